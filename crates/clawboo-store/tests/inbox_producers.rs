//! The board's inbox producers: a status change or a comment on a task by anyone other
//! than its assignee (an unknown actor included) queues one row for the assignee; the
//! assignee's own moves queue nothing. Each row is taken exactly once.

#![allow(clippy::unwrap_used)]

use clawboo_store::Store;
use clawboo_store::board::{AuthorType, CreatePolicy, NewComment, NewTask, Scope, Status};

fn claimed_task(store: &Store) -> String {
    let task = store
        .create_task(
            NewTask {
                team_id: Some("t".into()),
                ..NewTask::titled("ship it")
            },
            CreatePolicy::Uncapped,
        )
        .unwrap();
    store.claim_task(&task.id, "owner", None).unwrap();
    task.id
}

fn comment(author: Option<&str>, body: &str) -> NewComment {
    NewComment {
        author_agent_id: author.map(str::to_owned),
        author_type: AuthorType::Agent,
        body: body.into(),
    }
}

#[test]
fn the_assignees_own_moves_queue_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("inbox.db")).unwrap();
    let id = claimed_task(&store);
    store
        .set_status(&id, Status::InReview, Some("owner"), None, Scope::ALL)
        .unwrap();
    store
        .add_comment(&id, comment(Some("owner"), "done, please look"), Scope::ALL)
        .unwrap();
    assert!(
        store
            .take_inbox("owner", Some("t"), 5, "mcp")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn others_status_changes_and_comments_reach_the_assignee_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("inbox.db")).unwrap();
    let id = claimed_task(&store);
    store
        .set_status(&id, Status::Blocked, Some("lead"), None, Scope::ALL)
        .unwrap();
    store
        .add_comment(
            &id,
            comment(Some("reviewer"), "needs a test\nsecond line"),
            Scope::ALL,
        )
        .unwrap();
    store
        .add_comment(&id, comment(None, "from nowhere"), Scope::ALL)
        .unwrap();

    let rows = store.take_inbox("owner", Some("t"), 5, "mcp").unwrap();
    let bodies: Vec<&str> = rows.iter().map(|r| r.body.as_str()).collect();
    assert_eq!(rows.len(), 3, "{bodies:?}");
    assert!(
        bodies[0].starts_with("lead moved it to blocked"),
        "{bodies:?}"
    );
    assert!(
        bodies[1].starts_with("reviewer commented \"needs a test\""),
        "{bodies:?}"
    );
    assert!(bodies[2].starts_with("someone commented"), "{bodies:?}");
    assert!(bodies.iter().all(|b| b.contains(&id)));
    assert!(rows.iter().all(|r| r.team_id.as_deref() == Some("t")));
    assert!(
        store
            .take_inbox("owner", Some("t"), 5, "mcp")
            .unwrap()
            .is_empty()
    );
    assert!(store.take_inbox("lead", None, 5, "mcp").unwrap().is_empty());
}
