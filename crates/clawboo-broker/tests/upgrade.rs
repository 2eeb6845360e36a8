//! Upgrade safety for the tool broker: a database made by every earlier schema version (the
//! store's fixtures, `crates/clawboo-store/tests/fixtures/upgrade`) keeps its tool switches,
//! approvals, grants, notes and audit, and the broker works on it. The store's own
//! `tests/upgrade.rs` checks the rest of each fixture.
#![allow(clippy::unwrap_used)]

#[path = "../../clawboo-store/tests/upgrade_data/mod.rs"]
mod upgrade_data;

use std::sync::Arc;

use clawboo_broker::{
    Broker, BrokerConfig, BrokerStore, Caller, Executor, Invocation, Output, Subject,
};
use clawboo_store::Store;
use rusqlite::Connection;
use upgrade_data::*;

#[test]
fn every_fixture_migrates_with_its_tools_intact_and_the_broker_works_on_it() {
    let all = fixtures();
    assert!(!all.is_empty());
    for (version, fixture) in all {
        let dir = tempfile::tempdir().unwrap();
        let (db, store) = open_migrated(dir.path(), &fixture, version, |db| {
            Arc::new(Store::open(db).unwrap())
        });
        if version >= 4 {
            tools_are_intact(&store, version);
        }
        tools_work(&store, version);
        drop(store);
        reopens_unchanged(&db, |db| Store::open(db).unwrap());
    }
}

/// The upgrade checks list tools and run none outside the store.
#[derive(Debug)]
struct RunsNothing;

impl Executor for RunsNothing {
    fn execute(&self, _: &Invocation, _: &Caller) -> Output {
        Output::error("the upgrade test runs no tool outside the store".to_string())
    }
}

fn broker(store: &Arc<Store>) -> Broker {
    Broker::new(
        store.clone(),
        BrokerConfig::default(),
        Arc::new(RunsNothing),
    )
}

fn tools_are_intact(store: &Arc<Store>, version: i64) {
    let broker = broker(store);
    let tools = broker.tools().unwrap();
    let web = tools.iter().find(|t| t.name == "web_search").unwrap();
    assert!(!web.enabled);
    assert!(tools.iter().find(|t| t.name == "echo").unwrap().enabled);
    let allowed = store.approval(APPROVAL_ALLOWED).unwrap();
    assert_eq!(allowed.status.as_str(), "allowed");
    assert_eq!(allowed.decision.map(|d| d.as_str()), Some("allow_always"));
    assert_eq!(allowed.args_json, "{\"path\":\"/tmp/build\"}");
    // The old pending row's caller is long gone: listing expires it.
    assert!(store.list_approvals(true, 10).unwrap().is_empty());
    assert_eq!(
        store.approval(APPROVAL_PENDING).unwrap().status.as_str(),
        "expired"
    );
    let audit = store.tool_audit(Some("delete_path"), 10).unwrap();
    assert_eq!(audit.len(), 2);
    // Who decided was not recorded before migration 12.
    assert!(
        audit.iter().all(|row| row.decided_by.is_none()),
        "{audit:?}"
    );
    assert_eq!(audit[0].phase, "after");
    assert_eq!(
        audit[0].result_text.as_deref(),
        Some("would delete /tmp/build")
    );
    // Rows written under schema 12 say who decided.
    let decided = store.tool_audit(Some("echo"), 10).unwrap();
    assert_eq!(decided.len(), if version >= 12 { 2 } else { 0 });
    assert!(
        decided
            .iter()
            .all(|row| row.call_id == DECIDED_CALL && row.decided_by.as_deref() == Some("policy")),
        "{decided:?}"
    );
    let conn = Connection::open(store.path().expect("a SQLite store")).unwrap();
    // A grant keyed by agent alone cannot say which team it was for: migration 10 drops it;
    // one keyed by identity (written under version 10) stays.
    let (grants, note): (i64, String) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM tool_approval_grants),
                    (SELECT note FROM tool_notes WHERE id = ?1)",
            [NOTE_ID],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(grants, i64::from(version >= 10));
    assert_eq!(note, NOTE_TEXT);
    assert!(
        store
            .unblock_tool(&Subject::Agent(AGENT_BOB.into()), "delete_path")
            .unwrap()
    );
}

fn tools_work(store: &Arc<Store>, version: i64) {
    store.set_tool_enabled("web_search", true).unwrap();
    store
        .block_tool(&Subject::Team(TEAM_BETA.into()), "delete_path")
        .unwrap();
    assert!(
        store
            .unblock_tool(&Subject::Team(TEAM_BETA.into()), "delete_path")
            .unwrap()
    );
    let broker = broker(store);
    assert!(broker.tools().unwrap().iter().all(|t| t.enabled));
    let alice_in_alpha = Caller {
        agent_id: Some(AGENT_ALICE.into()),
        team_id: Some(TEAM_ALPHA.into()),
        tenant_id: None,
    };
    assert_eq!(
        store
            .revoke_approval_grant("delete_path", &alice_in_alpha)
            .unwrap(),
        version >= 10,
        "schema version {version}: only a grant per identity (written by version 10) survives"
    );
}
