//! bm25 as FTS5 computes it: the constants every ranker of memory's full text shares (the
//! in-memory index, FTS5's own ranking, PostgreSQL's term statistics), so all three order
//! hits alike.

/// bm25's column weights (title, content, tags): a title match weighs double.
pub(crate) const COLUMN_WEIGHTS: [u32; 3] = [2, 1, 1];
/// bm25's term-frequency saturation (FTS5's constant).
pub(crate) const K1: f64 = 1.2;
/// bm25's length normalisation (FTS5's constant).
pub(crate) const B: f64 = 0.75;
