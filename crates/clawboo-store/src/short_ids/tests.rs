//! Short ids: the store's rules on both backends (`TestStore::new` picks the backend).

use super::*;
use crate::board::{CreatePolicy, NewTask};
use crate::task::Task;
use crate::testing::TestStore;

fn create(store: &Store, team: Option<&str>, title: &str) -> Task {
    let new = NewTask {
        team_id: team.map(str::to_owned),
        ..NewTask::titled(title)
    };
    store.create_task(new, CreatePolicy::Uncapped).unwrap()
}

fn short(task: &Task) -> &str {
    task.short_id.as_deref().unwrap()
}

#[test]
fn each_team_numbers_its_own_tasks_from_one_and_a_rename_changes_nothing() {
    let test = TestStore::new();
    let store = test.store();
    let red = store.upsert_team(Some("red"), "Red", None).unwrap();
    assert_eq!(red.key.as_deref(), Some("RED"));
    // A second team whose name gives the same key gets the next free one.
    let again = store.upsert_team(Some("red-2"), "red", None).unwrap();
    assert_eq!(again.key.as_deref(), Some("RED2"));
    let a = create(&store, Some("red"), "a");
    let b = create(&store, Some("red"), "b");
    // A team id no `teams` row names gets its key from the id.
    let c = create(&store, Some("platform-infra"), "c");
    let d = create(&store, None, "d");
    let e = create(&store, Some("red"), "e");
    assert_eq!(
        [a, b, c, d, e.clone()]
            .iter()
            .map(short)
            .collect::<Vec<_>>(),
        ["RED-1", "RED-2", "PI-1", "TASK-1", "RED-3"]
    );
    // A rename keeps the key (a later create keeps counting), and so does a move.
    let renamed = store.upsert_team(Some("red"), "Crimson", None).unwrap();
    assert_eq!(renamed.key.as_deref(), Some("RED"));
    store
        .set_status(
            &e.id,
            crate::task::Status::Cancelled,
            None,
            None,
            Scope::ALL,
        )
        .unwrap();
    assert_eq!(
        short(&store.get_task(&e.id, Scope::ALL).unwrap().unwrap()),
        "RED-3"
    );
    assert_eq!(short(&create(&store, Some("red"), "f")), "RED-4");
    let keys: Vec<(String, Option<String>)> = store
        .list_teams()
        .unwrap()
        .into_iter()
        .map(|t| (t.id, t.key))
        .collect();
    assert_eq!(
        keys,
        [
            ("red".to_owned(), Some("RED".to_owned())),
            ("red-2".to_owned(), Some("RED2".to_owned()))
        ]
    );
}

#[test]
fn a_chosen_key_is_checked_and_never_changes_once_tasks_carry_it() {
    let test = TestStore::new();
    let store = test.store();
    let web = store.upsert_team(Some("web"), "Web", Some("fe")).unwrap();
    assert_eq!(web.key.as_deref(), Some("FE"));
    // Before any task carries it, the key may still change.
    let web = store.upsert_team(Some("web"), "Web", Some("WEB")).unwrap();
    assert_eq!(web.key.as_deref(), Some("WEB"));
    assert_eq!(short(&create(&store, Some("web"), "a")), "WEB-1");
    let changed = store
        .upsert_team(Some("web"), "Web", Some("W"))
        .unwrap_err();
    assert!(
        changed.to_string().contains("already carry the key WEB"),
        "{changed}"
    );
    let taken = store
        .upsert_team(Some("ops"), "Ops", Some("WEB"))
        .unwrap_err();
    assert!(taken.to_string().contains("taken by team web"), "{taken}");
    let bad = store
        .upsert_team(Some("ops"), "Ops", Some("1-A"))
        .unwrap_err();
    assert!(bad.to_string().contains("not a team key"), "{bad}");
    // None of the refusals left anything behind.
    assert_eq!(store.list_teams().unwrap().len(), 1);
    assert_eq!(short(&create(&store, Some("web"), "b")), "WEB-2");
}

#[test]
fn a_short_id_finds_its_task_in_the_callers_team_only() {
    let test = TestStore::new();
    let store = test.store();
    store.upsert_team(Some("red"), "Red", None).unwrap();
    let task = create(&store, Some("red"), "a");
    create(&store, Some("blue"), "b");
    for reference in ["RED-1", "red-1", " Red-01 "] {
        let found = store
            .task_detail(reference, Scope::team(Some("red")))
            .unwrap();
        assert_eq!(found.unwrap().task.id, task.id, "{reference}");
    }
    assert_eq!(
        store.get_task("RED-1", Scope::ALL).unwrap().unwrap().id,
        task.id
    );
    assert!(
        store
            .get_task("RED-1", Scope::team(Some("blue")))
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .task_detail("RED-1", Scope::team(Some("blue")))
            .unwrap()
            .is_none()
    );
    assert!(store.get_task("RED-2", Scope::ALL).unwrap().is_none());
    assert_eq!(
        store
            .resolve_task_id("BLU-1", Scope::team(Some("red")))
            .unwrap(),
        "BLU-1"
    );
    let dropped = store.set_dropped("red-1", true, Scope::ALL).unwrap();
    assert!(dropped.dropped);
    assert!(matches!(
        store.set_dropped("RED-1", false, Scope::team(Some("blue"))),
        Err(StoreError::NotFound(id)) if id == "RED-1"
    ));
}

#[test]
fn a_refused_create_takes_no_number() {
    let test = TestStore::new();
    let store = test.store();
    assert_eq!(short(&create(&store, Some("red"), "a")), "RED-1");
    let orphan = NewTask {
        team_id: Some("red".into()),
        parent_task_id: Some("no-such-task".into()),
        ..NewTask::titled("orphan")
    };
    assert!(store.create_task(orphan, CreatePolicy::Capped).is_err());
    assert_eq!(short(&create(&store, Some("red"), "b")), "RED-2");
}

#[test]
fn tasks_made_before_short_ids_are_numbered_in_creation_order_when_the_store_opens() {
    let test = TestStore::new();
    let store = test.store();
    store.upsert_team(Some("red"), "Red", None).unwrap();
    let ids: Vec<String> = [Some("red"), None, Some("red"), Some("green"), Some("red")]
        .into_iter()
        .enumerate()
        .map(|(i, team)| create(&store, team, &format!("t{i}")).id)
        .collect();
    // As the schema before migration 15 left them: no keys, no short ids.
    store
        .write(|tx| {
            tx.execute("UPDATE tasks SET short_id = NULL", &[])?;
            tx.execute("DELETE FROM task_keys", &[])
        })
        .unwrap();
    drop(store);
    let store = test.reopen();
    let shorts: Vec<String> = ids
        .iter()
        .map(|id| {
            store
                .get_task(id, Scope::ALL)
                .unwrap()
                .unwrap()
                .short_id
                .unwrap()
        })
        .collect();
    assert_eq!(shorts, ["RED-1", "TASK-1", "RED-2", "GRE-1", "RED-3"]);
    assert_eq!(short(&create(&store, Some("red"), "next")), "RED-4");
    assert_eq!(short(&create(&store, None, "next")), "TASK-2");
    // A second open finds nothing left to do.
    drop(test.reopen());
    assert_eq!(short(&create(&store, Some("green"), "next")), "GRE-2");
}

#[test]
fn a_key_is_derived_from_the_name() {
    assert_eq!(derive_key("Red"), "RED");
    assert_eq!(derive_key("red"), "RED");
    assert_eq!(derive_key("Platform infra"), "PI");
    assert_eq!(derive_key("team-alpha"), "TA");
    assert_eq!(derive_key("a b c d e"), "ABCD");
    assert_eq!(derive_key("Go"), "GO");
    assert_eq!(derive_key("42 crew"), "T4C");
    assert_eq!(derive_key("Équipe ✓"), "QUI");
    assert_eq!(derive_key("✓✓"), "T");
    for name in ["Red", "42 crew", "Équipe ✓", "✓", "", "a-b_c d"] {
        assert!(valid_key(&derive_key(name)), "{name}");
    }
}

#[test]
fn short_ids_parse_in_any_case_and_uuids_never_do() {
    assert_eq!(parse("RED-12").as_deref(), Some("RED-12"));
    assert_eq!(parse(" red-012 ").as_deref(), Some("RED-12"));
    assert_eq!(parse("WEB2-1").as_deref(), Some("WEB2-1"));
    for not in [
        "01903a5c-0000-7000-8000-000000000001",
        "RED-0",
        "RED-",
        "-12",
        "RED12",
        "2RED-1",
        "RED-1a",
        "RE D-1",
        "ABCDEFGHIJK-1",
    ] {
        assert_eq!(parse(not), None, "{not}");
    }
}
