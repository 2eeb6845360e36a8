-- Full-text postings packed in blocks, so a search reads a few rows per query term rather
-- than a row per fact holding it (clawboo-memory's `pg_fts` explains the layout).
--
-- A save still writes its fact's postings to `memory_fts_postings`, which is now the tail:
-- once it holds enough facts, a save moves them here, rows per term and scope each holding
-- a block of postings in ascending `seq`, encoded by memory (`fts_blocks`). A term keeps a
-- few partly filled blocks per scope, which a later packing merges.
CREATE TABLE memory_fts_blocks (
    term       TEXT   NOT NULL,
    first_seq  BIGINT NOT NULL,
    team_id    TEXT,
    agent_id   TEXT,
    tenant_id  TEXT,
    docs       BIGINT NOT NULL,
    postings   BYTEA  NOT NULL,
    PRIMARY KEY (term, first_seq) INCLUDE (docs, team_id, agent_id, tenant_id)
);

-- The partly filled blocks (memory's blocks hold at most 128 postings), so a packing
-- counts a term's without reading its full ones.
CREATE INDEX memory_fts_open_blocks ON memory_fts_blocks (term)
    INCLUDE (first_seq, team_id, agent_id, tenant_id) WHERE docs < 128;

-- The facts whose postings have moved into blocks, so a save can tell the tail's size from
-- the totals without counting it. Only the packer (holding its advisory lock) writes it.
CREATE TABLE memory_fts_packed (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    docs  BIGINT NOT NULL
);
INSERT INTO memory_fts_packed (id, docs) VALUES (1, 0);

-- A term's count of facts is now its blocks' sizes plus its tail rows, so saves no longer
-- add to a count per term. A database with facts is packed once by memory as it opens.
DROP TABLE memory_fts_terms;
