-- Facts reach the full-text index once per write transaction instead of once per fact.
-- FTS5 writes its pending terms out as a new index segment at every savepoint, and a group
-- commit runs each write in a savepoint of its own, so indexing in the insert trigger made a
-- segment (and merge work) per fact. The trigger now only notes the fact here; the store
-- indexes every noted fact in one statement just before it commits, so this table is empty
-- whenever no write transaction is open.
CREATE TABLE memory_facts_fts_pending (seq INTEGER PRIMARY KEY);

DROP TRIGGER memory_facts_fts_insert;
CREATE TRIGGER memory_facts_fts_insert AFTER INSERT ON memory_facts BEGIN
    INSERT INTO memory_facts_fts_pending(seq) VALUES (new.seq);
END;

-- A fact still waiting to be indexed has nothing in the index to take out.
DROP TRIGGER memory_facts_fts_delete;
CREATE TRIGGER memory_facts_fts_delete AFTER DELETE ON memory_facts BEGIN
    INSERT INTO memory_facts_fts(memory_facts_fts, rowid, title, content, tags)
    SELECT 'delete', old.seq, old.title, old.content, old.tags
    WHERE NOT EXISTS (SELECT 1 FROM memory_facts_fts_pending WHERE seq = old.seq);
    DELETE FROM memory_facts_fts_pending WHERE seq = old.seq;
END;

DROP TRIGGER memory_facts_fts_update;
CREATE TRIGGER memory_facts_fts_update AFTER UPDATE OF seq, title, content, tags ON memory_facts BEGIN
    INSERT INTO memory_facts_fts(memory_facts_fts, rowid, title, content, tags)
    SELECT 'delete', old.seq, old.title, old.content, old.tags
    WHERE NOT EXISTS (SELECT 1 FROM memory_facts_fts_pending WHERE seq = old.seq);
    DELETE FROM memory_facts_fts_pending WHERE seq = old.seq;
    INSERT INTO memory_facts_fts_pending(seq) VALUES (new.seq);
END;
