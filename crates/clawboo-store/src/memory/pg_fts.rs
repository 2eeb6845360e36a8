//! Full-text search on PostgreSQL: FTS5's bm25 computed in the database from the term
//! statistics of migration `postgres/0002_memory_search.sql`, with FTS5's formula,
//! constants and order of additions, so facts rank exactly as SQLite ranks them.
//!
//! The terms are FTS5's own ([`super::sqlite_fts::Tokenizer`]). A query word is one FTS5
//! phrase: usually one term; a word FTS5 splits into several terms matches where they
//! stand consecutively in one column, as FTS5 matches a phrase; a word of no term matches
//! nothing and adds nothing to any score.

use serde::Serialize;

use super::search::{B, COLUMN_WEIGHTS, K1};
use super::sqlite_fts::DocTerms;
use super::{FACT_COLUMNS, Fact, ScopeFilter, fact_from_row};
use crate::db::{ToValue, Tx};
use crate::error::{Result, StoreError};

/// Rows of `memory_fts_totals` writers spread over.
const TOTAL_SHARDS: i64 = 16;

/// One term of a fact, as `record_terms` hands it to the database.
#[derive(Serialize)]
struct TermRow<'a> {
    term: &'a str,
    freq: u32,
    positions: &'a [i64],
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

/// Write fact `seq`'s term statistics inside the transaction that inserted it.
pub(super) fn record_terms(tx: &dyn Tx, seq: i64, fact: &Fact, terms: &DocTerms) -> Result<()> {
    tx.execute(
        "INSERT INTO memory_fts_docs (seq, length, team_id, agent_id, tenant_id)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        &[
            &seq,
            &terms.length,
            &fact.team_id,
            &fact.agent_id,
            &fact.tenant_id,
        ],
    )?;
    if !terms.terms.is_empty() {
        let rows: Vec<TermRow<'_>> = terms
            .terms
            .iter()
            .map(|(term, (freq, positions))| TermRow {
                term,
                freq: *freq,
                positions,
            })
            .collect();
        tx.execute(
            "INSERT INTO memory_fts_postings (term, seq, freq, positions)
             SELECT t.term, CAST(?1 AS BIGINT), t.freq, t.positions
             FROM json_to_recordset(CAST(CAST(?2 AS TEXT) AS JSON))
                 AS t(term TEXT, freq BIGINT, positions BIGINT[])",
            &[&seq, &json(&rows)?],
        )?;
    }
    // The row of this connection: a transaction locks one row, so concurrent saves never
    // wait on each other in a circle.
    tx.execute(
        "INSERT INTO memory_fts_totals (shard, docs, tokens)
         VALUES (pg_backend_pid() % CAST(?1 AS BIGINT), 1, ?2)
         ON CONFLICT (shard) DO UPDATE SET docs = memory_fts_totals.docs + 1,
             tokens = memory_fts_totals.tokens + excluded.tokens",
        &[&TOTAL_SHARDS, &terms.length],
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
        return Ok(Vec::new());
    }
    let (cond, args) = scope.sql("d", 3);
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
    // occurrences weighted by column and D the fact's length.
    let sql = format!(
        "WITH q AS (
             SELECT e.phrase, e.place, e.term
             FROM json_to_recordset(CAST(CAST(?1 AS TEXT) AS JSON)) AS e(phrase BIGINT, place BIGINT, term TEXT)
         ),
         sizes AS (SELECT phrase, count(*) AS terms FROM q GROUP BY phrase),
         starts AS (
             SELECT q.phrase, p.seq, pos - q.place AS start
             FROM q JOIN sizes s ON s.phrase = q.phrase AND s.terms > 1
             JOIN memory_fts_postings p ON p.term = q.term
             CROSS JOIN LATERAL unnest(p.positions) AS pos
             GROUP BY q.phrase, p.seq, pos - q.place, s.terms
             HAVING count(DISTINCT q.place) = s.terms
         ),
         hits AS (
             SELECT q.phrase, p.seq, CAST(p.freq AS DOUBLE PRECISION) AS freq
             FROM q JOIN sizes s ON s.phrase = q.phrase AND s.terms = 1
             JOIN memory_fts_postings p ON p.term = q.term
             UNION ALL
             SELECT phrase, seq,
                 CAST(SUM(CASE start >> 32 WHEN 0 THEN {title} WHEN 1 THEN {content}
                          ELSE {tags} END) AS DOUBLE PRECISION)
             FROM starts GROUP BY phrase, seq
         ),
         totals AS (
             SELECT CAST(SUM(docs) AS DOUBLE PRECISION) AS docs,
                    CAST(SUM(tokens) AS DOUBLE PRECISION) / CAST(SUM(docs) AS DOUBLE PRECISION)
                        AS avgdl
             FROM memory_fts_totals
         ),
         idf AS (
             SELECT h.phrase,
                 CASE WHEN ln((t.docs - count(*) + {half}) / (count(*) + {half})) <= 0
                      THEN {floor}
                      ELSE ln((t.docs - count(*) + {half}) / (count(*) + {half})) END AS idf
             FROM hits h CROSS JOIN totals t GROUP BY h.phrase, t.docs
         ),
         shares AS (
             SELECT h.seq, h.phrase,
                 i.idf * ((h.freq * ({k1} + {one}))
                     / (h.freq + {k1} * ({one} - {b} + {b} * CAST(d.length AS DOUBLE PRECISION)
                        / t.avgdl))) AS share
             FROM hits h JOIN idf i ON i.phrase = h.phrase
             JOIN memory_fts_docs d ON d.seq = h.seq CROSS JOIN totals t
             WHERE {cond}
         ),
         best AS (
             SELECT seq, SUM(share ORDER BY phrase) AS score FROM shares GROUP BY seq
             ORDER BY score DESC, seq LIMIT ?2
         )
         SELECT {FACT_COLUMNS}, best.score FROM best JOIN memory_facts f ON f.seq = best.seq
         ORDER BY best.score DESC, best.seq"
    );
    let query = json(&query)?;
    let mut params: Vec<&dyn ToValue> = vec![&query, &k];
    params.extend(args.iter().map(|a| a as &dyn ToValue));
    tx.query_map(&sql, &params, |r| Ok((fact_from_row(r)?, r.get::<f64>(9)?)))
}
