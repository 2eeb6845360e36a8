-- Full-text ranking that reads only the query terms' postings.
--
-- Each posting carries its fact's length and scope, so bm25 and the scope test are
-- computed from the postings' index alone (no join to a row per fact), and the number of
-- facts holding each term is kept at write time in `memory_fts_terms`, so a query learns a
-- term's idf from a few rows instead of counting its postings. Terms are made by the
-- store's port of FTS5's 'porter unicode61' tokenizer (no SQLite in a PostgreSQL
-- deployment), the same terms as SQLite's memory_facts_fts.

ALTER TABLE memory_fts_postings
    ADD COLUMN length    BIGINT,
    ADD COLUMN team_id   TEXT,
    ADD COLUMN agent_id  TEXT,
    ADD COLUMN tenant_id TEXT;

UPDATE memory_fts_postings p
   SET length = d.length, team_id = d.team_id, agent_id = d.agent_id, tenant_id = d.tenant_id
  FROM memory_fts_docs d
 WHERE d.seq = p.seq;

ALTER TABLE memory_fts_postings ALTER COLUMN length SET NOT NULL;

-- The key carries what ranking reads, so a query term's postings come from the index.
ALTER TABLE memory_fts_postings DROP CONSTRAINT memory_fts_postings_pkey;
ALTER TABLE memory_fts_postings
    ADD PRIMARY KEY (term, seq) INCLUDE (freq, length, team_id, agent_id, tenant_id);

DROP TABLE memory_fts_docs;

-- Facts holding each term, split over a few rows per term (a writer adds to the row of its
-- connection, as `memory_fts_totals` does) so concurrent saves sharing a common word do
-- not queue on one row lock; a query sums a term's rows.
CREATE TABLE memory_fts_terms (
    term   TEXT NOT NULL,
    shard  BIGINT NOT NULL,
    docs   BIGINT NOT NULL,
    PRIMARY KEY (term, shard) INCLUDE (docs)
);

INSERT INTO memory_fts_terms (term, shard, docs)
SELECT term, 0, count(*) FROM memory_fts_postings GROUP BY term;
