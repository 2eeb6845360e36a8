-- The board's order (`priority DESC, created_at, id`) as an index, so a page of
-- `list_tasks` is a range scan that starts at its cursor and stops after the page: without
-- it every page sorted the whole board. Claims and status moves do not touch it (none of
-- its columns change); a create adds one entry.
CREATE INDEX tasks_by_board_order ON tasks(priority DESC, created_at, id);
