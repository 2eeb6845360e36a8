//! Vector search through pgvector's HNSW index, where the PostgreSQL server has the
//! extension.
//!
//! At open ([`path_at_open`]) memory enables the extension when it can (or finds it
//! enabled), gives `memory_facts` an `embedding_vec vector` column beside the portable
//! `embedding` bytes, fills it for facts written before, and makes sure of one HNSW index
//! (cosine) per embedding dimension in use: a partial index over `CAST(embedding_vec AS
//! halfvec(D))` for the facts of dimension `D`, so embedders of different sizes share the
//! table and a new dimension only needs its own index, made the first time it is searched.
//! The graph holds half-precision vectors: half the bytes a step of the walk reads (and
//! twice the dimensions pgvector indexes), while the candidates the walk finds are measured
//! again in full precision from `embedding_vec`, so the order of the hits is exact and only
//! which facts the walk reaches can differ (docs/BENCHMARKS.md measures both). A search
//! orders by distance through that index with the caller's scope and model in the same
//! `WHERE`, and pgvector's iterative scan (`hnsw.iterative_scan = relaxed_order`, set for
//! every connection) keeps walking the graph until `limit` facts in scope are found, so a
//! scope whose facts are not the nearest still gets its hits. When the walk ends short of
//! `limit` (the scope holds fewer facts, or they lie past `hnsw.max_scan_tuples`), the
//! exact scan answers instead, so the index never returns fewer hits than exist.
//!
//! Without the extension nothing here runs and vector search scans exactly.

use std::fmt::Write as _;

use crate::engine::VectorSearchPath;
use crate::{Result, ScopeFilter};
use clawboo_store::Store;
use clawboo_store::StoreError;
use clawboo_store::db::{ToValue, Tx, Value};

/// Facts whose vector column one backfill transaction fills.
const BACKFILL_BATCH: i64 = 500;

/// pgvector's HNSW index holds `halfvec`s of at most this many dimensions.
const HNSW_MAX_DIM: usize = 4000;

/// How many candidates the HNSW walk keeps (pgvector's `hnsw.ef_search`, default 40):
/// recall rises with it and so does a search's cost; docs/BENCHMARKS.md gives both,
/// measured at several values, and why this one.
const EF_SEARCH: u32 = 400;

/// The advisory lock held while the vector column and indexes are changed, so hosts
/// opening together do it once ("clawvec" in ASCII).
const VECTOR_DDL_LOCK: i64 = 0x0063_6c61_7776_6563;

/// What every PostgreSQL session sets once connected: pgvector's iterative index scans,
/// so a filtered search walks on until it has its `limit`, and the walk's breadth (a URL's
/// `options=-c hnsw.ef_search=N` overrides it). Set on servers without pgvector too, where
/// they are inert placeholders.
pub(crate) fn session_settings() -> Vec<(&'static str, String)> {
    vec![
        ("hnsw.iterative_scan", "relaxed_order".to_owned()),
        ("hnsw.ef_search", EF_SEARCH.to_string()),
    ]
}

/// Set to `off`, a store leaves pgvector alone even where the server has it (vector search
/// scans exactly, and new facts get no indexed vector until a store opens without it).
pub const PGVECTOR_ENV: &str = "CLAWBOO_PGVECTOR";

/// The vector search path a freshly opened PostgreSQL store takes: pgvector's index when
/// [`prepare`] makes it ready, else the exact scan.
pub(super) fn path_at_open(store: &Store) -> VectorSearchPath {
    match prepare(store) {
        Some(version) => VectorSearchPath::PgvectorHnsw { version },
        None => VectorSearchPath::ExactScan,
    }
}

/// Make pgvector ready on a freshly opened PostgreSQL store; its version, or `None` when
/// the server lacks it, it cannot be enabled (logged; vector search then scans exactly) or
/// [`PGVECTOR_ENV`] turns it off.
fn prepare(store: &Store) -> Option<String> {
    if std::env::var(PGVECTOR_ENV).is_ok_and(|v| v == "off") {
        tracing::info!("{PGVECTOR_ENV}=off: vector search scans exactly");
        return None;
    }
    match try_prepare(store) {
        Ok(version) => version,
        Err(e) => {
            tracing::warn!(error = %e, "pgvector could not be prepared; vector search scans exactly");
            None
        }
    }
}

fn try_prepare(store: &Store) -> Result<Option<String>> {
    let version = match installed_version(store)? {
        Some(version) => version,
        None => {
            let available: bool = store.read(|tx| {
                tx.query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
                    &[],
                    |r| r.get(0),
                )
            })?;
            if !available {
                tracing::info!(
                    "the PostgreSQL server has no pgvector: vector search scans exactly"
                );
                return Ok(None);
            }
            let created = store.write(|tx| {
                lock_ddl(tx)?;
                tx.execute("CREATE EXTENSION IF NOT EXISTS vector", &[])?;
                Ok::<_, StoreError>(())
            });
            if let Err(e) = created {
                tracing::warn!(
                    error = %e,
                    "pgvector is installed on the PostgreSQL server but this role cannot enable \
                     it: run `CREATE EXTENSION vector;` in this database as its owner or a \
                     superuser, then restart; until then vector search scans exactly"
                );
                return Ok(None);
            }
            match installed_version(store)? {
                Some(version) => version,
                None => return Ok(None),
            }
        }
    };
    if !has_vector_column(store)? {
        store.write(|tx| {
            lock_ddl(tx)?;
            tx.execute(
                "ALTER TABLE memory_facts ADD COLUMN IF NOT EXISTS embedding_vec vector",
                &[],
            )?;
            // Facts written without the column filled (before the extension, or by a
            // process that opened before it) are found by this small index at each open.
            tx.execute(
                "CREATE INDEX IF NOT EXISTS memory_facts_unvectored ON memory_facts (seq)
                 WHERE embedding_vec IS NULL AND embedding IS NOT NULL",
                &[],
            )?;
            Ok::<_, StoreError>(())
        })?;
    }
    backfill(store)?;
    let dims: Vec<i64> = store.read(|tx| {
        tx.query_map(
            "SELECT DISTINCT embedding_dim FROM memory_facts WHERE embedding_dim IS NOT NULL",
            &[],
            |r| r.get(0),
        )
    })?;
    for dim in dims {
        if let Ok(dim) = usize::try_from(dim) {
            ensure_index(store, dim)?;
            drop_superseded_index(store, dim)?;
        }
    }
    Ok(Some(version))
}

/// Drop the full-precision HNSW index of `dim` that versions before the half-precision
/// walk built (`memory_facts_vector_<dim>`): no search walks it, and every save would
/// still pay for it.
fn drop_superseded_index(store: &Store, dim: usize) -> Result<()> {
    let superseded = format!("memory_facts_vector_{dim}");
    if !store.read(|tx| index_exists(tx, &superseded))? {
        return Ok(());
    }
    tracing::info!(
        index = %superseded,
        "dropping the full-precision HNSW index an earlier version built; searches walk {}",
        index_name(dim)
    );
    store.write(|tx| {
        lock_ddl(tx)?;
        tx.execute(&format!("DROP INDEX IF EXISTS {superseded}"), &[])?;
        Ok::<_, StoreError>(())
    })
}

fn installed_version(store: &Store) -> Result<Option<String>> {
    store.read(|tx| {
        tx.query_opt(
            "SELECT CAST(extversion AS TEXT) FROM pg_extension WHERE extname = 'vector'",
            &[],
            |r| r.get(0),
        )
    })
}

fn has_vector_column(store: &Store) -> Result<bool> {
    store.read(|tx| {
        tx.query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = 'memory_facts'
                   AND column_name = 'embedding_vec')",
            &[],
            |r| r.get(0),
        )
    })
}

/// Hold [`VECTOR_DDL_LOCK`] until the transaction ends.
fn lock_ddl(tx: &dyn Tx) -> Result<()> {
    tx.execute("SELECT pg_advisory_xact_lock(?1)", &[&VECTOR_DDL_LOCK])?;
    Ok(())
}

/// Fill the vector column of facts that have vector bytes but no vector, a batch per
/// transaction.
fn backfill(store: &Store) -> Result<()> {
    let mut filled = 0usize;
    loop {
        let batch: Vec<(i64, String)> = store.read(|tx| {
            let mut rows = Vec::new();
            tx.query_each(
                "SELECT seq, embedding FROM memory_facts
                 WHERE embedding_vec IS NULL AND embedding IS NOT NULL
                 ORDER BY seq LIMIT ?1",
                &[&BACKFILL_BATCH],
                &mut |r| {
                    let seq: i64 = r.get(0)?;
                    if let Value::Blob(blob) = r.value(1)?
                        && let Some(vector) = crate::blob_to_vector(blob)
                    {
                        rows.push((seq, vector_literal(&vector)));
                    }
                    Ok(())
                },
            )?;
            Ok::<_, StoreError>(rows)
        })?;
        if batch.is_empty() {
            break;
        }
        let count = batch.len();
        #[derive(serde::Serialize)]
        struct Row<'a> {
            seq: i64,
            vector: &'a str,
        }
        let rows: Vec<Row<'_>> = batch
            .iter()
            .map(|(seq, vector)| Row { seq: *seq, vector })
            .collect();
        let rows = serde_json::to_string(&rows)
            .map_err(|e| StoreError::Invalid(format!("vector backfill: {e}")))?;
        store.write(|tx| {
            tx.execute(
                "UPDATE memory_facts f SET embedding_vec = CAST(r.vector AS vector)
                 FROM json_to_recordset(CAST(CAST(?1 AS TEXT) AS JSON)) AS r(seq BIGINT, vector TEXT)
                 WHERE f.seq = r.seq",
                &[&rows],
            )
        })?;
        filled += count;
        if count < BACKFILL_BATCH as usize {
            break;
        }
    }
    if filled > 0 {
        tracing::info!(
            facts = filled,
            "filled pgvector's column for facts written before"
        );
    }
    Ok(())
}

/// Whether an index (or any relation) of that name exists in the current schema.
fn index_exists(tx: &dyn Tx, name: &str) -> Result<bool> {
    tx.query_one("SELECT to_regclass(?1) IS NOT NULL", &[&name], |r| r.get(0))
}

/// The name of the HNSW index of dimension `dim`.
fn index_name(dim: usize) -> String {
    format!("memory_facts_halfvec_{dim}")
}

/// Make sure the HNSW index for vectors of `dim` exists (made now when missing, which
/// takes a while over many facts of that dimension); `false` when pgvector cannot index
/// that many dimensions, and the exact scan answers.
pub(super) fn ensure_index(store: &Store, dim: usize) -> Result<bool> {
    if dim == 0 || dim > HNSW_MAX_DIM {
        return Ok(false);
    }
    let name = index_name(dim);
    if store.read(|tx| index_exists(tx, &name))? {
        return Ok(true);
    }
    tracing::info!(
        dim,
        "building pgvector's HNSW index for this embedding dimension"
    );
    let build = |graph_in_memory: bool| {
        store.write(|tx| {
            lock_ddl(tx)?;
            if index_exists(tx, &name)? {
                return Ok(());
            }
            if graph_in_memory {
                room_for_the_graph(tx, dim)?;
            }
            tx.execute(
                &format!(
                    "CREATE INDEX {name} ON memory_facts USING hnsw
                         ((CAST(embedding_vec AS halfvec({dim}))) halfvec_cosine_ops)
                     WHERE embedding_dim = {dim}"
                ),
                &[],
            )?;
            Ok::<_, StoreError>(())
        })
    };
    if let Err(e) = build(true) {
        // The larger memory may be more than the server can give (a parallel build asks
        // for it as shared memory at once); the server's own setting builds it too.
        tracing::warn!(
            error = %e,
            "building the HNSW index with its graph in memory failed; building it within \
             the server's maintenance_work_mem"
        );
        build(false)?;
    }
    Ok(true)
}

/// Bytes pgvector's build keeps for one fact's node of the graph beyond its half-precision
/// vector (its neighbour lists and bookkeeping), with some room to spare.
const GRAPH_BYTES_A_NODE: i64 = 1024;

/// The largest `maintenance_work_mem` an index build asks for, in kB (1 GiB).
const MAX_BUILD_MEMORY_KB: i64 = 1 << 20;

/// Raise `maintenance_work_mem` for the rest of `tx` to what the graph of the facts of
/// `dim` needs, so pgvector builds it in memory (and in parallel) instead of inserting
/// node by node into the index on disk once the graph outgrows the setting: the server's
/// default is sized for B-trees, not graphs. A larger setting of the server's is kept.
pub(crate) fn room_for_the_graph(tx: &dyn Tx, dim: usize) -> Result<()> {
    let node_bytes = 2 * dim as i64 + GRAPH_BYTES_A_NODE;
    tx.query_one(
        &format!(
            "SELECT set_config('maintenance_work_mem',
                 CAST(greatest(
                     least((SELECT count(*) FROM memory_facts WHERE embedding_dim = {dim})
                               * {node_bytes} / 1024, {MAX_BUILD_MEMORY_KB}),
                     (SELECT CAST(setting AS BIGINT) FROM pg_settings
                      WHERE name = 'maintenance_work_mem')) AS TEXT) || 'kB', true)"
        ),
        &[],
        |r| r.get::<String>(0),
    )?;
    Ok(())
}

/// A vector as pgvector's text input, `[x,y,…]` (each float printed to round-trip).
pub(crate) fn vector_literal(vector: &[f32]) -> String {
    let mut out = String::with_capacity(vector.len() * 12 + 2);
    out.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{x}");
    }
    out.push(']');
    out
}

/// The best `k` facts in `scope` embedded by `model` by cosine similarity to `query`
/// (positive only), best first (ties: newest first), through the HNSW index of the query's
/// dimension, with the facts `also` (more candidates, found otherwise) measured beside
/// the index's; `None` when the index walk found fewer than `k` (the exact scan must
/// answer).
pub(crate) fn nearest(
    tx: &dyn Tx,
    query: &[f32],
    model: &str,
    scope: &ScopeFilter,
    k: usize,
    also: &[i64],
) -> Result<Option<Vec<(i64, f32)>>> {
    let dim = query.len();
    let (cond, args) = scope.sql("f", 5);
    // The dimension is written into the statement: the planner uses a partial index only
    // when the query's own condition is its predicate. The walk is materialized so it runs
    // once; the candidates are then measured by their primary keys.
    let sql = format!(
        "WITH walked AS MATERIALIZED (
             SELECT f.seq FROM memory_facts f
             WHERE f.embedding_dim = {dim} AND f.embedding_model = ?2 AND {cond}
             ORDER BY CAST(f.embedding_vec AS halfvec({dim}))
                 <=> CAST(CAST(?1 AS TEXT) AS halfvec({dim}))
             LIMIT ?3
         ),
         candidates AS (
             SELECT seq FROM walked
             UNION SELECT unnest(CAST(CAST(?4 AS TEXT) AS BIGINT[]))
         )
         SELECT f.seq,
             CAST(CAST(f.embedding_vec AS vector({dim})) <=> CAST(CAST(?1 AS TEXT) AS vector({dim}))
                 AS DOUBLE PRECISION),
             (SELECT count(*) FROM walked)
         FROM candidates c JOIN memory_facts f ON f.seq = c.seq
         WHERE f.embedding_dim = {dim} AND f.embedding_model = ?2 AND {cond}"
    );
    let literal = vector_literal(query);
    let also = format!(
        "{{{}}}",
        also.iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut params: Vec<&dyn ToValue> = vec![&literal, &model, &k, &also];
    params.extend(args.iter().map(|a| a as &dyn ToValue));
    let mut walked = 0i64;
    let mut best: Vec<(i64, f32)> = Vec::new();
    tx.query_each(&sql, &params, &mut |r| {
        walked = r.get(2)?;
        let distance: f64 = r.get(1)?;
        let score = (1.0 - distance) as f32;
        if score > 0.0 {
            best.push((r.get(0)?, score));
        }
        Ok(())
    })?;
    if usize::try_from(walked).unwrap_or(0) < k {
        return Ok(None);
    }
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    best.truncate(k);
    Ok(Some(best))
}
