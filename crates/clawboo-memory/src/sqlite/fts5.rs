//! What memory's full-text search needs from SQLite itself: the upkeep of the FTS5 index
//! (indexing the facts a transaction wrote just before it commits, merging segments when
//! the store is idle, both registered through [`crate::EXTENSION`]), ranking by FTS5's own
//! `bm25()`, and reading FTS5's own index whole for the in-memory one (`text_index`).
//! Everything here that names rusqlite stays here.

use rusqlite::Connection;

use crate::Result;
use crate::bm25::COLUMN_WEIGHTS;
use crate::terms::{Posting, Postings};
use crate::{FACT_COLUMNS, Fact, ScopeFilter, ScopeKey, fact_from_row};
use clawboo_store::Store;
use clawboo_store::db::{Findings, ToValue, Tx};
use clawboo_store::extension::{PreCommitHook, SqliteHooks};

/// The FTS5 query: each word quoted, all OR-ed.
pub(super) fn fts_query(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// Index the facts this transaction wrote, in one statement. `memory_facts`' insert
/// trigger only notes a new fact in `memory_facts_fts_pending` (migration 0005: FTS5 would
/// otherwise write an index segment per fact, at each write's savepoint); every write
/// transaction of the store runs this just before it commits, so the index never lags the
/// committed facts. Returns whether it indexed any.
fn index_pending_facts(conn: &Connection) -> Result<bool> {
    if !has_pending_facts(conn)? {
        return Ok(false);
    }
    conn.prepare_cached(
        "INSERT INTO memory_facts_fts(rowid, title, content, tags)
         SELECT f.seq, f.title, f.content, f.tags
         FROM memory_facts_fts_pending p JOIN memory_facts f ON f.seq = p.seq",
    )?
    .execute([])?;
    conn.prepare_cached("DELETE FROM memory_facts_fts_pending")?
        .execute([])?;
    Ok(true)
}

/// Pages of the full-text index one [`merge_fts_step`] writes at most: small enough that a
/// step holds the write lock only briefly, so a write arriving mid-merge barely waits.
const FTS_MERGE_STEP_PAGES: i64 = 128;

/// One bounded step of merging the full-text index into a single segment, in its own
/// transaction; `Ok(false)` once there is nothing left to merge. FTS5 writes a segment per
/// indexing transaction and merges them only a few at a time, so an index grown by many
/// commits keeps several segments, and every query term opens an iterator on each of them,
/// for every search (docs/BENCHMARKS.md, "The idle merge").
fn merge_fts_step(conn: &Connection) -> Result<bool> {
    let before = conn.total_changes();
    // A negative page count puts every segment on one level first, so all of them merge
    // (FTS5's incremental 'optimize').
    conn.prepare_cached(
        "INSERT INTO memory_facts_fts(memory_facts_fts, rank) VALUES ('merge', ?)",
    )?
    .execute([-FTS_MERGE_STEP_PAGES])?;
    // FTS5 documents that a step which merged anything changes two or more rows.
    Ok(conn.total_changes() - before >= 2)
}

/// Whether facts wait for [`index_pending_facts`].
fn has_pending_facts(conn: &Connection) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM memory_facts_fts_pending)")?
        .query_row([], |r| r.get(0))?)
}

/// Attach memory's work to the SQLite backend's transactions (called where the store is
/// opened): index the noted facts before every commit, merge the full-text index when the
/// store is idle after commits that indexed some.
pub(crate) fn register_sqlite_hooks(hooks: &mut SqliteHooks) {
    hooks
        .before_commit(PreCommitHook {
            pending: has_pending_facts,
            run: index_pending_facts,
        })
        .when_idle(merge_fts_step);
}

/// The best `k` matches of `words` (one FTS5 phrase each) in `scope` by FTS5's own bm25
/// (a title match weighs double), each with its relevance (positive, higher is better).
pub(super) fn ranked_by_fts5(
    tx: &dyn Tx,
    words: &[String],
    scope: &ScopeFilter,
    k: usize,
) -> Result<Vec<(Fact, f64)>> {
    let (cond, args) = scope.sql("f", 2);
    let [title, content, tags] = COLUMN_WEIGHTS;
    let limit = 2 + args.len();
    // Rank every match in scope with the scope read from the covering index
    // `memory_facts_scope` (migration 0006), then read only the best `k` rows whole.
    let sql = format!(
        "SELECT {FACT_COLUMNS}, best.rank FROM (
            SELECT f.seq AS seq, bm25(memory_facts_fts, {title}, {content}, {tags}) AS rank
            FROM memory_facts_fts JOIN memory_facts f INDEXED BY memory_facts_scope
              ON f.seq = memory_facts_fts.rowid
            WHERE memory_facts_fts MATCH ?1 AND {cond}
            ORDER BY rank LIMIT ?{limit}
         ) best JOIN memory_facts f ON f.seq = best.seq ORDER BY best.rank"
    );
    let query = fts_query(words);
    let mut params: Vec<&dyn ToValue> = vec![&query];
    params.extend(args.iter().map(|a| a as &dyn ToValue));
    params.push(&k);
    tx.query_map(&sql, &params, |r| {
        let rank: f64 = r.get(9)?;
        Ok((fact_from_row(r)?, (-rank).max(0.0)))
    })
}

/// The index holds every committed fact (none waits to be indexed, FTS5 holds one
/// document a fact) and passes FTS5's own integrity check against the facts.
pub(super) fn check(store: &Store, found: &mut Findings) -> Result<()> {
    found.checks.push("text_index_complete");
    let (facts, docs, pending): (i64, i64, i64) = store.snapshot(|tx| {
        tx.query_one(
            "SELECT (SELECT count(*) FROM memory_facts),
                 (SELECT count(*) FROM memory_facts_fts_docsize),
                 (SELECT count(*) FROM memory_facts_fts_pending)",
            &[],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    })?;
    if pending > 0 {
        found.problems.push((
            "text_index_complete",
            format!("{pending} committed facts wait to be indexed"),
        ));
    }
    if docs != facts {
        found.problems.push((
            "text_index_complete",
            format!("{facts} facts, but the full-text index counts {docs}"),
        ));
    }
    // FTS5 checks its index against the facts only in a statement it counts as a write;
    // it changes nothing.
    found.checks.push("fts5_integrity_check");
    let checked = store.write(|tx| {
        tx.execute(
            "INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('integrity-check')",
            &[],
        )
    });
    if let Err(e) = checked {
        found.problems.push((
            "fts5_integrity_check",
            format!("the full-text index does not match the facts: {e}"),
        ));
    }
    Ok(())
}

/// The column number of a `fts5vocab` instance row's column name.
fn column_number(name: &str) -> usize {
    match name {
        "title" => 0,
        "content" => 1,
        _ => 2,
    }
}

/// Add `fts5vocab` instance rows (term, doc, col; ordered by term, then doc) to `terms`,
/// with each fact numbered by `number` (rows of facts it does not know are skipped), and
/// count each fact's tokens in `lengths`.
fn collect_instances(
    mut rows: rusqlite::Rows<'_>,
    number: impl Fn(i64) -> Option<u32>,
    terms: &mut Postings,
    lengths: &mut [u32],
) -> Result<()> {
    let mut current: Option<&mut Vec<Posting>> = None;
    let mut current_term = String::new();
    while let Some(row) = rows.next()? {
        let Some(doc) = number(row.get(1)?) else {
            continue;
        };
        let term = text_at(row, 0)?;
        let weight = COLUMN_WEIGHTS[column_number(text_at(row, 2)?)];
        if let Some(length) = lengths.get_mut(doc as usize) {
            *length += 1;
        }
        if current.is_none() || term != current_term {
            current_term.clear();
            current_term.push_str(term);
            current = Some(terms.entry(current_term.clone()).or_default());
        }
        if let Some(postings) = current.as_deref_mut() {
            match postings.last_mut() {
                Some(last) if last.doc == doc => last.freq += weight,
                _ => postings.push(Posting { doc, freq: weight }),
            }
        }
    }
    Ok(())
}

/// Column `index` of `row` as text, borrowed.
fn text_at<'row>(row: &'row rusqlite::Row<'_>, index: usize) -> rusqlite::Result<&'row str> {
    row.get_ref(index)?.as_str().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// FTS5's index of every fact, as the in-memory index takes it over.
pub(super) struct Fts5Index {
    /// Each fact's seq and scope, ascending seq.
    pub(super) facts: Vec<(i64, ScopeKey)>,
    /// Postings by term, facts numbered in `facts`' order.
    pub(super) postings: Postings,
    /// Each fact's length in tokens.
    pub(super) lengths: Vec<u32>,
}

/// Every fact's terms read from `memory_facts_fts` itself through an `fts5vocab` table, in
/// one snapshot (nothing is tokenized again).
pub(super) fn read_fts5_index(store: &Store) -> Result<Fts5Index> {
    store.long_snapshot_sqlite(|conn| {
        conn.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_facts_fts_instances
                 USING fts5vocab(main, memory_facts_fts, instance)",
        )?;
        let mut facts = Vec::new();
        {
            let mut stmt = conn.prepare(
                "SELECT seq, team_id, agent_id, tenant_id FROM memory_facts ORDER BY seq",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let key = ScopeKey {
                    team_id: r.get(1)?,
                    agent_id: r.get(2)?,
                    tenant_id: r.get(3)?,
                };
                facts.push((r.get::<_, i64>(0)?, key));
            }
        }
        let mut postings = Postings::new();
        let mut lengths = vec![0u32; facts.len()];
        let mut stmt =
            conn.prepare("SELECT term, doc, col FROM temp.memory_facts_fts_instances")?;
        collect_instances(
            stmt.query([])?,
            |seq| {
                facts
                    .binary_search_by_key(&seq, |(s, _)| *s)
                    .ok()
                    .map(|doc| doc as u32)
            },
            &mut postings,
            &mut lengths,
        )?;
        Ok(Fts5Index {
            facts,
            postings,
            lengths,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::query_words;

    #[test]
    fn the_fts5_query_quotes_each_word_and_ors_them() {
        assert_eq!(fts_query(&query_words("a-b a")), "\"a\" OR \"b\"");
    }
}
