//! How long a store's first writer waits to gather a group before it drains the queue,
//! learned from the drains before it. Kept per store (not per process), so two stores in
//! one process pace apart; read by [`crate::Store::run_write`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore};

/// How long a multi-threaded drainer waits at most for the writes it expects (Tokio's
/// timer rounds it up to its next tick).
const GATHER_WAIT: Duration = Duration::from_micros(500);

/// Drains closer together than this mean writes arrive back to back: worth a probe.
const PROBE_WHEN_DRAINS_WITHIN: Duration = Duration::from_millis(1);

/// How long a probe that found no second writer holds off the next one.
const PROBE_BACKOFF: Duration = Duration::from_millis(50);

/// The largest group a drainer waits for.
const MAX_GROUP_TARGET: usize = 64;

/// How many short reads wait for a busy connection on the blocking pool at once. Reads
/// serialize on the connection anyway, so only a few wait there at once; more would only
/// be more threads (each with its stack and malloc arena) queued on the same lock.
const READERS_OFF_THREAD: usize = 2;

/// When the previous drain began, and when a probe may next run.
#[derive(Debug, Default, Clone, Copy)]
struct DrainTimes {
    last_began: Option<Instant>,
    no_probe_before: Option<Instant>,
}

/// One store's pacing of its group commits.
pub(crate) struct Pacing {
    /// The group a multi-threaded drainer waits for: the most writes that were queued at
    /// once during the previous drain. HTTP sessions have one call in flight each, so their
    /// writes arrive spread over the time their clients take to send the next one;
    /// committing each as it comes would cost a commit a write. Once the previous drain has
    /// shown N writers at once, the next waits (at most [`GATHER_WAIT`]) for N, which the
    /// writers that then answer soon bring. A lone writer sees 1 and commits at once; after
    /// a wait that timed out, the next group expects only what came.
    group_target: AtomicUsize,
    /// The most writes queued at once since the current drain began.
    queue_peak: AtomicUsize,
    /// Woken when the queue reaches `group_target`.
    group_filled: Notify,
    /// When drains began lately, for [`Pacing::group_to_wait_for`]'s probe.
    drain_times: Mutex<DrainTimes>,
    /// Room for the reads that wait for a busy connection off the async threads.
    pub(crate) readers_off_thread: Semaphore,
}

impl Default for Pacing {
    fn default() -> Pacing {
        Pacing {
            group_target: AtomicUsize::new(1),
            queue_peak: AtomicUsize::new(0),
            group_filled: Notify::new(),
            drain_times: Mutex::new(DrainTimes::default()),
            readers_off_thread: Semaphore::new(READERS_OFF_THREAD),
        }
    }
}

impl Pacing {
    /// How many writes a drainer about to begin at `now` waits for: the target, or 2 to
    /// probe.
    ///
    /// A target of 1 cannot grow by itself when the drain runs on the only worker thread
    /// (`clawboo serve` on SQLite has one): while the drain runs nothing else is read off
    /// the wire, so it never sees a second writer, and every write pays a commit of its own.
    /// So when the target is 1 yet drains follow each other within
    /// [`PROBE_WHEN_DRAINS_WITHIN`], the drainer waits (at most [`GATHER_WAIT`]) for a
    /// second write; when one comes the peak shows the writers and the target follows them.
    /// A probe that times out (one agent writing back to back) holds off the next for
    /// [`PROBE_BACKOFF`], so such an agent waits once in that while.
    pub(crate) fn group_to_wait_for(&self, now: Instant) -> usize {
        let target = self.group_target.load(Ordering::Relaxed);
        let mut times = self
            .drain_times
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let expected = writes_to_wait_for(target, &times, now);
        times.last_began = Some(now);
        expected
    }

    /// After a probe for a second write that did not come: no probe for [`PROBE_BACKOFF`].
    pub(crate) fn probe_found_none(&self, now: Instant) {
        let mut times = self
            .drain_times
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        times.no_probe_before = Some(now + PROBE_BACKOFF);
    }

    /// A drain begins with `queued` writes waiting.
    pub(crate) fn drain_began(&self, queued: usize) {
        self.queue_peak.store(queued, Ordering::Relaxed);
    }

    /// After a drain: the next drainer waits for as many writes as this one saw at once.
    pub(crate) fn drain_ended(&self) {
        let peak = self.queue_peak.load(Ordering::Relaxed);
        self.group_target
            .store(peak.clamp(1, MAX_GROUP_TARGET), Ordering::Relaxed);
    }

    /// A write joined a drain in progress, making `queued` waiting.
    pub(crate) fn write_joined(&self, queued: usize) {
        self.queue_peak.fetch_max(queued, Ordering::Relaxed);
        if queued >= self.group_target.load(Ordering::Relaxed) {
            self.group_filled.notify_waiters();
        }
    }

    /// Wait until `expected` writes are queued (as `queued` counts them), or
    /// [`GATHER_WAIT`] passed; `true` when they were.
    pub(crate) async fn gather(&self, expected: usize, queued: impl Fn() -> usize) -> bool {
        if expected <= 1 {
            return true;
        }
        let deadline = tokio::time::sleep(GATHER_WAIT);
        tokio::pin!(deadline);
        loop {
            let filled = self.group_filled.notified();
            tokio::pin!(filled);
            filled.as_mut().enable();
            if queued() >= expected {
                return true;
            }
            tokio::select! {
                () = filled => {}
                () = &mut deadline => return queued() >= expected,
            }
        }
    }
}

/// [`Pacing::group_to_wait_for`]'s rule, given the target and the times before this drain.
fn writes_to_wait_for(target: usize, before: &DrainTimes, now: Instant) -> usize {
    if target > 1 {
        return target;
    }
    let back_to_back = before
        .last_began
        .is_some_and(|began| now.duration_since(began) < PROBE_WHEN_DRAINS_WITHIN);
    let backed_off = before.no_probe_before.is_some_and(|until| now < until);
    if back_to_back && !backed_off { 2 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_probes_for_a_second_writer_only_when_drains_come_back_to_back() {
        let now = Instant::now();
        let times = |last_began: Option<Instant>, no_probe_before: Option<Instant>| DrainTimes {
            last_began,
            no_probe_before,
        };
        let just_before = now - Duration::from_micros(200);
        let long_before = now - Duration::from_millis(20);
        // A target the previous drain showed is kept, whatever the times.
        assert_eq!(writes_to_wait_for(6, &times(None, None), now), 6);
        assert_eq!(
            writes_to_wait_for(6, &times(Some(just_before), Some(now + PROBE_BACKOFF)), now),
            6
        );
        // The first drain, and one after a quiet while, commit at once.
        assert_eq!(writes_to_wait_for(1, &times(None, None), now), 1);
        assert_eq!(
            writes_to_wait_for(1, &times(Some(long_before), None), now),
            1
        );
        // Back-to-back drains of one write each probe for a second...
        assert_eq!(
            writes_to_wait_for(1, &times(Some(just_before), None), now),
            2
        );
        assert_eq!(
            writes_to_wait_for(1, &times(Some(just_before), Some(long_before)), now),
            2
        );
        // ...unless a probe found none within the back-off.
        let backed_off = times(Some(just_before), Some(now + PROBE_BACKOFF));
        assert_eq!(writes_to_wait_for(1, &backed_off, now), 1);
    }
}
