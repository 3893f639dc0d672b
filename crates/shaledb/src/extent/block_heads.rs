//! Key heads: the first 8 bytes of each restart point's user key, as one
//! contiguous array of big-endian `u64`s, built in memory when a block with
//! many restart points is decoded (the index block of an extent: one restart
//! per data block). Not stored on disk: the format is unchanged.
//!
//! Why: without heads, each step of the restart-point binary search reads a
//! restart offset (one cache line) and then the key it points at (another,
//! scattered over the block), so a search over 512 index entries touches
//! ~18 lines. With heads a step reads one `u64` of a dense array (512
//! heads = 64 lines, the first steps always hitting the same few), and the
//! full key is only read when two heads are equal.
//!
//! Order argument: with `head(k)` = the user key's first 8 bytes padded with
//! zero bytes, read big-endian, `head(a) < head(b)` implies user key
//! `a < b` (if they differ at byte `i`, either both bytes are real and
//! decide, or `a`'s byte is padding — then `a` is a proper prefix of `b`,
//! which sorts first; `b`'s cannot be padding since padding 0 is not greater
//! than a real byte). Internal keys order by user key first, so a strict head
//! order decides the internal order and equal heads fall back to the full
//! comparison. Example: `"apple"` → `0x6170706c65000000`, `"apples"` →
//! `0x6170706c65730000`: the heads decide; `"applesauce1"` and
//! `"applesauce2"` share the head `"applesau"` and are compared in full.
//!
//! Heads start after the block's common prefix: the bytes the restart keys
//! of the block share (the common prefix of its first and next-to-last user
//! keys, which every key between them shares too). The last restart key is
//! left out of it: in an index block it is the short successor of the last
//! key (`0x01` for keys starting `0x00 0x00 ...`), which shares nothing.
//! If it does not start with the prefix it sorts after every key that does
//! (it is greater than one that does), so it gets no head and the search
//! compares it in full, only for a target placed after the prefix. Keys of one table or
//! index share their leading bytes (an index id, the high bytes of an
//! integer key), so heads of the first 8 bytes would all be equal there and
//! every step would compare full keys. A target is first placed against
//! that prefix: one that sorts before it is below every key, one after it
//! above every key, and one that starts with it gets its head from the
//! bytes after it; with the prefix equal, the order argument above applies
//! to what follows. Example: restart keys `t1/000017`, `t1/000123`,
//! `t1/000999` share `t1/000`; their heads are those of `017`, `123`,
//! `999`; target `t0/5` is below all, `t2` above all, `t1/000500` gets the
//! head of `500`.
//!
//! The binary search runs on heads alone until the candidate range is one
//! cache line (8 heads); that line is then counted with SIMD compares where
//! the CPU has them (AVX2, detected at run time) or a portable loop — the
//! two give the same count, tested by forcing the portable path.

use crate::types::TRAILER_LEN;

/// Blocks with fewer restart points get no heads: their search is short
/// anyway, and data blocks (a few restarts each) are decoded on every cache
/// miss, where building heads would cost more than it saves.
pub(crate) const MIN_RESTARTS_FOR_HEADS: usize = 32;

/// The user key of an internal key; `None` if it has no full trailer (such
/// a key is malformed and is compared in full, which reports it).
#[inline]
fn user_key(internal_key: &[u8]) -> Option<&[u8]> {
    internal_key.get(..internal_key.len().checked_sub(TRAILER_LEN)?)
}

/// The head of an internal key (no prefix skipped); `None` as [`user_key`].
#[cfg(test)]
pub(crate) fn head_of(internal_key: &[u8]) -> Option<u64> {
    user_key(internal_key).map(user_head)
}

/// The head of (the rest of) a user key: its first 8 bytes, zero-padded,
/// big-endian.
#[inline]
fn user_head(user: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let take = user.len().min(8);
    if let (Some(dst), Some(src)) = (buf.get_mut(..take), user.get(..take)) {
        dst.copy_from_slice(src);
    }
    u64::from_be_bytes(buf)
}

/// Where a seek target stands against keys that all start with `prefix`
/// (see the module comment).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Below every key.
    Before,
    /// Above every key.
    After,
    /// Starts with the prefix; the head of the bytes after it.
    Head(u64),
}

/// Places `target` (an internal key) against `prefix`; `None` if it is
/// malformed.
#[inline]
pub(crate) fn place(target: &[u8], prefix: &[u8]) -> Option<Placement> {
    let user = user_key(target)?;
    let k = prefix.len().min(user.len());
    Some(match user.get(..k)?.cmp(prefix.get(..k)?) {
        std::cmp::Ordering::Less => Placement::Before,
        std::cmp::Ordering::Greater => Placement::After,
        // A proper prefix of the prefix sorts before every key.
        std::cmp::Ordering::Equal if user.len() < prefix.len() => Placement::Before,
        std::cmp::Ordering::Equal => Placement::Head(user_head(user.get(prefix.len()..)?)),
    })
}

/// Whether the user key of `internal_key` starts with `prefix` (`false` for
/// a malformed or missing key).
pub(crate) fn starts_with(internal_key: Option<&[u8]>, prefix: &[u8]) -> bool {
    internal_key
        .and_then(user_key)
        .is_some_and(|u| u.starts_with(prefix))
}

/// The common prefix of the user keys of `first` and `last` (internal keys,
/// the lowest and the next-to-highest restart keys of a block); `None` if
/// either is malformed.
pub(crate) fn common_prefix<'a>(first: &'a [u8], last: &[u8]) -> Option<&'a [u8]> {
    let (a, b) = (user_key(first)?, user_key(last)?);
    let n = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    a.get(..n)
}

/// Number of heads in `heads` strictly less than `target` (the slice is
/// sorted, non-decreasing). Uses AVX2 when available unless `portable`.
#[inline]
pub(crate) fn count_less(heads: &[u64], target: u64, portable: bool) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if !portable && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 support was just detected on this CPU.
            return unsafe { count_less_avx2(heads, target) };
        }
    }
    let _ = portable;
    count_less_portable(heads, target)
}

/// The portable loop (branch-free: the compiler turns it into adds).
#[inline]
pub(crate) fn count_less_portable(heads: &[u64], target: u64) -> usize {
    heads.iter().map(|&h| usize::from(h < target)).sum()
}

/// AVX2 version: 4 heads per compare. AVX2 has only a signed 64-bit
/// compare, so both sides are flipped at the sign bit first (which maps
/// unsigned order onto signed order).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn count_less_avx2(heads: &[u64], target: u64) -> usize {
    use std::arch::x86_64::{
        __m256i, _mm256_castsi256_pd, _mm256_cmpgt_epi64, _mm256_loadu_si256, _mm256_movemask_pd,
        _mm256_set1_epi64x, _mm256_xor_si256,
    };
    const FLIP: i64 = i64::MIN;
    let flip = _mm256_set1_epi64x(FLIP);
    let t = _mm256_set1_epi64x(i64::from_ne_bytes(target.to_ne_bytes()) ^ FLIP);
    let mut chunks = heads.chunks_exact(4);
    let mut n = 0usize;
    for c in &mut chunks {
        // SAFETY: `c` is exactly 4 u64 = 32 readable bytes; the load is
        // unaligned (`loadu`), so any address is fine.
        let v = unsafe { _mm256_loadu_si256(c.as_ptr().cast::<__m256i>()) };
        let v = _mm256_xor_si256(v, flip);
        // Lanes where target > head, i.e. head < target.
        let lt = _mm256_cmpgt_epi64(t, v);
        let mask = _mm256_movemask_pd(_mm256_castsi256_pd(lt));
        n += mask.count_ones() as usize;
    }
    n + count_less_portable(chunks.remainder(), target)
}

/// Builds the heads of the given restart keys, after the `skip` bytes of
/// their common prefix; `None` if any key has no head (malformed, or not
/// that long: the search then compares full keys and reports it).
pub(crate) fn build<'a>(
    keys: impl Iterator<Item = Option<&'a [u8]>>,
    skip: usize,
) -> Option<Box<[u64]>> {
    keys.map(|k| k.and_then(user_key)?.get(skip..).map(user_head))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::types::{make_internal_key, ValueKind};
    use proptest::prelude::*;

    fn ik(k: &[u8]) -> Vec<u8> {
        make_internal_key(k, 5, ValueKind::Put)
    }

    #[test]
    fn documented_heads() {
        assert_eq!(head_of(&ik(b"apple")), Some(0x6170_706c_6500_0000));
        assert_eq!(head_of(&ik(b"apples")), Some(0x6170_706c_6573_0000));
        assert_eq!(head_of(&ik(b"applesauce1")), head_of(&ik(b"applesauce2")));
        assert_eq!(head_of(&ik(b"")), Some(0));
        assert_eq!(head_of(b"short"), None);
    }

    #[test]
    fn documented_placement() {
        let keys = [ik(b"t1/000017"), ik(b"t1/000123"), ik(b"t1/000999")];
        let prefix = common_prefix(&keys[0], &keys[2]).unwrap();
        assert_eq!(prefix, b"t1/000");
        let heads = build(keys.iter().map(|k| Some(&k[..])), prefix.len()).unwrap();
        assert_eq!(heads[1], u64::from_be_bytes(*b"123\0\0\0\0\0"));
        assert_eq!(place(&ik(b"t0/5"), prefix), Some(Placement::Before));
        assert_eq!(place(&ik(b"t1/"), prefix), Some(Placement::Before));
        assert_eq!(place(&ik(b"t2"), prefix), Some(Placement::After));
        assert_eq!(
            place(&ik(b"t1/000500"), prefix),
            Some(Placement::Head(u64::from_be_bytes(*b"500\0\0\0\0\0")))
        );
        assert_eq!(place(b"short", prefix), None);
    }

    proptest! {
        /// A strict head order always agrees with the user-key order.
        #[test]
        fn strict_head_order_implies_key_order(
            a in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..12),
            b in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..12),
        ) {
            let (ha, hb) = (head_of(&ik(&a)).unwrap(), head_of(&ik(&b)).unwrap());
            if ha != hb {
                prop_assert_eq!(ha.cmp(&hb), a.cmp(&b));
            }
        }

        /// SIMD and portable counts agree with a model on sorted heads,
        /// including values at the sign bit where a signed compare would err.
        #[test]
        fn count_less_matches_model(
            mut heads in proptest::collection::vec(
                prop_oneof![any::<u64>(), Just(0u64), Just(u64::MAX), Just(1u64 << 63), Just((1u64 << 63) - 1)],
                0..40),
            target in prop_oneof![any::<u64>(), Just(0u64), Just(u64::MAX), Just(1u64 << 63)],
            pick in any::<prop::sample::Index>(),
        ) {
            heads.sort_unstable();
            let target = if heads.is_empty() { target } else { [target, heads[pick.index(heads.len())]][usize::from(target % 2 == 0)] };
            let model = heads.iter().filter(|&&h| h < target).count();
            prop_assert_eq!(count_less(&heads, target, true), model);
            prop_assert_eq!(count_less(&heads, target, false), model);
        }

        /// `BlockIter::seek` lands on the first key `>= target` of a
        /// sorted-vector model, with heads (SIMD and portable count) and
        /// without. Keys share long prefixes so heads tie often, and every
        /// key of a block starts with `prefix` (the bytes heads skip); a
        /// target does or does not (then it sorts before or after them all).
        #[test]
        fn block_seek_matches_model_in_every_mode(
            prefix in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0u8), Just(0xffu8)], 0..6),
            raw in proptest::collection::btree_set(
                (proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0u8), Just(0xffu8)], 0..12), 0u64..4),
                0..160),
            targets in proptest::collection::vec(
                (proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0u8), Just(0xffu8)], 0..12), 0u64..5, any::<bool>()),
                1..24),
            interval in 1usize..4,
            successor in any::<bool>(),
        ) {
            use crate::extent::block::{Block, BlockIter};
            use crate::extent::block_builder::BlockBuilder;
            use crate::iter::InternalIterator;
            use crate::types::compare_internal_keys;
            let mut keys: Vec<Vec<u8>> = raw
                .iter()
                .map(|(k, s)| make_internal_key(&[&prefix[..], k].concat(), *s, ValueKind::Put))
                .collect();
            // An index block's last key: a short successor of the prefix,
            // which does not start with it.
            if let Some(i) = prefix.iter().position(|&c| c < 0xff).filter(|_| successor) {
                let mut short = prefix[..i].to_vec();
                short.push(prefix[i] + 1);
                keys.push(make_internal_key(&short, 0, ValueKind::Put));
            }
            keys.sort_by(|a, b| compare_internal_keys(a, b));
            let mut b = BlockBuilder::new(interval);
            for (i, k) in keys.iter().enumerate() {
                b.add(k, &i.to_le_bytes()).unwrap();
            }
            let bytes = b.finish().to_vec();
            let restarts = keys.len().div_ceil(interval).max(1);
            for (heads, portable) in [(true, false), (true, true), (false, false)] {
                let mut block = Block::new(bytes.clone()).unwrap();
                prop_assert_eq!(block.has_heads(), restarts >= MIN_RESTARTS_FOR_HEADS);
                block.set_search_mode(heads, portable);
                let mut it = BlockIter::new(&block, std::path::Path::new("t"), 0);
                for (tk, ts, prefixed) in &targets {
                    let tk = if *prefixed { [&prefix[..], tk].concat() } else { tk.clone() };
                    let t = make_internal_key(&tk, *ts, ValueKind::Put);
                    // The heads' count of restart keys below the target is
                    // exact (a low count would only slow the scan down).
                    if let Some(below) = block.restarts_below(&t) {
                        let model = keys
                            .iter()
                            .step_by(interval)
                            .filter(|k| compare_internal_keys(k, &t).is_lt())
                            .count();
                        prop_assert_eq!(below, Ok(model));
                    }
                    it.seek(&t).unwrap();
                    let want = keys.iter().position(|k| compare_internal_keys(k, &t).is_ge());
                    match want {
                        Some(i) => {
                            prop_assert!(it.valid());
                            prop_assert_eq!(it.key(), &keys[i][..]);
                            prop_assert_eq!(it.value(), &i.to_le_bytes()[..]);
                        }
                        None => prop_assert!(!it.valid()),
                    }
                }
            }
        }
    }
}
