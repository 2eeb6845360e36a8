-- Full-text search over memory_facts, ranked by bm25 in the database (SQLite uses FTS5).
--
-- Every fact's terms are FTS5's own (the store tokenizes with an FTS5 table of the same
-- tokenizer, 'porter unicode61', as SQLite's memory_facts_fts) and are written in the same
-- transaction as the fact, so the statistics never lag the committed facts. A search
-- computes FTS5's bm25 from them here, so no process keeps anything per fact. Facts are
-- append-only, as on SQLite: nothing here is ever updated or deleted but the totals.

-- One row per fact: its length in tokens (all columns) and its scope, so ranking tests the
-- scope without reading the wide fact row.
CREATE TABLE memory_fts_docs (
    seq        BIGINT PRIMARY KEY,
    length     BIGINT NOT NULL,
    team_id    TEXT,
    agent_id   TEXT,
    tenant_id  TEXT
);

-- One row per term of a fact: its occurrences weighted by column (title 2, content 1,
-- tags 1, bm25's weights) and every place it occurs, column * 2^32 + token offset, so a
-- phrase (a query word FTS5 splits into several terms) matches consecutive places. The
-- number of facts holding a term is counted from here; a one-term query word reads only the
-- key and `freq`, so the index carries it.
CREATE TABLE memory_fts_postings (
    term       TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    freq       BIGINT NOT NULL,
    positions  BIGINT[] NOT NULL,
    PRIMARY KEY (term, seq) INCLUDE (freq)
);

-- Facts and tokens in all, split over a few rows (a writer adds to the row of its
-- connection) so that concurrent saves do not all wait on one row lock; a search sums them.
CREATE TABLE memory_fts_totals (
    shard   BIGINT PRIMARY KEY,
    docs    BIGINT NOT NULL,
    tokens  BIGINT NOT NULL
);
