//! `GET /api/events`: the web board's live feed, as Server-Sent Events. One reader per
//! server reads the store's change marks ([`clawboo_store::activity`]) while anyone is
//! listening and sends a `marks` event whenever an area changed, whichever process (a
//! stdio agent, an HTTP session, the REST API, another host) wrote it. Clients refetch
//! what moved. On PostgreSQL the reader reads when a write is announced; on SQLite it
//! polls.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use clawboo_store::Store;
use clawboo_store::activity::ActivityMarks;
use futures::Stream;
use tokio::sync::watch;

use crate::AppState;

/// How often the store is read while someone listens, on a backend that does not
/// announce writes.
const POLL_INTERVAL: Duration = Duration::from_millis(300);

/// The shortest gap between two reads on a backend that announces writes: many hosts'
/// announcements in a burst cost one read.
const READ_GAP: Duration = Duration::from_millis(100);

/// The longest gap between two reads on a backend that announces writes: a process killed
/// between a write and its announcement (sent a moment after the commit, never inside
/// it) leaves the feed stale no longer than this.
const UNANNOUNCED_WITHIN: Duration = Duration::from_secs(5);

/// The events route.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api/events", get(events))
}

/// The latest change marks, shared by every listener; polled only while one is connected.
pub(crate) struct ActivityFeed {
    latest: watch::Sender<Option<ActivityMarks>>,
    polling: AtomicBool,
}

impl Default for ActivityFeed {
    fn default() -> Self {
        ActivityFeed {
            latest: watch::Sender::new(None),
            polling: AtomicBool::new(false),
        }
    }
}

impl ActivityFeed {
    /// A receiver that sees the current marks first, then every change; starts the
    /// reader when it is not running.
    fn subscribe(self: &Arc<Self>, store: Arc<Store>) -> watch::Receiver<Option<ActivityMarks>> {
        let mut receiver = self.latest.subscribe();
        receiver.mark_changed();
        if !self.polling.swap(true, Ordering::SeqCst) {
            tokio::spawn(self.clone().follow(store));
        }
        receiver
    }

    /// Read the marks whenever the store announces a write (or every [`POLL_INTERVAL`]
    /// where it announces none) until the last listener leaves.
    async fn follow(self: Arc<Self>, store: Arc<Store>) {
        let mut announcements = store.activity_changes();
        loop {
            if self.latest.receiver_count() == 0 {
                self.polling.store(false, Ordering::SeqCst);
                // A listener that arrived between the count and the store saw `polling`
                // still set and relies on this loop: keep going unless one restarted it.
                if self.latest.receiver_count() == 0 || self.polling.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
            match store.activity_marks_async().await {
                Ok(Ok(marks)) => {
                    self.latest.send_if_modified(|current| {
                        let changed = current.as_ref() != Some(&marks);
                        if changed {
                            *current = Some(marks);
                        }
                        changed
                    });
                }
                Ok(Err(e)) => tracing::warn!("live feed could not read the store: {e}"),
                Err(e) => tracing::warn!("live feed reader failed: {e}"),
            }
            let still_announced = match announcements.as_mut() {
                Some(announcements) => {
                    tokio::time::sleep(READ_GAP).await;
                    tokio::select! {
                        heard = announcements.changed() => heard.is_ok(),
                        () = self.latest.closed() => true,
                        () = tokio::time::sleep(UNANNOUNCED_WITHIN) => true,
                    }
                }
                None => {
                    tokio::time::sleep(POLL_INTERVAL).await;
                    true
                }
            };
            if !still_announced {
                tracing::warn!("the store stopped announcing writes; the live feed polls");
                announcements = None;
            }
        }
    }
}

/// One `marks` event per change, starting with the current marks.
async fn events(
    State(state): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receiver = state.shared.activity.subscribe(state.store());
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        loop {
            receiver.changed().await.ok()?;
            let marks = receiver.borrow_and_update().clone();
            if let Some(marks) = marks {
                let data = serde_json::to_string(&marks).unwrap_or_else(|_| "{}".to_owned());
                return Some((Ok(Event::default().event("marks").data(data)), receiver));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
