-- Shared memory: facts (full-text indexed, optionally embedded) and versioned procedures.
CREATE TABLE memory_facts (
    seq              INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    title            TEXT NOT NULL,
    content          TEXT NOT NULL,
    tags             TEXT NOT NULL DEFAULT '[]',
    team_id          TEXT,
    agent_id         TEXT,
    tenant_id        TEXT,
    created_at       INTEGER NOT NULL,
    -- little-endian f32s, the model that made them and their count
    embedding        BLOB,
    embedding_model  TEXT,
    embedding_dim    INTEGER,
    -- bumped (board-wide max + 1) on every embedding write, so caches reload only changes
    embed_seq        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX memory_facts_recent ON memory_facts(created_at DESC, seq DESC);
CREATE INDEX memory_facts_team ON memory_facts(team_id, created_at DESC);
CREATE INDEX memory_facts_embed_seq ON memory_facts(embed_seq);
CREATE INDEX memory_facts_model ON memory_facts(embedding_model, embedding_dim);

CREATE VIRTUAL TABLE memory_facts_fts USING fts5(
    title, content, tags,
    content = 'memory_facts', content_rowid = 'seq',
    tokenize = 'porter unicode61'
);

CREATE TRIGGER memory_facts_fts_insert AFTER INSERT ON memory_facts BEGIN
    INSERT INTO memory_facts_fts(rowid, title, content, tags)
    VALUES (new.seq, new.title, new.content, new.tags);
END;
CREATE TRIGGER memory_facts_fts_delete AFTER DELETE ON memory_facts BEGIN
    INSERT INTO memory_facts_fts(memory_facts_fts, rowid, title, content, tags)
    VALUES ('delete', old.seq, old.title, old.content, old.tags);
END;
CREATE TRIGGER memory_facts_fts_update AFTER UPDATE OF title, content, tags ON memory_facts BEGIN
    INSERT INTO memory_facts_fts(memory_facts_fts, rowid, title, content, tags)
    VALUES ('delete', old.seq, old.title, old.content, old.tags);
    INSERT INTO memory_facts_fts(rowid, title, content, tags)
    VALUES (new.seq, new.title, new.content, new.tags);
END;

CREATE TABLE memory_procedures (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL CHECK (version >= 1),
    content     TEXT NOT NULL,
    tags        TEXT NOT NULL DEFAULT '[]',
    team_id     TEXT,
    agent_id    TEXT,
    tenant_id   TEXT,
    created_at  INTEGER NOT NULL
);
-- One version number per name and scope (NULL scope parts compare equal here).
CREATE UNIQUE INDEX memory_procedures_version ON memory_procedures(
    name, coalesce(tenant_id, ''), coalesce(team_id, ''), coalesce(agent_id, ''), version
);
