-- The board, its people, the agent inbox and settings.
CREATE TABLE teams (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    team_id     TEXT,
    runtime     TEXT,
    created_at  INTEGER NOT NULL
);
CREATE INDEX agents_by_team ON agents(team_id, name);

CREATE TABLE tasks (
    id                 TEXT PRIMARY KEY,
    title              TEXT NOT NULL,
    description        TEXT,
    status             TEXT NOT NULL CHECK (status IN
                         ('backlog','todo','in_progress','in_review','blocked','done','cancelled')),
    priority           INTEGER NOT NULL DEFAULT 0,
    team_id            TEXT,
    assignee_agent_id  TEXT,
    assignee_runtime   TEXT,
    parent_task_id     TEXT REFERENCES tasks(id),
    dropped            INTEGER NOT NULL DEFAULT 0 CHECK (dropped IN (0, 1)),
    tenant_id          TEXT,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    completed_at       INTEGER
);
CREATE INDEX tasks_by_status ON tasks(status, priority DESC, created_at);
CREATE INDEX tasks_by_team ON tasks(team_id, status);
CREATE INDEX tasks_by_parent ON tasks(parent_task_id);
CREATE INDEX tasks_roots_by_time ON tasks(created_at) WHERE parent_task_id IS NULL;

CREATE TABLE task_deps (
    task_id             TEXT NOT NULL REFERENCES tasks(id),
    depends_on_task_id  TEXT NOT NULL REFERENCES tasks(id),
    created_at          INTEGER NOT NULL,
    PRIMARY KEY (task_id, depends_on_task_id)
) WITHOUT ROWID;
CREATE INDEX task_deps_reverse ON task_deps(depends_on_task_id);

CREATE TABLE task_comments (
    id               TEXT PRIMARY KEY,
    task_id          TEXT NOT NULL REFERENCES tasks(id),
    author_agent_id  TEXT,
    author_type      TEXT NOT NULL CHECK (author_type IN ('agent','user','system')),
    body             TEXT NOT NULL,
    created_at       INTEGER NOT NULL
);
CREATE INDEX task_comments_by_task ON task_comments(task_id, created_at);

CREATE TABLE agent_inbox (
    id             TEXT PRIMARY KEY,
    agent_id       TEXT NOT NULL,
    team_id        TEXT,
    body           TEXT NOT NULL,
    source         TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    delivered_at   INTEGER,
    delivered_via  TEXT
);
CREATE INDEX agent_inbox_pending ON agent_inbox(agent_id, created_at) WHERE delivered_at IS NULL;

CREATE TABLE settings (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
