//! Retired facts on the run's backend (with `CLAWBOO_TEST_PGVECTOR=1`, vector search through
//! pgvector's index): no search mode, the exact scan or browsing returns one, each still
//! returns `limit` hits while enough live facts match, and by id one shows its retirement.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use super::tests::{fact, hashed, location, open, team};
use super::*;

/// Facts whose title says "deploy" more often rank first for "deploy".
fn deploy_fact(i: usize, times: usize) -> NewFact {
    let title = format!("{} note {i}", vec!["deploy"; times].join(" "));
    fact(
        &title,
        &format!("deploy the service to production, step {i}"),
        Some("red"),
        None,
    )
}

#[test]
fn a_retired_fact_leaves_every_search_and_browse_but_is_found_by_id() {
    let at = location();
    let m = Memory::new(open(&at), hashed());
    if std::env::var("CLAWBOO_TEST_PGVECTOR").is_ok_and(|v| v == "1") {
        // test.sh's pgvector pass: the vector searches below walk the HNSW index.
        assert!(matches!(
            m.vector_search(),
            VectorSearchPath::PgvectorHnsw { .. }
        ));
    }
    let scope = team("red");
    // Five facts that rank first for "deploy" (the ones retired below), ten live ones, and
    // one of another team.
    let mut retired = HashSet::new();
    for i in 0..5 {
        retired.insert(m.save_fact(deploy_fact(i, 3)).unwrap().id);
    }
    let mut live = HashSet::new();
    for i in 5..15 {
        live.insert(m.save_fact(deploy_fact(i, 1)).unwrap().id);
    }
    m.save_fact(fact("deploy blue", "deploy elsewhere", Some("blue"), None))
        .unwrap();
    // Searched once before, so SQLite's in-process indexes hold every fact.
    let before = m
        .search("deploy", Some(SearchMode::Fts), &scope, 5)
        .unwrap();
    assert!(before.hits.iter().all(|h| retired.contains(&h.fact.id)));

    for id in &retired {
        let outcome = m
            .retire_fact(id, "api", "superseded by the new runbook")
            .unwrap();
        assert!(matches!(outcome, RetireOutcome::Retired(_)), "{outcome:?}");
    }

    for mode in [SearchMode::Fts, SearchMode::Vector, SearchMode::Hybrid] {
        let hits = m.search("deploy", Some(mode), &scope, 10).unwrap().hits;
        let ids: HashSet<String> = hits.iter().map(|h| h.fact.id.clone()).collect();
        assert_eq!(ids, live, "{mode}: exactly the ten live facts");
        let few = m.search("deploy", Some(mode), &scope, 3).unwrap().hits;
        assert_eq!(few.len(), 3, "{mode}");
        assert!(few.iter().all(|h| live.contains(&h.fact.id)), "{mode}");
    }
    let exact = m.exact_vector_search("deploy", &scope, 10).unwrap();
    let exact: HashSet<String> = exact.into_iter().map(|(id, _)| id).collect();
    assert_eq!(exact, live);
    let newest = m.browse(&scope, 10).unwrap();
    assert_eq!(newest.len(), 10);
    assert!(newest.iter().all(|f| live.contains(&f.id)));
    assert_eq!(m.browse(&ScopeFilter::default(), 200).unwrap().len(), 11);

    // By id a retired fact is found, with its retirement.
    let id = retired.iter().next().unwrap();
    assert!(m.get_fact(id, &scope).unwrap().is_some());
    let retirement = m.fact_retirement(id).unwrap().unwrap();
    assert_eq!(
        (retirement.retired_by.as_str(), retirement.reason.as_str()),
        ("api", "superseded by the new runbook")
    );
    let live_id = live.iter().next().unwrap();
    assert_eq!(m.fact_retirement(live_id).unwrap(), None);

    // Retiring again keeps the first retirement.
    match m.retire_fact(id, "cli", "again").unwrap() {
        RetireOutcome::AlreadyRetired(first) => assert_eq!(first, retirement),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_retirement_needs_a_fact_and_a_reason_and_keeps_no_secret() {
    let at = location();
    let m = Memory::new(open(&at), None);
    let id = m.save_fact(fact("t", "c", None, None)).unwrap().id;
    assert!(matches!(
        m.retire_fact("no-such-fact", "api", "why"),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        m.retire_fact(&id, "api", "  "),
        Err(StoreError::Invalid(_))
    ));
    let secret = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
    assert!(matches!(
        m.retire_fact(&id, "api", secret),
        Err(StoreError::Invalid(_))
    ));
    let long = "x".repeat(MAX_REASON_CHARS + 1);
    assert!(matches!(
        m.retire_fact(&id, "api", &long),
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(m.fact_retirement(&id).unwrap(), None, "nothing written");
    let RetireOutcome::Retired(r) = m
        .retire_fact(&id, "api", &format!("leaked {secret} in it"))
        .unwrap()
    else {
        panic!("retired")
    };
    assert!(!r.reason.contains(secret), "{}", r.reason);
    assert!(m.browse(&ScopeFilter::default(), 10).unwrap().is_empty());
}

/// A search's read of the retired facts looks up the few retirements, not every fact in
/// scope: on SQLite its plan never scans `memory_facts`.
#[test]
fn reading_the_retired_facts_does_not_scan_the_facts() {
    let at = super::tests::sqlite_location();
    let memory = Memory::new(open(&at), None);
    for i in 0..50 {
        memory.save_fact(deploy_fact(i, 1)).unwrap();
    }
    for scope in [ScopeFilter::default(), team("alpha")] {
        let (sql, args) = retire::retired_in(&scope);
        let plan: Vec<String> = memory
            .store()
            .read(|tx| {
                let params: Vec<&dyn ToValue> = args.iter().map(|a| a as &dyn ToValue).collect();
                tx.query_map(&format!("EXPLAIN QUERY PLAN {sql}"), &params, |r| r.get(3))
            })
            .unwrap();
        assert!(
            plan.iter().all(|step| !step.starts_with("SCAN f")),
            "{plan:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_retirements_keep_the_first_and_refuse_the_unknown() {
    let at = location();
    let m = std::sync::Arc::new(Memory::new(open(&at), hashed()));
    let saved = m.save_fact(deploy_fact(0, 1)).unwrap();
    let retirements = (0..6).map(|i| {
        let (m, id) = (std::sync::Arc::clone(&m), saved.id.clone());
        tokio::spawn(async move {
            let reason = format!("stale, says reviewer {i}");
            m.retire_fact_async(&id, "api", &reason)
                .await
                .unwrap()
                .unwrap()
        })
    });
    let mut first = Vec::new();
    for outcome in futures_util::future::join_all(retirements).await {
        if let RetireOutcome::Retired(retirement) = outcome.unwrap() {
            first.push(retirement);
        }
    }
    assert_eq!(first.len(), 1, "{first:?}");
    let kept = m.fact_retirement_async(&saved.id).await.unwrap().unwrap();
    assert_eq!(kept.as_ref(), first.first());
    assert_eq!(kept, m.fact_retirement(&saved.id).unwrap());
    let by_id = m.get_fact_async(&saved.id, &team("red")).await.unwrap();
    assert_eq!(by_id.unwrap().map(|f| f.id), Some(saved.id.clone()));
    let elsewhere = m.get_fact_async(&saved.id, &team("blue")).await.unwrap();
    assert_eq!(
        elsewhere.unwrap(),
        None,
        "another team's caller does not see it"
    );

    let unknown = m
        .retire_fact_async("no-such-fact", "api", "gone")
        .await
        .unwrap();
    assert!(
        matches!(unknown, Err(StoreError::NotFound(_))),
        "{unknown:?}"
    );
    let blank = m.retire_fact_async(&saved.id, "api", "  ").await.unwrap();
    assert!(matches!(blank, Err(StoreError::Invalid(_))), "{blank:?}");
    assert_eq!(
        m.fact_retirement_async("no-such-fact")
            .await
            .unwrap()
            .unwrap(),
        None
    );
}
