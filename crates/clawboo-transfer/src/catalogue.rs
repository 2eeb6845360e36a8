//! Every table of the store, each one entry: copied row by row, or derived from the copied
//! rows and rebuilt where they land. A table in a database that is in neither list fails
//! the catalogue's test on both engines (`tests/catalogue.rs`), so a table added by a later
//! migration cannot be left behind by a move without someone deciding how it travels.

/// One table the copy carries row for row.
#[derive(Debug, Clone, Copy)]
pub struct Copied {
    /// Its name, the same on both engines.
    pub name: &'static str,
    /// Its primary key, the order the copy pages through it in.
    pub key: &'static [&'static str],
    /// Columns naming another row of the same table (a subtask's parent): written as
    /// `NULL` with the row, then set once every row of the table is in, so the order the
    /// rows come in never breaks the foreign key.
    pub self_refs: &'static [&'static str],
}

/// Which engine's schema holds a derived table or column: the store's dialect.
pub use clawboo_store::db::Dialect as Engine;

/// One table made from the copied rows (or the engine's own bookkeeping), never carried.
#[derive(Debug, Clone, Copy)]
pub struct Derived {
    /// Its name, or for FTS5's shadow tables the prefix they share.
    pub name: &'static str,
    /// Whose schema has it.
    pub engine: Engine,
    /// How the target gets its own.
    pub rebuilt: &'static str,
}

/// The copied tables, parents before children (a comment after its task).
pub const COPIED: &[Copied] = &[
    copied("settings", &["key"]),
    copied("teams", &["id"]),
    // Each team's key and counter, so the target numbers new tasks after the copied ones.
    copied("task_keys", &["team_id"]),
    copied("agents", &["id"]),
    copied("agent_presence", &["agent_id", "team_key"]),
    Copied {
        name: "tasks",
        key: &["id"],
        self_refs: &["parent_task_id"],
    },
    copied("task_deps", &["task_id", "depends_on_task_id"]),
    copied("task_comments", &["id"]),
    copied("operator_activity", &["id"]),
    copied("agent_inbox", &["id"]),
    copied("team_chat", &["id"]),
    copied("memory_facts", &["seq"]),
    copied("memory_fact_retirements", &["fact_id"]),
    copied("memory_procedures", &["id"]),
    copied("tool_registry", &["name"]),
    copied(
        "tool_blocklist",
        &["subject_kind", "subject_id", "tool_name"],
    ),
    copied("tool_call_approvals", &["id"]),
    copied(
        "tool_approval_grants",
        &["tool_name", "agent_id", "team_id", "tenant_id"],
    ),
    copied("tool_call_audit", &["id"]),
    copied("tool_notes", &["id"]),
    // Links name facts, posts and audit rows by id (no foreign key): after them all.
    copied("task_links", &["task_id", "kind", "ref_id"]),
];

const fn copied(name: &'static str, key: &'static [&'static str]) -> Copied {
    Copied {
        name,
        key,
        self_refs: &[],
    }
}

/// The derived tables and the engines' own bookkeeping.
pub const DERIVED: &[Derived] = &[
    Derived {
        name: "memory_facts_fts",
        engine: Engine::Sqlite,
        rebuilt: "FTS5's index of the facts (and its shadow tables \
                  memory_facts_fts_data, _idx, _docsize, _config): memory's pre-commit hook \
                  indexes every fact the copy inserts",
    },
    Derived {
        name: "memory_facts_fts_pending",
        engine: Engine::Sqlite,
        rebuilt: "facts waiting for that hook inside a write; empty after every commit",
    },
    Derived {
        name: "memory_fts_postings",
        engine: Engine::Postgres,
        rebuilt: "full-text postings not yet packed: emptied by \
                  clawboo_memory::rebuild_text_index, in the copy's transaction",
    },
    Derived {
        name: "memory_fts_blocks",
        engine: Engine::Postgres,
        rebuilt: "full-text postings packed in blocks: clawboo_memory::rebuild_text_index",
    },
    Derived {
        name: "memory_fts_packed",
        engine: Engine::Postgres,
        rebuilt: "facts packed in blocks: clawboo_memory::rebuild_text_index",
    },
    Derived {
        name: "memory_fts_totals",
        engine: Engine::Postgres,
        rebuilt: "facts and tokens in all: clawboo_memory::rebuild_text_index",
    },
    Derived {
        name: "clawboo_schema",
        engine: Engine::Postgres,
        rebuilt: "the migrations applied: the target's own, written as it opens",
    },
    Derived {
        name: "clawboo_changes",
        engine: Engine::Postgres,
        rebuilt: "a change count no longer written; its rows are made by migration 0001",
    },
];

/// Columns of copied tables that are derived from other columns of the same row: the
/// engine whose schema has it, the table, the column, how the target gets it.
pub const DERIVED_COLUMNS: &[(Engine, &str, &str, &str)] = &[(
    Engine::Postgres,
    "memory_facts",
    "embedding_vec",
    "pgvector's copy of `embedding`, with its HNSW index: memory's open step fills it \
     (run on the target after the copy)",
)];

/// The catalogue's entry for a table found in `engine`'s schema: `Ok(true)` when copied,
/// `Ok(false)` when derived, `Err` naming it when it is in neither list.
pub fn classify(engine: Engine, table: &str) -> Result<bool, String> {
    if COPIED.iter().any(|t| t.name == table) {
        return Ok(true);
    }
    let derived = DERIVED.iter().any(|d| {
        d.engine == engine
            && (d.name == table
                || (d.engine == Engine::Sqlite
                    && table
                        .strip_prefix(d.name)
                        .is_some_and(|rest| FTS5_SHADOWS.contains(&rest))))
    });
    if derived {
        Ok(false)
    } else {
        Err(format!(
            "table {table} ({engine:?}) is neither copied nor derived: add it to \
             clawboo-transfer's catalogue (COPIED, or DERIVED saying how it is rebuilt)"
        ))
    }
}

/// The suffixes of the tables FTS5 keeps for one of its own.
const FTS5_SHADOWS: &[&str] = &["_data", "_idx", "_docsize", "_config", "_content"];

/// Whether `column` of `table` is derived ([`DERIVED_COLUMNS`]), and so left out.
pub fn is_derived_column(table: &str, column: &str) -> bool {
    DERIVED_COLUMNS
        .iter()
        .any(|(_, t, c, _)| *t == table && *c == column)
}
