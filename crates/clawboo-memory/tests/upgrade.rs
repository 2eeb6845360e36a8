//! Upgrade safety for memory: a database made by every earlier schema version (the store's
//! fixtures, `crates/clawboo-store/tests/fixtures/upgrade`) opens with the current store and
//! memory's extension, keeps its facts and procedures, and memory works on it. The store's
//! own `tests/upgrade.rs` checks the rest of each fixture.
#![allow(clippy::unwrap_used)]

#[path = "../../clawboo-store/tests/upgrade_data/mod.rs"]
mod upgrade_data;

use std::sync::Arc;

use clawboo_embed::HashedEmbedder;
use clawboo_memory::{
    EXTENSION, Memory, NewFact, NewProcedure, ScopeFilter, SearchMode, TeamFilter,
};
use clawboo_store::{Store, StoreConfig};
use upgrade_data::*;

fn open(db: &std::path::Path) -> Store {
    let config = StoreConfig::default().with_extension(EXTENSION);
    Store::open_with(db, config).unwrap()
}

#[test]
fn every_fixture_migrates_with_its_memory_intact_and_memory_works_on_it() {
    let all = fixtures();
    assert!(!all.is_empty());
    for (version, fixture) in all {
        let dir = tempfile::tempdir().unwrap();
        let (db, store) = open_migrated(dir.path(), &fixture, version, |db| Arc::new(open(db)));

        if version >= 2 {
            memory_is_intact(&store, version);
        }
        memory_works(&store, version);
        drop(store);
        reopens_unchanged(&db, open);
    }
}

fn memory_is_intact(store: &Arc<Store>, version: i64) {
    let memory = Memory::new(store.clone(), Some(Arc::new(HashedEmbedder::default())));
    let everything = ScopeFilter::default();
    let facts = if version >= 5 { 4 } else { 3 };
    assert_eq!(memory.browse(&everything, 50).unwrap().len(), facts);
    if version >= 5 {
        // Left unindexed by plain SQL under schema 5; opening the store indexed it, and a
        // search in its team's scope finds it (the scope test reads migration 6's index).
        let found_in = |team: &str| -> Vec<String> {
            let scope = ScopeFilter {
                team: TeamFilter::TeamOrGlobal(team.into()),
                ..ScopeFilter::default()
            };
            let outcome = memory
                .search("zanzibar train", Some(SearchMode::Fts), &scope, 10)
                .unwrap();
            outcome.hits.into_iter().map(|h| h.fact.id).collect()
        };
        assert_eq!(found_in(TEAM_BETA), [FACT_PENDING]);
        assert!(found_in(TEAM_ALPHA).is_empty());
    }
    let team_fact = memory.get_fact(FACT_TEAM, &everything).unwrap().unwrap();
    assert_eq!(team_fact.content, FACT_TEAM_CONTENT);
    assert_eq!(team_fact.tags, ["infra"]);
    assert_eq!(team_fact.team_id.as_deref(), Some(TEAM_ALPHA));
    let agent_fact = memory.get_fact(FACT_AGENT, &everything).unwrap().unwrap();
    assert_eq!(agent_fact.agent_id.as_deref(), Some(AGENT_ALICE));
    assert_eq!(agent_fact.tenant_id.as_deref(), Some("tenant-1"));

    // The full-text index written by the old triggers still answers.
    let fts = memory
        .search("kubernetes cluster", Some(SearchMode::Fts), &everything, 10)
        .unwrap();
    assert_eq!(fts.hits[0].fact.id, FACT_TEAM);
    // The stored vector is still read and compared.
    let vector = memory
        .search(
            "blue-green deploy switch",
            Some(SearchMode::Vector),
            &everything,
            10,
        )
        .unwrap();
    assert_eq!(vector.mode, SearchMode::Vector);
    assert_eq!(vector.hits[0].fact.id, FACT_EMBEDDED);

    let versions: Vec<(String, i64)> = memory
        .procedure_versions(PROCEDURE_NAME, &everything)
        .unwrap()
        .into_iter()
        .map(|p| (p.id, p.version))
        .collect();
    assert_eq!(
        versions,
        [(PROCEDURE_V1.to_owned(), 1), (PROCEDURE_V2.to_owned(), 2)]
    );
}

fn memory_works(store: &Arc<Store>, version: i64) {
    let memory = Memory::new(store.clone(), Some(Arc::new(HashedEmbedder::default())));
    let saved = memory
        .save_fact(NewFact {
            title: "Upgrades keep data".into(),
            content: "a migrated database accepts new zeppelin facts".into(),
            tags: vec!["upgrade".into()],
            team_id: Some(TEAM_ALPHA.into()),
            ..NewFact::default()
        })
        .unwrap();
    let everything = ScopeFilter::default();
    let found = memory
        .search("zeppelin", Some(SearchMode::Fts), &everything, 10)
        .unwrap();
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.hits[0].fact.id, saved.id);
    let procedure = memory
        .save_procedure(NewProcedure {
            name: PROCEDURE_NAME.into(),
            content: "1. build\n2. smoke test\n3. deploy\n4. announce".into(),
            team_id: Some(TEAM_ALPHA.into()),
            ..NewProcedure::default()
        })
        .unwrap();
    let expected = if version >= 2 { 3 } else { 1 };
    assert_eq!(procedure.version, expected);
}
