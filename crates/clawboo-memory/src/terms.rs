//! The terms of facts and queries as FTS5's `porter unicode61` tokenizer makes them, made
//! in Rust ([`super::fts5_tokenizer`]): the same terms as SQLite's `memory_facts_fts`, for
//! PostgreSQL's term statistics and SQLite's in-memory index alike, so both rank as FTS5
//! does, with no SQLite engine in a PostgreSQL deployment.

use std::collections::{BTreeMap, HashMap};

use super::bm25::COLUMN_WEIGHTS;
use super::fts5_tokenizer::tokenize;

/// One fact's occurrences of one term.
#[derive(Debug, Clone, Copy)]
pub(super) struct Posting {
    /// The fact's number (its place in the batch or index it belongs to).
    pub(super) doc: u32,
    /// Occurrences, weighted by [`COLUMN_WEIGHTS`].
    pub(super) freq: u32,
}

/// Postings by term.
pub(super) type Postings = HashMap<String, Vec<Posting>>;

/// The terms of one fact, as PostgreSQL's term statistics store them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct DocTerms {
    /// Tokens in all columns (bm25's document length).
    pub(super) length: u32,
    /// Each term: occurrences weighted by [`COLUMN_WEIGHTS`], and every place it occurs
    /// ([`position`]), ascending.
    pub(super) terms: BTreeMap<String, (u32, Vec<i64>)>,
}

impl DocTerms {
    /// The terms of a fact's columns (title, content, tags as stored).
    pub(super) fn of(columns: [&str; 3]) -> DocTerms {
        let mut doc = DocTerms::default();
        for (column, text) in columns.into_iter().enumerate() {
            tokenize(text, |term, offset| {
                let entry = match doc.terms.get_mut(term) {
                    Some(entry) => entry,
                    None => doc.terms.entry(term.to_owned()).or_default(),
                };
                entry.0 += COLUMN_WEIGHTS[column];
                // Offsets ascend within a column and columns are visited in order, so
                // every term's places come out ascending.
                entry.1.push(position(column, offset as i64));
                doc.length += 1;
            });
        }
        doc
    }
}

/// A token's place: its column in the high half, its offset in the column in the low half,
/// so that the next token of the same column is the next number.
pub(super) fn position(column: usize, offset: i64) -> i64 {
    ((column as i64) << 32) | offset
}

/// The terms FTS5 makes of a query word, in order: one for most words; several make a
/// phrase FTS5 matches as consecutive terms; none match nothing.
pub(super) fn phrase(word: &str) -> Vec<String> {
    let mut terms = Vec::new();
    tokenize(word, |term, _| terms.push(term.to_owned()));
    terms
}

/// Facts' (title, content, tags) as the in-memory index takes them: postings by term
/// (weighted, facts numbered in order from 0) and each fact's length in tokens.
pub(super) fn postings<'t>(facts: impl Iterator<Item = &'t [String; 3]>) -> (Postings, Vec<u32>) {
    let mut postings = Postings::new();
    let mut lengths = Vec::new();
    for (doc, [title, content, tags]) in facts.enumerate() {
        let terms = DocTerms::of([title, content, tags]);
        for (term, (freq, _)) in terms.terms {
            postings.entry(term).or_default().push(Posting {
                doc: doc as u32,
                freq,
            });
        }
        lengths.push(terms.length);
    }
    (postings, lengths)
}
