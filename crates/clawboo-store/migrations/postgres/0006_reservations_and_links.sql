-- Path reservations and links (SPEC §19).
-- A task's paths: glob patterns relative to the repository root, one a line, declared by
-- create_task or set by the claim that names them. They are reserved exactly while the task
-- is claimed in_progress under a live lease, so a release, a move out of in_progress or an
-- expiry frees them with no row of their own to clean up.
ALTER TABLE tasks ADD COLUMN paths TEXT;

-- What was said or done about a task elsewhere: a fact, a room post, a tool call's audit row.
-- `line` is the first line of what was stored (already scrubbed), so a task's links are read
-- from this table alone.
CREATE TABLE task_links (
    task_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    ref_id      TEXT NOT NULL,
    line        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (task_id, kind, ref_id)
);
CREATE INDEX task_links_recent ON task_links(task_id, created_at);
