//! bm25 as FTS5 computes it: the constants every ranker of memory's full text shares (the
//! in-memory index, FTS5's own ranking, PostgreSQL's term statistics), so all three order
//! hits alike.

/// bm25's column weights (title, content, tags): a title match weighs double.
pub(crate) const COLUMN_WEIGHTS: [u32; 3] = [2, 1, 1];
/// bm25's term-frequency saturation (FTS5's constant).
pub(crate) const K1: f64 = 1.2;
/// bm25's length normalisation (FTS5's constant).
pub(crate) const B: f64 = 0.75;

/// A phrase's idf as FTS5 computes it: over every fact (`rows`), `hits` of them matching,
/// floored at 1e-6 so a phrase in over half the facts still counts a little.
pub(crate) fn idf(rows: f64, hits: f64) -> f64 {
    let idf = ((rows - hits + 0.5) / (hits + 0.5)).ln();
    if idf <= 0.0 { 1e-6 } else { idf }
}

/// One phrase's share of a fact's score: its `idf` times its saturated weighted frequency
/// in a fact of `length` tokens, the corpus' facts averaging `average_length`.
pub(crate) fn share(idf: f64, freq: f64, length: f64, average_length: f64) -> f64 {
    idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * length / average_length)))
}

/// The best `k` facts from `shares` (a fact's `seq` and one phrase's share, pushed phrase by
/// phrase in query order), best first. A fact's shares are added in phrase order, as FTS5
/// adds them (to its last bit); ties: oldest fact first, as SQLite's sort of FTS5's
/// matches (in rowid order) leaves them.
pub(crate) fn best(mut shares: Vec<(i64, f64)>, k: usize) -> Vec<(i64, f64)> {
    if k == 0 {
        return Vec::new();
    }
    // A stable sort keeps each fact's shares in phrase order.
    shares.sort_by_key(|&(seq, _)| seq);
    let mut ranked: Vec<(i64, f64)> = Vec::new();
    for (seq, share) in shares {
        match ranked.last_mut() {
            Some((last, score)) if *last == seq => *score += share,
            _ => ranked.push((seq, share)),
        }
    }
    let order = |a: &(i64, f64), b: &(i64, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if ranked.len() > k {
        ranked.select_nth_unstable_by(k - 1, order);
        ranked.truncate(k);
    }
    ranked.sort_unstable_by(order);
    ranked
}

/// bm25 scores (positive, higher is better) as relevance in 0..1.
pub(crate) fn relevance(ranked: Vec<(crate::Fact, f64)>) -> Vec<(crate::Fact, f64)> {
    ranked
        .into_iter()
        .map(|(fact, score)| (fact, score / (1.0 + score)))
        .collect()
}
