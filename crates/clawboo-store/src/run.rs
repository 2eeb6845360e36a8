//! How the store's operations run under tokio, decided here once for every caller (the MCP
//! servers, REST, the CLI). A short read runs right where it is asked when a connection is
//! free for it, and on the blocking pool otherwise; a write joins SQLite's group commit,
//! whose first writer drains the queue after gathering the writers close behind it; on
//! PostgreSQL each write runs beside the others, on a pooled connection of its own.
//! Nothing here waits for a post or a human: those waits are futures on the store's event
//! bus ([`Store::listen_to_room`], [`Store::listen_to_approval`]) between such runs.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use tokio::runtime::{Handle, RuntimeFlavor};
use tracing::Instrument;

use crate::engine::{AsyncKind, SettleWrite};
use crate::reads::StoreRead;
use crate::writes::{AsyncWriteTx, StoreWrite};
use crate::{Store, StoreError};

/// How many times a single-threaded drainer yields to gather more writes into its group.
const MAX_GATHER_ROUNDS: usize = 8;

/// Why a run gave no answer. Its text is for the log; a caller says only that the call
/// failed internally and changed nothing it can tell.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The operation panicked (the store is unchanged: its transaction rolled back).
    #[error("the store operation panicked")]
    Panicked,
    /// The group commit this write shared failed, so nothing of the group was written.
    #[error("the write's group commit failed: {0}")]
    GroupFailed(String),
}

fn on_this_thread() -> bool {
    Handle::current().runtime_flavor() == RuntimeFlavor::CurrentThread
}

impl Store {
    /// Run one quick store read.
    ///
    /// On a single-threaded runtime (a stdio server: one client, one connection, whose
    /// store calls serialize on the connection anyway) the read runs inline, which saves
    /// two thread hand-offs (wake-ups) per call, a large share of a short read's cost; on a
    /// multi-threaded one (`clawboo serve`) it runs inline when the connection is free and
    /// on the blocking pool otherwise, never waiting for the lock on an async thread.
    pub async fn run_read<T, F>(self: &Arc<Store>, f: F) -> Result<T, RunError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> T + Send + 'static,
    {
        if on_this_thread() {
            return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self)))
                .map_err(|_| RunError::Panicked);
        }
        let inline =
            |f: F| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_if_idle(f)));
        let f = match inline(f) {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(f)) => f,
            Err(_) => return Err(RunError::Panicked),
        };
        let _permit = self
            .pacing
            .readers_off_thread
            .acquire()
            .await
            .map_err(|_| RunError::Panicked)?;
        match inline(f) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(f)) => self.run_off_thread(f).await,
            Err(_) => Err(RunError::Panicked),
        }
    }

    /// Run a read of several statements in one snapshot, written once over
    /// [`crate::reads::Reads`]: on a multi-threaded runtime (`clawboo serve`) and an
    /// engine that runs statements asynchronously (PostgreSQL) right here, its round trips
    /// awaited on this task; otherwise as [`Store::run_read`] runs a synchronous read. A
    /// single-threaded runtime (a stdio server) gains nothing from the asynchronous
    /// connections there, since its synchronous reads already run inline, and would hold
    /// one more connection to the server per process.
    pub async fn run_snapshot<R: StoreRead>(
        self: &Arc<Store>,
        read: R,
    ) -> Result<Result<R::Output, StoreError>, RunError> {
        self.run_async_read(read, true).await
    }

    /// [`Store::run_snapshot`] for a read whose statements each need only see the last
    /// commit (one that reads once): no transaction around them.
    pub async fn run_read_committed<R: StoreRead>(
        self: &Arc<Store>,
        read: R,
    ) -> Result<Result<R::Output, StoreError>, RunError> {
        self.run_async_read(read, false).await
    }

    async fn run_async_read<R: StoreRead>(
        self: &Arc<Store>,
        read: R,
        snapshot: bool,
    ) -> Result<Result<R::Output, StoreError>, RunError> {
        let kind = if snapshot {
            AsyncKind::Snapshot
        } else {
            AsyncKind::ReadCommitted
        };
        let asynchronous = (!on_this_thread())
            .then(|| self.engine().begin_async(kind))
            .flatten();
        let Some(begin) = asynchronous else {
            return self
                .run_read(move |store| {
                    if snapshot {
                        store.snapshot(|tx| read.run(tx))
                    } else {
                        store.read(|tx| read.run(tx))
                    }
                })
                .await;
        };
        let span = if snapshot {
            tracing::info_span!("store.snapshot", engine = self.engine().name())
        } else {
            tracing::info_span!("store.read", engine = self.engine().name())
        };
        async move {
            let tx = match begin.await {
                Ok(tx) => tx,
                Err(e) => return Ok(Err(e)),
            };
            // A panic drops `tx` unfinished, which rolls it back.
            let value = AssertUnwindSafe(read.run_async(&tx))
                .catch_unwind()
                .await
                .map_err(|_| RunError::Panicked)?;
            if value.is_ok() {
                tx.finish();
            }
            Ok(value)
        }
        .instrument(span)
        .await
    }

    /// Run a write written once over [`crate::writes::Writes`] in one write transaction:
    /// on a multi-threaded runtime (`clawboo serve`) and an engine that runs statements
    /// asynchronously (PostgreSQL) right here, its round trips awaited on this task and its
    /// events published once it committed; otherwise as [`Store::run_write`] runs a
    /// synchronous write (SQLite's group commit). On PostgreSQL a call dropped before its
    /// commit went out (its client went away) rolls back and changes nothing; a write
    /// queued for SQLite's group commit runs to its end.
    pub async fn run_transaction<W: StoreWrite>(
        self: &Arc<Store>,
        write: W,
    ) -> Result<Result<W::Output, StoreError>, RunError> {
        let asynchronous = (!on_this_thread())
            .then(|| self.engine().begin_async(AsyncKind::Write))
            .flatten();
        let Some(begin) = asynchronous else {
            return self
                .run_write(move |store| store.write(|tx| write.run(tx)))
                .await;
        };
        async move {
            let tx = match begin.await {
                Ok(tx) => AsyncWriteTx::new(tx),
                Err(e) => return Ok(Err(e)),
            };
            // A panic or an error drops `tx` uncommitted, which rolls it back.
            let value = AssertUnwindSafe(write.run_async(&tx))
                .catch_unwind()
                .await
                .map_err(|_| RunError::Panicked)?;
            let value = match value {
                Ok(value) => value,
                Err(e) => return Ok(Err(e)),
            };
            match tx.commit().await {
                Ok(events) => {
                    self.publish(&events);
                    Ok(Ok(value))
                }
                Err(e) => Ok(Err(e)),
            }
        }
        .instrument(tracing::info_span!(
            "store.write",
            engine = self.engine().name()
        ))
        .await
    }

    /// Run store work on the blocking pool: work that may take long (an embedding, a
    /// whole-index read) or must not hold an async thread while it waits.
    pub async fn run_off_thread<T, F>(self: &Arc<Store>, f: F) -> Result<T, RunError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> T + Send + 'static,
    {
        let store = Arc::clone(self);
        // The caller's span goes along, so the store's spans stay children of its call.
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || span.in_scope(|| f(&store)))
            .await
            .map_err(|_| RunError::Panicked)
    }

    /// Run a store write. On PostgreSQL it runs on the blocking pool beside the others, in
    /// a transaction of its own. On SQLite it goes through the group commit: queued writes
    /// of every session of this store share one transaction (each in its own savepoint)
    /// and one commit, and each call is answered only after its group committed. One caller
    /// at a time drains the queue ([`Store::queue_write`] says who); the others only wait
    /// for their answer. On a single-threaded runtime the drainer first yields until no
    /// more calls join, so the calls already read off the wire queue theirs and share its
    /// group; on a multi-threaded one it first waits for as many writes as the previous
    /// drain saw at once (the store's pacing), then drains right here when the writer's
    /// connection is free (never waiting for its lock) and on the blocking pool otherwise;
    /// writers arriving meanwhile join its next group.
    pub async fn run_write<T, F>(self: &Arc<Store>, f: F) -> Result<T, RunError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> T + Send + 'static,
    {
        if !self.groups_writes() {
            return self.run_off_thread(f).await;
        }
        let (answer, answered) = tokio::sync::oneshot::channel();
        // The write may run on another caller's thread, in its group: under this call's span.
        let span = tracing::Span::current();
        let must_drain = self.queue_write(Box::new(move |store: &Store| -> SettleWrite {
            let value = span.in_scope(|| f(store));
            Box::new(move |group: Result<(), &StoreError>| {
                let _ = answer.send(
                    group
                        .map(|()| value)
                        .map_err(|e| RunError::GroupFailed(e.to_string())),
                );
            })
        }));
        // Dropped before it drained (its client went away mid-wait), this call hands the
        // drain on, so the writes queued behind it are not stranded.
        let duty = must_drain.then(|| DrainDuty(Some(Arc::clone(self))));
        if on_this_thread() {
            if let Some(duty) = duty {
                // Yield until a round adds no write: each round lets the session read the
                // requests already on the wire and queue theirs, so a pipelining client's
                // whole window shares one commit (a single yield let only part of it join).
                let mut queued = self.queued_writes();
                for _ in 0..MAX_GATHER_ROUNDS {
                    tokio::task::yield_now().await;
                    let now = self.queued_writes();
                    if now == queued {
                        break;
                    }
                    queued = now;
                }
                duty.taken();
                self.run_queued_writes();
            }
        } else if let Some(duty) = duty {
            let now = Instant::now();
            let expected = self.pacing.group_to_wait_for(now);
            if !self.pacing.gather(expected, || self.queued_writes()).await && expected == 2 {
                self.pacing.probe_found_none(now);
            }
            duty.taken();
            self.pacing.drain_began(self.queued_writes());
            if self.try_run_queued_writes() {
                self.pacing.drain_ended();
            } else {
                // The writer's connection is busy: drain on the blocking pool rather than
                // wait for it here. Not awaited: this call's answer comes through
                // `answered` like everyone's.
                let store = Arc::clone(self);
                drop(tokio::task::spawn_blocking(move || {
                    store.run_queued_writes();
                    store.pacing.drain_ended();
                }));
            }
        } else {
            self.pacing.write_joined(self.queued_writes());
        }
        answered.await.map_err(|_| RunError::Panicked)?
    }
}

/// The duty to drain the write queue, held by the call [`Store::queue_write`] named while it
/// gathers more writes: dropped before it was taken up (the call's future was dropped, its
/// client gone), it drains on the blocking pool instead, since no later writer would.
struct DrainDuty(Option<Arc<Store>>);

impl DrainDuty {
    /// The holder drains now.
    fn taken(mut self) {
        self.0 = None;
    }
}

impl Drop for DrainDuty {
    fn drop(&mut self) {
        let Some(store) = self.0.take() else {
            return;
        };
        match Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || store.run_queued_writes())),
            Err(_) => store.run_queued_writes(),
        }
    }
}
