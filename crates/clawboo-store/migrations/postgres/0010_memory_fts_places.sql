-- A block's places (where each posting's term stands in its fact) move to a column of
-- their own, which only a query word FTS5 splits into several terms (a phrase) reads; a
-- one-term word reads the postings alone (clawboo-memory's `postgres/blocks.rs` has the
-- encoding).
--
-- Blocks written before hold their places inside `postings`: they get an empty `places`
-- here, and memory rebuilds the whole index from the facts once, at the first open after
-- this migration, while `memory_fts_packed.places_apart` is false. The column keeps no
-- default, so a process of an older version still running fails to write a block rather
-- than write one in the old form.
ALTER TABLE memory_fts_blocks ADD COLUMN places BYTEA NOT NULL DEFAULT '\x';
ALTER TABLE memory_fts_blocks ALTER COLUMN places DROP DEFAULT;

ALTER TABLE memory_fts_packed ADD COLUMN places_apart BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE memory_fts_packed SET places_apart = NOT EXISTS (SELECT 1 FROM memory_fts_blocks);
