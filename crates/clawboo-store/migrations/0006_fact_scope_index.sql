-- Who may see each fact, apart from the wide fact rows. A full-text search tests the scope of
-- every match before ranking keeps the best few; read from `memory_facts` itself, each test
-- landed on a row that carries the fact's 1.5 KB embedding (two rows a page), and that seek
-- was a fifth of a search. Through this covering index the test reads small index pages,
-- and only the few facts kept are read whole.
CREATE INDEX memory_facts_scope ON memory_facts(seq, team_id, agent_id, tenant_id);
