//! Change marks: one cheap reading per area of the store (board, team chat, memory, tool
//! approvals, audit) that changes whenever that area does, whichever process wrote it.
//! A live view reads [`Store::activity_marks`] and refetches only the areas whose mark
//! moved, so agents' moves from any process appear without a reload. On PostgreSQL every
//! process announces its writes to every other ([`Store::activity_changes`]), so a view
//! reads again when told; on SQLite, whose other processes write the file without telling
//! anyone, it polls.

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::watch;

use crate::Store;
use crate::error::Result;
use crate::reads::{OneRowRead, Query, StoreRead};
use crate::run::RunError;

/// What each area of the store looks like now, as opaque marks: compare two readings
/// area by area; a different mark means that area changed in between.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityMarks {
    /// Tasks (their leases included), their comments and dependencies, and agents' calls.
    pub board: String,
    /// Team-chat posts in every room.
    pub chat: String,
    /// Facts (their retirements included) and procedures.
    pub memory: String,
    /// Tool-call approvals (new ones and decisions).
    pub approvals: String,
    /// Tool-call audit rows and the operator's own activity.
    pub audit: String,
    /// Approvals waiting for a human now.
    pub pending_approvals: i64,
}

/// One read snapshot of every mark. Counts and maxima over indexed columns; the board's
/// `max(updated_at)` and lease sum are one scan (of a narrow table), fine at a poll
/// every few hundred milliseconds. Every number is cast to text before it is joined, so
/// neither engine relies on the other's implicit conversions.
const MARKS_SQL: &str = "SELECT
    (SELECT CAST(count(*) AS TEXT) || '.' || CAST(coalesce(max(updated_at), 0) AS TEXT)
        || '.' || CAST(CAST(coalesce(sum(lease_expires_at), 0) AS BIGINT) AS TEXT) FROM tasks)
        || '.' || CAST((SELECT count(*) FROM task_comments) AS TEXT)
        || '.' || CAST((SELECT count(*) FROM task_deps) AS TEXT)
        || '.' || CAST((SELECT coalesce(max(last_seen_at), 0) FROM agent_presence) AS TEXT),
    CAST((SELECT count(*) FROM team_chat) AS TEXT)
        || '.' || CAST((SELECT coalesce(max(created_at), 0) FROM team_chat) AS TEXT),
    CAST((SELECT count(*) FROM memory_facts) AS TEXT)
        || '.' || CAST((SELECT coalesce(max(seq), 0) FROM memory_facts) AS TEXT)
        || '.' || CAST((SELECT count(*) FROM memory_procedures) AS TEXT)
        || '.' || CAST((SELECT count(*) FROM memory_fact_retirements) AS TEXT),
    CAST((SELECT count(*) FROM tool_call_approvals) AS TEXT)
        || '.' || CAST((SELECT count(*) FROM tool_call_approvals WHERE status = 'pending') AS TEXT),
    CAST((SELECT count(*) FROM tool_call_audit) AS TEXT)
        || '.' || CAST((SELECT coalesce(max(created_at), 0) FROM tool_call_audit) AS TEXT)
        || '.' || CAST((SELECT count(*) FROM operator_activity) AS TEXT),
    (SELECT count(*) FROM tool_call_approvals WHERE status = 'pending')";

impl Store {
    /// Wakes whenever any process may have written to this database, so a live view need
    /// not poll: `Some` on PostgreSQL (writes are announced by `LISTEN/NOTIFY`, and once
    /// more whenever the listening connection is made again, since announcements sent
    /// while it was down are lost); `None` on SQLite, where a view must poll the marks.
    pub fn activity_changes(&self) -> Option<watch::Receiver<u64>> {
        self.announces_writes().then(|| self.bus.listen_to_writes())
    }

    /// Read the change mark of every area in one snapshot.
    pub fn activity_marks(&self) -> Result<ActivityMarks> {
        self.read(|tx| marks_read().run(tx))
    }

    /// [`Store::activity_marks`] for an async caller (the live feed, after each write
    /// announced), run the way the engine runs reads best ([`Store::run_read_committed`]:
    /// the marks are one statement, so one snapshot).
    pub async fn activity_marks_async(
        self: &Arc<Store>,
    ) -> std::result::Result<Result<ActivityMarks>, RunError> {
        self.run_read_committed(marks_read()).await
    }
}

/// [`Store::activity_marks`]' read: one statement, so one snapshot.
fn marks_read() -> OneRowRead<ActivityMarks> {
    OneRowRead {
        query: Query::new(MARKS_SQL, &[]),
        decode: |row| {
            Ok(ActivityMarks {
                board: row.get(0)?,
                chat: row.get(1)?,
                memory: row.get(2)?,
                approvals: row.get(3)?,
                audit: row.get(4)?,
                pending_approvals: row.get(5)?,
            })
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use crate::board::{AuthorType, CreatePolicy, NewComment, NewTask, Scope, Status};
    use crate::chat::PostKind;
    use crate::{Store, StoreConfig};

    /// A clock one millisecond further on at every reading, so consecutive writes never
    /// share a timestamp.
    fn ticking_clock() -> i64 {
        static NOW: AtomicI64 = AtomicI64::new(1_700_000_000_000);
        NOW.fetch_add(1, Ordering::Relaxed)
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            clock: ticking_clock,
            ..StoreConfig::default()
        };
        let store = Store::open_with(&dir.path().join("db.sqlite"), config).unwrap();
        (dir, store)
    }

    #[test]
    fn each_area_moves_only_its_own_mark() {
        let (_dir, store) = store();
        let start = store.activity_marks().unwrap();

        let task = store
            .create_task(NewTask::titled("a"), CreatePolicy::Uncapped)
            .unwrap();
        let after_create = store.activity_marks().unwrap();
        assert_ne!(after_create.board, start.board);
        assert_eq!(after_create.chat, start.chat);
        assert_eq!(after_create.memory, start.memory);

        store
            .set_status(&task.id, Status::InProgress, None, Some("a1"), Scope::ALL)
            .unwrap();
        let after_move = store.activity_marks().unwrap();
        assert_ne!(after_move.board, after_create.board, "a status move");

        store
            .add_comment(
                &task.id,
                NewComment {
                    author_agent_id: None,
                    author_type: AuthorType::User,
                    body: "hi".into(),
                },
                Scope::ALL,
            )
            .unwrap();
        let after_comment = store.activity_marks().unwrap();
        assert_ne!(after_comment.board, after_move.board, "a comment");

        store
            .post_chat("team:t", "a1", PostKind::Peer, "hello")
            .unwrap();
        let after_post = store.activity_marks().unwrap();
        assert_ne!(after_post.chat, after_comment.chat);
        assert_eq!(after_post.board, after_comment.board);
        assert_eq!(after_post.pending_approvals, 0);
    }
}
