use std::fmt;

/// Why a capped create was refused: the machine-readable policy reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapReason {
    /// The named parent does not exist (or is hidden from the caller).
    ParentNotFound,
    /// The parent already has the maximum number of live children.
    ChildCap,
    /// The new task would nest deeper than the maximum depth.
    DepthCap,
    /// Too many root tasks were created in the new task's team in the rolling window.
    RootRateCap,
}

impl CapReason {
    /// The stable code (`child_cap`, `depth_cap`, `root_rate_cap`, `parent_not_found`).
    pub fn code(self) -> &'static str {
        match self {
            CapReason::ParentNotFound => "parent_not_found",
            CapReason::ChildCap => "child_cap",
            CapReason::DepthCap => "depth_cap",
            CapReason::RootRateCap => "root_rate_cap",
        }
    }
}

impl fmt::Display for CapReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// What kind of failure the database backend reported, so a caller can act on it without
/// knowing which backend (SQLite today) runs underneath.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendErrorKind {
    /// Another writer held the database past the busy timeout: retrying may succeed.
    Busy,
    /// The database cannot be reached, opened or written (I/O, permissions, a full disk):
    /// nothing was written; retry once it is back.
    Unavailable,
    /// The database file is damaged or is not a clawboo database.
    Corrupt,
    /// Any other backend failure (a bug, a constraint the domain did not foresee).
    Other,
}

/// A failure of the database backend itself, as text plus a kind a caller can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    /// What kind of failure it is.
    pub kind: BackendErrorKind,
    /// The backend's own description.
    pub message: String,
}

/// Every failure a store operation can report. Variants other than `Backend` and `Io`
/// are domain refusals that leave the store unchanged.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named row does not exist (or is hidden from the caller's scope).
    #[error("not found: {0}")]
    NotFound(String),
    /// The row exists but the conditional write lost (e.g. already claimed).
    #[error("conflict")]
    Conflict,
    /// A claim on a task whose dependencies are not all done.
    #[error("not_ready")]
    NotReady,
    /// A bound agent tried to move a task another agent holds: only the holder or an
    /// operator (REST, CLI, board) may.
    #[error(
        "task {task_id} is held by {holder}; only its holder or an operator may move it: ask {holder} (team chat) or an operator"
    )]
    NotAssignee { task_id: String, holder: String },
    /// A move or comment fenced with a `claimToken` of a claim that has ended: the task was
    /// claimed again (or released, or its lease expired) since.
    #[error(
        "claimToken {token} of task {task_id} is stale (the task is at claim {current}{held}): your claim ended; get_task to see who holds it, and claim it again before acting on it"
    )]
    StaleClaim {
        task_id: String,
        token: i64,
        current: i64,
        held: String,
    },
    /// A claim whose paths overlap another agent's live reservation on the team (SPEC §19).
    #[error(
        "{holder} holds task {task_id} (\"{title}\") with paths that overlap yours ({pairs}): work on other paths or another task (claim_next skips reserved ones), or ask {holder} in team chat; the paths are free once {holder} releases, finishes or blocks the task, or its lease runs out",
        pairs = overlapping.iter().map(|(mine, theirs)| format!("{mine} overlaps {theirs}")).collect::<Vec<_>>().join(", ")
    )]
    Reserved {
        holder: String,
        task_id: String,
        title: String,
        /// (the asked pattern, the held pattern it overlaps)
        overlapping: Vec<(String, String)>,
    },
    /// A status change the state machine does not allow.
    #[error("illegal transition from {from} to {to}")]
    IllegalTransition { from: String, to: String },
    /// A dependency link that would close a cycle.
    #[error("linking {task_id} to {depends_on} would create a dependency cycle")]
    Cycle { task_id: String, depends_on: String },
    /// A creation cap refused the write; `message` is the agent-facing text.
    #[error("{message}")]
    Cap { reason: CapReason, message: String },
    /// Input the store refuses to write (the text says what is wrong).
    #[error("invalid: {0}")]
    Invalid(String),
    /// The database backend itself failed.
    #[error("database error: {0}")]
    Backend(BackendError),
    /// The filesystem failed (creating the database folder).
    #[error("io error: {0}")]
    Io(#[from] std::io::Error),
    /// The database file was migrated by a newer build than this one.
    #[error(
        "the database is at schema version {found}, newer than this build of clawboo knows \
         ({known}); upgrade clawboo to open it"
    )]
    NewerSchema { found: i64, known: i64 },
}

impl StoreError {
    /// The stable code for this failure (`not_found`, `conflict`, `cycle`, …).
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::NotFound(_) => "not_found",
            StoreError::Conflict => "conflict",
            StoreError::NotReady => "not_ready",
            StoreError::NotAssignee { .. } => "not_assignee",
            StoreError::StaleClaim { .. } => "stale_claim",
            StoreError::Reserved { .. } => "reserved",
            StoreError::IllegalTransition { .. } => "illegal_transition",
            StoreError::Cycle { .. } => "cycle",
            StoreError::Cap { reason, .. } => reason.code(),
            StoreError::Invalid(_) => "invalid_args",
            StoreError::Backend(BackendError {
                kind: BackendErrorKind::Unavailable,
                ..
            }) => "backend_unavailable",
            StoreError::Backend(_) | StoreError::Io(_) | StoreError::NewerSchema { .. } => {
                "internal"
            }
        }
    }
}

pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;
