-- Liveness belongs to (team, agent) (SPEC §16): an agent id active on one team says nothing
-- of the same id on another. `team_key` is the bound team, '' for a caller bound to none.
-- The `agents` table stays the roster (names, runtimes, the team an agent was registered
-- or first seen on).
CREATE TABLE agent_presence (
    agent_id      TEXT NOT NULL,
    team_key      TEXT NOT NULL,
    runtime       TEXT,
    last_seen_at  INTEGER NOT NULL,
    PRIMARY KEY (agent_id, team_key)
);
INSERT INTO agent_presence(agent_id, team_key, runtime, last_seen_at)
    SELECT id, COALESCE(team_id, ''), runtime, last_seen_at FROM agents
    WHERE last_seen_at IS NOT NULL;
ALTER TABLE agents DROP COLUMN last_seen_at;

-- Renewal reads a holder's leases on one team.
DROP INDEX tasks_by_holder;
CREATE INDEX tasks_by_holder ON tasks(assignee_agent_id, team_id, lease_expires_at)
    WHERE status = 'in_progress';
