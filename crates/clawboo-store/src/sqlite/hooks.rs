//! Work other crates attach to the SQLite backend's transactions
//! ([`crate::extension::Extension::sqlite_hooks`]), so the backend runs it without knowing
//! what it is.

use rusqlite::Connection;

use crate::error::Result;

/// Work run inside every write transaction just before its `COMMIT` (a group commit's once
/// for all its writes), and once when the store opens for work left by plain SQL.
#[derive(Debug, Clone, Copy)]
pub struct PreCommitHook {
    /// Whether anything waits for [`PreCommitHook::run`]; read outside a write transaction
    /// at open, so opening takes no write lock when nothing waits.
    pub pending: fn(&Connection) -> Result<bool>,
    /// Do the waiting work; `true` when it did some that leaves idle work behind.
    pub run: fn(&Connection) -> Result<bool>,
}

/// Work run once the store is idle after commits whose pre-commit work left some, one
/// bounded step per short transaction; a step returns `true` while more remains.
pub type IdleStep = fn(&Connection) -> Result<bool>;

/// The hooks a store runs, registered by its extensions as it opens.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    pre_commit: Vec<PreCommitHook>,
    idle: Vec<IdleStep>,
}

impl Hooks {
    /// Run `hook` before every commit.
    pub fn before_commit(&mut self, hook: PreCommitHook) -> &mut Hooks {
        self.pre_commit.push(hook);
        self
    }

    /// Run `step` (until it reports nothing left) when the store is idle.
    pub fn when_idle(&mut self, step: IdleStep) -> &mut Hooks {
        self.idle.push(step);
        self
    }

    /// Whether any pre-commit hook has work waiting.
    pub(super) fn pending(&self, conn: &Connection) -> Result<bool> {
        for hook in &self.pre_commit {
            if (hook.pending)(conn)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Run every pre-commit hook; `true` when one left idle work behind.
    pub(super) fn before_commit_run(&self, conn: &Connection) -> Result<bool> {
        let mut left_idle_work = false;
        for hook in &self.pre_commit {
            left_idle_work |= (hook.run)(conn)?;
        }
        Ok(left_idle_work)
    }

    /// One step of idle work: `Ok(true)` while any step has more to do.
    pub(super) fn idle_step(&self, conn: &Connection) -> Result<bool> {
        let mut more = false;
        for step in &self.idle {
            more |= step(conn)?;
        }
        Ok(more)
    }
}
