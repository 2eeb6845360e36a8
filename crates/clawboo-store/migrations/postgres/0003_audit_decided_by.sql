-- Who decided a tool call, on both of its audit rows (SQLite's migration 0012): `policy`,
-- `allow_always`, the approval's own `decided_by` (`elicitation`, `cli`, `api`) or
-- `expired`. Rows written before this are left NULL.
ALTER TABLE tool_call_audit ADD COLUMN decided_by TEXT;

-- One decision row and at most one result row per call, as on SQLite.
CREATE UNIQUE INDEX tool_call_audit_one_per_phase ON tool_call_audit(call_id, phase);
