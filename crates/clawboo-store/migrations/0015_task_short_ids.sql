-- Short, stable task ids per team (`RED-12`): each team's key and the number its
-- next task gets, and each task's short id, given in the transaction that creates it and
-- never changed. `team_id` is '' for the tasks of no team. Tasks already on the board get
-- theirs, in creation order per team, when the store first opens the migrated database
-- (`Store::number_unnumbered_tasks`: the key is derived from the team's name in Rust).
CREATE TABLE task_keys (
    team_id      TEXT PRIMARY KEY,
    key          TEXT NOT NULL UNIQUE,
    next_number  INTEGER NOT NULL
);
ALTER TABLE tasks ADD COLUMN short_id TEXT;
CREATE UNIQUE INDEX tasks_by_short_id ON tasks(short_id);
