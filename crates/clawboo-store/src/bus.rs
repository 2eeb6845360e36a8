//! The store's event bus: where committed [`Event`]s meet the waits of this process (a
//! long-poll on a room, a call waiting for its approval, a live view) without any thread
//! parked on them. Each wait listens to its own key (its room, its approval, or writes at
//! all), so a post in one room wakes that room's long-polls and no other wait. A waiter is
//! a future that marks its listener, reads the database, and when the read found nothing
//! awaits the next event or its poll interval (SQLite's other processes tell nobody). A
//! spurious wake costs one read.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use crate::events::Event;

/// What a wait listens to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Room(String),
    Approval(String),
    Writes,
}

/// One store's bus: a ring count per key somebody listens to.
#[derive(Default)]
pub(crate) struct Bus {
    keys: Mutex<HashMap<Key, watch::Sender<u64>>>,
}

impl Bus {
    /// Wake the waits `event` concerns.
    pub(crate) fn publish(&self, event: &Event) {
        let keys = self.keys();
        let ring = |sender: &watch::Sender<u64>| {
            sender.send_modify(|rings| *rings = rings.wrapping_add(1));
        };
        match event {
            Event::Posted { room } => {
                keys.get(&Key::Room(room.clone())).map(ring);
            }
            Event::ApprovalSettled { id } => {
                keys.get(&Key::Approval(id.clone())).map(ring);
            }
            Event::Wrote => {
                keys.get(&Key::Writes).map(ring);
            }
            Event::PostedSomewhere => keys
                .iter()
                .filter(|(key, _)| matches!(key, Key::Room(_)))
                .for_each(|(_, sender)| ring(sender)),
            Event::ApprovalsSettled => keys
                .iter()
                .filter(|(key, _)| matches!(key, Key::Approval(_)))
                .for_each(|(_, sender)| ring(sender)),
        }
    }

    /// Publish what another process sent as `topic` (the cross-host relay).
    pub(crate) fn deliver(&self, topic: &str) {
        if let Some(event) = Event::from_topic(topic) {
            self.publish(&event);
        }
    }

    fn listen(&self, key: Key) -> Listener {
        let mut keys = self.keys();
        // Keys nobody listens to any more go, so the map holds only live waits.
        keys.retain(|_, sender| sender.receiver_count() > 0);
        let rings = keys
            .entry(key)
            .or_insert_with(|| watch::Sender::new(0))
            .subscribe();
        Listener { rings }
    }

    pub(crate) fn listen_to_room(&self, room: &str) -> Listener {
        self.listen(Key::Room(room.into()))
    }

    pub(crate) fn listen_to_approval(&self, id: &str) -> Listener {
        self.listen(Key::Approval(id.into()))
    }

    pub(crate) fn listen_to_writes(&self) -> watch::Receiver<u64> {
        self.listen(Key::Writes).rings
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<Key, watch::Sender<u64>>> {
        self.keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One waiter's ear on its key. Mark it before each read, so that an event after the read
/// (a post committed just after it) still ends the next [`Listener::heard`].
pub struct Listener {
    rings: watch::Receiver<u64>,
}

impl Listener {
    /// Forget the events so far.
    pub fn mark(&mut self) {
        self.rings.borrow_and_update();
    }

    /// Wait until an event on this key after the last mark, or `timeout` passes (the
    /// caller then reads again, which finds what other processes wrote meanwhile).
    pub async fn heard(&mut self, timeout: Duration) {
        // A closed key (the store dropped) ends the wait like a timeout: the caller reads.
        let _heard_or_timed_out = tokio::time::timeout(timeout, self.rings.changed()).await;
    }
}

impl crate::Store {
    /// A listener for posts in `room`: this process's, and on PostgreSQL every host's.
    pub fn listen_to_room(&self, room: &str) -> Listener {
        self.bus.listen_to_room(room)
    }

    /// A listener for the decision or expiry of approval `id`: this process's, and on
    /// PostgreSQL every host's decisions.
    pub fn listen_to_approval(&self, id: &str) -> Listener {
        self.bus.listen_to_approval(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn hears_within(listener: &mut Listener, timeout: Duration) -> bool {
        let started = std::time::Instant::now();
        listener.heard(timeout).await;
        started.elapsed() < timeout
    }

    #[tokio::test]
    async fn an_event_after_the_mark_ends_the_wait_and_one_before_it_does_not() {
        let bus = Bus::default();
        let mut listener = bus.listen_to_room("r");
        bus.publish(&Event::Posted { room: "r".into() });
        listener.mark();
        assert!(!hears_within(&mut listener, Duration::from_millis(200)).await);
        bus.publish(&Event::Posted { room: "r".into() });
        assert!(hears_within(&mut listener, Duration::from_secs(60)).await);
    }

    #[tokio::test]
    async fn a_post_wakes_its_own_room_and_a_wildcard_wakes_every_room() {
        let bus = Bus::default();
        let mut red = bus.listen_to_room("team:red");
        let mut blue = bus.listen_to_room("team:blue");
        let mut approval = bus.listen_to_approval("a1");
        bus.publish(&Event::Posted {
            room: "team:red".into(),
        });
        assert!(hears_within(&mut red, Duration::from_secs(60)).await);
        assert!(!hears_within(&mut blue, Duration::from_millis(100)).await);
        bus.deliver("chat");
        assert!(hears_within(&mut red, Duration::from_secs(60)).await);
        assert!(hears_within(&mut blue, Duration::from_secs(60)).await);
        assert!(!hears_within(&mut approval, Duration::from_millis(100)).await);
        bus.deliver("approval:a2");
        assert!(!hears_within(&mut approval, Duration::from_millis(100)).await);
        bus.deliver("approval:a1");
        assert!(hears_within(&mut approval, Duration::from_secs(60)).await);
    }

    #[tokio::test]
    async fn keys_nobody_listens_to_are_forgotten() {
        let bus = Bus::default();
        drop(bus.listen_to_room("gone"));
        let _kept = bus.listen_to_approval("kept");
        assert_eq!(bus.keys().len(), 1);
    }
}
