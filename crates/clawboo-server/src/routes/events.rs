//! `GET /api/events`: the web board's live feed, as Server-Sent Events. One poller per
//! server reads the store's change marks ([`clawboo_store::activity`]) while anyone is
//! listening and sends a `marks` event whenever an area changed, whichever process (a
//! stdio agent, an HTTP session, the REST API) wrote it. Clients refetch what moved.

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

/// How often the store is read while someone listens.
const POLL_INTERVAL: Duration = Duration::from_millis(300);

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
    /// poller when it is not running.
    fn subscribe(self: &Arc<Self>, store: Arc<Store>) -> watch::Receiver<Option<ActivityMarks>> {
        let mut receiver = self.latest.subscribe();
        receiver.mark_changed();
        if !self.polling.swap(true, Ordering::SeqCst) {
            tokio::spawn(self.clone().poll(store));
        }
        receiver
    }

    /// Read the marks every [`POLL_INTERVAL`] until the last listener leaves.
    async fn poll(self: Arc<Self>, store: Arc<Store>) {
        loop {
            if self.latest.receiver_count() == 0 {
                self.polling.store(false, Ordering::SeqCst);
                // A listener that arrived between the count and the store saw `polling`
                // still set and relies on this loop: keep going unless one restarted it.
                if self.latest.receiver_count() == 0 || self.polling.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
            let reader = store.clone();
            match tokio::task::spawn_blocking(move || reader.activity_marks()).await {
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
            tokio::time::sleep(POLL_INTERVAL).await;
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
