//! Extents: the self-contained, immutable sorted unit of the data files.
//!
//! A data file is a sequence of fixed-size (2 MiB) slots; each slot holds at
//! most one extent. This module only deals with the bytes of one extent at a
//! given offset of a file; placing extents into slots and recording
//! `(file, offset, size)` is the version layer's job. The byte-exact layout
//! is specified in `docs/format-extent.md`; in short:
//!
//! ```text
//! +--------------+-----+--------------+--------+----------+-------+-------+--------+
//! | data block 0 | ... | data block n | filter | rangedel | index | props | footer |
//! +--------------+-----+--------------+--------+----------+-------+-------+--------+
//!   each stored block = contents | compression type u8 | masked crc32c u32 LE
//! ```
//!
//! * data blocks ([`block_builder`], [`block`]): ~16 KiB of internal keys
//!   with prefix compression and restart points, optionally compressed
//!   ([`compression`]);
//! * filter ([`filter`]): one cache-line-blocked bloom filter over the
//!   distinct user keys;
//! * range-del: range tombstones as a block of `(begin@seq, end)` entries;
//! * index: one entry per data block, `separator -> block handle`;
//! * properties ([`properties`]): counts, key and sequence bounds;
//! * footer ([`footer`]): fixed 48 bytes with the meta-block handles, format
//!   version, magic number and its own checksum.
//!
//! Worked example: adding `a@9:Put=1, a@5:Put=0, b@7:Del` with default
//! options gives one data block with three entries (the second shares the
//! prefix `a`), a filter over the two user keys `a` and `b`, an index with a
//! single entry `c@MAX -> (offset 0, size N)` (the short successor of `b`),
//! properties `num_entries = 3, num_deletions = 1, smallest = a@9,
//! largest = b@7`, then the footer.
//!
//! Reading ([`reader`], [`extent_iter`]): [`ExtentReader::open`] checks the
//! footer and meta blocks; lookups binary-search the index, then one data
//! block, through the [`crate::cache::BlockCache`]. Every stored block is
//! checksummed; damaged bytes surface as `Error::Corruption` with the
//! absolute file offset of the damaged block, never as wrong data.

pub mod block;
pub mod block_builder;
mod block_heads;
pub mod builder;
pub mod compression;
pub mod extent_iter;
pub mod filter;
pub mod footer;
pub mod properties;
pub mod reader;
#[cfg(test)]
mod tests;

pub use block::Block;
pub use builder::{ExtentBuilder, ExtentBuilderOptions};
pub use compression::CompressionType;
pub use extent_iter::ExtentIterator;
pub use reader::ExtentReader;

use crate::error::Error;
use crate::util::coding::{put_varint64, Reader};
use std::path::Path;

/// Format version written in the footer and the properties.
pub const FORMAT_VERSION: u32 = 1;

/// Magic number at the end of every footer: the ASCII bytes `ShaleExt`
/// read as a little-endian u64.
pub const EXTENT_MAGIC: u64 = u64::from_le_bytes(*b"ShaleExt");

/// Bytes after each stored block's contents: compression type u8 + masked crc32c u32 LE.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Largest uncompressed block the reader accepts when a compressed block
/// announces its decompressed size (defense in depth after the checksum).
/// The builder never produces a larger block: block_size is clamped to
/// [`MAX_BLOCK_SIZE_OPTION`] and an entry to [`MAX_ENTRY_LEN`].
pub const MAX_BLOCK_LEN: usize = 128 << 20;

/// Largest `block_size` option honoured (larger values are clamped).
pub const MAX_BLOCK_SIZE_OPTION: usize = 32 << 20;

/// Largest `key + value` of one entry accepted by the builder.
pub const MAX_ENTRY_LEN: usize = 64 << 20;

/// A range tombstone `(begin user key, end user key (exclusive), sequence)`.
pub type RangeTombstone = (Vec<u8>, Vec<u8>, crate::types::SequenceNumber);

/// Largest encoding of a [`BlockHandle`] as two varints.
pub const MAX_HANDLE_LEN: usize = 20;

/// Where a block lives inside its extent: offset from the extent start and
/// length of the stored contents (without the 5-byte trailer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHandle {
    /// Offset of the block from the start of the extent.
    pub offset: u64,
    /// Length of the stored (possibly compressed) contents, trailer excluded.
    pub size: u64,
}

impl BlockHandle {
    /// Appends `offset varint, size varint` (the index-entry value format).
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.offset);
        put_varint64(out, self.size);
    }

    /// Decodes a handle that must fill `bytes` exactly.
    pub fn decode(bytes: &[u8]) -> Option<BlockHandle> {
        let mut r = Reader::new(bytes);
        let offset = r.varint64()?;
        let size = r.varint64()?;
        r.is_empty().then_some(BlockHandle { offset, size })
    }

    /// End of the stored block including its trailer, relative to the extent.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// A position in a file, used to build `Error::Corruption` for bytes found there.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Loc<'a> {
    /// The file.
    pub file: &'a Path,
    /// Absolute offset of the damaged unit (block or footer) in the file.
    pub offset: u64,
}

impl Loc<'_> {
    /// The corruption error for this location.
    pub fn corrupt(&self, reason: impl Into<String>) -> Error {
        Error::corruption(self.file, self.offset, reason)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index fixtures they built
mod handle_tests {
    use super::*;

    #[test]
    fn handle_round_trips_and_rejects_trailing_bytes() {
        let h = BlockHandle {
            offset: 1 << 20,
            size: 16_391,
        };
        let mut b = Vec::new();
        h.encode_to(&mut b);
        assert!(b.len() <= MAX_HANDLE_LEN);
        assert_eq!(BlockHandle::decode(&b), Some(h));
        b.push(0);
        assert_eq!(BlockHandle::decode(&b), None);
        assert_eq!(BlockHandle::decode(&[0x80]), None);
        let max = BlockHandle {
            offset: u64::MAX,
            size: u64::MAX,
        };
        let mut b = Vec::new();
        max.encode_to(&mut b);
        assert_eq!(b.len(), MAX_HANDLE_LEN);
        assert_eq!(max.end_with_trailer(), None);
    }

    #[test]
    fn magic_spells_shaleext() {
        assert_eq!(&EXTENT_MAGIC.to_le_bytes(), b"ShaleExt");
    }
}
