//! Full-text search on PostgreSQL: FTS5's bm25 over postings kept in the database and
//! scored in this process, with FTS5's formula, constants and order of additions
//! ([`crate::bm25`]), so facts rank exactly as SQLite ranks them.
//!
//! Where the postings live. A save writes its fact's terms, in its own transaction, as a
//! row per term to `memory_fts_postings`, the tail, and adds to the totals
//! (`memory_fts_totals`). Once the tail holds [`PACK_AT`] facts, the save that notices
//! packs it ([`pack`]): its postings move into `memory_fts_blocks`, rows per term and
//! scope each holding up to [`BLOCK_POSTINGS`] postings in ascending `seq`
//! ([`super::blocks`]), a few of them partly filled.
//! A search reads, in one statement, the blocks and tail rows of its terms in the caller's
//! scope, each term's count of facts (its blocks' sizes plus its tail rows), the totals
//! and the retired facts in scope (which it leaves out), and scores here. The database
//! thus hands over a few rows per query term however many facts hold it, and a save
//! writes into a small, hot index instead of one that grows with the corpus, with no
//! count per term to update.
//!
//! The terms are FTS5's own, made by memory's port of its tokenizer ([`crate::terms`]).
//! A query word is one FTS5 phrase: usually one term; a word FTS5 splits into several
//! terms matches where they stand consecutively in one column, as FTS5 matches a phrase,
//! found from those terms' postings in every scope (FTS5 counts a phrase's facts over the
//! whole corpus); a word of no term matches nothing and adds nothing to any score.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::blocks::{self, BlockPosting};
use crate::Result;
use crate::bm25::{self, COLUMN_WEIGHTS};
use crate::retire;
use crate::terms::DocTerms;
use crate::{FACT_COLUMNS, Fact, SEQ_IN_LIST, ScopeFilter, ScopeKey, fact_from_row};
use clawboo_store::db::{DbRow, Findings, ToValue, Tx, Value};
use clawboo_store::reads::Query;
use clawboo_store::{Store, StoreError};

/// Rows of `memory_fts_totals` writers spread over.
const SHARDS: i64 = 16;

/// Facts the tail holds before a save packs it: a search reads the tail row by row, so it
/// stays small, and each packing rewrites the open block of every term it touches, so it
/// does not run too often. Memory's own tests pack far sooner, so their small corpora
/// are packed many times over.
const PACK_AT: i64 = if cfg!(test) { 64 } else { 2_000 };

/// Postings a block holds at most (in memory's own tests, few, so terms span blocks); at
/// most the 128 of the partial index `memory_fts_open_blocks`.
const BLOCK_POSTINGS: usize = if cfg!(test) { 8 } else { 128 };

/// Postings a packing takes from the tail at a time.
const PACK_PAGE: usize = if cfg!(test) { 100 } else { 10_000 };

/// Partly filled blocks a term keeps in one scope before a packing merges them.
const PARTIAL_BLOCKS: usize = 4;

/// Blocks written per statement.
const BLOCKS_PER_STATEMENT: usize = 500;

/// The advisory lock a packing holds until its transaction ends, so one packs at a time
/// ("clawpack" in ASCII).
const PACK_LOCK: i64 = 0x636c_6177_7061_636b;

/// One term of a fact, as [`record_terms_of`] hands it to the database, with what its
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

/// One block as [`BlockWriter`] hands it to the database.
#[derive(Serialize)]
struct BlockRow {
    term: String,
    first_seq: i64,
    team_id: Option<String>,
    agent_id: Option<String>,
    tenant_id: Option<String>,
    docs: usize,
    /// The encoded postings and their places, in hexadecimal (JSON carries no bytes).
    postings: String,
    places: String,
}

fn json<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Invalid(format!("full-text statistics: {e}")))
}

/// Fact `seq`'s postings and totals, to write inside the transaction that inserted it:
/// the statement's one row says whether the tail has grown to [`PACK_AT`] facts, so the
/// save (or right after it) [`pack`]s it.
pub(super) fn record_terms(seq: i64, fact: &Fact, terms: &DocTerms) -> Result<Query> {
    record_terms_of(&[(seq, fact, terms)])
}

/// Several facts' postings written to the tail and added to the totals, in one
/// statement, answering whether the facts in the tail (about: other writers' uncommitted
/// ones not counted) reach [`PACK_AT`].
fn record_terms_of(facts: &[(i64, &Fact, &DocTerms)]) -> Result<Query> {
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
    // Each writer adds to the totals row of its connection's shard, so concurrent saves
    // do not queue on one row lock.
    Ok(Query::new(
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
             INSERT INTO memory_fts_totals (shard, docs, tokens)
             VALUES (pg_backend_pid() % CAST(?4 AS BIGINT), ?2, ?3)
             ON CONFLICT (shard) DO UPDATE SET docs = memory_fts_totals.docs + excluded.docs,
                 tokens = memory_fts_totals.tokens + excluded.tokens
         )
         SELECT CAST(?2 AS BIGINT)
             + CAST(COALESCE((SELECT SUM(docs) FROM memory_fts_totals), 0) AS BIGINT)
             - (SELECT docs FROM memory_fts_packed) >= CAST(?5 AS BIGINT)",
        &[&json(&rows)?, &facts.len(), &tokens, &SHARDS, &PACK_AT],
    ))
}

/// Blocks on their way to `memory_fts_blocks`.
#[derive(Default)]
struct BlockWriter {
    rows: Vec<BlockRow>,
}

impl BlockWriter {
    /// Cut `postings` (one term's, in one scope, ascending `seq`) into blocks.
    fn add(&mut self, term: &str, scope: &ScopeKey, postings: &[BlockPosting]) {
        for block in postings.chunks(BLOCK_POSTINGS) {
            let encoded = blocks::encode(block);
            self.rows.push(BlockRow {
                term: term.to_owned(),
                first_seq: block[0].seq,
                team_id: scope.team_id.clone(),
                agent_id: scope.agent_id.clone(),
                tenant_id: scope.tenant_id.clone(),
                docs: block.len(),
                postings: hex::encode(encoded.postings),
                places: hex::encode(encoded.places),
            });
        }
    }

    /// Insert the blocks added so far.
    fn write(&mut self, tx: &dyn Tx) -> Result<()> {
        for rows in self.rows.chunks(BLOCKS_PER_STATEMENT) {
            tx.execute(
                "INSERT INTO memory_fts_blocks
                     (term, first_seq, team_id, agent_id, tenant_id, docs, postings, places)
                 SELECT r.term, r.first_seq, r.team_id, r.agent_id, r.tenant_id, r.docs,
                     decode(r.postings, 'hex'), decode(r.places, 'hex')
                 FROM json_to_recordset(CAST(CAST(?1 AS TEXT) AS JSON))
                     AS r(term TEXT, first_seq BIGINT, team_id TEXT, agent_id TEXT,
                          tenant_id TEXT, docs BIGINT, postings TEXT, places TEXT)",
                &[&json(rows)?],
            )?;
        }
        self.rows.clear();
        Ok(())
    }
}

/// The scope columns of `row` from `first` on (team, agent, tenant).
fn scope_of(row: &dyn DbRow, first: usize) -> Result<ScopeKey> {
    Ok(ScopeKey {
        team_id: row.get(first)?,
        agent_id: row.get(first + 1)?,
        tenant_id: row.get(first + 2)?,
    })
}

/// The places of a tail posting as `array_to_string` gives them.
fn places(text: Option<String>) -> Result<Vec<i64>> {
    text.filter(|t| !t.is_empty())
        .map(|t| {
            t.split(',')
                .map(|p| {
                    p.parse().map_err(|_| {
                        StoreError::Invalid("a full-text posting's places are unreadable".into())
                    })
                })
                .collect()
        })
        .unwrap_or_else(|| Ok(Vec::new()))
}

/// A block's postings, or an error that names the damage and what repairs it.
fn decoded(postings: &[u8], places: Option<&[u8]>) -> Result<Vec<BlockPosting>> {
    blocks::decode(postings, places).map_err(|_| {
        StoreError::Invalid(
            "a block of the full-text index is unreadable; run `clawboo db check`, and \
             rebuild the index by copying the database (`clawboo db copy`)"
                .into(),
        )
    })
}

/// Move the tail's postings into blocks, within `tx`, unless another transaction is
/// packing (then it will). Each term and scope's new postings become blocks of their own,
/// the last one partly filled; once a term and scope holds [`PARTIAL_BLOCKS`] partly
/// filled blocks, the packing that would add another merges them with its postings
/// instead. So a search reads at most that many partial blocks per term and scope, and a
/// posting is rewritten once per few packings rather than at every one.
pub(super) fn pack(tx: &dyn Tx) -> Result<()> {
    let locked: bool =
        tx.query_one("SELECT pg_try_advisory_xact_lock(?1)", &[&PACK_LOCK], |r| {
            r.get(0)
        })?;
    if !locked {
        return Ok(());
    }
    // The tail is taken a page at a time in key order, so a packing holds one page of
    // postings in memory however long the tail has grown.
    let mut after = (String::new(), 0i64);
    loop {
        let mut groups: HashMap<(String, ScopeKey), Vec<BlockPosting>> = HashMap::new();
        let mut taken = 0usize;
        let mut last = after.clone();
        tx.query_each(
            // The page's rows are found in key order and deleted by their row ids (a TID
            // scan), rather than joined back to the table.
            "DELETE FROM memory_fts_postings p
             WHERE p.ctid = ANY(ARRAY(
                 SELECT ctid FROM memory_fts_postings
                 WHERE (term, seq) > (CAST(?1 AS TEXT), CAST(?2 AS BIGINT))
                 ORDER BY term, seq LIMIT ?3))
             RETURNING p.term, p.seq, p.freq, p.length, array_to_string(p.positions, ','),
                 p.team_id, p.agent_id, p.tenant_id",
            &[&after.0, &after.1, &PACK_PAGE],
            &mut |r| {
                let (term, seq): (String, i64) = (r.get(0)?, r.get(1)?);
                // RETURNING keeps no order: the page ends at its greatest key.
                if (term.as_str(), seq) > (last.0.as_str(), last.1) {
                    last = (term.clone(), seq);
                }
                taken += 1;
                groups
                    .entry((term, scope_of(r, 5)?))
                    .or_default()
                    .push(BlockPosting {
                        seq,
                        freq: r.get(2)?,
                        length: r.get(3)?,
                        positions: places(r.get(4)?)?,
                    });
                Ok(())
            },
        )?;
        after = last;
        pack_groups(tx, groups)?;
        if taken < PACK_PAGE {
            break;
        }
    }
    // The totals as this statement sees them: a save committed since the tail was taken
    // is counted as packed, and its postings wait for the next packing.
    tx.execute(
        "UPDATE memory_fts_packed
         SET docs = (SELECT COALESCE(SUM(docs), 0) FROM memory_fts_totals)",
        &[],
    )?;
    Ok(())
}

/// Write the postings taken from the tail, by term and scope, as blocks: merged with the
/// term and scope's partly filled blocks when it holds [`PARTIAL_BLOCKS`] of them.
fn pack_groups(
    tx: &dyn Tx,
    mut groups: HashMap<(String, ScopeKey), Vec<BlockPosting>>,
) -> Result<()> {
    if groups.is_empty() {
        return Ok(());
    }
    let terms: Vec<&str> = groups
        .keys()
        .map(|(term, _)| term.as_str())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    // The partly filled blocks of the tail's terms, from the partial index
    // `memory_fts_open_blocks` (migration 0009) alone: the size is written into the
    // statement so the planner sees that index covers it.
    let mut partials: HashMap<(String, ScopeKey), Vec<i64>> = HashMap::new();
    tx.query_each(
        &format!(
            "SELECT b.term, b.first_seq, b.team_id, b.agent_id, b.tenant_id
             FROM memory_fts_blocks b
             WHERE b.term = ANY(ARRAY(SELECT json_array_elements_text(CAST(CAST(?1 AS TEXT) AS JSON))))
               AND b.docs < {BLOCK_POSTINGS}"
        ),
        &[&json(&terms)?],
        &mut |r| {
            let key = (r.get::<String>(0)?, scope_of(r, 2)?);
            if groups.contains_key(&key) {
                partials.entry(key).or_default().push(r.get(1)?);
            }
            Ok(())
        },
    )?;
    #[derive(Serialize)]
    struct BlockKey<'a> {
        term: &'a str,
        first_seq: i64,
    }
    let merged: Vec<BlockKey<'_>> = partials
        .iter()
        .filter(|(_, blocks)| blocks.len() >= PARTIAL_BLOCKS)
        .flat_map(|((term, _), blocks)| {
            blocks
                .iter()
                .map(move |&first_seq| BlockKey { term, first_seq })
        })
        .collect();
    if !merged.is_empty() {
        let keys = json(&merged)?;
        tx.query_each(
            "DELETE FROM memory_fts_blocks b
             USING json_to_recordset(CAST(CAST(?1 AS TEXT) AS JSON)) AS k(term TEXT, first_seq BIGINT)
             WHERE b.term = k.term AND b.first_seq = k.first_seq
             RETURNING b.term, b.team_id, b.agent_id, b.tenant_id, b.postings, b.places",
            &[&keys],
            &mut |r| {
                let key = (r.get::<String>(0)?, scope_of(r, 1)?);
                if let (Some(postings), Value::Blob(bytes), Value::Blob(places)) =
                    (groups.get_mut(&key), r.value(4)?, r.value(5)?)
                {
                    postings.extend(decoded(bytes, Some(places))?);
                }
                Ok(())
            },
        )?;
    }
    let mut writer = BlockWriter::default();
    for ((term, scope), mut postings) in groups {
        // A write that committed late can bring a lower `seq` than a merged block's last.
        postings.sort_by_key(|p| p.seq);
        writer.add(&term, &scope, &postings);
        if writer.rows.len() >= BLOCKS_PER_STATEMENT {
            writer.write(tx)?;
        }
    }
    writer.write(tx)
}

/// Pack whatever the tail holds now (what a save does once it holds [`PACK_AT`] facts).
pub(super) fn pack_now(store: &Store) -> Result<()> {
    store.write(|tx| {
        tx.execute("SELECT pg_advisory_xact_lock(?1)", &[&PACK_LOCK])?;
        pack(tx)
    })
}

/// Memory's full-text step once a PostgreSQL store is open: the index is rebuilt whole
/// from the facts, once, when its postings all sit in the tail (written before blocks
/// existed) or its blocks hold their places inline (written before `places` had a column
/// of its own, migration 0010).
pub(super) fn opened(store: &Store) -> Result<()> {
    let (unpacked, places_apart): (i64, bool) = store.read(|tx| {
        tx.query_one(
            "SELECT CAST(COALESCE((SELECT SUM(docs) FROM memory_fts_totals), 0) - docs
                 AS BIGINT), places_apart
             FROM memory_fts_packed",
            &[],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    })?;
    if unpacked < PACK_AT && places_apart {
        return Ok(());
    }
    tracing::info!(
        unpacked,
        places_apart,
        "rebuilding the full-text index into blocks from the facts (once, after an upgrade)"
    );
    store.write(|tx| {
        tx.execute("SELECT pg_advisory_xact_lock(?1)", &[&PACK_LOCK])?;
        let mut rebuild = Rebuild::start(tx)?;
        rebuild.add_all(tx)?;
        rebuild.finish(tx)
    })?;
    Ok(())
}

/// The index counts every fact, and reads back as packings and saves write it: each block
/// and its places decode, holding its `docs` postings (at most [`BLOCK_POSTINGS`]), in
/// ascending `seq` from its `first_seq`; every posting, packed or in the tail, names an existing fact of its own
/// row's scope; and no fact is posted twice under one term.
pub(super) fn check(tx: &dyn Tx, found: &mut Findings) -> Result<()> {
    found.checks.push("text_index_complete");
    let (facts, counted): (i64, i64) = tx.query_one(
        "SELECT (SELECT count(*) FROM memory_facts),
             CAST(COALESCE((SELECT SUM(docs) FROM memory_fts_totals), 0) AS BIGINT)",
        &[],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if counted != facts {
        found.problems.push((
            "text_index_complete",
            format!("{facts} facts, but the full-text index counts {counted}"),
        ));
    }
    const CHECK: &str = "text_index_blocks";
    found.checks.push(CHECK);
    let mut scopes: HashMap<i64, ScopeKey> = HashMap::new();
    tx.query_each(
        "SELECT seq, team_id, agent_id, tenant_id FROM memory_facts",
        &[],
        &mut |r| {
            scopes.insert(r.get(0)?, scope_of(r, 1)?);
            Ok(())
        },
    )?;
    let mut listed = Listed::default();
    let mut term = String::new();
    let mut posted: HashSet<i64> = HashSet::new();
    // Blocks and tail rows together, a term at a time (a tail row reads as `docs` -1).
    tx.query_each(
        "SELECT term, first_seq, docs, postings, team_id, agent_id, tenant_id, places
         FROM memory_fts_blocks
         UNION ALL
         SELECT term, seq, -1, NULL, team_id, agent_id, tenant_id, NULL
         FROM memory_fts_postings
         ORDER BY 1",
        &[],
        &mut |r| {
            let row_term: String = r.get(0)?;
            if row_term != term {
                term = row_term;
                posted.clear();
            }
            let first_seq: i64 = r.get(1)?;
            let docs: i64 = r.get(2)?;
            let scope = scope_of(r, 4)?;
            let seqs: Vec<i64> = if docs < 0 {
                vec![first_seq]
            } else {
                let Value::Blob(bytes) = r.value(3)? else {
                    listed.add(format!("block ({term:?}, {first_seq}) has no postings"));
                    return Ok(());
                };
                let places = match r.value(7)? {
                    Value::Blob(places) => places,
                    _ => &[],
                };
                let Ok(postings) = blocks::decode(bytes, Some(places)) else {
                    listed.add(format!("block ({term:?}, {first_seq}) is unreadable"));
                    return Ok(());
                };
                let seqs: Vec<i64> = postings.iter().map(|p| p.seq).collect();
                let ascending = seqs.windows(2).all(|w| w[0] < w[1]);
                if usize::try_from(docs).ok() != Some(seqs.len())
                    || seqs.len() > BLOCK_POSTINGS
                    || seqs.first() != Some(&first_seq)
                    || !ascending
                {
                    listed.add(format!(
                        "block ({term:?}, {first_seq}) says {docs} postings from {first_seq} \
                             but holds {} (ascending: {ascending}, first: {:?})",
                        seqs.len(),
                        seqs.first()
                    ));
                }
                seqs
            };
            for seq in seqs {
                match scopes.get(&seq) {
                    None => listed.add(format!(
                        "term {term:?} has a posting of fact {seq}, which does not exist"
                    )),
                    Some(of_fact) if *of_fact != scope => listed.add(format!(
                        "term {term:?} files fact {seq} under another scope than its own"
                    )),
                    Some(_) => {}
                }
                if !posted.insert(seq) {
                    listed.add(format!("term {term:?} has fact {seq} posted twice"));
                }
            }
            Ok(())
        },
    )?;
    listed.close(CHECK, found);
    Ok(())
}

/// The problems one check found: the first [`Listed::MOST`] in words, the rest counted.
#[derive(Default)]
struct Listed {
    details: Vec<String>,
    more: usize,
}

impl Listed {
    const MOST: usize = 20;

    fn add(&mut self, detail: String) {
        if self.details.len() < Self::MOST {
            self.details.push(detail);
        } else {
            self.more += 1;
        }
    }

    /// Hand them to `found` as `check`'s.
    fn close(self, check: &'static str, found: &mut Findings) {
        found
            .problems
            .extend(self.details.into_iter().map(|detail| (check, detail)));
        if self.more > 0 {
            found.problems.push((
                check,
                format!("and {} more problems of this kind", self.more),
            ));
        }
    }
}

/// The full-text index rebuilt from the facts, straight into blocks, in one transaction.
pub(super) struct Rebuild {
    /// Each term and scope's postings not yet in a full block.
    open: HashMap<(String, ScopeKey), Vec<BlockPosting>>,
    writer: BlockWriter,
    docs: i64,
    tokens: i64,
}

impl Rebuild {
    /// Empty the index, to fill it again with [`Rebuild::add`].
    pub(super) fn start(tx: &dyn Tx) -> Result<Rebuild> {
        for table in [
            "memory_fts_postings",
            "memory_fts_blocks",
            "memory_fts_totals",
        ] {
            tx.execute(&format!("DELETE FROM {table}"), &[])?;
        }
        Ok(Rebuild {
            open: HashMap::new(),
            writer: BlockWriter::default(),
            docs: 0,
            tokens: 0,
        })
    }

    /// Index every fact of the database, in `seq` order.
    pub(super) fn add_all(&mut self, tx: &dyn Tx) -> Result<u64> {
        crate::each_fact_text(tx, |seq, fact, terms| self.add(tx, seq, fact, terms))
    }

    /// Index fact `seq` (after every fact added before).
    pub(super) fn add(
        &mut self,
        tx: &dyn Tx,
        seq: i64,
        fact: &Fact,
        terms: &DocTerms,
    ) -> Result<()> {
        let scope = ScopeKey {
            team_id: fact.team_id.clone(),
            agent_id: fact.agent_id.clone(),
            tenant_id: fact.tenant_id.clone(),
        };
        for (term, (freq, positions)) in &terms.terms {
            let key = (term.clone(), scope.clone());
            let postings = self.open.entry(key).or_default();
            postings.push(BlockPosting {
                seq,
                freq: *freq,
                length: terms.length,
                positions: positions.clone(),
            });
            if postings.len() == BLOCK_POSTINGS {
                let full = std::mem::take(postings);
                self.writer.add(term, &scope, &full);
            }
        }
        self.docs += 1;
        self.tokens += i64::from(terms.length);
        if self.writer.rows.len() >= BLOCKS_PER_STATEMENT {
            self.writer.write(tx)?;
        }
        Ok(())
    }

    /// Write the blocks left open and the totals.
    pub(super) fn finish(mut self, tx: &dyn Tx) -> Result<()> {
        for ((term, scope), postings) in std::mem::take(&mut self.open) {
            if !postings.is_empty() {
                self.writer.add(&term, &scope, &postings);
            }
            if self.writer.rows.len() >= BLOCKS_PER_STATEMENT {
                self.writer.write(tx)?;
            }
        }
        self.writer.write(tx)?;
        if self.docs > 0 {
            tx.execute(
                "INSERT INTO memory_fts_totals (shard, docs, tokens) VALUES (0, ?1, ?2)",
                &[&self.docs, &self.tokens],
            )?;
        }
        tx.execute(
            "UPDATE memory_fts_packed SET docs = ?1, places_apart = TRUE",
            &[&self.docs],
        )?;
        Ok(())
    }
}

/// What a search reads of its terms.
#[derive(Default)]
struct Read {
    /// A one-term phrase's postings in scope: (seq, weighted frequency, length).
    in_scope: HashMap<String, Vec<(i64, u32, u32)>>,
    /// A term of a phrase of several: its postings in every scope, with places.
    everywhere: HashMap<String, Vec<(BlockPosting, ScopeKey)>>,
    /// Facts holding each one-term phrase's term, over the whole corpus.
    counts: HashMap<String, f64>,
    docs: f64,
    tokens: f64,
    /// The retired facts in scope, which no ranking returns.
    retired: HashSet<i64>,
}

/// Read what ranking `phrases` in `scope` needs, in one statement.
fn read(tx: &dyn Tx, phrases: &[Vec<String>], scope: &ScopeFilter) -> Result<Read> {
    let mut single: Vec<&str> = phrases
        .iter()
        .filter(|p| p.len() == 1)
        .map(|p| p[0].as_str())
        .collect();
    let mut multi: Vec<&str> = phrases
        .iter()
        .filter(|p| p.len() > 1)
        .flatten()
        .map(String::as_str)
        .collect();
    for terms in [&mut single, &mut multi] {
        terms.sort_unstable();
        terms.dedup();
    }
    let (blocks_in_scope, args) = scope.sql("b", 3);
    let (tail_in_scope, _) = scope.sql("p", 3);
    let (facts_in_scope, _) = scope.sql("f", 3);
    let retired = retire::retired_in_scope("f", &facts_in_scope);
    // Kinds of row: 0 a block in scope (without its places) and 1 a tail posting in scope,
    // of a one-term phrase; 2 such a term's count of facts; 3 the totals; 4 a block with
    // its places and 5 a tail posting, in any scope, of a term of a phrase of several; 6 a
    // retired fact in scope (read here rather than apart, a round trip fewer).
    // The terms go in as JSON and are made an array once, so each branch looks its terms
    // up in the primary key (`= ANY` of an array), whatever the planner guesses of them.
    let single_terms =
        "ANY(ARRAY(SELECT json_array_elements_text(CAST(CAST(?1 AS TEXT) AS JSON))))";
    let multi_terms = "ANY(ARRAY(SELECT json_array_elements_text(CAST(CAST(?2 AS TEXT) AS JSON))))";
    let sql = format!(
        "SELECT CAST(0 AS BIGINT), b.term, b.team_id, b.agent_id, b.tenant_id,
             CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), b.postings,
             CAST(NULL AS TEXT), CAST(NULL AS BYTEA)
         FROM memory_fts_blocks b WHERE b.term = {single_terms} AND {blocks_in_scope}
         UNION ALL
         SELECT 1, p.term, NULL, NULL, NULL, p.seq, p.freq, p.length, NULL, NULL, NULL
         FROM memory_fts_postings p WHERE p.term = {single_terms} AND {tail_in_scope}
         UNION ALL
         SELECT 2, t.term, NULL, NULL, NULL,
             CAST((SELECT COALESCE(SUM(b.docs), 0) FROM memory_fts_blocks b WHERE b.term = t.term)
                  + (SELECT count(*) FROM memory_fts_postings p WHERE p.term = t.term)
                  AS BIGINT),
             NULL, NULL, NULL, NULL, NULL
         FROM json_array_elements_text(CAST(CAST(?1 AS TEXT) AS JSON)) AS t(term)
         UNION ALL
         SELECT 3, NULL, NULL, NULL, NULL, CAST(SUM(docs) AS BIGINT), CAST(SUM(tokens) AS BIGINT),
             NULL, NULL, NULL, NULL
         FROM memory_fts_totals
         UNION ALL
         SELECT 4, b.term, b.team_id, b.agent_id, b.tenant_id, NULL, NULL, NULL, b.postings, NULL,
             b.places
         FROM memory_fts_blocks b WHERE b.term = {multi_terms}
         UNION ALL
         SELECT 5, p.term, p.team_id, p.agent_id, p.tenant_id, p.seq, p.freq, p.length, NULL,
             array_to_string(p.positions, ','), NULL
         FROM memory_fts_postings p WHERE p.term = {multi_terms}
         UNION ALL
         SELECT 6, NULL, NULL, NULL, NULL, f.seq, NULL, NULL, NULL, NULL, NULL {retired}"
    );
    let (single, multi) = (json(&single)?, json(&multi)?);
    let mut params: Vec<&dyn ToValue> = vec![&single, &multi];
    params.extend(args.iter().map(|a| a as &dyn ToValue));
    let mut read = Read::default();
    tx.query_each(&sql, &params, &mut |r| {
        match r.get::<i64>(0)? {
            0 => {
                if let Value::Blob(bytes) = r.value(8)? {
                    let postings = read.in_scope.entry(r.get(1)?).or_default();
                    postings.extend(
                        decoded(bytes, None)?
                            .into_iter()
                            .map(|p| (p.seq, p.freq, p.length)),
                    );
                }
            }
            1 => {
                read.in_scope
                    .entry(r.get(1)?)
                    .or_default()
                    .push((r.get(5)?, r.get(6)?, r.get(7)?))
            }
            2 => {
                read.counts.insert(r.get(1)?, r.get::<i64>(5)? as f64);
            }
            3 => {
                read.docs = r.get::<Option<i64>>(5)?.unwrap_or(0) as f64;
                read.tokens = r.get::<Option<i64>>(6)?.unwrap_or(0) as f64;
            }
            6 => {
                read.retired.insert(r.get(5)?);
            }
            4 => {
                if let (Value::Blob(bytes), Value::Blob(places)) = (r.value(8)?, r.value(10)?) {
                    let scope = scope_of(r, 2)?;
                    let postings = read.everywhere.entry(r.get(1)?).or_default();
                    postings.extend(
                        decoded(bytes, Some(places))?
                            .into_iter()
                            .map(|p| (p, scope.clone())),
                    );
                }
            }
            _ => {
                let posting = BlockPosting {
                    seq: r.get(5)?,
                    freq: r.get(6)?,
                    length: r.get(7)?,
                    positions: places(r.get(9)?)?,
                };
                let scope = scope_of(r, 2)?;
                read.everywhere
                    .entry(r.get(1)?)
                    .or_default()
                    .push((posting, scope));
            }
        }
        Ok(())
    })?;
    Ok(read)
}

/// A phrase of several terms' matches, in every scope: each matching fact's `seq`, its
/// occurrences of the phrase weighted by column, its length and its scope.
fn phrase_matches<'r>(terms: &[String], read: &'r Read) -> Vec<(i64, f64, u32, &'r ScopeKey)> {
    let by_seq: Vec<HashMap<i64, &BlockPosting>> = terms
        .iter()
        .map(|term| {
            read.everywhere
                .get(term)
                .map(|postings| postings.iter().map(|(p, _)| (p.seq, p)).collect())
                .unwrap_or_default()
        })
        .collect();
    let Some(first) = read.everywhere.get(&terms[0]) else {
        return Vec::new();
    };
    let mut matches = Vec::new();
    for (posting, scope) in first {
        let mut freq = 0u32;
        for &start in &posting.positions {
            // The phrase starts here when its term at place `i` stands at `start + i`.
            let whole = by_seq.iter().enumerate().skip(1).all(|(place, postings)| {
                postings
                    .get(&posting.seq)
                    .is_some_and(|p| p.positions.binary_search(&(start + place as i64)).is_ok())
            });
            if whole {
                let column = usize::try_from(start >> 32).unwrap_or(2).min(2);
                freq += COLUMN_WEIGHTS[column];
            }
        }
        if freq > 0 {
            matches.push((posting.seq, f64::from(freq), posting.length, scope));
        }
    }
    matches
}

/// The best `k` live facts in `scope` matching any of `phrases` (one per query word, each
/// the terms FTS5 made of it), by bm25 (positive, higher is better), best first; ties:
/// oldest fact first, as SQLite leaves them.
fn best(
    tx: &dyn Tx,
    phrases: &[Vec<String>],
    scope: &ScopeFilter,
    k: usize,
) -> Result<Vec<(i64, f64)>> {
    if phrases.iter().all(Vec::is_empty) || k == 0 {
        return Ok(Vec::new());
    }
    let read = read(tx, phrases, scope)?;
    if read.docs <= 0.0 {
        return Ok(Vec::new());
    }
    let average_length = read.tokens / read.docs;
    let mut shares: Vec<(i64, f64)> = Vec::new();
    for phrase in phrases {
        match phrase.as_slice() {
            [] => {}
            [term] => {
                let Some(postings) = read.in_scope.get(term) else {
                    continue;
                };
                let idf = bm25::idf(read.docs, read.counts.get(term).copied().unwrap_or(0.0));
                shares.extend(postings.iter().map(|&(seq, freq, length)| {
                    let share =
                        bm25::share(idf, f64::from(freq), f64::from(length), average_length);
                    (seq, share)
                }));
            }
            terms => {
                let matches = phrase_matches(terms, &read);
                let idf = bm25::idf(read.docs, matches.len() as f64);
                shares.extend(
                    matches
                        .into_iter()
                        .filter(|(_, _, _, key)| {
                            scope.admits(
                                key.team_id.as_deref(),
                                key.agent_id.as_deref(),
                                key.tenant_id.as_deref(),
                            )
                        })
                        .map(|(seq, freq, length, _)| {
                            (
                                seq,
                                bm25::share(idf, freq, f64::from(length), average_length),
                            )
                        }),
                );
            }
        }
    }
    if !read.retired.is_empty() {
        shares.retain(|(seq, _)| !read.retired.contains(seq));
    }
    Ok(bm25::best(shares, k))
}

/// [`best`]'s facts, whole, with their scores.
pub(super) fn ranked(
    tx: &dyn Tx,
    phrases: &[Vec<String>],
    scope: &ScopeFilter,
    k: usize,
) -> Result<Vec<(Fact, f64)>> {
    let best = best(tx, phrases, scope, k)?;
    if best.is_empty() {
        return Ok(Vec::new());
    }
    let list = best
        .iter()
        .map(|(seq, _)| seq.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let sql = format!(
        "SELECT {FACT_COLUMNS}, f.seq FROM memory_facts f WHERE {}",
        tx.statement(&SEQ_IN_LIST)
    );
    let mut facts: HashMap<i64, Fact> = HashMap::with_capacity(best.len());
    tx.query_each(&sql, &[&list], &mut |r| {
        facts.insert(r.get(9)?, fact_from_row(r)?);
        Ok(())
    })?;
    // A fact deleted behind the store's back is skipped (facts are append-only).
    Ok(best
        .into_iter()
        .filter_map(|(seq, score)| facts.remove(&seq).map(|fact| (fact, score)))
        .collect())
}

/// The numbers (`seq`) of [`ranked`]'s facts, best first, without reading the facts.
pub(super) fn ranked_seqs(
    tx: &dyn Tx,
    phrases: &[Vec<String>],
    scope: &ScopeFilter,
    k: usize,
) -> Result<Vec<i64>> {
    Ok(best(tx, phrases, scope, k)?
        .into_iter()
        .map(|(seq, _)| seq)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_parse_or_refuse() {
        assert_eq!(
            places(Some("1,4294967298".into())).unwrap(),
            vec![1, 4294967298]
        );
        assert!(places(None).unwrap().is_empty());
        assert!(places(Some("1,x".into())).is_err());
    }
}
