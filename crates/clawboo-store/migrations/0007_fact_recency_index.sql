-- One index orders facts by time and carries their scope, in place of two.
--
-- `memory_facts_recent` was declared descending, so every new fact went in at its left edge,
-- where SQLite splits pages in half and never fills them again; and `memory_facts_team`
-- (team, time) took each save to the page of its team, one more page per team a commit
-- touches. A group commit of eight saves across five teams wrote 33 WAL pages, 7.4 of them
-- for the team index and 2.8 for the recent one. An ascending index serves the newest-first
-- scans just as well (SQLite reads an index backwards), and appends at its right edge.
--
-- The team index did not help reads either: a browse of "this team or global" merged both
-- ranges and sorted every fact in them (35 ms on 100k facts) and a reindex batch did the
-- same for 64 rows (75 ms). Scanning this index newest first tests each fact's scope in the
-- index itself, reads only the facts it keeps, and stops at the limit (0.2 ms for both;
-- 11-15 ms when the scope holds almost none of 100k facts). `seq` is named after
-- `created_at` so that the index's order is the browse order (time, then seq).
DROP INDEX memory_facts_team;
DROP INDEX memory_facts_recent;
CREATE INDEX memory_facts_recent ON memory_facts(created_at, seq, team_id, agent_id, tenant_id);
