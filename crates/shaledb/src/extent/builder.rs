//! Builds one extent in memory from sorted internal entries.
//!
//! Entries go into a data block until it reaches `block_size` (uncompressed);
//! the block is then compressed (if that saves >= 12.5%), appended with its
//! trailer, and its index entry is deferred until the next key is known so
//! the separator can be shortened (`"apple"…` / `"banana"…` -> `"b"@MAX`).
//! [`ExtentBuilder::finish`] appends the filter, range-del, index and
//! properties blocks and the footer (layout: `docs/format-extent.md` §1, size control §9).
//!
//! Size control: the caller asks [`ExtentBuilder::would_overflow`] before
//! each `add`; it answers with an upper bound of the finished size that
//! assumes compression does not help and counts every meta block, so
//! `finish()` never exceeds `extent_size` if the caller stops when told.
//! Example: with `extent_size = 2 MiB` and 1 KiB entries an extent ends up
//! holding ~2 000 entries and is over 97% full.

use super::block_builder::BlockBuilder;
use super::compression::{CompressionType, Compressor};
use super::filter::{self, filter_hash};
use super::footer::{Footer, FOOTER_LEN};
use super::properties::ExtentProperties;
use super::{
    BlockHandle, RangeTombstone, BLOCK_TRAILER_LEN, FORMAT_VERSION, MAX_BLOCK_SIZE_OPTION,
    MAX_ENTRY_LEN, MAX_HANDLE_LEN,
};
use crate::error::{Error, Result};
use crate::types::{
    append_internal_key, compare_internal_keys, parse_internal_key, user_key, SequenceNumber,
    ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE,
};
use crate::util::coding::mask_crc;
use std::cmp::Ordering;

/// Default extent size: one 2 MiB slot.
pub const DEFAULT_EXTENT_SIZE: usize = 2 << 20;

/// Restart interval of the range-tombstone block.
const RANGE_DEL_RESTART_INTERVAL: usize = 16;

/// Largest header (three varint32) of a block entry.
const MAX_ENTRY_HEADER: usize = 15;

/// Options of one extent.
#[derive(Clone, Debug)]
pub struct ExtentBuilderOptions {
    /// Target uncompressed size of a data block (default 16 KiB).
    pub block_size: usize,
    /// Entries between restart points in data blocks (default 16).
    pub restart_interval: usize,
    /// Bloom filter bits per distinct user key; 0 = no filter (default 10).
    pub bloom_bits_per_key: u32,
    /// Compression of the data blocks (default LZ4).
    pub compression: CompressionType,
    /// Upper bound of the finished extent in bytes (default 2 MiB).
    pub extent_size: usize,
}

impl Default for ExtentBuilderOptions {
    fn default() -> Self {
        ExtentBuilderOptions {
            block_size: 16 * 1024,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: CompressionType::Lz4,
            extent_size: DEFAULT_EXTENT_SIZE,
        }
    }
}

/// The bytes of a finished extent and its properties.
#[derive(Debug)]
pub struct FinishedExtent {
    /// The extent, `len() <= extent_size`.
    pub data: Vec<u8>,
    /// Its properties (as also stored in it).
    pub props: ExtentProperties,
}

/// Accumulates sorted entries into one extent. Not thread-safe (one
/// builder per flush or compaction output).
pub struct ExtentBuilder {
    opts: ExtentBuilderOptions,
    /// Finished data blocks with trailers.
    out: Vec<u8>,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    /// Handle of the last flushed data block, waiting for its separator.
    pending_handle: Option<BlockHandle>,
    last_key: Vec<u8>,
    /// One hash per distinct user key, in order.
    filter_hashes: Vec<u64>,
    tombstones: Vec<RangeTombstone>,
    /// Upper bound of the encoded tombstone entries (with restart slots).
    tombstone_bytes: usize,
    max_tombstone_key_len: (usize, usize),
    props: ExtentProperties,
    compressor: Compressor,
    scratch: Vec<u8>,
}

/// Appends `contents ++ type ++ masked crc32c(contents ++ type)` and
/// returns the block's handle.
pub(crate) fn write_block(
    out: &mut Vec<u8>,
    contents: &[u8],
    kind: CompressionType,
) -> BlockHandle {
    let offset = out.len() as u64;
    out.extend_from_slice(contents);
    let t = kind.to_u8();
    out.push(t);
    let crc = crc32c::crc32c_append(crc32c::crc32c(contents), &[t]);
    out.extend_from_slice(&mask_crc(crc).to_le_bytes());
    BlockHandle {
        offset,
        size: contents.len() as u64,
    }
}

/// Sets `out` to a short internal key `s` with `start <= s < limit`
/// (`start < limit`): the shortest user key between the two with the
/// largest trailer, or `start` itself if no shorter one exists.
pub(crate) fn shortest_separator(start: &[u8], limit: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let us = user_key(start);
    let ul = user_key(limit);
    let diff = us.iter().zip(ul).take_while(|(a, b)| a == b).count();
    if let (Some(&b), Some(&lb)) = (us.get(diff), ul.get(diff)) {
        // us[..diff] is common and b < lb (start < limit).
        // `us[..diff] ++ (b + 1)` is > us and < ul unless it equals ul.
        if b < 0xff && (b + 1 < lb || ul.len() > diff + 1) {
            out.extend_from_slice(us.get(..diff).unwrap_or_default());
            out.push(b + 1);
        } else {
            // Keep us[..=diff] (still < ul there) and bump a later byte.
            let bump = us
                .iter()
                .enumerate()
                .skip(diff + 1)
                .find(|&(_, &c)| c < 0xff);
            if let Some((i, &c)) = bump {
                out.extend_from_slice(us.get(..i).unwrap_or_default());
                out.push(c + 1);
            }
        }
    }
    if !out.is_empty() && out.len() < us.len() {
        append_trailer_for_seek(out);
    } else {
        out.clear();
        out.extend_from_slice(start);
    }
}

/// Sets `out` to a short internal key `>= key` (index entry of the last block).
pub(crate) fn short_successor(key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let uk = user_key(key);
    if let Some((i, &c)) = uk.iter().enumerate().find(|&(_, &c)| c < 0xff) {
        if i + 1 < uk.len() {
            out.extend_from_slice(uk.get(..i).unwrap_or_default());
            out.push(c + 1);
            append_trailer_for_seek(out);
            return;
        }
    }
    out.extend_from_slice(key);
}

/// Turns a user key in `out` into the smallest internal key of that user key.
fn append_trailer_for_seek(out: &mut Vec<u8>) {
    let uk = std::mem::take(out);
    append_internal_key(out, &uk, MAX_SEQUENCE, KIND_FOR_SEEK);
}

impl ExtentBuilder {
    /// A builder; out-of-range options are clamped (`block_size <= 32 MiB`,
    /// `restart_interval >= 1`, `extent_size <= 4 GiB - 1`).
    pub fn new(mut opts: ExtentBuilderOptions) -> Self {
        opts.block_size = opts.block_size.min(MAX_BLOCK_SIZE_OPTION);
        opts.restart_interval = opts.restart_interval.max(1);
        opts.extent_size = opts.extent_size.min(u32::MAX as usize);
        let props = ExtentProperties {
            compression: opts.compression,
            format_version: FORMAT_VERSION,
            ..ExtentProperties::default()
        };
        ExtentBuilder {
            out: Vec::with_capacity(opts.extent_size.min(4 << 20)),
            data_block: BlockBuilder::new(opts.restart_interval),
            index_block: BlockBuilder::new(1),
            pending_handle: None,
            last_key: Vec::new(),
            filter_hashes: Vec::new(),
            tombstones: Vec::new(),
            tombstone_bytes: 0,
            max_tombstone_key_len: (0, 0),
            props,
            compressor: Compressor::new(opts.compression),
            scratch: Vec::new(),
            opts,
        }
    }

    /// Adds a point entry; internal keys must strictly increase and be of
    /// kind Put or Delete, else `InvalidArgument` (and nothing is added).
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let parsed = parse_internal_key(ikey)
            .ok_or_else(|| Error::InvalidArgument("extent entry is not an internal key".into()))?;
        if parsed.kind == ValueKind::RangeDelete {
            return Err(Error::InvalidArgument(
                "range tombstones go through add_range_tombstone".into(),
            ));
        }
        if ikey.len().saturating_add(value.len()) > MAX_ENTRY_LEN {
            return Err(Error::InvalidArgument(format!(
                "entry of {} bytes exceeds the {MAX_ENTRY_LEN}-byte limit",
                ikey.len().saturating_add(value.len())
            )));
        }
        let first = self.props.num_entries == 0;
        if !first && compare_internal_keys(&self.last_key, ikey) != Ordering::Less {
            return Err(Error::InvalidArgument(
                "extent keys must be strictly increasing".into(),
            ));
        }
        if let Some(h) = self.pending_handle.take() {
            shortest_separator(&self.last_key, ikey, &mut self.scratch);
            self.add_index_entry(h)?;
        }
        if self.opts.bloom_bits_per_key > 0
            && (first || user_key(&self.last_key) != parsed.user_key)
        {
            self.filter_hashes.push(filter_hash(parsed.user_key));
        }
        self.data_block.add(ikey, value)?;

        let p = &mut self.props;
        if first {
            p.smallest_key = ikey.to_vec();
        }
        if first && self.tombstones.is_empty() {
            p.smallest_seq = parsed.seq;
            p.largest_seq = parsed.seq;
        } else {
            p.smallest_seq = p.smallest_seq.min(parsed.seq);
            p.largest_seq = p.largest_seq.max(parsed.seq);
        }
        p.num_entries += 1;
        if parsed.kind == ValueKind::Delete {
            p.num_deletions += 1;
        }
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);

        if self.data_block.current_size_estimate() >= self.opts.block_size {
            self.flush_data_block();
        }
        Ok(())
    }

    /// Adds a range tombstone deleting user keys in `[begin, end)` at `seq`
    /// (any order). An empty range (`begin >= end`) deletes nothing and is
    /// dropped.
    pub fn add_range_tombstone(&mut self, begin: &[u8], end: &[u8], seq: SequenceNumber) {
        if begin >= end {
            return;
        }
        if self.props.num_entries == 0 && self.tombstones.is_empty() {
            self.props.smallest_seq = seq;
            self.props.largest_seq = seq;
        } else {
            self.props.smallest_seq = self.props.smallest_seq.min(seq);
            self.props.largest_seq = self.props.largest_seq.max(seq);
        }
        self.tombstone_bytes += Self::tombstone_bound(begin.len(), end.len());
        let (b, e) = self.max_tombstone_key_len;
        self.max_tombstone_key_len = (b.max(begin.len()), e.max(end.len()));
        self.tombstones.push((begin.to_vec(), end.to_vec(), seq));
    }

    /// True if adding an entry of these sizes could make `finish()` exceed
    /// `extent_size` (an upper bound: no compression, all meta blocks).
    pub fn would_overflow(&self, ikey_len: usize, value_len: usize) -> bool {
        self.size_bound(Some((ikey_len, value_len)), None) > self.opts.extent_size
    }

    /// Like [`ExtentBuilder::would_overflow`] for a range tombstone.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn would_overflow_tombstone(&self, begin_len: usize, end_len: usize) -> bool {
        self.size_bound(None, Some((begin_len, end_len))) > self.opts.extent_size
    }

    /// Upper bound of the size `finish()` would produce now.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn estimated_size(&self) -> usize {
        self.size_bound(None, None)
    }

    /// True if no point entry and no tombstone was added.
    pub fn is_empty(&self) -> bool {
        self.props.num_entries == 0 && self.tombstones.is_empty()
    }

    /// Point entries added.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Writes the meta blocks and the footer; fails with `InvalidArgument`
    /// if the extent would exceed `extent_size` or a tombstone sequence is
    /// out of range.
    pub fn finish(mut self) -> Result<FinishedExtent> {
        if !self.data_block.is_empty() {
            self.flush_data_block();
        }
        if let Some(h) = self.pending_handle.take() {
            short_successor(&self.last_key, &mut self.scratch);
            self.add_index_entry(h)?;
        }
        self.props.data_size = self.out.len() as u64;
        if self.props.num_entries > 0 {
            self.props.largest_key = self.last_key.clone();
        }

        let filter = filter::build(&self.filter_hashes, self.opts.bloom_bits_per_key)
            .map(|f| write_block(&mut self.out, &f, CompressionType::None));
        if let Some(h) = filter {
            self.props.filter_size = h.size + BLOCK_TRAILER_LEN as u64;
            self.props.num_filter_keys = self.filter_hashes.len() as u64;
        }

        let range_del = self.write_range_del_block()?;

        let index_contents = self.index_block.finish();
        let index = write_block(&mut self.out, index_contents, CompressionType::None);
        self.props.index_size = index.size + BLOCK_TRAILER_LEN as u64;

        self.scratch.clear();
        self.props.encode_to(&mut self.scratch);
        let properties = write_block(&mut self.out, &self.scratch, CompressionType::None);

        Footer {
            index,
            filter,
            properties,
            range_del,
            version: FORMAT_VERSION,
        }
        .encode_to(&mut self.out)?;

        if self.out.len() > self.opts.extent_size {
            return Err(Error::InvalidArgument(format!(
                "extent of {} bytes exceeds extent_size {}",
                self.out.len(),
                self.opts.extent_size
            )));
        }
        Ok(FinishedExtent {
            data: self.out,
            props: self.props,
        })
    }

    fn add_index_entry(&mut self, h: BlockHandle) -> Result<()> {
        let mut enc = Vec::with_capacity(MAX_HANDLE_LEN);
        h.encode_to(&mut enc);
        self.index_block.add(&self.scratch, &enc)
    }

    fn flush_data_block(&mut self) {
        let raw = self.data_block.finish();
        let (kind, stored) = self.compressor.compress(raw);
        let h = write_block(&mut self.out, stored, kind);
        self.data_block.reset();
        self.pending_handle = Some(h);
        self.props.num_data_blocks += 1;
    }

    fn write_range_del_block(&mut self) -> Result<Option<BlockHandle>> {
        if self.tombstones.is_empty() {
            return Ok(None);
        }
        // Internal-key order of (begin, seq): begin ascending, seq descending.
        self.tombstones
            .sort_by(|a, b| a.0.cmp(&b.0).then(b.2.cmp(&a.2)).then(a.1.cmp(&b.1)));
        self.tombstones.dedup();
        let mut block = BlockBuilder::new(RANGE_DEL_RESTART_INTERVAL);
        let mut key = Vec::new();
        for (begin, end, seq) in &self.tombstones {
            if *seq > MAX_SEQUENCE {
                return Err(Error::InvalidArgument(format!(
                    "range tombstone sequence {seq} exceeds 2^56 - 1"
                )));
            }
            key.clear();
            append_internal_key(&mut key, begin, *seq, ValueKind::RangeDelete);
            block.add(&key, end)?;
        }
        let p = &mut self.props;
        p.num_range_deletions = self.tombstones.len() as u64;
        p.range_del_begin = self
            .tombstones
            .first()
            .map(|t| t.0.clone())
            .unwrap_or_default();
        p.range_del_end = self
            .tombstones
            .iter()
            .map(|t| &t.1)
            .max()
            .cloned()
            .unwrap_or_default();
        Ok(Some(write_block(
            &mut self.out,
            block.finish(),
            CompressionType::None,
        )))
    }

    fn tombstone_bound(begin_len: usize, end_len: usize) -> usize {
        MAX_ENTRY_HEADER + begin_len + 8 + end_len + 4
    }

    /// Upper bound of the finished size with an optional extra point entry
    /// `(ikey_len, value_len)` or extra tombstone `(begin_len, end_len)`.
    fn size_bound(&self, entry: Option<(usize, usize)>, tomb: Option<(usize, usize)>) -> usize {
        let mut total = self.out.len();
        // Current data block, stored raw (compression may not help).
        let mut pending_index = usize::from(self.pending_handle.is_some());
        if !self.data_block.is_empty() {
            total += self.data_block.current_size_estimate() + BLOCK_TRAILER_LEN;
            pending_index += 1;
        }
        let mut max_key = self.last_key.len();
        let mut filter_keys = self.filter_hashes.len();
        let mut smallest = self.props.smallest_key.len();
        let mut largest = self.last_key.len();
        if let Some((k, v)) = entry {
            // As if it opened a new block: header, bytes, one restart, count, trailer.
            total += MAX_ENTRY_HEADER + k + v + 8 + BLOCK_TRAILER_LEN;
            pending_index += 1;
            max_key = max_key.max(k);
            if self.opts.bloom_bits_per_key > 0 {
                filter_keys += 1;
            }
            if self.props.num_entries == 0 {
                smallest = k;
            }
            largest = largest.max(k);
        }
        // Index: each pending separator is at most as long as its block's last key.
        total += self.index_block.current_size_estimate()
            + pending_index * (MAX_ENTRY_HEADER + max_key + MAX_HANDLE_LEN + 4)
            + BLOCK_TRAILER_LEN;
        let filter_len = filter::encoded_len(filter_keys, self.opts.bloom_bits_per_key);
        if filter_len > 0 {
            total += filter_len + BLOCK_TRAILER_LEN;
        }
        let (mut tb, mut te) = self.max_tombstone_key_len;
        let mut tomb_bytes = self.tombstone_bytes;
        if let Some((b, e)) = tomb {
            tomb_bytes += Self::tombstone_bound(b, e);
            tb = tb.max(b);
            te = te.max(e);
        }
        if tomb_bytes > 0 {
            total += tomb_bytes + 4 + BLOCK_TRAILER_LEN;
        }
        total +=
            ExtentProperties::encoded_len_bound([smallest, largest, tb, te]) + BLOCK_TRAILER_LEN;
        total + FOOTER_LEN
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index fixtures they built
mod tests {
    use super::*;
    use crate::types::make_internal_key;

    fn ik(k: &[u8], seq: u64) -> Vec<u8> {
        make_internal_key(k, seq, ValueKind::Put)
    }

    #[test]
    fn separators_are_short_and_between() {
        let mut out = Vec::new();
        let cases: &[(&[u8], &[u8])] = &[
            (b"apple", b"banana"),
            (b"abc1zz", b"abd"),
            (b"ab\xff\xffz", b"ac"),
            (b"abc", b"abcd"),
            (b"a", b"b"),
            (b"a", b"ba"),
            (b"ab", b"b"),
            (b"same", b"same"),
            (b"\xff\xff", b"\xff\xff\x01"),
        ];
        for &(a, b) in cases {
            let start = ik(a, 5);
            let limit = ik(b, 3);
            shortest_separator(&start, &limit, &mut out);
            assert!(compare_internal_keys(&start, &out).is_le(), "{a:?} {b:?}");
            assert!(compare_internal_keys(&out, &limit).is_lt(), "{a:?} {b:?}");
            assert!(out.len() <= start.len());
            assert!(parse_internal_key(&out).is_some());
        }
        shortest_separator(&ik(b"apple", 5), &ik(b"banana", 3), &mut out);
        assert_eq!(user_key(&out), b"b");
        shortest_separator(&ik(b"abc1zz", 5), &ik(b"abd", 3), &mut out);
        assert_eq!(user_key(&out), b"abc2");
        for k in [&b"abc"[..], b"\xff\xff", b"", b"a\xff"] {
            let key = ik(k, 1);
            short_successor(&key, &mut out);
            assert!(compare_internal_keys(&key, &out).is_le());
            assert!(out.len() <= key.len());
        }
        short_successor(&ik(b"abc", 1), &mut out);
        assert_eq!(user_key(&out), b"b");
    }

    #[test]
    fn add_rejects_bad_keys_without_changing_state() {
        let mut b = ExtentBuilder::new(ExtentBuilderOptions::default());
        assert!(b.is_empty());
        b.add(&ik(b"b", 5), b"v").expect("first");
        for bad in [ik(b"b", 5), ik(b"b", 6), ik(b"a", 1)] {
            assert!(matches!(b.add(&bad, b""), Err(Error::InvalidArgument(_))));
        }
        assert!(b.add(b"short", b"").is_err());
        let rd = make_internal_key(b"c", 1, ValueKind::RangeDelete);
        assert!(b.add(&rd, b"d").is_err());
        assert_eq!(b.num_entries(), 1);
        b.add(&ik(b"b", 4), b"v")
            .expect("older version of same key");
        let f = b.finish().expect("finish");
        assert_eq!(f.props.num_entries, 2);
        assert_eq!(f.props.num_filter_keys, 1);
    }

    #[test]
    fn tombstones_only_and_empty_ranges() {
        let mut b = ExtentBuilder::new(ExtentBuilderOptions::default());
        b.add_range_tombstone(b"m", b"a", 3);
        b.add_range_tombstone(b"m", b"m", 3);
        assert!(b.is_empty());
        b.add_range_tombstone(b"k", b"p", 9);
        b.add_range_tombstone(b"c", b"f", 4);
        assert!(!b.is_empty());
        assert!(!b.would_overflow_tombstone(1, 1));
        let est = b.estimated_size();
        let f = b.finish().expect("finish");
        assert!(f.data.len() <= est);
        let p = &f.props;
        assert_eq!((p.num_entries, p.num_range_deletions), (0, 2));
        assert_eq!((p.smallest_seq, p.largest_seq), (4, 9));
        assert_eq!(
            (&p.range_del_begin[..], &p.range_del_end[..]),
            (&b"c"[..], &b"p"[..])
        );
        assert!(p.smallest_key.is_empty());
    }

    #[test]
    fn finish_refuses_to_exceed_extent_size() {
        let opts = ExtentBuilderOptions {
            extent_size: 4096,
            compression: CompressionType::None,
            ..Default::default()
        };
        let mut b = ExtentBuilder::new(opts);
        assert!(b.would_overflow(10, 5000));
        b.add(&ik(b"k", 1), &[7u8; 5000])
            .expect("add is not size-checked");
        assert!(matches!(b.finish(), Err(Error::InvalidArgument(_))));
    }
}
