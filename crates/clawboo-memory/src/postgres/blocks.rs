//! The encoding of one block of full-text postings on PostgreSQL (a row of
//! `memory_fts_blocks`, see [`super::fts`]), in two columns: `postings` and `places`,
//! so a one-term query word, which needs no places, reads neither them nor their bytes.
//!
//! `postings` holds, for each posting in ascending `seq`, unsigned LEB128 varints: the gap
//! from the previous posting's `seq` (from 0 for the first), the weighted frequency and the
//! fact's length in tokens. `places` holds, for each posting in the same order, the number
//! of places, then each place's gap from the one before (from 0). The varints are prost's
//! (protobuf's own encoding), rather than a hand-written one.

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

/// A block's two columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EncodedBlock {
    pub(super) postings: Vec<u8>,
    pub(super) places: Vec<u8>,
}

/// A block's bytes could not be read: written by something other than [`encode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MalformedBlock;

/// The columns of `postings`, which must be in ascending `seq` with ascending places.
pub(super) fn encode(postings: &[BlockPosting]) -> EncodedBlock {
    let mut block = EncodedBlock {
        postings: Vec::with_capacity(postings.len() * 4),
        places: Vec::with_capacity(postings.len() * 4),
    };
    let mut previous = 0i64;
    for posting in postings {
        encode_varint(gap(previous, posting.seq), &mut block.postings);
        previous = posting.seq;
        encode_varint(u64::from(posting.freq), &mut block.postings);
        encode_varint(u64::from(posting.length), &mut block.postings);
        encode_varint(posting.positions.len() as u64, &mut block.places);
        let mut place = 0i64;
        for &next in &posting.positions {
            encode_varint(gap(place, next), &mut block.places);
            place = next;
        }
    }
    block
}

/// The postings of a block made by [`encode`], with their places when `places` is given
/// (a one-term query word needs none).
pub(super) fn decode(
    mut postings: &[u8],
    places: Option<&[u8]>,
) -> Result<Vec<BlockPosting>, MalformedBlock> {
    let next = |bytes: &mut &[u8]| decode_varint(bytes).map_err(|_| MalformedBlock);
    let mut places = places;
    let mut out = Vec::new();
    let mut seq = 0i64;
    while !postings.is_empty() {
        seq = add(seq, next(&mut postings)?)?;
        let freq = u32::try_from(next(&mut postings)?).map_err(|_| MalformedBlock)?;
        let length = u32::try_from(next(&mut postings)?).map_err(|_| MalformedBlock)?;
        let mut positions = Vec::new();
        if let Some(places) = places.as_mut() {
            let count = next(places)?;
            let mut place = 0i64;
            for _ in 0..count {
                place = add(place, next(places)?)?;
                positions.push(place);
            }
        }
        out.push(BlockPosting {
            seq,
            freq,
            length,
            positions,
        });
    }
    if places.is_some_and(|rest| !rest.is_empty()) {
        return Err(MalformedBlock);
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
        let block = encode(&postings);
        assert_eq!(
            decode(&block.postings, Some(&block.places)),
            Ok(postings.clone())
        );
        let bare: Vec<BlockPosting> = postings
            .into_iter()
            .map(|p| BlockPosting {
                positions: Vec::new(),
                ..p
            })
            .collect();
        assert_eq!(decode(&block.postings, None), Ok(bare));
        assert_eq!(decode(&[], Some(&[])), Ok(Vec::new()));
    }

    #[test]
    fn truncated_mismatched_or_overflowing_bytes_are_refused() {
        let block = encode(&[posting(5, 1, 3, vec![position(1, 2)])]);
        for cut in 1..block.postings.len() {
            assert_eq!(
                decode(&block.postings[..cut], None),
                Err(MalformedBlock),
                "cut {cut}"
            );
        }
        for cut in 0..block.places.len() {
            assert_eq!(
                decode(&block.postings, Some(&block.places[..cut])),
                Err(MalformedBlock),
                "places cut {cut}"
            );
        }
        let mut longer = block.places.clone();
        longer.push(0);
        assert_eq!(decode(&block.postings, Some(&longer)), Err(MalformedBlock));
        let mut huge = Vec::new();
        encode_varint(u64::MAX, &mut huge);
        assert_eq!(decode(&huge, None), Err(MalformedBlock));
    }
}
