//! Opens one extent at `(file, offset, size)` (format: `docs/format-extent.md`,
//! reading and errors §8) and serves point lookups,
//! iterators, range tombstones, verification and dumps.
//!
//! Opening reads the 48-byte footer, then all meta blocks (filter,
//! range-del, index, properties: they sit together before the footer) with
//! one more pread, and checks every checksum. With `pin_index_and_filter`
//! the index and filter stay in the reader; otherwise they are put in the
//! block cache like data blocks and re-read on a miss, so the reader itself
//! holds only handles and properties (a few hundred bytes).
//!
//! A lookup (`get("k", 42)`) probes the filter, binary-searches the index
//! for the first separator `>= k@42`, reads that data block (one pread of
//! block + trailer, or a cache hit), binary-searches its restart points and
//! scans to the first entry `>= k@42`; if its user key is `k` that is the
//! newest version visible at snapshot 42. Key buffers come from a
//! thread-local scratch, so a lookup allocates only the returned value
//! (nothing with [`ExtentReader::get_into`] and a reused buffer), plus the
//! block read on a cache miss.
//!
//! Every stored block is verified before use: checksum (over contents and
//! type byte), compression type, decompression, restart array. Failures are
//! `Error::Corruption` with the absolute file offset of the block (or of the
//! footer, or of the block holding a bad handle); wrong data is never returned.

use super::block::{Block, BlockIter};
use super::compression::{decompress, CompressionType};
use super::extent_iter::ExtentIterator;
use super::filter::FilterView;
use super::footer::{Footer, FOOTER_LEN};
use super::properties::{fmt_bytes, fmt_ikey, ExtentProperties};
use super::{BlockHandle, Loc, RangeTombstone, BLOCK_TRAILER_LEN, FORMAT_VERSION};
use crate::cache::{BlockCache, CacheKey, CachePriority};
use crate::env::RandomAccessFile;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::types::{
    append_internal_key, compare_internal_keys, parse_internal_key, user_key, SequenceNumber,
    ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE,
};
use crate::util::coding::unmask_crc;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a block's contents are interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockKind {
    /// Entries + restart array (data, index, range-del).
    Entries,
    /// Opaque bytes (filter).
    Raw,
}

/// Per-thread buffers reused by [`ExtentReader::get`].
#[derive(Default)]
struct Scratch {
    lookup: Vec<u8>,
    index_key: Vec<u8>,
    data_key: Vec<u8>,
}

impl Scratch {
    /// Largest buffer kept between lookups (a huge key must not pin memory).
    const KEEP: usize = 4096;

    fn trim(&mut self) {
        for b in [&mut self.lookup, &mut self.index_key, &mut self.data_key] {
            if b.capacity() > Self::KEEP {
                *b = Vec::new();
            }
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// An open extent. Shared (`Arc`) by lookups and iterators on many threads;
/// immutable after `open`, so it needs no lock.
pub struct ExtentReader {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<Path>,
    /// Absolute offset of the extent in the file.
    offset: u64,
    size: u64,
    cache_id: u64,
    cache: Option<Arc<BlockCache>>,
    footer: Footer,
    pinned_index: Option<Arc<Block>>,
    pinned_filter: Option<Arc<Block>>,
    props: ExtentProperties,
}

/// Checks the trailer of a stored block (`contents ++ type ++ crc`) and
/// decodes it. `loc` is the block's absolute position.
pub(crate) fn decode_stored_block(
    mut stored: Vec<u8>,
    kind: BlockKind,
    loc: Loc<'_>,
) -> Result<(Block, CompressionType)> {
    let n = stored
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or_else(|| loc.corrupt("block shorter than its trailer"))?;
    let (contents, trailer) = stored.split_at(n);
    let [t, c0, c1, c2, c3] =
        <[u8; 5]>::try_from(trailer).map_err(|_| loc.corrupt("bad block trailer"))?;
    let expected = unmask_crc(u32::from_le_bytes([c0, c1, c2, c3]));
    let actual = crc32c::crc32c_append(crc32c::crc32c(contents), &[t]);
    if expected != actual {
        return Err(loc.corrupt("block checksum mismatch"));
    }
    let ctype = CompressionType::from_u8(t)
        .ok_or_else(|| loc.corrupt(format!("unknown compression type {t}")))?;
    let data = match ctype {
        CompressionType::None => {
            stored.truncate(n);
            stored
        }
        _ => {
            let out = decompress(ctype, contents, loc)?;
            crate::util::buf_pool::give(stored);
            out
        }
    };
    let block = match kind {
        BlockKind::Entries => {
            Block::new(data).ok_or_else(|| loc.corrupt("bad block restart array"))?
        }
        BlockKind::Raw => Block::raw(data),
    };
    Ok((block, ctype))
}

impl ExtentReader {
    /// Reads and checks the footer, index, filter and properties. `path` is
    /// for error messages; errors carry file offsets = extent offset + position.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        offset: u64,
        size: u64,
        cache_id: u64,
        cache: Option<Arc<BlockCache>>,
        pin_index_and_filter: bool,
    ) -> Result<Arc<ExtentReader>> {
        let path: Arc<Path> = Arc::from(path);
        let at = |rel: u64| Loc {
            file: &path,
            offset: offset.saturating_add(rel),
        };
        if size < FOOTER_LEN as u64 {
            return Err(at(0).corrupt(format!(
                "extent of {size} bytes is shorter than its {FOOTER_LEN}-byte footer"
            )));
        }
        let end = offset
            .checked_add(size)
            .ok_or_else(|| at(0).corrupt("extent offset + size overflows"))?;
        let file_len = file.len()?;
        if file_len < end {
            return Err(at(0).corrupt(format!(
                "extent [{offset}, {end}) extends past the end of the file ({file_len} bytes)"
            )));
        }
        let footer_off = size - FOOTER_LEN as u64;
        let mut fbuf = [0u8; FOOTER_LEN];
        file.read_exact_at(offset + footer_off, &mut fbuf)?;
        let footer = Footer::decode(&fbuf, at(footer_off))?;

        // Meta blocks must lie between the data blocks and the footer.
        let metas = [
            Some(footer.index),
            Some(footer.properties),
            footer.filter,
            footer.range_del,
        ];
        let mut meta_start = footer_off;
        for h in metas.into_iter().flatten() {
            match h.end_with_trailer() {
                Some(e) if e <= footer_off => meta_start = meta_start.min(h.offset),
                _ => return Err(at(footer_off).corrupt("meta block handle out of range")),
            }
        }
        let mut meta = vec![
            0u8;
            usize::try_from(footer_off - meta_start)
                .map_err(|_| at(footer_off).corrupt("meta region too large"))?
        ];
        file.read_exact_at(offset + meta_start, &mut meta)?;
        let meta_block = |h: BlockHandle, kind: BlockKind| -> Result<Block> {
            let from = usize::try_from(h.offset - meta_start).ok();
            let to = h
                .end_with_trailer()
                .and_then(|e| usize::try_from(e - meta_start).ok());
            let stored = match (from, to) {
                (Some(f), Some(t)) => meta.get(f..t),
                _ => None,
            }
            .ok_or_else(|| at(footer_off).corrupt("meta block handle out of range"))?;
            Ok(decode_stored_block(stored.to_vec(), kind, at(h.offset))?.0)
        };

        let props_block = meta_block(footer.properties, BlockKind::Raw)?;
        let props_loc = at(footer.properties.offset);
        let props = ExtentProperties::decode(props_block.contents())
            .ok_or_else(|| props_loc.corrupt("malformed properties"))?;
        if props.format_version != footer.version || props.format_version != FORMAT_VERSION {
            return Err(props_loc.corrupt(format!(
                "properties format version {} disagrees with footer version {}",
                props.format_version, footer.version
            )));
        }
        if props.data_size > meta_start {
            return Err(props_loc.corrupt("data size runs into the meta blocks"));
        }
        if props.num_entries > 0
            && (parse_internal_key(&props.smallest_key).is_none()
                || parse_internal_key(&props.largest_key).is_none())
        {
            return Err(props_loc.corrupt("malformed smallest/largest key"));
        }

        let index = Arc::new(meta_block(footer.index, BlockKind::Entries)?);
        let filter = match footer.filter {
            Some(h) => {
                let b = meta_block(h, BlockKind::Raw)?;
                if FilterView::parse(b.contents()).is_none() {
                    return Err(at(h.offset).corrupt("malformed filter"));
                }
                Some(Arc::new(b))
            }
            None => None,
        };
        if let Some(h) = footer.range_del {
            meta_block(h, BlockKind::Entries)?;
        }

        let (pinned_index, pinned_filter) = if pin_index_and_filter {
            (Some(index), filter)
        } else {
            if let Some(c) = &cache {
                let key = |h: BlockHandle| CacheKey {
                    extent_id: cache_id,
                    offset: h.offset,
                };
                c.insert(key(footer.index), index);
                if let (Some(h), Some(f)) = (footer.filter, filter) {
                    c.insert(key(h), f);
                }
            }
            (None, None)
        };
        Ok(Arc::new(ExtentReader {
            file,
            path,
            offset,
            size,
            cache_id,
            cache,
            footer,
            pinned_index,
            pinned_filter,
            props,
        }))
    }

    /// The extent's properties.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn properties(&self) -> &ExtentProperties {
        &self.props
    }

    /// How the extent's data blocks are compressed.
    pub fn compression(&self) -> CompressionType {
        self.props.compression
    }

    /// The file path (for messages).
    pub fn path(&self) -> &Arc<Path> {
        &self.path
    }

    /// Absolute file offset of a position inside the extent.
    pub(crate) fn abs(&self, rel: u64) -> u64 {
        self.offset.saturating_add(rel)
    }

    fn loc(&self, rel: u64) -> Loc<'_> {
        Loc {
            file: &self.path,
            offset: self.abs(rel),
        }
    }

    /// Handle of the index block.
    pub(crate) fn index_handle(&self) -> BlockHandle {
        self.footer.index
    }

    /// Reads one block from the file (no cache) and decodes it.
    fn read_block(&self, h: BlockHandle, kind: BlockKind) -> Result<(Block, CompressionType)> {
        let loc = self.loc(h.offset);
        let len = h
            .size
            .checked_add(BLOCK_TRAILER_LEN as u64)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| loc.corrupt("block size overflows"))?;
        // A pooled buffer: usually the one of the block this thread's last
        // cache insert evicted (`util::buf_pool`).
        let mut stored = crate::util::buf_pool::take(len);
        self.file.read_exact_at(loc.offset, &mut stored)?;
        decode_stored_block(stored, kind, loc)
    }

    /// A block through the cache (if any).
    pub(crate) fn load_block(&self, h: BlockHandle, kind: BlockKind) -> Result<Arc<Block>> {
        self.load_block_with(h, kind, CachePriority::High)
    }

    /// [`ExtentReader::load_block`], caching a block read on a miss at `priority`.
    pub(crate) fn load_block_with(
        &self,
        h: BlockHandle,
        kind: BlockKind,
        priority: CachePriority,
    ) -> Result<Arc<Block>> {
        let Some(cache) = &self.cache else {
            return Ok(Arc::new(self.read_block(h, kind)?.0));
        };
        let key = CacheKey {
            extent_id: self.cache_id,
            offset: h.offset,
        };
        if let Some(b) = cache.get(key) {
            return Ok(b);
        }
        let b = Arc::new(self.read_block(h, kind)?.0);
        cache.insert_with(key, b.clone(), priority);
        Ok(b)
    }

    /// The index block (pinned, cached or read).
    pub(crate) fn index_block(&self) -> Result<Arc<Block>> {
        match &self.pinned_index {
            Some(b) => Ok(b.clone()),
            None => self.load_block(self.footer.index, BlockKind::Entries),
        }
    }

    /// Decodes a data-block handle from an index value; it must lie within
    /// the data blocks.
    pub(crate) fn data_handle(&self, index_value: &[u8]) -> Result<BlockHandle> {
        match BlockHandle::decode(index_value) {
            Some(h)
                if h.end_with_trailer()
                    .is_some_and(|e| e <= self.props.data_size) =>
            {
                Ok(h)
            }
            _ => Err(self
                .loc(self.footer.index.offset)
                .corrupt("bad data block handle in index")),
        }
    }

    /// Filter probe: false only if `user_key` is certainly not in the extent.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let probe =
            |b: &Block| FilterView::parse(b.contents()).is_none_or(|f| f.may_contain(user_key));
        let Some(h) = self.footer.filter else {
            return true;
        };
        if let Some(b) = &self.pinned_filter {
            return probe(b);
        }
        match self.load_block(h, BlockKind::Raw) {
            Ok(b) => probe(&b),
            Err(_) => true, // cannot tell; the lookup itself will report it
        }
    }

    /// Newest entry of `user_key` with seq <= `snapshot` in this extent
    /// (point entries), probing the filter first. (The engine uses
    /// [`ExtentReader::get_into`]; tests and benches use this.)
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn get(
        &self,
        user_key_: &[u8],
        snapshot: SequenceNumber,
    ) -> Result<Option<(ValueKind, SequenceNumber, Vec<u8>)>> {
        let mut value = Vec::new();
        Ok(self
            .get_into(user_key_, snapshot, &mut value)?
            .map(|(kind, seq)| (kind, seq, value)))
    }

    /// Like [`ExtentReader::get`], but the value is copied into `value`
    /// (cleared first; untouched if nothing is found), so a caller that
    /// reuses its buffer allocates nothing.
    pub fn get_into(
        &self,
        user_key_: &[u8],
        snapshot: SequenceNumber,
        value: &mut Vec<u8>,
    ) -> Result<Option<(ValueKind, SequenceNumber)>> {
        if self.props.num_entries == 0
            || user_key_ < user_key(&self.props.smallest_key)
            || user_key_ > user_key(&self.props.largest_key)
            || !self.may_contain(user_key_)
        {
            return Ok(None);
        }
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut s) => {
                let r = self.get_inner(user_key_, snapshot, &mut s, value);
                s.trim();
                r
            }
            Err(_) => self.get_inner(user_key_, snapshot, &mut Scratch::default(), value),
        })
    }

    fn get_inner(
        &self,
        uk: &[u8],
        snapshot: SequenceNumber,
        s: &mut Scratch,
        value: &mut Vec<u8>,
    ) -> Result<Option<(ValueKind, SequenceNumber)>> {
        s.lookup.clear();
        append_internal_key(&mut s.lookup, uk, snapshot.min(MAX_SEQUENCE), KIND_FOR_SEEK);
        // Borrowed cursors: no reference counts touched except the data
        // block's cache handle.
        let loaded_index;
        let index_block: &Block = match &self.pinned_index {
            Some(b) => b,
            None => {
                loaded_index = self.load_block(self.footer.index, BlockKind::Entries)?;
                &loaded_index
            }
        };
        let mut index = BlockIter::with_key_buffer(
            index_block,
            &*self.path,
            self.abs(self.footer.index.offset),
            std::mem::take(&mut s.index_key),
        );
        index.seek(&s.lookup)?;
        let mut found = None;
        while index.valid() {
            let h = self.data_handle(index.value())?;
            let block = self.load_block(h, BlockKind::Entries)?;
            let mut data = BlockIter::with_key_buffer(
                &*block,
                &*self.path,
                self.abs(h.offset),
                std::mem::take(&mut s.data_key),
            );
            data.seek(&s.lookup)?;
            if data.valid() {
                let p = parse_internal_key(data.key())
                    .filter(|p| p.kind != ValueKind::RangeDelete)
                    .ok_or_else(|| self.loc(h.offset).corrupt("bad internal key in data block"))?;
                if p.user_key == uk {
                    value.clear();
                    value.extend_from_slice(data.value());
                    found = Some((p.kind, p.seq));
                }
                s.data_key = data.into_key_buffer();
                break;
            }
            // Only reachable if the separator lies past this block's last
            // key; the answer is then the first entry of the next block.
            s.data_key = data.into_key_buffer();
            index.next()?;
        }
        s.index_key = index.into_key_buffer();
        Ok(found)
    }

    /// Two-level iterator over the point entries (index -> data blocks, through the cache).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn iter(self: &Arc<Self>) -> ExtentIterator {
        ExtentIterator::new(self.clone(), CachePriority::High)
    }

    /// Two-level iterator over the point entries, caching the data blocks it
    /// reads on a miss at `priority`.
    pub fn iter_with(self: &Arc<Self>, priority: CachePriority) -> ExtentIterator {
        ExtentIterator::new(self.clone(), priority)
    }

    /// The range tombstones `(begin, end, seq)`, ordered by begin then
    /// newest first.
    pub fn range_tombstones(&self) -> Result<Vec<RangeTombstone>> {
        let Some(h) = self.footer.range_del else {
            return Ok(Vec::new());
        };
        let block = self.load_block(h, BlockKind::Entries)?;
        let mut it = BlockIter::new(block, self.path.clone(), self.abs(h.offset));
        let mut out = Vec::new();
        it.seek_to_first()?;
        while it.valid() {
            let p = parse_internal_key(it.key())
                .filter(|p| p.kind == ValueKind::RangeDelete)
                .ok_or_else(|| self.loc(h.offset).corrupt("bad range tombstone key"))?;
            out.push((p.user_key.to_vec(), it.value().to_vec(), p.seq));
            it.next()?;
        }
        Ok(out)
    }

    /// Reads every block from the file (bypassing the cache) and checks
    /// checksums, decoding, key order and the counts in the properties.
    pub fn verify_checksums(&self) -> Result<()> {
        self.walk(|_, _, _| {})
    }

    /// Walks footer, meta blocks and every data block straight from the
    /// file, calling `f(handle, compression, block)` per data block.
    fn walk(&self, mut f: impl FnMut(BlockHandle, CompressionType, &Arc<Block>)) -> Result<()> {
        let footer_off = self.size - FOOTER_LEN as u64;
        let mut fbuf = [0u8; FOOTER_LEN];
        self.file.read_exact_at(self.abs(footer_off), &mut fbuf)?;
        let footer = Footer::decode(&fbuf, self.loc(footer_off))?;
        if footer != self.footer {
            return Err(self.loc(footer_off).corrupt("footer changed since open"));
        }
        self.read_block(footer.properties, BlockKind::Raw)?;
        if let Some(h) = footer.filter {
            self.read_block(h, BlockKind::Raw)?;
        }
        if let Some(h) = footer.range_del {
            self.read_block(h, BlockKind::Entries)?;
        }
        let index = Arc::new(self.read_block(footer.index, BlockKind::Entries)?.0);
        let mut it = BlockIter::new(index, self.path.clone(), self.abs(footer.index.offset));
        let (mut blocks, mut entries) = (0u64, 0u64);
        let mut prev_key: Vec<u8> = Vec::new();
        it.seek_to_first()?;
        while it.valid() {
            let h = self.data_handle(it.value())?;
            let (block, ctype) = self.read_block(h, BlockKind::Entries)?;
            let block = Arc::new(block);
            let mut d = BlockIter::new(block.clone(), self.path.clone(), self.abs(h.offset));
            d.seek_to_first()?;
            while d.valid() {
                let bad = parse_internal_key(d.key())
                    .is_none_or(|p| p.kind == ValueKind::RangeDelete)
                    || (entries > 0 && compare_internal_keys(&prev_key, d.key()) != Ordering::Less)
                    || compare_internal_keys(d.key(), it.key()) == Ordering::Greater;
                if bad {
                    return Err(self
                        .loc(h.offset)
                        .corrupt("data block keys out of order or malformed"));
                }
                prev_key.clear();
                prev_key.extend_from_slice(d.key());
                entries += 1;
                d.next()?;
            }
            f(h, ctype, &block);
            blocks += 1;
            it.next()?;
        }
        if blocks != self.props.num_data_blocks || entries != self.props.num_entries {
            return Err(self.loc(footer.properties.offset).corrupt(format!(
                "properties claim {} blocks / {} entries, found {blocks} / {entries}",
                self.props.num_data_blocks, self.props.num_entries
            )));
        }
        Ok(())
    }

    /// Human-readable dump of blocks (offset, size, entries, compression)
    /// and properties, for `shale dump`.
    pub fn describe(&self) -> Result<String> {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "extent {} @ {} size {} (format v{})",
            self.path.display(),
            self.offset,
            self.size,
            self.footer.version
        );
        let _ = writeln!(s, "properties:");
        s.push_str(&self.props.describe());
        let fh = |h: Option<BlockHandle>| match h {
            Some(h) => format!("offset {} size {}", h.offset, h.size),
            None => "none".to_string(),
        };
        let _ = writeln!(s, "meta blocks:");
        let _ = writeln!(s, "  index:      {}", fh(Some(self.footer.index)));
        let _ = writeln!(s, "  filter:     {}", fh(self.footer.filter));
        let _ = writeln!(s, "  range-del:  {}", fh(self.footer.range_del));
        let _ = writeln!(s, "  properties: {}", fh(Some(self.footer.properties)));
        let _ = writeln!(s, "data blocks:");
        let mut lines = Vec::new();
        self.walk(|h, ctype, block| {
            let mut it = BlockIter::new(block.clone(), self.path.clone(), self.abs(h.offset));
            let mut n = 0usize;
            let mut first = String::new();
            let mut last = String::new();
            let _ = it.seek_to_first();
            while it.valid() {
                if n == 0 {
                    first = fmt_ikey(it.key());
                }
                last = fmt_ikey(it.key());
                n += 1;
                if it.next().is_err() {
                    break;
                }
            }
            lines.push(format!(
                "  #{:<4} offset {:>8} size {:>6} (+{BLOCK_TRAILER_LEN}) {:<4} raw {:>6} entries {:>4}  {} .. {}",
                lines.len(),
                h.offset,
                h.size,
                ctype.name(),
                block.contents().len(),
                n,
                first,
                last
            ));
        })?;
        for l in lines {
            let _ = writeln!(s, "{l}");
        }
        let tombstones = self.range_tombstones()?;
        if !tombstones.is_empty() {
            let _ = writeln!(s, "range tombstones:");
            for (b, e, seq) in tombstones {
                let _ = writeln!(s, "  [{}, {}) @{seq}", fmt_bytes(&b), fmt_bytes(&e));
            }
        }
        Ok(s)
    }
}

impl std::fmt::Debug for ExtentReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtentReader")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("size", &self.size)
            .field("cache_id", &self.cache_id)
            .finish_non_exhaustive()
    }
}
