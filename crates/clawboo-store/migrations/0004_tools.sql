-- The tool broker: operator switches, per-caller blocklists, remembered approvals,
-- approval rows a human decides, the audit log and the notes the `note` tool records.

-- Operator overrides of the builtin registry (a missing row means enabled).
CREATE TABLE tool_registry (
    name        TEXT PRIMARY KEY,
    enabled     INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    updated_at  INTEGER NOT NULL
);

-- Tools a caller (an agent or a whole team) may not use.
CREATE TABLE tool_blocklist (
    subject_kind  TEXT NOT NULL CHECK (subject_kind IN ('agent', 'team')),
    subject_id    TEXT NOT NULL,
    tool_name     TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (subject_kind, subject_id, tool_name)
) WITHOUT ROWID;

-- One row per approval a call asked for; arguments are scrubbed before they land here.
CREATE TABLE tool_call_approvals (
    id          TEXT PRIMARY KEY,
    call_id     TEXT NOT NULL,
    tool_name   TEXT NOT NULL,
    agent_id    TEXT,
    team_id     TEXT,
    risk        TEXT NOT NULL CHECK (risk IN ('safe', 'external', 'destructive')),
    message     TEXT NOT NULL,
    args_json   TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'allowed', 'denied', 'expired')),
    decision    TEXT CHECK (decision IN ('allow_once', 'allow_always', 'deny')),
    decided_by  TEXT,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    decided_at  INTEGER
);
CREATE INDEX tool_call_approvals_pending ON tool_call_approvals(created_at) WHERE status = 'pending';
CREATE INDEX tool_call_approvals_by_time ON tool_call_approvals(created_at);

-- `allow_always`, remembered per (tool, bound agent); never written for anonymous callers.
CREATE TABLE tool_approval_grants (
    tool_name    TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    approval_id  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tool_name, agent_id)
) WITHOUT ROWID;

-- A `before` row for every call and an `after` row for every executed call.
CREATE TABLE tool_call_audit (
    id            TEXT PRIMARY KEY,
    call_id       TEXT NOT NULL,
    phase         TEXT NOT NULL CHECK (phase IN ('before', 'after')),
    tool_name     TEXT NOT NULL,
    agent_id      TEXT,
    team_id       TEXT,
    decision      TEXT NOT NULL,
    reason        TEXT,
    observations  TEXT NOT NULL DEFAULT '[]',
    args_json     TEXT,
    result_text   TEXT,
    is_error      INTEGER CHECK (is_error IN (0, 1)),
    approval_id   TEXT,
    created_at    INTEGER NOT NULL
);
CREATE INDEX tool_call_audit_by_time ON tool_call_audit(created_at);
CREATE INDEX tool_call_audit_by_tool ON tool_call_audit(tool_name, created_at);
CREATE INDEX tool_call_audit_by_call ON tool_call_audit(call_id);

-- What the `note` tool records (scrubbed).
CREATE TABLE tool_notes (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT,
    team_id     TEXT,
    note        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX tool_notes_by_time ON tool_notes(created_at);
