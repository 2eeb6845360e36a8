//! The encoding of one block of full-text postings on PostgreSQL
//! (`memory_fts_blocks.postings`, see [`super::fts`]).
//!
//! Postings come in ascending `seq`, each as unsigned LEB128 varints: the gap from the
//! previous posting's `seq` (from 0 for the first), the weighted frequency, the fact's
//! length in tokens, the number of places, then each place's gap from the one before (from
//! 0). The varints are prost's (protobuf's own encoding), rather than a hand-written one.

use prost::encoding::{decode_varint, encode_varint};

/// One fact's occurrences of one term, as a block holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BlockPosting {
    /// The fact's `seq`.
    pub(super) seq: i64,
    /// Occurrences, weighted by column.
    pub(super) freq: u32,
    /// The fact's length in tokens, all columns.
    pub(super) length: u32,
    /// Every place the term occurs ([`crate::terms::position`]), ascending; left empty
    /// when decoded without places.
    pub(super) positions: Vec<i64>,
}

/// A block's bytes could not be read: written by something other than [`encode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MalformedBlock;

/// The bytes of `postings`, which must be in ascending `seq` with ascending places.
pub(super) fn encode(postings: &[BlockPosting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(postings.len() * 6);
    let mut previous = 0i64;
    for posting in postings {
        encode_varint(gap(previous, posting.seq), &mut out);
        previous = posting.seq;
        encode_varint(u64::from(posting.freq), &mut out);
        encode_varint(u64::from(posting.length), &mut out);
        encode_varint(posting.positions.len() as u64, &mut out);
        let mut place = 0i64;
        for &next in &posting.positions {
            encode_varint(gap(place, next), &mut out);
            place = next;
        }
    }
    out
}

/// The postings of a block made by [`encode`], places included only when `positions`
/// (a one-term query word needs none).
pub(super) fn decode(
    mut bytes: &[u8],
    positions: bool,
) -> Result<Vec<BlockPosting>, MalformedBlock> {
    let mut out = Vec::new();
    let mut seq = 0i64;
    let next = |bytes: &mut &[u8]| decode_varint(bytes).map_err(|_| MalformedBlock);
    while !bytes.is_empty() {
        seq = add(seq, next(&mut bytes)?)?;
        let freq = u32::try_from(next(&mut bytes)?).map_err(|_| MalformedBlock)?;
        let length = u32::try_from(next(&mut bytes)?).map_err(|_| MalformedBlock)?;
        let places = next(&mut bytes)?;
        let mut kept = Vec::new();
        let mut place = 0i64;
        for _ in 0..places {
            place = add(place, next(&mut bytes)?)?;
            if positions {
                kept.push(place);
            }
        }
        out.push(BlockPosting {
            seq,
            freq,
            length,
            positions: kept,
        });
    }
    Ok(out)
}

/// The step from `from` up to `to` (ascending numbers; a step down is written as 0 and
/// caught by the tests of whoever sorted them).
fn gap(from: i64, to: i64) -> u64 {
    u64::try_from(to.saturating_sub(from)).unwrap_or(0)
}

fn add(base: i64, step: u64) -> Result<i64, MalformedBlock> {
    i64::try_from(step)
        .ok()
        .and_then(|step| base.checked_add(step))
        .ok_or(MalformedBlock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terms::position;

    fn posting(seq: i64, freq: u32, length: u32, positions: Vec<i64>) -> BlockPosting {
        BlockPosting {
            seq,
            freq,
            length,
            positions,
        }
    }

    #[test]
    fn a_block_reads_back_as_written() {
        let postings = vec![
            posting(1, 2, 9, vec![position(0, 0)]),
            posting(
                7,
                3,
                40,
                vec![position(1, 3), position(1, 17), position(2, 0)],
            ),
            posting(1 << 40, 1, u32::MAX, vec![position(2, 5)]),
        ];
        let bytes = encode(&postings);
        assert_eq!(decode(&bytes, true), Ok(postings.clone()));
        let bare: Vec<BlockPosting> = postings
            .into_iter()
            .map(|p| BlockPosting {
                positions: Vec::new(),
                ..p
            })
            .collect();
        assert_eq!(decode(&bytes, false), Ok(bare));
        assert_eq!(decode(&[], true), Ok(Vec::new()));
    }

    #[test]
    fn truncated_or_overflowing_bytes_are_refused() {
        let bytes = encode(&[posting(5, 1, 3, vec![position(1, 2)])]);
        for cut in 1..bytes.len() {
            assert_eq!(
                decode(&bytes[..cut], true),
                Err(MalformedBlock),
                "cut {cut}"
            );
        }
        let mut huge = Vec::new();
        encode_varint(u64::MAX, &mut huge);
        assert_eq!(decode(&huge, false), Err(MalformedBlock));
    }
}
