-- The operator's own moves, edits and comments (REST, the board, the CLI), one row each,
-- written by the store in the same transaction as what they record, so the audit view
-- lists them beside the agents' tool calls. `actor` is the surface (`api`, `cli`);
-- `detail` says what changed ("todo → done", "title, priority", a comment's first line).
-- A task's team is read from the task (it never changes), so team-less tasks need nothing.
CREATE TABLE operator_activity (
    id          TEXT PRIMARY KEY,
    task_id     TEXT NOT NULL REFERENCES tasks(id),
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL CHECK (action IN ('moved','edited','commented','dropped','restored')),
    detail      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX operator_activity_recent ON operator_activity(created_at, id);

-- A fact an operator retired: no search, browse or list returns it again; by id it is
-- shown with this row. Facts stay append-only (the in-process search caches rely on it):
-- a retirement is a row of its own, written once, never changed.
CREATE TABLE memory_fact_retirements (
    fact_id     TEXT PRIMARY KEY REFERENCES memory_facts(id),
    retired_by  TEXT NOT NULL,
    reason      TEXT NOT NULL,
    retired_at  INTEGER NOT NULL
);
