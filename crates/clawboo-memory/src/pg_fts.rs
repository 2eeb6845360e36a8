//! Full-text search on PostgreSQL: FTS5's bm25 computed in the database from the term
//! statistics of migrations `postgres/0002_memory_search.sql` and `0004_memory_scale.sql`,
//! with FTS5's formula, constants and order of additions, so facts rank exactly as SQLite
//! ranks them.
//!
//! The terms are FTS5's own, made by memory's port of its tokenizer ([`super::terms`]).
//! A query word is one FTS5 phrase: usually one term, whose idf comes from the count kept
//! at write time and whose postings (each carrying its fact's length and scope) are all a
//! search reads; a word FTS5 splits into several terms matches where they stand
//! consecutively in one column, as FTS5 matches a phrase, counted from those terms'
//! postings; a word of no term matches nothing and adds nothing to any score.

use serde::Serialize;

use super::bm25::{B, COLUMN_WEIGHTS, K1};
use super::terms::DocTerms;
use super::{FACT_COLUMNS, Fact, ScopeFilter, fact_from_row};
use crate::Result;
use clawboo_store::StoreError;
use clawboo_store::db::{ToValue, Tx};

/// Rows of `memory_fts_totals`, and of `memory_fts_terms` per term, writers spread over.
const SHARDS: i64 = 16;

/// One term of a fact, as `record_terms_of` hands it to the database, with what its
/// posting carries of the fact.
#[derive(Serialize)]
struct TermRow<'a> {
    seq: i64,
    term: &'a str,
    freq: u32,
    positions: &'a [i64],
    length: u32,
    team_id: Option<&'a str>,
    agent_id: Option<&'a str>,
    tenant_id: Option<&'a str>,
}

/// One term of a query: its phrase (the query word's place) and its place in the phrase.
#[derive(Serialize)]
struct QueryTerm<'a> {
    phrase: usize,
    place: usize,
    term: &'a str,
}

fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Invalid(format!("full-text statistics: {e}")))
}

/// Write fact `seq`'s term statistics inside the transaction that inserted it, in one
/// statement: its postings, the count of facts holding each of its terms, the totals.
pub(super) fn record_terms(tx: &dyn Tx, seq: i64, fact: &Fact, terms: &DocTerms) -> Result<()> {
    record_terms_of(tx, &[(seq, fact, terms)])
}

/// [`record_terms`] for several facts in one statement (a rebuild writes them in batches).
pub(super) fn record_terms_of(tx: &dyn Tx, facts: &[(i64, &Fact, &DocTerms)]) -> Result<()> {
    let rows: Vec<TermRow<'_>> = facts
        .iter()
        .flat_map(|(seq, fact, terms)| {
            terms
                .terms
                .iter()
                .map(move |(term, (freq, positions))| TermRow {
                    seq: *seq,
                    term,
                    freq: *freq,
                    positions,
                    length: terms.length,
                    team_id: fact.team_id.as_deref(),
                    agent_id: fact.agent_id.as_deref(),
                    tenant_id: fact.tenant_id.as_deref(),
                })
        })
        .collect();
    let tokens: i64 = facts.iter().map(|(_, _, t)| i64::from(t.length)).sum();
    // Each writer adds to the rows of its connection's shard: a transaction locks those,
    // so concurrent saves never wait on each other in a circle, and every save takes its
    // locks in the same order (the statement's, terms sorted).
    tx.execute(
        "WITH t AS (
             SELECT t.seq, t.term, t.freq, t.positions, t.length, t.team_id, t.agent_id,
                 t.tenant_id
             FROM json_to_recordset(CAST(CAST(?1 AS TEXT) AS JSON))
                 AS t(seq BIGINT, term TEXT, freq BIGINT, positions BIGINT[], length BIGINT,
                      team_id TEXT, agent_id TEXT, tenant_id TEXT)
         ),
         posted AS (
             INSERT INTO memory_fts_postings
                 (term, seq, freq, positions, length, team_id, agent_id, tenant_id)
             SELECT t.term, t.seq, t.freq, t.positions, t.length, t.team_id, t.agent_id,
                 t.tenant_id
             FROM t
         ),
         counted AS (
             INSERT INTO memory_fts_terms (term, shard, docs)
             SELECT t.term, pg_backend_pid() % CAST(?4 AS BIGINT), count(*) FROM t
             GROUP BY t.term ORDER BY t.term
             ON CONFLICT (term, shard) DO UPDATE SET docs = memory_fts_terms.docs + excluded.docs
         )
         INSERT INTO memory_fts_totals (shard, docs, tokens)
         VALUES (pg_backend_pid() % CAST(?4 AS BIGINT), ?2, ?3)
         ON CONFLICT (shard) DO UPDATE SET docs = memory_fts_totals.docs + excluded.docs,
             tokens = memory_fts_totals.tokens + excluded.tokens",
        &[&json(&rows)?, &facts.len(), &tokens, &SHARDS],
    )?;
    Ok(())
}

/// A float constant as PostgreSQL's `double precision`, so every step of the score is
/// computed in doubles as FTS5 computes it (a bare literal would be `numeric`).
fn double(x: f64) -> String {
    format!("CAST({x:?} AS DOUBLE PRECISION)")
}

/// The best `k` facts in `scope` matching any of `phrases` (one per query word, each the
/// terms FTS5 made of it), by bm25 (positive, higher is better), best first; ties: oldest
/// fact first, as SQLite leaves them.
pub(super) fn ranked(
    tx: &dyn Tx,
    phrases: &[Vec<String>],
    scope: &ScopeFilter,
    k: usize,
) -> Result<Vec<(Fact, f64)>> {
    let Some((best, query, args)) = best_statement(phrases, scope)? else {
        return Ok(Vec::new());
    };
    let sql = format!(
        "{best}
         SELECT {FACT_COLUMNS}, best.score FROM best JOIN memory_facts f ON f.seq = best.seq
         ORDER BY best.score DESC, best.seq"
    );
    let mut params: Vec<&dyn ToValue> = vec![&query, &k];
    params.extend(args.iter().map(|a| a as &dyn ToValue));
    tx.query_map(&sql, &params, |r| Ok((fact_from_row(r)?, r.get::<f64>(9)?)))
}

/// The numbers (`seq`) of [`ranked`]'s facts, best first, without reading the facts.
pub(super) fn ranked_seqs(
    tx: &dyn Tx,
    phrases: &[Vec<String>],
    scope: &ScopeFilter,
    k: usize,
) -> Result<Vec<i64>> {
    let Some((best, query, args)) = best_statement(phrases, scope)? else {
        return Ok(Vec::new());
    };
    let sql = format!("{best} SELECT seq FROM best ORDER BY score DESC, seq");
    let mut params: Vec<&dyn ToValue> = vec![&query, &k];
    params.extend(args.iter().map(|a| a as &dyn ToValue));
    tx.query_map(&sql, &params, |r| r.get(0))
}

/// The `WITH … best AS (…)` part of a ranking, its query terms as JSON (`?1`; `?2` is the
/// `k`) and its scope's parameters (`?3`…); `None` when the phrases hold no term.
fn best_statement(
    phrases: &[Vec<String>],
    scope: &ScopeFilter,
) -> Result<Option<(String, String, Vec<String>)>> {
    let query: Vec<QueryTerm<'_>> = phrases
        .iter()
        .enumerate()
        .flat_map(|(phrase, terms)| {
            terms
                .iter()
                .enumerate()
                .map(move |(place, term)| QueryTerm {
                    phrase,
                    place,
                    term,
                })
        })
        .collect();
    if query.is_empty() {
        return Ok(None);
    }
    let (single_cond, args) = scope.sql("p", 3);
    let (phrase_cond, _) = scope.sql("h", 3);
    let [title, content, tags] = COLUMN_WEIGHTS;
    let (k1, b, one, half, floor) = (
        double(K1),
        double(B),
        double(1.0),
        double(0.5),
        double(1e-6),
    );
    // FTS5's bm25: for each phrase, idf = ln((N - n + 0.5) / (n + 0.5)) over the whole
    // corpus (floored at 1e-6); a fact scores the sum, phrase by phrase in query order, of
    // idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl)), f the phrase's
    // occurrences weighted by column and D the fact's length. A one-term phrase's n is the
    // count kept at write time and only its postings in scope are read; a phrase of
    // several terms is matched over all of its terms' postings, to count its n.
    let sql = format!(
        "WITH q AS (
             SELECT e.phrase, e.place, e.term
             FROM json_to_recordset(CAST(CAST(?1 AS TEXT) AS JSON)) AS e(phrase BIGINT, place BIGINT, term TEXT)
         ),
         sizes AS (SELECT phrase, count(*) AS terms FROM q GROUP BY phrase),
         single AS (
             SELECT q.phrase, q.term FROM q JOIN sizes s ON s.phrase = q.phrase AND s.terms = 1
         ),
         starts AS (
             SELECT q.phrase, p.seq, pos - q.place AS start, p.length, p.team_id, p.agent_id,
                 p.tenant_id
             FROM q JOIN sizes s ON s.phrase = q.phrase AND s.terms > 1
             JOIN memory_fts_postings p ON p.term = q.term
             CROSS JOIN LATERAL unnest(p.positions) AS pos
             GROUP BY q.phrase, p.seq, pos - q.place, s.terms, p.length, p.team_id,
                 p.agent_id, p.tenant_id
             HAVING count(DISTINCT q.place) = s.terms
         ),
         phrase_hits AS (
             SELECT phrase, seq, length, team_id, agent_id, tenant_id,
                 CAST(SUM(CASE start >> 32 WHEN 0 THEN {title} WHEN 1 THEN {content}
                          ELSE {tags} END) AS DOUBLE PRECISION) AS freq
             FROM starts GROUP BY phrase, seq, length, team_id, agent_id, tenant_id
         ),
         totals AS (
             SELECT CAST(SUM(docs) AS DOUBLE PRECISION) AS docs,
                    CAST(SUM(tokens) AS DOUBLE PRECISION) / CAST(SUM(docs) AS DOUBLE PRECISION)
                        AS avgdl
             FROM memory_fts_totals
         ),
         counts AS (
             SELECT single.phrase, CAST(SUM(c.docs) AS DOUBLE PRECISION) AS n
             FROM single JOIN memory_fts_terms c ON c.term = single.term
             GROUP BY single.phrase
             UNION ALL
             SELECT phrase, CAST(count(*) AS DOUBLE PRECISION) FROM phrase_hits GROUP BY phrase
         ),
         idf AS (
             SELECT c.phrase,
                 CASE WHEN ln((t.docs - c.n + {half}) / (c.n + {half})) <= 0
                      THEN {floor}
                      ELSE ln((t.docs - c.n + {half}) / (c.n + {half})) END AS idf
             FROM counts c CROSS JOIN totals t
         ),
         hits AS (
             SELECT single.phrase, p.seq, CAST(p.freq AS DOUBLE PRECISION) AS freq, p.length
             FROM single JOIN memory_fts_postings p ON p.term = single.term
             WHERE {single_cond}
             UNION ALL
             SELECT h.phrase, h.seq, h.freq, h.length FROM phrase_hits h WHERE {phrase_cond}
         ),
         shares AS (
             SELECT h.seq, h.phrase,
                 i.idf * ((h.freq * ({k1} + {one}))
                     / (h.freq + {k1} * ({one} - {b} + {b} * CAST(h.length AS DOUBLE PRECISION)
                        / t.avgdl))) AS share
             FROM hits h JOIN idf i ON i.phrase = h.phrase CROSS JOIN totals t
         ),
         best AS (
             SELECT seq, SUM(share ORDER BY phrase) AS score FROM shares GROUP BY seq
             ORDER BY score DESC, seq LIMIT ?2
         )"
    );
    Ok(Some((sql, json(&query)?, args)))
}
