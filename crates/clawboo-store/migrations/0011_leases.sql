-- Every claim is a lease (SPEC §12). `lease_expires_at` is set while a claimed task is
-- `in_progress` under a lease; `claim_token` grows by one at every claim over the task's
-- life (a fencing token); `reclaimed_at`/`reclaimed_from` say when and from whom an expired
-- lease was taken back, for the board's marker.
ALTER TABLE tasks ADD COLUMN lease_expires_at INTEGER;
ALTER TABLE tasks ADD COLUMN claim_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN reclaimed_at INTEGER;
ALTER TABLE tasks ADD COLUMN reclaimed_from TEXT;
-- The expiry rule and the renewal read only leased rows: the sweep by expiry, the renewal
-- by holder.
CREATE INDEX tasks_by_lease ON tasks(lease_expires_at) WHERE status = 'in_progress';
CREATE INDEX tasks_by_holder ON tasks(assignee_agent_id, lease_expires_at) WHERE status = 'in_progress';

-- An agent's last tool call, whichever server it went to.
ALTER TABLE agents ADD COLUMN last_seen_at INTEGER;
