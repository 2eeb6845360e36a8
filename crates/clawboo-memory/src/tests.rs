#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use clawboo_embed::HashedEmbedder;

use super::*;
use clawboo_store::StoreConfig;
use clawboo_store::testing::TestStore;

// The contract tests open every store through `location` and `open`, so they hold on any
// backend: with `CLAWBOO_TEST_BACKEND=postgres` each test gets a fresh PostgreSQL database
// (test.sh runs them so on a server without pgvector and on one with it). The tests after
// `in_memory_ranking_equals_fts5_bm25` are SQLite's own (its in-memory index against
// FTS5) and open `sqlite_location`.

/// Where one test's stores live (a fresh, empty database), kept until the test ends.
pub(super) struct Location(TestStore);

/// A fresh, empty database for one test, on the backend the test run names.
pub(super) fn location() -> Location {
    if std::env::var("CLAWBOO_TEST_BACKEND").is_ok_and(|b| b == "postgres") {
        Location(
            TestStore::postgres()
                .expect("CLAWBOO_TEST_BACKEND=postgres needs CLAWBOO_TEST_POSTGRES_URL"),
        )
    } else {
        sqlite_location()
    }
}

/// A fresh SQLite file, whatever the run's backend.
pub(super) fn sqlite_location() -> Location {
    Location(TestStore::sqlite())
}

/// What every test store opens with: memory's [`EXTENSION`].
pub(super) fn config() -> StoreConfig {
    StoreConfig::default().with_extension(EXTENSION)
}

/// A store (a connection of its own, as another process would have) on `at`.
pub(super) fn open(at: &Location) -> Arc<Store> {
    Arc::new(at.0.store_with(config()))
}

pub(super) fn memory(embedder: Option<Arc<dyn Embedder>>) -> (Location, Memory) {
    let at = location();
    let store = open(&at);
    (at, Memory::new(store, embedder))
}

pub(super) fn hashed() -> Option<Arc<dyn Embedder>> {
    Some(Arc::new(HashedEmbedder::default()))
}

pub(super) fn fact(title: &str, content: &str, team: Option<&str>, agent: Option<&str>) -> NewFact {
    NewFact {
        title: title.into(),
        content: content.into(),
        team_id: team.map(Into::into),
        agent_id: agent.map(Into::into),
        ..NewFact::default()
    }
}

pub(super) fn team(t: &str) -> ScopeFilter {
    ScopeFilter {
        team: TeamFilter::TeamOrGlobal(t.into()),
        ..ScopeFilter::default()
    }
}

fn titles(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.fact.title.as_str()).collect()
}

#[test]
fn save_scrubs_every_field_and_declines_pure_secrets() {
    let (_d, m) = memory(None);
    let saved = m
        .save_fact(NewFact {
            title: "creds ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8".into(),
            content: "use API_KEY=abc123 for staging".into(),
            tags: vec!["sk-proj-4f9aB7cD2eF1gH8iJ3kL6mN0pQ5rS".into(), "ops".into()],
            ..NewFact::default()
        })
        .unwrap();
    assert_eq!(saved.title, "creds [REDACTED]");
    assert_eq!(saved.content, "use API_KEY=[REDACTED] for staging");
    assert_eq!(saved.tags, ["[REDACTED]", "ops"]);
    let stored = m.get_fact(&saved.id, &ScopeFilter::default()).unwrap();
    assert_eq!(stored.as_ref(), Some(&saved));

    let err = m
        .save_fact(fact(
            "t",
            "sk-proj-4f9aB7cD2eF1gH8iJ3kL6mN0pQ5rS",
            None,
            None,
        ))
        .unwrap_err();
    assert_eq!(err.to_string(), format!("invalid: {ENTIRELY_REDACTED}"));
    let err = m.save_fact(fact("  ", "content", None, None)).unwrap_err();
    assert_eq!(err.to_string(), format!("invalid: {TITLE_REQUIRED}"));
    assert_eq!(m.browse(&ScopeFilter::default(), 200).unwrap().len(), 1);
}

#[test]
fn oversize_input_and_bad_limits_are_refused() {
    let (_d, m) = memory(None);
    let long = "x".repeat(MAX_CONTENT_CHARS + 1);
    assert!(m.save_fact(fact("t", &long, None, None)).is_err());
    assert!(m.browse(&ScopeFilter::default(), 0).is_err());
    assert!(m.browse(&ScopeFilter::default(), 201).is_err());
    assert!(m.search("x", None, &ScopeFilter::default(), 101).is_err());
    assert!(m.search("   ", None, &ScopeFilter::default(), 5).is_err());
    let long_query = "word ".repeat(500);
    assert!(
        m.search(&long_query, None, &ScopeFilter::default(), 5)
            .is_err()
    );
}

#[test]
fn browse_is_newest_first() {
    let (_d, m) = memory(None);
    for i in 0..5 {
        m.save_fact(fact(&format!("f{i}"), "body", None, None))
            .unwrap();
    }
    let facts = m.browse(&ScopeFilter::default(), 3).unwrap();
    let names: Vec<&str> = facts.iter().map(|f| f.title.as_str()).collect();
    assert_eq!(names, ["f4", "f3", "f2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_browsing_reads_what_browsing_reads() {
    let (_d, m) = memory(None);
    for (i, team) in [None, Some("A"), Some("B"), None].into_iter().enumerate() {
        m.save_fact(fact(&format!("f{i}"), "body", team, None))
            .unwrap();
    }
    let step = |content: &str| NewProcedure {
        name: "release".into(),
        content: content.into(),
        ..NewProcedure::default()
    };
    m.save_procedure(step("v1 steps")).unwrap();
    m.save_procedure(step("v2 steps")).unwrap();

    let a = ScopeFilter {
        team: TeamFilter::TeamOrGlobal("A".into()),
        ..ScopeFilter::default()
    };
    let facts = m.browse_async(&a, 10).await.unwrap().unwrap();
    assert_eq!(facts, m.browse(&a, 10).unwrap());
    let titles: Vec<&str> = facts.iter().map(|f| f.title.as_str()).collect();
    assert_eq!(
        titles,
        ["f3", "f1", "f0"],
        "team B's fact is not in A's scope"
    );
    let refused = m.browse_async(&a, 0).await.unwrap();
    assert!(refused.is_err(), "{refused:?}");

    let latest = m
        .latest_procedures_async(&a, None, 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest, m.latest_procedures(&a, None, 10).unwrap());
    assert_eq!(latest[0].content, "v2 steps");
    let matched = m.latest_procedures_async(&a, Some("release"), 10).await;
    assert_eq!(matched.unwrap().unwrap().len(), 1);
    let wordless = m.latest_procedures_async(&a, Some("is it"), 10).await;
    assert!(wordless.unwrap().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_saves_are_all_found_and_leave_a_sound_packed_index() {
    let (_d, m) = memory(hashed());
    let m = Arc::new(m);
    // More than the tests' packing threshold, so saves find the tail long and pack it
    // (on PostgreSQL right after their commit).
    let saves = (0..150).map(|i| {
        let m = Arc::clone(&m);
        tokio::spawn(async move {
            let new = fact(
                &format!("note {i}"),
                &format!("word{i} nightly"),
                Some("A"),
                None,
            );
            let prepared = m.prepare_fact(new).unwrap();
            prepared.insert_async(m.store()).await.unwrap().unwrap()
        })
    });
    let saved = futures_util::future::join_all(saves).await;
    assert!(saved.iter().all(|joined| joined.is_ok()));
    let a = ScopeFilter {
        team: TeamFilter::TeamOrGlobal("A".into()),
        ..ScopeFilter::default()
    };
    for i in [0, 77, 149] {
        let hits = m
            .search(&format!("word{i}"), Some(SearchMode::Fts), &a, 5)
            .unwrap()
            .hits;
        let titles: Vec<&str> = hits.iter().map(|h| h.fact.title.as_str()).collect();
        assert_eq!(titles, [format!("note {i}")], "word{i}");
    }
    assert_eq!(m.facts_stored().unwrap(), 150);
    let found = check_text_index(m.store()).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    if m.store().dialect() == Dialect::Postgres {
        let waiting: i64 = m
            .store()
            .read(|tx| {
                tx.query_one(
                    "SELECT count(DISTINCT seq) FROM memory_fts_postings",
                    &[],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert!(waiting < 150, "the tail was packed ({waiting} facts wait)");
    }
}

#[test]
fn scope_filters_team_agent_and_tenant_in_every_mode() {
    let (_d, m) = memory(hashed());
    m.save_fact(fact(
        "alpha deploy",
        "deploy notes for team A",
        Some("A"),
        None,
    ))
    .unwrap();
    m.save_fact(fact(
        "beta deploy",
        "deploy notes for team B",
        Some("B"),
        None,
    ))
    .unwrap();
    m.save_fact(fact(
        "global deploy",
        "deploy notes for everyone",
        None,
        None,
    ))
    .unwrap();
    m.save_fact(fact(
        "a1 deploy",
        "deploy notes of agent a1",
        Some("A"),
        Some("a1"),
    ))
    .unwrap();
    m.save_fact(NewFact {
        tenant_id: Some("t1".into()),
        ..fact(
            "tenant deploy",
            "deploy notes of tenant t1",
            Some("A"),
            None,
        )
    })
    .unwrap();

    for mode in [SearchMode::Fts, SearchMode::Vector, SearchMode::Hybrid] {
        let hits = m
            .search("deploy notes", Some(mode), &team("A"), 100)
            .unwrap();
        assert_eq!(hits.mode, mode);
        let mut got = titles(&hits.hits);
        got.sort();
        assert_eq!(
            got,
            [
                "a1 deploy",
                "alpha deploy",
                "global deploy",
                "tenant deploy"
            ],
            "{mode}"
        );
        let scope = ScopeFilter {
            team: TeamFilter::TeamOrGlobal("A".into()),
            agent_id: Some("a2".into()),
            tenant_id: None,
        };
        let hits = m.search("deploy notes", Some(mode), &scope, 100).unwrap();
        assert!(!titles(&hits.hits).contains(&"a1 deploy"), "{mode}");
        let scope = ScopeFilter {
            tenant_id: Some("t1".into()),
            ..ScopeFilter::default()
        };
        let hits = m.search("deploy notes", Some(mode), &scope, 100).unwrap();
        assert_eq!(titles(&hits.hits), ["tenant deploy"], "{mode}");
        let global = ScopeFilter {
            team: TeamFilter::GlobalOnly,
            ..ScopeFilter::default()
        };
        let hits = m.search("deploy notes", Some(mode), &global, 100).unwrap();
        assert_eq!(titles(&hits.hits), ["global deploy"], "{mode}");
        for hit in &hits.hits {
            assert!(hit.score > 0.0 && hit.score <= 1.0);
        }
    }
    let browsed = m.browse(&team("B"), 200).unwrap();
    let mut got: Vec<&str> = browsed.iter().map(|f| f.title.as_str()).collect();
    got.sort();
    assert_eq!(got, ["beta deploy", "global deploy"]);
    assert_eq!(m.browse(&ScopeFilter::default(), 200).unwrap().len(), 5);
}

#[test]
fn fts_survives_any_punctuation_and_ranks_title_matches() {
    let (_d, m) = memory(None);
    m.save_fact(fact("postgres backups", "nightly at 02:00", None, None))
        .unwrap();
    m.save_fact(fact("misc", "we once talked about postgres", None, None))
        .unwrap();
    for q in [
        "postgres\"",
        "postgres AND (",
        "NEAR(postgres",
        "postgres*",
        "'; DROP TABLE memory_facts; --",
        "-postgres",
        "^postgres:",
    ] {
        let out = m.search(q, None, &ScopeFilter::default(), 10).unwrap();
        assert_eq!(out.mode, SearchMode::Fts);
        if q.contains("postgres") {
            assert_eq!(out.hits[0].fact.title, "postgres backups", "{q}");
            assert!(out.hits.iter().all(|h| h.matched_via == MatchedVia::Fts));
        }
    }
    assert!(
        m.search("???", None, &ScopeFilter::default(), 10)
            .unwrap()
            .hits
            .is_empty()
    );
    assert_eq!(m.browse(&ScopeFilter::default(), 10).unwrap().len(), 2);
}

#[test]
fn vector_and_hybrid_fall_back_to_fts_without_an_embedder() {
    let (_d, m) = memory(None);
    m.save_fact(fact("cache", "redis cache eviction", None, None))
        .unwrap();
    assert_eq!(m.default_mode(), SearchMode::Fts);
    for mode in [SearchMode::Vector, SearchMode::Hybrid] {
        let out = m
            .search("redis", Some(mode), &ScopeFilter::default(), 10)
            .unwrap();
        assert_eq!(out.mode, SearchMode::Fts);
        assert_eq!(out.hits.len(), 1);
    }
}

/// An embedder that always fails, to prove the fallback.
struct Broken;

impl Embedder for Broken {
    fn model_id(&self) -> &str {
        "broken"
    }
    fn dim(&self) -> usize {
        8
    }
    fn embed(&self, _: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Http("connection refused".into()))
    }
}

#[test]
fn a_failing_embedder_still_saves_and_search_degrades_to_fts() {
    let (_d, m) = memory(Some(Arc::new(Broken)));
    let saved = m
        .save_fact(fact("cache", "redis cache eviction", None, None))
        .unwrap();
    assert_eq!(saved.embedding_model, None);
    assert_eq!(m.default_mode(), SearchMode::Hybrid);
    let out = m
        .search("redis", None, &ScopeFilter::default(), 10)
        .unwrap();
    assert_eq!(out.mode, SearchMode::Fts);
    assert_eq!(out.hits.len(), 1);
}

#[test]
fn hybrid_marks_hits_found_by_both_lists() {
    let (_d, m) = memory(hashed());
    m.save_fact(fact(
        "deploy checklist",
        "run migrations then restart",
        None,
        None,
    ))
    .unwrap();
    m.save_fact(fact("lunch", "pizza on fridays", None, None))
        .unwrap();
    let out = m
        .search(
            "deploy checklist",
            Some(SearchMode::Hybrid),
            &ScopeFilter::default(),
            10,
        )
        .unwrap();
    assert_eq!(out.mode, SearchMode::Hybrid);
    assert_eq!(out.hits[0].fact.title, "deploy checklist");
    assert_eq!(out.hits[0].matched_via, MatchedVia::Both);
    assert!(out.hits[0].score > 0.9 && out.hits[0].score <= 1.0);
    // The built-in embedder is lexical: hybrid is not the default with it.
    assert_eq!(m.default_mode(), SearchMode::Fts);
}

#[test]
fn vectors_of_another_model_are_re_embedded_lazily_and_by_reindex() {
    let at = location();
    let store = open(&at);
    let old = Memory::new(store.clone(), Some(Arc::new(HashedEmbedder::new(64))));
    let a = old
        .save_fact(fact("kafka", "kafka topics retention", None, None))
        .unwrap();
    assert_eq!(a.embedding_model.as_deref(), Some("clawboo-hashed-v1-64"));
    let unembedded = Memory::new(store.clone(), None);
    unembedded
        .save_fact(fact("zookeeper", "kafka needs zookeeper", None, None))
        .unwrap();

    // A new model: the vector search re-embeds both facts before scanning.
    let new = Memory::new(store.clone(), hashed());
    let out = new
        .search(
            "kafka",
            Some(SearchMode::Vector),
            &ScopeFilter::default(),
            10,
        )
        .unwrap();
    assert_eq!(out.mode, SearchMode::Vector);
    assert_eq!(out.hits.len(), 2);
    for hit in &out.hits {
        assert_eq!(
            hit.fact.embedding_model.as_deref(),
            Some("clawboo-hashed-v1-256")
        );
    }
    // Reindex back to the old model reports the work done.
    let report = old.reindex().unwrap();
    assert_eq!(
        report,
        ReindexReport {
            embedded: 2,
            up_to_date: 0
        }
    );
    assert_eq!(
        old.reindex().unwrap(),
        ReindexReport {
            embedded: 0,
            up_to_date: 2
        }
    );
    // The new model's cache sees the change made through another handle and catches up.
    let out = new
        .search(
            "kafka",
            Some(SearchMode::Vector),
            &ScopeFilter::default(),
            10,
        )
        .unwrap();
    assert_eq!(out.hits.len(), 2);
}

#[test]
fn procedures_version_per_name_and_scope() {
    let (_d, m) = memory(None);
    let proc = |content: &str, team: Option<&str>| NewProcedure {
        name: "release".into(),
        content: content.into(),
        team_id: team.map(Into::into),
        ..NewProcedure::default()
    };
    assert_eq!(m.save_procedure(proc("v1 steps", None)).unwrap().version, 1);
    assert_eq!(m.save_procedure(proc("v2 steps", None)).unwrap().version, 2);
    assert_eq!(
        m.save_procedure(proc("team A steps", Some("A")))
            .unwrap()
            .version,
        1
    );
    let err = m
        .save_procedure(proc("AKIAIOSFODNN7EXAMPLE", None))
        .unwrap_err();
    assert_eq!(err.to_string(), format!("invalid: {ENTIRELY_REDACTED}"));

    let latest = m
        .latest_procedures(&ScopeFilter::default(), None, 10)
        .unwrap();
    let mut got: Vec<(Option<String>, i64)> = latest
        .iter()
        .map(|p| (p.team_id.clone(), p.version))
        .collect();
    got.sort();
    assert_eq!(got, [(None, 2), (Some("A".into()), 1)]);
    let b_only = m
        .latest_procedures(&team("B"), Some("release"), 10)
        .unwrap();
    assert_eq!(b_only.len(), 1);
    assert_eq!(b_only[0].content, "v2 steps");
    assert!(
        m.latest_procedures(&team("B"), Some("unrelated"), 10)
            .unwrap()
            .is_empty()
    );
    // Function words alone do not match every procedure.
    assert!(
        m.latest_procedures(&team("B"), Some("is there a thing"), 10)
            .unwrap()
            .is_empty()
    );
    let versions = m
        .procedure_versions(
            "release",
            &ScopeFilter {
                team: TeamFilter::GlobalOnly,
                ..ScopeFilter::default()
            },
        )
        .unwrap();
    assert_eq!(
        versions.iter().map(|p| p.version).collect::<Vec<_>>(),
        [1, 2]
    );
}

#[test]
fn concurrent_procedure_saves_from_many_connections_get_distinct_versions() {
    let at = Arc::new(location());
    open(&at);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let at = Arc::clone(&at);
            std::thread::spawn(move || {
                // One store (one connection) per thread, as separate processes would have.
                let m = Memory::new(open(&at), None);
                (0..5)
                    .map(|i| {
                        m.save_procedure(NewProcedure {
                            name: "deploy".into(),
                            content: format!("writer {t} save {i}"),
                            ..NewProcedure::default()
                        })
                        .unwrap()
                        .version
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut versions: Vec<i64> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    versions.sort();
    assert_eq!(versions, (1..=40).collect::<Vec<_>>());
}

#[test]
fn a_word_fts5_splits_in_two_matches_as_a_phrase() {
    let (_d, m) = memory(None);
    // A Devanagari sign between two letters: one query word, two terms.
    m.save_fact(fact("in order", "pager a b", None, None))
        .unwrap();
    m.save_fact(fact("reversed", "pager b a", None, None))
        .unwrap();
    m.save_fact(fact("apart", "a pager b", None, None)).unwrap();
    let all = ScopeFilter::default();
    let hits = m
        .search("a\u{902}b", Some(SearchMode::Fts), &all, 10)
        .unwrap();
    assert_eq!(titles(&hits.hits), ["in order"]);
    // A word of no term matches nothing and changes no score.
    let with = m
        .search("pager \u{902}", Some(SearchMode::Fts), &all, 10)
        .unwrap();
    let without = m.search("pager", Some(SearchMode::Fts), &all, 10).unwrap();
    assert_eq!(with, without);
    assert_eq!(with.hits.len(), 3);
}

/// A small deterministic generator for the ranking corpus.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Words that stem together, fold diacritics, repeat and differ in rarity.
const RANKING_VOCABULARY: &[&str] = &[
    "deploy",
    "deploys",
    "deploying",
    "runbook",
    "database",
    "migration",
    "café",
    "naïve",
    "straße",
    "rollback",
    "kubernetes",
    "k8s",
    "v2",
    "canary",
    "release",
    "token",
    "rotate",
    "rotation",
    "alert",
    "pager",
    "the",
    "of",
    "caresses",
    "ponies",
    "ÉCOLE",
    "école",
];

/// `check_text_index` finds a sound index sound, and names what was broken by hand: on
/// SQLite a fact FTS5 lost count of; on PostgreSQL a block whose size lies, postings filed under
/// another scope than their fact's, a fact posted twice under one term (in a block and
/// in the tail). This crate's tests pack every 64 facts, 8 postings a block.
#[test]
fn the_text_index_check_names_what_was_broken() {
    let (_at, m) = memory(None);
    let mut rng = Lcg(5);
    for i in 0..150 {
        m.save_fact(ranking_fact(&mut rng, i)).unwrap();
    }
    let sound = check_text_index(m.store()).unwrap();
    assert!(sound.problems.is_empty(), "{:?}", sound.problems);
    assert!(sound.checks.contains(&"text_index_complete"));
    let break_it = |sql: &str| {
        m.store().write(|tx| tx.execute(sql, &[])).unwrap();
    };
    let expected: &[(&str, &str)] = if m.store().dialect() == Dialect::Postgres {
        assert!(sound.checks.contains(&"text_index_blocks"));
        break_it(
            "UPDATE memory_fts_blocks SET docs = docs + 1
             WHERE (term, first_seq) = (SELECT term, first_seq FROM memory_fts_blocks
                                        WHERE docs < 8 ORDER BY term, first_seq LIMIT 1)",
        );
        break_it(
            "UPDATE memory_fts_blocks SET team_id = 'elsewhere'
             WHERE (term, first_seq) = (SELECT term, first_seq FROM memory_fts_blocks
                                        WHERE docs < 8 ORDER BY term DESC, first_seq LIMIT 1)",
        );
        break_it(
            "INSERT INTO memory_fts_postings
                 (term, seq, freq, positions, length, team_id, agent_id, tenant_id)
             SELECT term, first_seq, 1, '{}', 1, team_id, agent_id, tenant_id
             FROM memory_fts_blocks WHERE team_id IS DISTINCT FROM 'elsewhere'
             ORDER BY term, first_seq DESC LIMIT 1",
        );
        &[
            ("text_index_blocks", "postings from"),
            ("text_index_blocks", "under another scope than its own"),
            ("text_index_blocks", "posted twice"),
        ]
    } else {
        break_it(
            "DELETE FROM memory_facts_fts_docsize WHERE id = (SELECT max(seq) FROM memory_facts)",
        );
        &[(
            "text_index_complete",
            "150 facts, but the full-text index counts 149",
        )]
    };
    let found = check_text_index(m.store()).unwrap();
    for (check, words) in expected {
        assert!(
            found
                .problems
                .iter()
                .any(|(c, detail)| c == check && detail.contains(words)),
            "{check}: {words:?} not among {:?}",
            found.problems
        );
    }
    assert_eq!(found.problems.len(), expected.len(), "{:?}", found.problems);
}

/// One to `most` words of [`RANKING_VOCABULARY`], the first words likelier.
fn words(rng: &mut Lcg, most: usize) -> String {
    let n = 1 + rng.below(most);
    (0..n)
        .map(|_| {
            RANKING_VOCABULARY[rng
                .below(RANKING_VOCABULARY.len())
                .min(rng.below(RANKING_VOCABULARY.len()))]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text_ranked` once the text index answers (its thread may still be catching up).
fn settled(m: &Memory, words: &[String], scope: &ScopeFilter, k: usize) -> Vec<(i64, f64)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(ranked) = m.text_ranked(words, scope, k).unwrap() {
            return ranked;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the text index never caught up"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Fact `i` of the ranking corpus.
fn ranking_fact(rng: &mut Lcg, i: usize) -> NewFact {
    let teams = [None, Some("alpha"), Some("beta")];
    NewFact {
        title: words(rng, 4),
        content: words(rng, 40),
        tags: (0..rng.below(3)).map(|_| words(rng, 1)).collect(),
        team_id: teams[i % 3].map(Into::into),
        agent_id: i.is_multiple_of(4).then(|| "a1".into()),
        tenant_id: i.is_multiple_of(5).then(|| "t1".into()),
    }
}

/// The scopes the ranking tests search in.
fn ranking_scopes() -> [ScopeFilter; 4] {
    [
        ScopeFilter::default(),
        team("alpha"),
        ScopeFilter {
            team: TeamFilter::GlobalOnly,
            ..ScopeFilter::default()
        },
        ScopeFilter {
            agent_id: Some("a1".into()),
            tenant_id: Some("t1".into()),
            ..team("beta")
        },
    ]
}

/// The database's own bm25 on this run's backend (PostgreSQL with
/// `CLAWBOO_TEST_BACKEND=postgres`) ranks every query as SQLite's FTS5 does: the same
/// facts in the same places with the same scores, terms made by the ported tokenizer.
/// On PostgreSQL the postings are read from packed blocks, spanning several per term, and
/// from the tail at once (this crate's tests pack every 64 facts, 8 postings a block), and
/// again after a database whose postings all sit in the tail is packed as it opens, and
/// after one whose blocks hold their places inline is rebuilt as it opens.
#[test]
fn full_text_ranks_as_fts5_on_every_backend() {
    let sqlite = Memory::new(open(&sqlite_location()), None);
    let at = location();
    let tested = Memory::new(open(&at), None);
    let mut rng = Lcg(11);
    for i in 0..400 {
        let fact = ranking_fact(&mut rng, i);
        sqlite.save_fact(fact.clone()).unwrap();
        tested.save_fact(fact).unwrap();
        if i == 200 {
            merge_search_index(tested.store()).unwrap();
        }
    }
    assert_ranks_as_fts5(&sqlite, &tested, &mut rng);
    if tested.store().dialect() == Dialect::Postgres {
        let (blocks, tail): (i64, i64) = tested
            .store()
            .read(|tx| {
                tx.query_one(
                    "SELECT (SELECT count(*) FROM memory_fts_blocks),
                         (SELECT count(DISTINCT seq) FROM memory_fts_postings)",
                    &[],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
            })
            .unwrap();
        assert!(blocks > 100, "the postings were packed: {blocks} blocks");
        // Packings merge a term's partly filled blocks in a scope once it holds four.
        let most_partials: i64 = tested
            .store()
            .read(|tx| {
                tx.query_one(
                    "SELECT max(n) FROM (SELECT count(*) AS n FROM memory_fts_blocks
                         WHERE docs < 8 GROUP BY term, team_id, agent_id, tenant_id) AS p",
                    &[],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert!((1..=4).contains(&most_partials), "{most_partials}");
        assert!(
            (1..64).contains(&tail),
            "the newest facts wait in the tail: {tail}"
        );
        // As a database from before blocks looks: nothing counted as packed.
        tested
            .store()
            .write(|tx| tx.execute("UPDATE memory_fts_packed SET docs = 0", &[]))
            .unwrap();
        let reopened = Memory::new(open(&at), None);
        let tail: i64 = reopened
            .store()
            .read(|tx| {
                tx.query_one("SELECT count(*) FROM memory_fts_postings", &[], |r| {
                    r.get(0)
                })
            })
            .unwrap();
        assert_eq!(tail, 0, "opening packed the whole index");
        assert_ranks_as_fts5(&sqlite, &reopened, &mut rng);
        // As a database from before places had a column of their own looks (migration
        // 0010 left its blocks an empty `places`): opening rebuilds the index from the facts.
        reopened
            .store()
            .write(|tx| {
                tx.execute("UPDATE memory_fts_blocks SET places = ''", &[])?;
                tx.execute("UPDATE memory_fts_packed SET places_apart = FALSE", &[])
            })
            .unwrap();
        let rebuilt = Memory::new(open(&at), None);
        let (emptied, apart): (i64, bool) = rebuilt
            .store()
            .read(|tx| {
                tx.query_one(
                    "SELECT (SELECT count(*) FROM memory_fts_blocks WHERE places = ''),
                         (SELECT places_apart FROM memory_fts_packed)",
                    &[],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
            })
            .unwrap();
        assert_eq!((emptied, apart), (0, true), "opening rebuilt every block");
        assert_ranks_as_fts5(&sqlite, &rebuilt, &mut rng);
        assert!(
            check_text_index(rebuilt.store())
                .unwrap()
                .problems
                .is_empty()
        );
    }
}

/// `tested` ranks 60 random queries in every scope as `sqlite`'s FTS5 does.
fn assert_ranks_as_fts5(sqlite: &Memory, tested: &Memory, rng: &mut Lcg) {
    let mut compared = 0;
    for _ in 0..60 {
        // Accents, case and a word FTS5 splits in two, beside the corpus' own words.
        let query = format!("{} UNHEARD café Déploy a\u{902}b", words(rng, 4));
        let words = search::fts_words(&search::query_words(&query));
        for scope in &ranking_scopes() {
            let expected = sqlite.fts_ranked_in_sqlite(&words, scope, 100).unwrap();
            let got = tested
                .search(&query, Some(SearchMode::Fts), scope, 100)
                .unwrap();
            assert_eq!(got.hits.len(), expected.len(), "{query:?}");
            for (i, (hit, (fact, score))) in got.hits.iter().zip(&expected).enumerate() {
                assert_eq!(
                    (&hit.fact.title, &hit.fact.content),
                    (&fact.title, &fact.content),
                    "{query:?} place {i}"
                );
                assert!((hit.score - score).abs() < 1e-12, "{query:?} place {i}");
            }
            compared += expected.len();
        }
    }
    assert!(
        compared > 1_000,
        "the queries matched too little: {compared}"
    );
}

#[test]
fn in_memory_ranking_equals_fts5_bm25() {
    let m = Memory::new(open(&sqlite_location()), None);
    let mut rng = Lcg(7);
    for i in 0..400 {
        if i == 300 {
            // The first 300 are indexed whole from FTS5's index; the rest one by one, as a
            // search finds them, through the ported tokenizer.
            settled(&m, &["deploy".into()], &ScopeFilter::default(), 1);
        }
        m.save_fact(ranking_fact(&mut rng, i)).unwrap();
    }
    let scopes = ranking_scopes();
    let mut compared = 0;
    for _ in 0..60 {
        let query = format!("{} unheard", words(&mut rng, 4));
        let words = search::fts_words(&search::query_words(&query));
        for scope in &scopes {
            let every = m.fts_ranked_in_sqlite(&words, scope, 100_000).unwrap();
            for k in [1, 5, 50] {
                let ranked = settled(&m, &words, scope, k);
                assert_eq!(ranked.len(), every.len().min(k), "{query:?} k={k}");
                let facts = m.facts_by_seq(ranked.iter().map(|(s, _)| *s)).unwrap();
                for (i, (seq, score)) in ranked.iter().enumerate() {
                    // The same fact at the same place (ties included), with the same score.
                    assert_eq!(facts[seq].id, every[i].0.id, "{query:?} place {i}");
                    assert_eq!(score / (1.0 + score), every[i].1, "{query:?} place {i}");
                }
                compared += ranked.len();
            }
        }
    }
    assert!(
        compared > 1_000,
        "the queries matched too little: {compared}"
    );
}

#[test]
fn the_text_index_follows_other_processes_and_defers_what_it_cannot_rank() {
    let at = sqlite_location();
    let open = || Memory::new(open(&at), None);
    let (reader, writer) = (open(), open());
    let words = |q: &str| search::fts_words(&search::query_words(q));
    // More facts than a search indexes itself: until a thread of its own has indexed them,
    // searches rank in SQLite.
    writer
        .store()
        .write(|_| {
            for i in 0..2_500 {
                writer
                    .prepare_fact(fact(&format!("note {i}"), "filler text", None, None))?
                    .insert(writer.store())?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let all = ScopeFilter::default();
    assert_eq!(reader.text_ranked(&words("filler"), &all, 3).unwrap(), None);
    assert_eq!(settled(&reader, &words("filler"), &all, 3).len(), 3);
    writer
        .save_fact(fact("pager rotation", "who holds the pager", None, None))
        .unwrap();
    let hits = reader
        .search("pagers", Some(SearchMode::Fts), &all, 5)
        .unwrap()
        .hits;
    assert_eq!(titles(&hits), ["pager rotation"]);
    assert!(
        reader
            .text_ranked(&words("pagers"), &all, 5)
            .unwrap()
            .is_some_and(|r| r.len() == 1),
        "a search indexes another process's new fact itself"
    );
    // A word FTS5 splits in two (a Devanagari sign between letters) is a phrase there,
    // which the index does not rank: SQLite does, and finds it.
    writer
        .save_fact(fact("pager a b", "a b", None, None))
        .unwrap();
    assert!(
        reader
            .text_ranked(&words("pager"), &all, 5)
            .unwrap()
            .is_some_and(|r| r.len() == 2)
    );
    assert_eq!(
        reader.text_ranked(&words("a\u{902}b"), &all, 5).unwrap(),
        None
    );
    let hits = reader
        .search("a\u{902}b", Some(SearchMode::Fts), &all, 5)
        .unwrap()
        .hits;
    assert_eq!(titles(&hits), ["pager a b"]);
}
