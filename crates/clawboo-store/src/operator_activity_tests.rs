//! The operator's activity (`operator_activity`) on the engine the environment names
//! (`TestStore::new`: PostgreSQL when `CLAWBOO_TEST_POSTGRES_URL` is set).
#![allow(clippy::unwrap_used)]

use crate::Store;
use crate::board::{AuthorType, CreatePolicy, NewComment, NewTask, Status, TaskPatch};
use crate::error::StoreError;
use crate::task::Scope;
use crate::testing::TestStore;

fn comment(author_type: AuthorType, body: &str) -> NewComment {
    NewComment {
        author_agent_id: None,
        author_type,
        body: body.into(),
    }
}

fn rows(store: &Store, team: Option<&str>) -> Vec<(String, String, String)> {
    store
        .operator_activity(team, 50)
        .unwrap()
        .into_iter()
        .map(|a| (a.task_id, a.action, a.detail))
        .collect()
}

#[test]
fn the_operators_moves_edits_drops_and_comments_are_recorded_and_nobody_elses() {
    let db = TestStore::new();
    let store = db.store();
    let teamless = store
        .create_task(NewTask::titled("no team"), CreatePolicy::Uncapped)
        .unwrap();
    let red = store
        .create_task(
            NewTask {
                team_id: Some("red".into()),
                ..NewTask::titled("red task")
            },
            CreatePolicy::Uncapped,
        )
        .unwrap();
    let op = Scope::operator("api");

    // An agent's and the server's writes are not the operator's.
    store
        .set_status(
            &red.id,
            Status::InProgress,
            Some("a1"),
            Some("a1"),
            Scope::bound(Some("red"), Some("a1")),
        )
        .unwrap();
    store
        .add_comment(
            &red.id,
            comment(AuthorType::Agent, "agent note"),
            Scope::bound(Some("red"), Some("a1")),
        )
        .unwrap();
    store
        .add_comment(
            &red.id,
            comment(AuthorType::System, "server note"),
            Scope::ALL,
        )
        .unwrap();
    assert!(rows(&store, None).is_empty());

    store
        .set_status(&teamless.id, Status::Backlog, None, None, op)
        .unwrap();
    store
        .set_status(&teamless.id, Status::Todo, None, None, op)
        .unwrap();
    store
        .set_status(&teamless.id, Status::InProgress, None, Some("a2"), op)
        .unwrap();
    // A move to where the task already is changes nothing and records nothing.
    store
        .set_status(&teamless.id, Status::InProgress, None, Some("a2"), op)
        .unwrap();
    store
        .set_status(&red.id, Status::Done, None, None, op)
        .unwrap();
    let patch = TaskPatch {
        title: Some("red task, renamed".into()),
        priority: Some(3),
        ..TaskPatch::default()
    };
    store.patch_task(&red.id, &patch, op).unwrap();
    store
        .add_comment(
            &teamless.id,
            comment(AuthorType::User, "please split this\nsecond line"),
            op,
        )
        .unwrap();
    store
        .set_dropped(&teamless.id, true, Scope::operator("cli"))
        .unwrap();
    store
        .set_dropped(&teamless.id, true, Scope::operator("cli"))
        .unwrap();
    store
        .set_dropped(&teamless.id, false, Scope::operator("cli"))
        .unwrap();

    let all = rows(&store, None);
    let t = teamless.id.clone();
    let r = red.id.clone();
    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(
        all,
        vec![
            s(&t, "restored", "restored to the board"),
            s(&t, "dropped", "dropped from the board"),
            s(&t, "commented", "please split this"),
            s(&r, "edited", "title, priority"),
            s(&r, "moved", "in_progress → done"),
            s(&t, "moved", "todo → in_progress (claimed for a2)"),
            s(&t, "moved", "backlog → todo"),
            s(&t, "moved", "todo → backlog"),
        ]
    );
    // The team filter: a team's rows only; team-less tasks only unfiltered.
    let red_rows = store.operator_activity(Some("red"), 50).unwrap();
    assert_eq!(red_rows.len(), 2);
    assert!(red_rows.iter().all(|a| a.team_id.as_deref() == Some("red")));
    assert_eq!(red_rows[0].task_title, "red task, renamed");
    assert!(
        store
            .operator_activity(Some("blue"), 50)
            .unwrap()
            .is_empty()
    );
    let newest = &store.operator_activity(None, 1).unwrap()[0];
    assert_eq!(
        (newest.actor.as_str(), newest.team_id.as_deref()),
        ("cli", None)
    );
    assert!(matches!(
        store.operator_activity(None, 0),
        Err(StoreError::Invalid(_))
    ));
}

#[test]
fn a_refused_move_records_nothing() {
    let db = TestStore::new();
    let store = db.store();
    let task = store
        .create_task(NewTask::titled("t"), CreatePolicy::Uncapped)
        .unwrap();
    let op = Scope::operator("api");
    store
        .set_status(&task.id, Status::Done, None, None, op)
        .unwrap_err();
    store
        .add_comment(&task.id, comment(AuthorType::User, "  "), op)
        .unwrap_err();
    assert!(rows(&store, None).is_empty());
}
