//! Bells: how a write wakes the waits of its area in this process (a long-poll on a room,
//! a call waiting for an approval) without any thread parked on them. A writer rings the
//! area's bell after its commit; a waiter is a future that marks the bell, reads the
//! database, and when the read found nothing awaits the next ring (or its poll interval:
//! other processes' writes arrive by `LISTEN/NOTIFY` on PostgreSQL, which rings the same
//! bell, and by polling on SQLite). A spurious wake costs one read.

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::watch;

/// One area's bell: a ring count that waiters watch.
pub(crate) struct Bell {
    rings: watch::Sender<u64>,
}

impl Bell {
    fn new() -> Bell {
        Bell {
            rings: watch::Sender::new(0),
        }
    }

    /// Wake every listener of this bell.
    pub(crate) fn ring(&self) {
        self.rings
            .send_modify(|rings| *rings = rings.wrapping_add(1));
    }

    /// A listener that hears the rings from now on.
    fn listen(&self) -> BellListener {
        BellListener {
            rings: self.rings.subscribe(),
        }
    }

    /// The raw ring count, for a caller that hands the receiver on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.rings.subscribe()
    }
}

/// A room got a post.
pub(crate) static CHAT: LazyLock<Bell> = LazyLock::new(Bell::new);

/// An approval was decided or expired.
pub(crate) static APPROVALS: LazyLock<Bell> = LazyLock::new(Bell::new);

/// A write was announced to every process ([`crate::Store::activity_changes`]): this
/// process's own writes included, which come back through the database like everyone
/// else's.
pub(crate) static ACTIVITY: LazyLock<Bell> = LazyLock::new(Bell::new);

/// One waiter's ear on a bell. Mark it before each read, so that a ring after the read
/// (a post committed just after it) still ends the next [`BellListener::rung`].
pub struct BellListener {
    rings: watch::Receiver<u64>,
}

impl BellListener {
    /// Forget the rings so far.
    pub fn mark(&mut self) {
        self.rings.borrow_and_update();
    }

    /// Wait until the bell rings after the last mark, or `timeout` passes (the caller then
    /// reads again, which finds what other processes wrote meanwhile).
    pub async fn rung(&mut self, timeout: Duration) {
        // The sender lives in a static, so `changed` never fails.
        let _rung_or_timed_out = tokio::time::timeout(timeout, self.rings.changed()).await;
    }
}

impl crate::Store {
    /// A listener on the bell that every post in this process rings (and, on PostgreSQL,
    /// every post another host announces).
    pub fn chat_bell(&self) -> BellListener {
        CHAT.listen()
    }

    /// A listener on the bell that every approval decided or expired in this process
    /// rings (and, on PostgreSQL, every decision another host announces).
    pub fn approval_bell(&self) -> BellListener {
        APPROVALS.listen()
    }

    /// Wake this process's approval waits after a decision or an expiry committed here:
    /// each reads its own approval again.
    pub fn ring_approval_bell(&self) {
        APPROVALS.ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_ring_after_the_mark_ends_the_wait_and_one_before_it_does_not() {
        let bell = Bell::new();
        let mut listener = bell.listen();
        bell.ring();
        listener.mark();
        let started = std::time::Instant::now();
        // Nothing rang since the mark: the wait lasts its whole timeout.
        listener.rung(Duration::from_millis(200)).await;
        assert!(started.elapsed() >= Duration::from_millis(200));
        bell.ring();
        let before = std::time::Instant::now();
        listener.rung(Duration::from_secs(60)).await;
        assert!(
            before.elapsed() < Duration::from_secs(30),
            "a ring ends the wait"
        );
    }
}
