//! The thread that checkpoints the WAL and runs the registered idle work.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use rusqlite::Connection;

use super::hooks::Hooks;
use crate::error::Result;

/// Commits between two wake-ups of the [`Checkpointer`]: a commit writes a few WAL pages,
/// so it wakes before SQLite's own auto-checkpoint (every 1,000 WAL pages) would have run.
pub(super) const CHECKPOINT_EVERY: u64 = 128;

/// WAL size (pages) at which a commit checkpoints inline, finishing what the
/// [`Checkpointer`] copied. A PASSIVE checkpoint on another connection never lets SQLite
/// start the WAL over while writes keep coming, so commits still must, now and then.
pub(super) const INLINE_CHECKPOINT_PAGES: u32 = 4_000;

/// Copies the WAL back into the database on a thread of its own (with its own connection).
/// SQLite's auto-checkpoint (every 1,000 pages) runs inside whichever commit crosses the
/// threshold, copy and fsync included, which stalled every call queued behind it for
/// milliseconds (docs/BENCHMARKS.md's git history). The checkpoint is PASSIVE: it never waits for,
/// nor blocks, readers or writers of any process.
///
/// The same thread runs the registered idle work ([`Hooks::when_idle`], such as a
/// full-text index merge) once this store has committed nothing for a whole round
/// ([`IDLE_ROUND`]) after commits that left some, a bounded step at a time, stopping as
/// soon as this store commits again: no write ever waits for the whole of it.
pub(super) struct Checkpointer {
    pub(super) wake: mpsc::SyncSender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Each round runs holding this, so a test that holds it decides when the thread's
    /// checkpoints may overlap its commits.
    #[cfg(test)]
    pub(super) rounds: Arc<std::sync::Mutex<()>>,
}

impl Checkpointer {
    pub(super) fn start(
        path: &Path,
        commits: Arc<AtomicU64>,
        idle_work_commits: Arc<AtomicU64>,
        hooks: Arc<Hooks>,
    ) -> Option<Checkpointer> {
        let conn = match Connection::open(path) {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "no checkpoint connection; SQLite checkpoints inline");
                return None;
            }
        };
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        #[cfg(test)]
        let rounds = Arc::new(std::sync::Mutex::new(()));
        #[cfg(test)]
        let held = Arc::clone(&rounds);
        let thread = std::thread::Builder::new()
            .name("clawboo-checkpoint".into())
            .spawn(move || {
                let checkpoint = || {
                    if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
                        tracing::debug!(error = %e, "WAL checkpoint failed; retrying later");
                    }
                };
                let mut checkpointed = 0;
                let mut idle_work_done = 0;
                loop {
                    let woke = woken.recv_timeout(IDLE_ROUND);
                    #[cfg(test)]
                    let _round = held
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let stopping = matches!(woke, Err(mpsc::RecvTimeoutError::Disconnected));
                    let now = commits.load(Ordering::Relaxed);
                    let left_idle_work = idle_work_commits.load(Ordering::Relaxed);
                    let idle = woke.is_err() && now == checkpointed;
                    if idle && !stopping && left_idle_work != idle_work_done {
                        // Writers are back, or the store is closing.
                        let interrupted = || {
                            commits.load(Ordering::Relaxed) != now
                                || matches!(woken.try_recv(), Err(mpsc::TryRecvError::Disconnected))
                        };
                        match idle_work_until_interrupted(&conn, &hooks, interrupted) {
                            Ok(true) => {
                                idle_work_done = left_idle_work;
                                checkpoint();
                            }
                            Ok(false) => {}
                            Err(e) => {
                                tracing::debug!(error = %e, "idle work failed; retrying when idle");
                            }
                        }
                    }
                    if now != checkpointed {
                        checkpointed = now;
                        checkpoint();
                    }
                    if stopping {
                        return;
                    }
                }
            });
        match thread {
            Ok(thread) => Some(Checkpointer {
                wake,
                thread: Some(thread),
                #[cfg(test)]
                rounds,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "no checkpoint thread; SQLite checkpoints inline");
                None
            }
        }
    }
}

/// How long the [`Checkpointer`] sleeps between rounds when not woken; a round that saw no
/// commit of this store counts as idle.
const IDLE_ROUND: Duration = Duration::from_secs(1);

/// Run the idle work step by step until none is left (`Ok(true)`) or `interrupted` says
/// writers are back (`Ok(false)`).
fn idle_work_until_interrupted(
    conn: &Connection,
    hooks: &Hooks,
    interrupted: impl Fn() -> bool,
) -> Result<bool> {
    while hooks.idle_step(conn)? {
        if interrupted() {
            return Ok(false);
        }
    }
    Ok(true)
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Closing the channel makes the thread run a last checkpoint and end.
        let (closed, _) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.wake, closed));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
