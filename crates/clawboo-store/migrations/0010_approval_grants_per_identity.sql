-- `allow_always` was remembered per (tool, agent) and so let the same agent name through in
-- every team. It is now remembered per (tool, bound agent, team, tenant), '' standing for a
-- binding without a team or tenant. An old grant cannot say which team and tenant it was
-- given to, so the old grants are dropped: their agents are asked once more.
DROP TABLE tool_approval_grants;
CREATE TABLE tool_approval_grants (
    tool_name    TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    team_id      TEXT NOT NULL,
    tenant_id    TEXT NOT NULL,
    approval_id  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tool_name, agent_id, team_id, tenant_id)
) WITHOUT ROWID;

-- The tenant of the call that asked, so an `allow_always` on it is remembered for it.
ALTER TABLE tool_call_approvals ADD COLUMN tenant_id TEXT;
