//! A decoded block in memory ([`Block`]) and a cursor over its entries
//! ([`BlockIter`]); format in `docs/format-extent.md` §4.
//!
//! Contents are the bytes written by [`super::block_builder::BlockBuilder`]
//! (after decompression): entries, then the restart array. [`Block::new`]
//! validates the restart array once (count, bounds, strictly increasing
//! offsets) so that lookups can trust it; entry bytes are still decoded with
//! checked access and a malformed entry is `Error::Corruption`, never a panic.
//!
//! Seeking: binary search over the restart points (their keys are stored
//! whole, so no key is rebuilt during the search), then a linear scan of at
//! most `restart_interval` entries. Example: with restarts at `a, m, t` and
//! target `p`, the search picks the `m` run and scans `m, n, p`. A block with
//! many restart points (an index block) gets in-memory key heads when it is
//! decoded, and the search runs on those (`block_heads.rs`).
//!
//! `prev` has no back links: it goes back to the restart point before the
//! current entry and scans forward, as in LevelDB.
//!
//! Keys are internal keys ordered by [`compare_internal_keys`].

use super::block_heads::{self, Placement, MIN_RESTARTS_FOR_HEADS};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::types::{compare_internal_keys, TRAILER_LEN};
use crate::util::coding::get_varint32;
use std::cmp::Ordering;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

/// Bytewise comparison, inlined: keys are usually short, where a call to
/// `memcmp` costs more than the comparison itself.
#[inline]
pub(crate) fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() > 32 && b.len() > 32 {
        return a.cmp(b);
    }
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        let x = x.try_into().map(u64::from_be_bytes).unwrap_or(0);
        let y = y.try_into().map(u64::from_be_bytes).unwrap_or(0);
        if x != y {
            return x.cmp(&y);
        }
    }
    // Both prefixes of whole words are equal; compare the rest bytewise.
    let n = (a.len().min(b.len()) / 8) * 8;
    let (ra, rb) = (
        a.get(n..).unwrap_or_default(),
        b.get(n..).unwrap_or_default(),
    );
    for (x, y) in ra.iter().zip(rb) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// [`compare_internal_keys`] with an inlined user-key comparison.
#[inline]
pub(crate) fn cmp_internal(a: &[u8], b: &[u8]) -> Ordering {
    let (Some(sa), Some(sb)) = (
        a.len().checked_sub(TRAILER_LEN),
        b.len().checked_sub(TRAILER_LEN),
    ) else {
        return compare_internal_keys(a, b);
    };
    let (ua, ta) = a.split_at(sa);
    let (ub, tb) = b.split_at(sb);
    match cmp_bytes(ua, ub) {
        Ordering::Equal => {
            let ta = ta.try_into().map(u64::from_le_bytes).unwrap_or(0);
            let tb = tb.try_into().map(u64::from_le_bytes).unwrap_or(0);
            tb.cmp(&ta)
        }
        o => o,
    }
}

/// Immutable, decoded contents of one block, shared through the block cache.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Offset of the restart array: entries occupy `data[..restart_offset]`.
    restart_offset: usize,
    /// Number of restart points (0 for a raw, entry-less block such as a filter).
    num_restarts: usize,
    /// Heads of the restart keys (`block_heads.rs`), one per restart point
    /// that starts with `head_prefix` (all of them, or all but the last), if
    /// the block has at least `MIN_RESTARTS_FOR_HEADS` of them.
    heads: Option<Box<[u64]>>,
    /// The prefix every restart key shares, which the heads start after
    /// (empty without heads).
    head_prefix: Box<[u8]>,
    /// Count the last cache line of heads with the portable loop even where
    /// SIMD is available (tests force it to cover both paths).
    portable: bool,
}

/// A block's buffer goes back to its thread's pool (`util::buf_pool`):
/// the next block read on this thread reuses it instead of allocating.
impl Drop for Block {
    fn drop(&mut self) {
        crate::util::buf_pool::give(std::mem::take(&mut self.data));
    }
}

/// Decoded entry header: `(shared, unshared, value_len, offset of the key delta)`.
type EntryHeader = (usize, usize, usize, usize);

/// The varint at `p[at..]` and the offset after it. One- and two-byte
/// varints decode in line: entry headers are almost always made of them
/// (a value of 128..16383 bytes, e.g. a table row, takes two), and the
/// out-of-line loop cost ~80 instructions per entry of a scan.
#[inline]
fn varint32_at(p: &[u8], at: usize) -> Option<(usize, usize)> {
    match p.get(at..at.checked_add(2)?) {
        Some(&[b0, _]) if b0 < 0x80 => return Some((usize::from(b0), at + 1)),
        Some(&[b0, b1]) if b1 < 0x80 => {
            return Some((usize::from(b0 & 0x7f) | usize::from(b1) << 7, at + 2));
        }
        _ => {}
    }
    let (v, n) = get_varint32(p.get(at..)?)?;
    Some((usize::try_from(v).ok()?, at + n))
}

/// Decodes the three varints of the entry at `off`; `None` if they do not
/// fit before `limit`.
#[inline]
fn decode_entry(data: &[u8], off: usize, limit: usize) -> Option<EntryHeader> {
    let p = data.get(off..limit)?;
    if let [a, b, c, ..] = *p {
        if (a | b | c) < 0x80 {
            return Some((usize::from(a), usize::from(b), usize::from(c), off + 3));
        }
    }
    let (s, at) = varint32_at(p, 0)?;
    let (u, at) = varint32_at(p, at)?;
    let (v, at) = varint32_at(p, at)?;
    Some((s, u, v, off + at))
}

impl Block {
    /// Wraps block contents (entries + restart array); `None` if the restart
    /// array is malformed.
    pub fn new(data: Vec<u8>) -> Option<Block> {
        let len = data.len();
        let n = u32::from_le_bytes(data.get(len.checked_sub(4)?..)?.try_into().ok()?);
        let n = usize::try_from(n).ok()?;
        if n == 0 {
            return None;
        }
        let restart_offset = len.checked_sub(4)?.checked_sub(n.checked_mul(4)?)?;
        let mut block = Block {
            data,
            restart_offset,
            num_restarts: n,
            heads: None,
            head_prefix: Box::default(),
            portable: false,
        };
        // Restart 0 is at 0; offsets strictly increase and point at entries
        // (an entry-less block has exactly the one restart at 0).
        let mut prev = None;
        for i in 0..n {
            let r = block.restart_point_checked(i)?;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restart_offset,
            };
            if !ok || (restart_offset == 0 && n != 1) {
                return None;
            }
            prev = Some(r);
        }
        if n >= MIN_RESTARTS_FOR_HEADS {
            // The prefix of all restart keys but the last, which may not
            // share it (an index block's last key is a short successor).
            let prefix = match (block.restart_key(0), block.restart_key(n - 2)) {
                (Some(first), Some(before_last)) => block_heads::common_prefix(first, before_last),
                _ => None,
            };
            if let Some(prefix) = prefix {
                let prefix: Box<[u8]> = prefix.into();
                let m = if block_heads::starts_with(block.restart_key(n - 1), &prefix) {
                    n
                } else {
                    n - 1
                };
                block.heads =
                    block_heads::build((0..m).map(|i| block.restart_key(i)), prefix.len());
                block.head_prefix = prefix;
            }
        }
        Some(block)
    }

    /// Test hook: drop the heads (plain restart search) and/or force the
    /// portable head count.
    #[cfg(test)]
    pub(crate) fn set_search_mode(&mut self, heads: bool, portable: bool) {
        if !heads {
            self.heads = None;
        }
        self.portable = portable;
    }

    /// Whether the block carries key heads.
    #[cfg(test)]
    pub(crate) fn has_heads(&self) -> bool {
        self.heads.is_some()
    }

    /// Number of restart keys `< target`, from the heads; `None` if the
    /// block or the target has none. Restart keys whose head equals the
    /// target's are compared in full (binary search among them).
    #[inline]
    pub(super) fn restarts_below(&self, target: &[u8]) -> Option<Result<usize, ()>> {
        let heads = self.heads.as_deref()?;
        let th = match block_heads::place(target, &self.head_prefix)? {
            Placement::Before => return Some(Ok(0)),
            Placement::After => {
                // Every key with the prefix is below; a last key without it
                // (sorting after them all) is compared in full.
                let mut below = heads.len();
                while below < self.num_restarts {
                    let Some(k) = self.restart_key(below) else {
                        return Some(Err(()));
                    };
                    if cmp_internal(k, target) != Ordering::Less {
                        break;
                    }
                    below += 1;
                }
                return Some(Ok(below));
            }
            Placement::Head(h) => h,
        };
        let lo = heads_below(heads, th, self.portable);
        let hi = match th.checked_add(1) {
            Some(t1) => heads_below(heads, t1, self.portable),
            None => heads.len(),
        };
        let (mut a, mut b) = (lo, hi);
        while a < b {
            let mid = a + (b - a) / 2;
            let Some(k) = self.restart_key(mid) else {
                return Some(Err(()));
            };
            if cmp_internal(k, target) == Ordering::Less {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        Some(Ok(a))
    }

    /// Wraps bytes that are not an entry block (the filter); iterating it
    /// yields nothing.
    pub fn raw(data: Vec<u8>) -> Block {
        Block {
            data,
            restart_offset: 0,
            num_restarts: 0,
            heads: None,
            head_prefix: Box::default(),
            portable: false,
        }
    }

    /// The whole contents.
    pub fn contents(&self) -> &[u8] {
        &self.data
    }

    /// Bytes of memory held by this block (for cache charging).
    pub fn memory_usage(&self) -> usize {
        self.data.capacity()
            + self.heads.as_ref().map_or(0, |h| h.len() * 8)
            + self.head_prefix.len()
            + std::mem::size_of::<Block>()
    }

    /// Number of restart points.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    fn restart_point_checked(&self, i: usize) -> Option<usize> {
        let at = self.restart_offset.checked_add(i.checked_mul(4)?)?;
        let b = self.data.get(at..at.checked_add(4)?)?;
        usize::try_from(u32::from_le_bytes(b.try_into().ok()?)).ok()
    }

    /// Offset of restart point `i` (validated in [`Block::new`]); the end of
    /// the entries for an out-of-range `i`.
    #[inline]
    fn restart_point(&self, i: usize) -> usize {
        if i >= self.num_restarts {
            return self.restart_offset;
        }
        self.restart_point_checked(i).unwrap_or(self.restart_offset)
    }

    /// The full key stored at restart point `i` (restart entries share nothing).
    #[inline]
    fn restart_key(&self, i: usize) -> Option<&[u8]> {
        let off = self.restart_point(i);
        let (shared, unshared, _, key_start) = decode_entry(&self.data, off, self.restart_offset)?;
        if shared != 0 {
            return None;
        }
        let end = key_start.checked_add(unshared)?;
        if end > self.restart_offset {
            return None;
        }
        self.data.get(key_start..end)
    }
}

/// Number of `heads` (sorted) below `t`: binary search down to one cache
/// line (8 heads), then a SIMD or portable count of that line.
#[inline]
fn heads_below(heads: &[u64], t: u64, portable: bool) -> usize {
    // Invariant: heads[..base] < t and heads[base + len..] >= t.
    let (mut base, mut len) = (0usize, heads.len());
    while len > 8 {
        let half = len / 2;
        match heads.get(base + half) {
            Some(&h) if h < t => {
                base += half + 1;
                len -= half + 1;
            }
            _ => len = half,
        }
    }
    base + block_heads::count_less(heads.get(base..base + len).unwrap_or_default(), t, portable)
}

/// A cursor over the entries of a [`Block`].
///
/// Generic over how the block and the file name are held: owned `Arc`s (the
/// default, for iterators that outlive the call) or plain references (point
/// lookups, which then touch no reference count).
///
/// Invariant: the iterator is valid iff `current < block.restart_offset`;
/// then `key` holds the full key of the entry at `current` and
/// `value_start..value_start + value_len` is its value.
pub struct BlockIter<B = Arc<Block>, P = Arc<Path>>
where
    B: Deref<Target = Block>,
    P: Deref<Target = Path>,
{
    block: B,
    /// File and absolute offset of the block, for corruption errors.
    file: P,
    file_offset: u64,
    current: usize,
    /// Offset where the entry after `current` starts.
    next_off: usize,
    /// Restart run that contains `current`.
    restart_index: usize,
    /// Offset of restart point `restart_index + 1` (end of entries if none).
    next_restart: usize,
    key: Vec<u8>,
    value_start: usize,
    value_len: usize,
}

impl<B, P> BlockIter<B, P>
where
    B: Deref<Target = Block>,
    P: Deref<Target = Path>,
{
    /// An unpositioned iterator over `block`, which was read from `file` at
    /// absolute offset `file_offset`.
    pub fn new(block: B, file: P, file_offset: u64) -> Self {
        Self::with_key_buffer(block, file, file_offset, Vec::new())
    }

    /// Like [`BlockIter::new`], reusing `key_buf`'s allocation for the current key.
    pub fn with_key_buffer(block: B, file: P, file_offset: u64, mut key_buf: Vec<u8>) -> Self {
        key_buf.clear();
        let end = block.restart_offset;
        let n = block.num_restarts;
        BlockIter {
            block,
            file,
            file_offset,
            current: end,
            next_off: end,
            restart_index: n,
            next_restart: end,
            key: key_buf,
            value_start: 0,
            value_len: 0,
        }
    }

    /// Gives back the key buffer for reuse.
    pub fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    fn invalidate(&mut self) {
        self.current = self.block.restart_offset;
        self.next_off = self.block.restart_offset;
        self.restart_index = self.block.num_restarts;
        self.next_restart = self.block.restart_offset;
        self.key.clear();
    }

    fn corrupt(&mut self, reason: &str) -> Error {
        self.invalidate();
        Error::corruption(&*self.file, self.file_offset, reason)
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next_off = self.block.restart_point(i);
        self.next_restart = self.block.restart_point(i + 1);
    }

    /// Decodes the entry at `next_off`; `Ok(false)` at the end of the entries.
    #[inline]
    fn parse_next(&mut self) -> Result<bool> {
        let end = self.block.restart_offset;
        self.current = self.next_off;
        if self.current >= end {
            self.invalidate();
            return Ok(false);
        }
        let Some((shared, unshared, vlen, key_start)) =
            decode_entry(&self.block.data, self.current, end)
        else {
            return Err(self.corrupt("bad block entry header"));
        };
        if shared > self.key.len() {
            return Err(self.corrupt("block entry shares more than the previous key"));
        }
        let key_end = key_start.checked_add(unshared);
        let value_end = key_end.and_then(|k| k.checked_add(vlen));
        let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
            return Err(self.corrupt("block entry length overflow"));
        };
        if value_end > end {
            return Err(self.corrupt("block entry runs past the restart array"));
        }
        let Some(delta) = self.block.data.get(key_start..key_end) else {
            return Err(self.corrupt("block entry out of range"));
        };
        self.key.truncate(shared);
        self.key.extend_from_slice(delta);
        self.value_start = key_end;
        self.value_len = vlen;
        self.next_off = value_end;
        while self.next_restart <= self.current && self.restart_index + 1 < self.block.num_restarts
        {
            self.restart_index += 1;
            self.next_restart = self.block.restart_point(self.restart_index + 1);
        }
        Ok(true)
    }
}

impl<B, P> InternalIterator for BlockIter<B, P>
where
    B: Deref<Target = Block> + Send,
    P: Deref<Target = Path> + Send,
{
    fn valid(&self) -> bool {
        self.current < self.block.restart_offset
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.block.num_restarts == 0 {
            self.invalidate();
            return Ok(());
        }
        self.seek_to_restart(0);
        self.parse_next().map(|_| ())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let n = self.block.num_restarts;
        if n == 0 {
            self.invalidate();
            return Ok(());
        }
        self.seek_to_restart(n - 1);
        if !self.parse_next()? {
            return Ok(());
        }
        while self.next_off < self.block.restart_offset {
            self.parse_next()?;
        }
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let n = self.block.num_restarts;
        if n == 0 {
            self.invalidate();
            return Ok(());
        }
        // Last restart point whose key is < target (or 0).
        let (mut left, mut right) = (0usize, n - 1);
        let mut left_is_less = false;
        match self.block.restarts_below(target) {
            Some(Ok(below)) => {
                left = below.saturating_sub(1);
                left_is_less = below > 0;
                right = left;
            }
            Some(Err(())) => return Err(self.corrupt("bad restart entry")),
            None => {}
        }
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let Some(k) = self.block.restart_key(mid) else {
                return Err(self.corrupt("bad restart entry"));
            };
            if cmp_internal(k, target) == Ordering::Less {
                left = mid;
                left_is_less = true;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        // The first entry of the run is already known to be < target
        // unless the search never compared it (left == 0).
        if left_is_less && !self.parse_next()? {
            return Ok(());
        }
        while self.parse_next()? {
            if cmp_internal(&self.key, target) != Ordering::Less {
                break;
            }
        }
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        while self.valid() && cmp_internal(&self.key, target) == Ordering::Greater {
            self.prev()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.parse_next().map(|_| ())
    }

    fn prev(&mut self) -> Result<()> {
        let original = self.current;
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return Ok(());
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        loop {
            if !self.parse_next()? {
                return Err(self.corrupt("entry lost while stepping back"));
            }
            if self.next_off >= original {
                return Ok(());
            }
        }
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value_start..self.value_start + self.value_len)
            .unwrap_or_default()
    }

    fn location(&self) -> Option<(&Path, u64)> {
        Some((&*self.file, self.file_offset))
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index fixtures they built
mod tests {
    use super::*;
    use crate::extent::block_builder::BlockBuilder;
    use crate::types::{make_internal_key, ValueKind};

    fn ik(k: &str, seq: u64) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, ValueKind::Put)
    }

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v).expect("add");
        }
        Arc::new(Block::new(b.finish().to_vec()).expect("valid block"))
    }

    fn iter(b: &Arc<Block>) -> BlockIter {
        BlockIter::new(b.clone(), Arc::from(Path::new("blk")), 4096)
    }

    fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                (
                    ik(&format!("key{:05}", i * 2), 7),
                    format!("v{i}").into_bytes(),
                )
            })
            .collect()
    }

    #[test]
    fn round_trip_forward_and_backward() {
        for interval in [1, 2, 16] {
            let es = entries(100);
            let b = build(&es, interval);
            let mut it = iter(&b);
            it.seek_to_first().expect("ok");
            for (k, v) in &es {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.next().expect("ok");
            }
            assert!(!it.valid());
            it.seek_to_last().expect("ok");
            for (k, v) in es.iter().rev() {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.prev().expect("ok");
            }
            assert!(!it.valid());
        }
    }

    #[test]
    fn seek_semantics() {
        let es = entries(100); // key00000, key00002, ...
        let b = build(&es, 16);
        let mut it = iter(&b);
        // Exact hit, between keys, before all, after all.
        it.seek(&ik("key00034", 7)).expect("ok");
        assert_eq!(it.key(), &ik("key00034", 7)[..]);
        it.seek(&ik("key00035", 7)).expect("ok");
        assert_eq!(it.key(), &ik("key00036", 7)[..]);
        it.seek(&ik("a", 7)).expect("ok");
        assert_eq!(it.key(), &es[0].0[..]);
        it.seek(&ik("z", 7)).expect("ok");
        assert!(!it.valid());
        // Same user key, higher seq sorts first: seek(k@9) lands on k@7.
        it.seek(&ik("key00034", 9)).expect("ok");
        assert_eq!(it.key(), &ik("key00034", 7)[..]);
        it.seek(&ik("key00034", 3)).expect("ok");
        assert_eq!(it.key(), &ik("key00036", 7)[..]);
        // seek_for_prev.
        it.seek_for_prev(&ik("key00035", 7)).expect("ok");
        assert_eq!(it.key(), &ik("key00034", 7)[..]);
        it.seek_for_prev(&ik("key00034", 7)).expect("ok");
        assert_eq!(it.key(), &ik("key00034", 7)[..]);
        it.seek_for_prev(&ik("a", 7)).expect("ok");
        assert!(!it.valid());
        it.seek_for_prev(&ik("z", 7)).expect("ok");
        assert_eq!(it.key(), &es[99].0[..]);
        // prev across a restart boundary (restart at entry 32).
        it.seek(&ik("key00064", 7)).expect("ok");
        it.prev().expect("ok");
        assert_eq!(it.key(), &ik("key00062", 7)[..]);
        it.prev().expect("ok");
        assert_eq!(it.key(), &ik("key00060", 7)[..]);
        it.next().expect("ok");
        it.next().expect("ok");
        assert_eq!(it.key(), &ik("key00064", 7)[..]);
    }

    #[test]
    fn every_target_matches_a_linear_scan() {
        let es = entries(70);
        for interval in [1, 3, 16] {
            let b = build(&es, interval);
            let mut it = iter(&b);
            for i in 0..142 {
                let t = ik(&format!("key{i:05}"), 7);
                it.seek(&t).expect("ok");
                let want = es
                    .iter()
                    .find(|(k, _)| compare_internal_keys(k, &t).is_ge());
                assert_eq!(
                    it.valid().then(|| it.key().to_vec()),
                    want.map(|e| e.0.clone())
                );
                it.seek_for_prev(&t).expect("ok");
                let want = es
                    .iter()
                    .rev()
                    .find(|(k, _)| compare_internal_keys(k, &t).is_le());
                assert_eq!(
                    it.valid().then(|| it.key().to_vec()),
                    want.map(|e| e.0.clone())
                );
            }
        }
    }

    #[test]
    fn empty_and_raw_blocks() {
        let b = build(&[], 16);
        let mut it = iter(&b);
        it.seek_to_first().expect("ok");
        assert!(!it.valid());
        it.seek_to_last().expect("ok");
        assert!(!it.valid());
        it.seek(&ik("a", 1)).expect("ok");
        assert!(!it.valid());
        let raw = Arc::new(Block::raw(vec![1, 2, 3]));
        let mut it = iter(&raw);
        it.seek_to_first().expect("ok");
        it.seek_for_prev(&ik("a", 1)).expect("ok");
        assert!(!it.valid());
        assert_eq!(raw.contents(), &[1, 2, 3]);
    }

    #[test]
    fn malformed_restart_arrays_are_rejected() {
        assert!(Block::new(vec![]).is_none());
        assert!(Block::new(vec![0, 0, 0]).is_none());
        assert!(Block::new(vec![0, 0, 0, 0]).is_none()); // zero restarts
        assert!(Block::new(vec![0, 0, 0, 0, 9, 0, 0, 0]).is_none()); // too many
        let good = build(&entries(40), 4).contents().to_vec();
        assert!(Block::new(good.clone()).is_some());
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 8..n - 4].copy_from_slice(&0xffffu32.to_le_bytes()); // last restart out of range
        assert!(Block::new(bad).is_none());
        let mut bad = good;
        let first = bad.len() - 4 - 10 * 4;
        bad[first..first + 4].copy_from_slice(&5u32.to_le_bytes()); // restart 0 not at 0
        assert!(Block::new(bad).is_none());
    }

    #[test]
    fn varints_in_line_match_the_loop() {
        use crate::util::coding::put_varint32;
        let mut values: Vec<u32> = (0..20_000).collect();
        values.extend([u32::MAX, 1 << 21, (1 << 28) + 5, 300_000]);
        for v in values {
            for tail in [&[][..], &[0x00], &[0x80, 0x80]] {
                let mut buf = vec![0x81];
                put_varint32(&mut buf, v);
                buf.extend_from_slice(tail);
                let want = get_varint32(&buf[1..]).map(|(v, n)| (v as usize, 1 + n));
                assert_eq!(varint32_at(&buf, 1), want, "{v} {tail:?}");
                // Cut inside the varint: both fail.
                let cut = &buf[..want.unwrap().1 - 1];
                assert_eq!(varint32_at(cut, 1), None);
            }
        }
        // A continuation byte at the very end, and an unterminated varint.
        assert_eq!(varint32_at(&[0x80], 0), None);
        assert_eq!(varint32_at(&[0xff; 6], 0), None);
    }

    #[test]
    fn damaged_entries_are_corruption_not_panics() {
        let good = build(&entries(40), 4).contents().to_vec();
        let entries_end = good.len() - 4 - 10 * 4;
        let mut saw_error = false;
        for pos in 0..entries_end {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[pos] ^= flip;
                let Some(b) = Block::new(bad) else { continue };
                let b = Arc::new(b);
                let mut it = iter(&b);
                let mut r = it.seek_to_first();
                let mut steps = 0;
                while r.is_ok() && it.valid() && steps < 100 {
                    r = it.next();
                    steps += 1;
                }
                if let Err(e) = r {
                    assert!(e.is_corruption());
                    saw_error = true;
                }
                let _ = it.seek(&ik("key00040", 7));
                let _ = it.seek_to_last();
                let _ = it.seek_for_prev(&ik("key00010", 7));
                if it.valid() {
                    let _ = it.prev();
                }
            }
        }
        assert!(saw_error);
    }

    #[test]
    fn inlined_compare_matches_compare_internal_keys() {
        let keys: Vec<Vec<u8>> = [
            &b""[..],
            b"a",
            b"ab",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgi",
            b"abcdefghijklmnopqrstuvwxyz0123456789",
            b"abcdefghijklmnopqrstuvwxyz0123456788",
            b"\xff\xff",
        ]
        .iter()
        .flat_map(|k| {
            [
                ik(std::str::from_utf8(k).unwrap_or("?"), 1),
                ik(std::str::from_utf8(k).unwrap_or("?"), 9),
            ]
        })
        .chain([b"short".to_vec(), Vec::new()])
        .collect();
        for a in &keys {
            for b in &keys {
                assert_eq!(
                    cmp_internal(a, b),
                    compare_internal_keys(a, b),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn borrowed_block_and_path() {
        let b = build(&entries(10), 4);
        let path = Path::new("borrowed");
        let mut it = BlockIter::new(&*b, path, 0);
        it.seek(&ik("key00004", 7)).expect("ok");
        assert_eq!(it.key(), &ik("key00004", 7)[..]);
        assert_eq!(Arc::strong_count(&b), 1);
    }

    #[test]
    fn key_buffer_is_reused() {
        let b = build(&entries(3), 16);
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(b"junk");
        let ptr = buf.as_ptr();
        let mut it = BlockIter::with_key_buffer(b, Arc::from(Path::new("x")), 0, buf);
        it.seek_to_first().expect("ok");
        assert_eq!(it.key(), &ik("key00000", 7)[..]);
        let buf = it.into_key_buffer();
        assert_eq!(buf.as_ptr(), ptr);
    }
}
