-- Team chat rooms: per-room contiguous sequence numbers assigned inside the write transaction.
CREATE TABLE team_chat (
    id          TEXT PRIMARY KEY,
    room_id     TEXT NOT NULL,
    seq         INTEGER NOT NULL CHECK (seq >= 1),
    author      TEXT NOT NULL,
    body        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('peer','user','system')),
    created_at  INTEGER NOT NULL,
    UNIQUE (room_id, seq)
);
