//! pgvector's index path against the exact scan. They run on every backend; they assert
//! something of the index only where the store found pgvector, and with
//! `CLAWBOO_TEST_PGVECTOR=1` (test.sh's run on a server with the extension) they require it.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use super::tests::{fact, hashed, location, open, team};
use super::*;

/// Whether this run must find pgvector (test.sh's pgvector pass).
fn pgvector_required() -> bool {
    std::env::var("CLAWBOO_TEST_PGVECTOR").is_ok_and(|v| v == "1")
}

/// Memory over a fresh database of the run's backend with the built-in embedder, and
/// whether vector search goes through pgvector's index there.
fn indexed_memory() -> (super::tests::Location, Memory, bool) {
    let at = location();
    let m = Memory::new(open(&at), hashed());
    let indexed = matches!(m.vector_search(), VectorSearchPath::PgvectorHnsw { .. });
    if pgvector_required() {
        assert!(
            indexed,
            "CLAWBOO_TEST_PGVECTOR=1 but the store found no pgvector"
        );
    }
    (at, m, indexed)
}

/// A deterministic sentence of `n` words from a vocabulary of 400.
fn sentence(seed: &mut u64, n: usize) -> String {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            format!("w{}", *seed % 400)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_store_names_its_vector_search_path() {
    let (_at, m, indexed) = indexed_memory();
    let path = m.vector_search();
    match m.store().backend_name() {
        "sqlite" => assert_eq!(path, VectorSearchPath::InProcess),
        _ if indexed => assert_eq!(path.as_str(), "pgvector-hnsw"),
        _ => assert_eq!(path, VectorSearchPath::ExactScan),
    }
    assert!(!path.to_string().is_empty());
}

/// Vector search's top 10 through the index against the exact scan's, over a corpus small
/// enough for CI.
#[test]
fn the_index_recalls_what_the_exact_scan_finds() {
    let (_at, m, indexed) = indexed_memory();
    if !indexed {
        eprintln!("skipped: no pgvector on this store");
        return;
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let teams = [Some("red"), Some("blue"), None];
    for i in 0..2_000 {
        m.save_fact(fact(
            &sentence(&mut seed, 4),
            &sentence(&mut seed, 24),
            teams[i % 3],
            None,
        ))
        .unwrap();
    }
    let (mut found, mut expected) = (0usize, 0usize);
    for scope in [ScopeFilter::default(), team("red")] {
        for _ in 0..40 {
            let query = sentence(&mut seed, 3);
            let exact: HashSet<String> = m
                .exact_vector_search(&query, &scope, 10)
                .unwrap()
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            let searched = m
                .search(&query, Some(SearchMode::Vector), &scope, 10)
                .unwrap();
            found += searched
                .hits
                .iter()
                .filter(|hit| exact.contains(&hit.fact.id))
                .count();
            expected += exact.len();
        }
    }
    let recall = found as f64 / expected as f64;
    eprintln!("recall@10 through the index: {recall:.3}");
    assert!(recall >= 0.9, "recall@10 {recall:.3} is below 0.9");
}

/// Another team's or tenant's facts never come through the index, even when every nearest
/// neighbour of the query is theirs, and the caller still gets `limit` hits of its own.
#[test]
fn the_index_keeps_to_the_callers_scope_when_every_neighbour_is_foreign() {
    let (_at, m, indexed) = indexed_memory();
    let query = "rotate the staging deploy key before the canary release";
    for i in 0..600 {
        // The foreign facts are the query itself, give or take one word.
        let (team, tenant) = if i % 2 == 0 {
            (Some("blue"), None)
        } else {
            (Some("red"), Some("other"))
        };
        m.save_fact(NewFact {
            tenant_id: tenant.map(Into::into),
            ..fact(query, &format!("{query} {i}"), team, None)
        })
        .unwrap();
    }
    let mut seed = 7u64;
    for _ in 0..30 {
        m.save_fact(NewFact {
            tenant_id: Some("acme".into()),
            ..fact(
                &format!("rotate {}", sentence(&mut seed, 3)),
                &sentence(&mut seed, 20),
                Some("red"),
                None,
            )
        })
        .unwrap();
    }
    let scope = ScopeFilter {
        tenant_id: Some("acme".into()),
        ..team("red")
    };
    let hits = m
        .search(query, Some(SearchMode::Vector), &scope, 10)
        .unwrap();
    assert_eq!(hits.mode, SearchMode::Vector);
    assert_eq!(hits.hits.len(), 10, "the caller's own facts fill the limit");
    for hit in &hits.hits {
        assert_eq!(hit.fact.team_id.as_deref(), Some("red"));
        assert_eq!(hit.fact.tenant_id.as_deref(), Some("acme"));
    }
    if indexed {
        // The index walk itself (not the exact fallback) found them.
        let embedder = hashed().unwrap();
        let vector = embedder.embed(&[query]).unwrap().remove(0);
        let nearest = m
            .store()
            .read(|tx| {
                crate::postgres::pgvector::nearest(
                    tx,
                    &vector,
                    embedder.model_id(),
                    &scope,
                    10,
                    &[],
                )
            })
            .unwrap()
            .expect("the iterative index scan went past the foreign neighbours");
        assert_eq!(nearest.len(), 10);
    }
}

/// An embedder of another size gets an index of its own, the facts are re-embedded for
/// it, and the index answers for it.
#[test]
fn a_new_embedding_dimension_gets_its_own_index() {
    let (at, m, indexed) = indexed_memory();
    for i in 0..12 {
        m.save_fact(fact(&format!("deploy key {i}"), "rotate it", None, None))
            .unwrap();
    }
    let small: Arc<dyn Embedder> = Arc::new(clawboo_embed::HashedEmbedder::new(32));
    let resized = Memory::new(open(&at), Some(Arc::clone(&small)));
    let hits = resized
        .search(
            "deploy key",
            Some(SearchMode::Vector),
            &ScopeFilter::default(),
            5,
        )
        .unwrap();
    assert_eq!(hits.mode, SearchMode::Vector);
    assert_eq!(hits.hits.len(), 5);
    assert!(
        hits.hits
            .iter()
            .all(|h| h.fact.embedding_model.as_deref() == Some(small.model_id()))
    );
    if indexed {
        let vector = small.embed(&["deploy key"]).unwrap().remove(0);
        let nearest = resized
            .store()
            .read(|tx| {
                crate::postgres::pgvector::nearest(
                    tx,
                    &vector,
                    small.model_id(),
                    &ScopeFilter::default(),
                    5,
                    &[],
                )
            })
            .unwrap();
        assert_eq!(nearest.map(|n| n.len()), Some(5));
    }
}

/// A database from before the half-precision walk has a full-precision index per
/// dimension (`memory_facts_vector_<dim>`): opening it builds the `halfvec` index and
/// drops the old one, which no search walks and every save would pay for.
#[test]
fn opening_replaces_the_full_precision_index_with_the_half_precision_one() {
    let (at, m, indexed) = indexed_memory();
    if !indexed {
        return;
    }
    m.save_fact(fact("deploy key", "rotate it", None, None))
        .unwrap();
    let dim = clawboo_embed::HashedEmbedder::default().dim();
    let exists = |m: &Memory, name: String| -> bool {
        m.store()
            .read(|tx| tx.query_one("SELECT to_regclass(?1) IS NOT NULL", &[&name], |r| r.get(0)))
            .unwrap()
    };
    let (old, new) = (
        format!("memory_facts_vector_{dim}"),
        format!("memory_facts_halfvec_{dim}"),
    );
    m.store()
        .write(|tx| {
            tx.execute(&format!("DROP INDEX {new}"), &[])?;
            tx.execute(
                &format!(
                    "CREATE INDEX {old} ON memory_facts USING hnsw
                         ((CAST(embedding_vec AS vector({dim}))) vector_cosine_ops)
                     WHERE embedding_dim = {dim}"
                ),
                &[],
            )
        })
        .unwrap();
    let reopened = Memory::new(open(&at), hashed());
    assert!(exists(&reopened, new), "the half-precision index was built");
    assert!(
        !exists(&reopened, old),
        "the full-precision one was dropped"
    );
    let hits = reopened
        .search(
            "deploy key",
            Some(SearchMode::Vector),
            &ScopeFilter::default(),
            1,
        )
        .unwrap();
    assert_eq!(hits.hits.len(), 1);
}

/// An index build asks for the memory its graph needs when the server's
/// `maintenance_work_mem` is smaller, and keeps a larger setting.
#[test]
fn an_index_build_asks_for_room_for_its_graph() {
    let (_at, m, indexed) = indexed_memory();
    if !indexed {
        return;
    }
    let facts = 800;
    let mut seed = 7u64;
    for i in 0..facts {
        m.save_fact(fact(
            &format!("note {i}"),
            &sentence(&mut seed, 12),
            None,
            None,
        ))
        .unwrap();
    }
    let dim = clawboo_embed::HashedEmbedder::default().dim();
    let asked_after = |server_kb: i64| -> i64 {
        m.store()
            .write(|tx| {
                tx.execute(
                    &format!("SET LOCAL maintenance_work_mem = '{server_kb}kB'"),
                    &[],
                )?;
                postgres::pgvector::room_for_the_graph(tx, dim)?;
                tx.query_one(
                    "SELECT CAST(setting AS BIGINT) FROM pg_settings
                     WHERE name = 'maintenance_work_mem'",
                    &[],
                    |r| r.get::<i64>(0),
                )
            })
            .unwrap()
    };
    let graph_kb = facts * (2 * dim as i64 + 1024) / 1024;
    assert!(graph_kb > 1024, "the corpus outgrows the smallest setting");
    assert_eq!(asked_after(1024), graph_kb, "raised to the graph's size");
    assert_eq!(asked_after(4 * graph_kb), 4 * graph_kb, "a larger one kept");
}
