-- Who decided a tool call, on both of its audit rows: `policy` (the pipeline's own checks),
-- `allow_always` (a remembered grant), the approval's own `decided_by` (`elicitation`,
-- `cli`, `api`) or `expired`. Rows written before this are left NULL: who decided them was
-- not recorded.
ALTER TABLE tool_call_audit ADD COLUMN decided_by TEXT;

-- A call has one decision row and at most one result row. A multi-round-trip call's later
-- round reuses its call id, so a replayed round that raced past the broker's check fails
-- here rather than running the tool twice.
CREATE UNIQUE INDEX tool_call_audit_one_per_phase ON tool_call_audit(call_id, phase);
