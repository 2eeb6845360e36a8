//! Retiring a fact: an operator's word that a fact is wrong or stale. Facts stay
//! append-only (the in-process search caches catch up by `seq` and never drop a row), so a
//! retirement is a row of its own in `memory_fact_retirements`, written once. Every read
//! that lists facts leaves retired ones out: browsing in its SQL; a search by asking each
//! ranking for as many more hits as there are retired facts in scope and dropping those,
//! so it still returns `limit` hits while enough live facts match (only the top of a
//! ranking can hold a retired fact, and no more of them than there are; PostgreSQL's
//! full-text ranking reads them in its own statement and leaves them out itself). By id a
//! retired fact is still found, and [`Memory::fact_retirement`] says when, by whom and why.

use std::collections::HashSet;

use serde::Serialize;

use super::{Fact, Memory, ScopeFilter, check_len};
use crate::Result;
use clawboo_store::db::{DbRow, ToValue, Tx};
use clawboo_store::reads::{Query, RowsRead, StoreRead, ready_now};
use clawboo_store::scrub::{is_only_redactions, scrub_text};
use clawboo_store::writes::{AsyncWriteTx, StoreWrite, Writes};
use clawboo_store::{RunError, StoreError};
use futures_util::future::BoxFuture;

/// Longest accepted reason for a retirement, in characters.
pub const MAX_REASON_CHARS: usize = 1_000;

/// The condition (on the facts aliased `alias`) that a fact is not retired.
pub(crate) fn live(alias: &str) -> String {
    format!("NOT EXISTS (SELECT 1 FROM memory_fact_retirements r WHERE r.fact_id = {alias}.id)")
}

/// When, by whom and why a fact was retired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Retirement {
    pub fact_id: String,
    /// The operator's surface (`api`: REST and the board; `cli`).
    pub retired_by: String,
    /// Why, as the operator said it (scrubbed of secrets).
    pub reason: String,
    pub retired_at: i64,
}

/// What [`Memory::retire_fact`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetireOutcome {
    /// The fact is retired now.
    Retired(Retirement),
    /// It already was (a retirement is final); nothing changed.
    AlreadyRetired(Retirement),
}

fn retirement_from_row(r: &dyn DbRow) -> Result<Retirement> {
    Ok(Retirement {
        fact_id: r.get(0)?,
        retired_by: r.get(1)?,
        reason: r.get(2)?,
        retired_at: r.get(3)?,
    })
}

const RETIREMENT_BY_FACT: &str = "SELECT fact_id, retired_by, reason, retired_at
     FROM memory_fact_retirements WHERE fact_id = ?1";

/// The retirement of fact `id` (none, or one row).
fn retirement_read(id: &str) -> RowsRead<Retirement> {
    RowsRead {
        query: Query::new(RETIREMENT_BY_FACT, &[&id]),
        decode: retirement_from_row,
    }
}

/// A fact's retirement with its reason checked and scrubbed, for `Store::run_transaction`.
struct RetireWrite {
    id: String,
    by: String,
    reason: String,
    now: i64,
}

impl RetireWrite {
    fn new(memory: &Memory, id: &str, by: &str, reason: &str) -> Result<RetireWrite> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(StoreError::Invalid(
                "a retirement needs a reason: say why the fact is wrong or stale".into(),
            ));
        }
        check_len("reason", reason, MAX_REASON_CHARS)?;
        let reason = scrub_text(reason);
        if is_only_redactions(&reason) {
            return Err(StoreError::Invalid(
                "the reason was entirely redacted secrets; say why without the credential".into(),
            ));
        }
        Ok(RetireWrite {
            id: id.to_owned(),
            by: by.to_owned(),
            reason,
            now: memory.store().now_ms(),
        })
    }

    /// Whether the fact exists, its retirement (a first one only: a retirement is
    /// final) and the retirement as it stands, in one round trip on PostgreSQL.
    async fn retire<W: Writes + ?Sized>(&self, tx: &W) -> Result<RetireOutcome> {
        let id = &self.id;
        let batch = vec![
            Query::new(
                "SELECT EXISTS(SELECT 1 FROM memory_facts WHERE id = ?1)",
                &[id],
            ),
            Query::new(
                "INSERT INTO memory_fact_retirements(fact_id, retired_by, reason, retired_at)
                 SELECT ?1, ?2, ?3, ?4 WHERE EXISTS(SELECT 1 FROM memory_facts WHERE id = ?1)
                 ON CONFLICT (fact_id) DO NOTHING RETURNING fact_id",
                &[id, &self.by, &self.reason, &self.now],
            ),
            Query::new(RETIREMENT_BY_FACT, &[id]),
        ];
        let mut answers = tx.query_batch(batch).await?.into_iter();
        let exists = match answers.next().unwrap_or_default().first() {
            Some(row) => row.get::<bool>(0)?,
            None => false,
        };
        if !exists {
            return Err(StoreError::NotFound(format!("fact {id}")));
        }
        let inserted = !answers.next().unwrap_or_default().is_empty();
        let retirement = match answers.next().unwrap_or_default().first() {
            Some(row) => retirement_from_row(&**row)?,
            None => return Err(StoreError::NotFound(format!("retirement of fact {id}"))),
        };
        Ok(if inserted {
            RetireOutcome::Retired(retirement)
        } else {
            RetireOutcome::AlreadyRetired(retirement)
        })
    }
}

impl StoreWrite for RetireWrite {
    type Output = RetireOutcome;

    fn run(&self, tx: &dyn Tx) -> Result<RetireOutcome> {
        ready_now(self.retire(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<RetireOutcome>> {
        Box::pin(self.retire(tx))
    }
}

/// The retired facts a search in one scope must pass over, by row number and by id.
#[derive(Debug, Default)]
pub(crate) struct Retired {
    seqs: HashSet<i64>,
    ids: HashSet<String>,
}

impl Retired {
    /// How many hits to ask a ranking for so that `k` live ones remain after
    /// [`Retired::live_facts`] or [`Retired::live_seqs`], when that many match.
    pub(crate) fn widen(&self, k: usize) -> usize {
        k + self.seqs.len()
    }

    /// `ranked` without retired facts, cut to `k`.
    pub(crate) fn live_facts(&self, mut ranked: Vec<(Fact, f64)>, k: usize) -> Vec<(Fact, f64)> {
        if !self.ids.is_empty() {
            ranked.retain(|(fact, _)| !self.ids.contains(&fact.id));
        }
        ranked.truncate(k);
        ranked
    }

    /// `ranked` (row numbers) without retired facts, cut to `k`.
    pub(crate) fn live_seqs(&self, mut ranked: Vec<(i64, f32)>, k: usize) -> Vec<(i64, f32)> {
        if !self.seqs.is_empty() {
            ranked.retain(|(seq, _)| !self.seqs.contains(seq));
        }
        ranked.truncate(k);
        ranked
    }
}

impl Memory {
    /// Retire fact `id` (any scope: operators only), saying why; `by` names the operator's
    /// surface. A fact already retired keeps its first retirement. A fact that does not
    /// exist is [`StoreError::NotFound`]; an empty reason, or one that was nothing but
    /// secrets, [`StoreError::Invalid`].
    pub fn retire_fact(&self, id: &str, by: &str, reason: &str) -> Result<RetireOutcome> {
        let write = RetireWrite::new(self, id, by, reason)?;
        self.store().write(|tx| write.run(tx))
    }

    /// [`Memory::retire_fact`] for an async caller, run the way the engine runs writes
    /// best (`Store::run_transaction`).
    pub async fn retire_fact_async(
        &self,
        id: &str,
        by: &str,
        reason: &str,
    ) -> std::result::Result<Result<RetireOutcome>, RunError> {
        match RetireWrite::new(self, id, by, reason) {
            Ok(write) => self.store().run_transaction(write).await,
            Err(e) => Ok(Err(e)),
        }
    }

    /// The retirement of fact `id`, if it was retired.
    pub fn fact_retirement(&self, id: &str) -> Result<Option<Retirement>> {
        let read = retirement_read(id);
        Ok(self.store().read(|tx| read.run(tx))?.pop())
    }

    /// [`Memory::fact_retirement`] for an async caller, run the way the engine runs reads
    /// best (`Store::run_read_committed`).
    pub async fn fact_retirement_async(
        &self,
        id: &str,
    ) -> std::result::Result<Result<Option<Retirement>>, RunError> {
        let read = self.store().run_read_committed(retirement_read(id)).await?;
        Ok(read.map(|mut rows| rows.pop()))
    }

    /// The retired facts in `scope`: what a search there passes over.
    pub(crate) fn retired(&self, scope: &ScopeFilter) -> Result<Retired> {
        let (sql, args) = retired_in(scope);
        self.store().read(|tx| {
            let mut retired = Retired::default();
            let params: Vec<&dyn ToValue> = args.iter().map(|a| a as &dyn ToValue).collect();
            tx.query_each(&sql, &params, &mut |r| {
                retired.seqs.insert(r.get(0)?);
                retired.ids.insert(r.get(1)?);
                Ok(())
            })?;
            Ok(retired)
        })
    }
}

/// The statement reading the retired facts in `scope`, and its parameters.
pub(crate) fn retired_in(scope: &ScopeFilter) -> (String, Vec<String>) {
    let (cond, args) = scope.sql("f", 1);
    (
        format!("SELECT f.seq, f.id {}", retired_in_scope("f", &cond)),
        args,
    )
}

/// The `FROM … WHERE …` of the retired facts, aliased `alias`, that `cond` (a scope's
/// condition on `alias`) admits. `CROSS JOIN` makes SQLite read the retirements (few) and
/// look each fact up by id; with a plain join it scanned every fact in scope on every
/// search. PostgreSQL plans it as the inner join it is.
pub(crate) fn retired_in_scope(alias: &str, cond: &str) -> String {
    format!(
        "FROM memory_fact_retirements r CROSS JOIN memory_facts {alias}
         WHERE {alias}.id = r.fact_id AND {cond}"
    )
}
