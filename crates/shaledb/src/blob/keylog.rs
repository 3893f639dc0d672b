//! Format version 2 (docs/format-blob.md, section 7): where values go in a
//! version-2 value file, and the codecs of its key log (`NNNNNN.bkey`),
//! which holds each value's key, column family, lengths and checksum so
//! that the value file holds values alone and a 4 KiB value is one aligned
//! 4 KiB page.

use super::format::{
    decode_sealing_footer, encode_sealing_footer, value_crc, BlobIndex, HeaderError, FOOTER_MARK,
    PAGE,
};
use crate::util::coding::{mask_crc, unmask_crc, Reader};
use std::path::{Path, PathBuf};

/// Magic at the start of a key log.
pub const KEYLOG_MAGIC: &[u8; 8] = b"SHALEBKY";
/// Magic at the end of a key log's footer.
pub const KEYLOG_FOOTER_MAGIC: &[u8; 8] = b"SHALEBKF";
/// The key-log version this code writes and reads.
pub const KEYLOG_VERSION: u32 = 1;
/// Bytes of the key-log header.
pub const KEYLOG_HEADER_LEN: usize = 24;
/// Bytes of an entry before its key.
pub const ENTRY_HEAD_LEN: usize = 24;
/// Bytes of an entry besides its key.
pub const ENTRY_OVERHEAD: usize = ENTRY_HEAD_LEN + 4;
/// Bytes of the key-log footer.
pub const KEYLOG_FOOTER_LEN: usize = 36;
/// File-name suffix of key logs.
pub const KEYLOG_SUFFIX: &str = "bkey";

/// Path of the key log of value file `number` in `dir`.
pub fn keylog_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.{KEYLOG_SUFFIX}"))
}

/// The value-file number of a key-log name (`000007.bkey` -> 7).
pub fn parse_keylog_name(name: &str) -> Option<u64> {
    let (num, ext) = name.split_once('.')?;
    (ext == KEYLOG_SUFFIX && !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()))
        .then(|| num.parse().ok())
        .flatten()
}

/// The key-log header naming value file `number`.
pub fn encode_keylog_header(number: u64) -> [u8; KEYLOG_HEADER_LEN] {
    let mut out = [0u8; KEYLOG_HEADER_LEN];
    out[..8].copy_from_slice(KEYLOG_MAGIC);
    out[8..12].copy_from_slice(&KEYLOG_VERSION.to_le_bytes());
    out[12..20].copy_from_slice(&number.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&out[..20]));
    out[20..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a key-log header for value file `number`.
pub fn check_keylog_header(bytes: &[u8], number: u64) -> Result<(), HeaderError> {
    let short = HeaderError::Bad("short key-log header");
    let body = bytes.get(..20).ok_or(short)?;
    let mut r = Reader::new(bytes);
    let magic = r.bytes(8);
    let version = r.u32();
    let file = r.u64();
    let crc = r.u32().ok_or(short)?;
    if magic != Some(KEYLOG_MAGIC.as_slice()) {
        return Err(HeaderError::Bad("bad key-log magic"));
    }
    if unmask_crc(crc) != crc32c::crc32c(body) {
        return Err(HeaderError::Bad("key-log header checksum mismatch"));
    }
    match version {
        Some(KEYLOG_VERSION) => {}
        Some(v) => return Err(HeaderError::Version(v)),
        None => return Err(short),
    }
    if file != Some(number) {
        return Err(HeaderError::Bad("key log names another value file"));
    }
    Ok(())
}

/// One key-log entry, decoded and checked (its own checksum; not yet the
/// value's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Column family id.
    pub cf: u32,
    /// User key.
    pub key: Vec<u8>,
    /// Offset of the value in the value file.
    pub offset: u64,
    /// Length of the value.
    pub value_len: u32,
    /// The value checksum ([`value_crc`]).
    pub crc: u32,
}

impl Entry {
    /// The version-2 index of this entry's value in file `file`.
    pub fn index(&self, file: u64) -> BlobIndex {
        BlobIndex {
            file,
            offset: self.offset,
            value_len: u64::from(self.value_len),
            crc: Some(self.crc),
        }
    }
}

/// What reading an entry at some key-log offset found.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A valid entry.
    Entry(Entry),
    /// The footer mark: the footer starts here.
    Footer,
}

/// The key length of an entry head (its first 4 bytes), to size the read
/// of the whole entry; `None` if shorter.
pub fn entry_key_len(head: &[u8]) -> Option<u32> {
    Reader::new(head).u32()
}

/// Decodes the entry that `bytes` holds exactly (`ENTRY_OVERHEAD + k`
/// bytes) and checks its checksum.
pub fn decode_entry(bytes: &[u8]) -> Result<Decoded, &'static str> {
    let mut r = Reader::new(bytes);
    let key_len = r.u32().ok_or("short key-log entry")?;
    if key_len == FOOTER_MARK {
        return Ok(Decoded::Footer);
    }
    let value_len = r.u32().ok_or("short key-log entry")?;
    let cf = r.u32().ok_or("short key-log entry")?;
    let offset = r.u64().ok_or("short key-log entry")?;
    let crc = r.u32().ok_or("short key-log entry")?;
    let key = r.bytes(key_len as usize).ok_or("short key-log entry")?;
    let stored = r.u32().ok_or("short key-log entry")?;
    if !r.is_empty() {
        return Err("key-log entry length mismatch");
    }
    let body = bytes.get(..bytes.len() - 4).ok_or("short key-log entry")?;
    if unmask_crc(stored) != crc32c::crc32c(body) {
        return Err("key-log entry checksum mismatch");
    }
    Ok(Decoded::Entry(Entry {
        cf,
        key: key.to_vec(),
        offset,
        value_len,
        crc,
    }))
}

/// The key-log footer: `entries` entries, value file `value_end` bytes long
/// (the layout of a version-1 value file's footer, with the key log's
/// magic and version).
pub fn encode_keylog_footer(entries: u64, value_end: u64) -> [u8; KEYLOG_FOOTER_LEN] {
    encode_sealing_footer(entries, value_end, KEYLOG_FOOTER_MAGIC, KEYLOG_VERSION)
}

/// Decodes a key-log footer: `(entries, value_end)`, `None` if invalid
/// (including any length but `KEYLOG_FOOTER_LEN`).
pub fn decode_keylog_footer(bytes: &[u8]) -> Option<(u64, u64)> {
    if bytes.len() != KEYLOG_FOOTER_LEN {
        return None;
    }
    decode_sealing_footer(bytes, KEYLOG_FOOTER_MAGIC, KEYLOG_VERSION)
}

/// Where the next value of `len` bytes starts in a version-2 value file
/// whose logical end is `end`: a positive multiple of [`PAGE`] at the next
/// page boundary, anything else right at `end` (packed).
pub fn place(end: u64, len: u64) -> u64 {
    if len > 0 && len.is_multiple_of(PAGE) {
        end.div_ceil(PAGE) * PAGE
    } else {
        end
    }
}

/// Builds one group's appends to a version-2 value file and its key log:
/// the value bytes (with the zero padding before aligned values) and the
/// entries. The caller appends `values` to the value file, then `keys` to
/// the key log, in that order (docs/format-blob.md section 7.4).
pub struct GroupEncoder {
    file: u64,
    /// Value-file offset of `values[0]`.
    base: u64,
    /// Value bytes of this group.
    pub values: Vec<u8>,
    /// Key-log bytes of this group.
    pub keys: Vec<u8>,
    /// Entries encoded.
    pub entries: u64,
}

impl GroupEncoder {
    /// An encoder appending to value file `file` at logical offset `base`.
    pub fn new(file: u64, base: u64, room: usize) -> GroupEncoder {
        GroupEncoder {
            file,
            base,
            values: Vec::with_capacity(room),
            keys: Vec::new(),
            entries: 0,
        }
    }

    /// The value file this group appends to.
    pub fn file(&self) -> u64 {
        self.file
    }

    /// The value file's logical end after this group.
    pub fn end(&self) -> u64 {
        self.base + self.values.len() as u64
    }

    /// Places `value` of `key` in `cf`, records its entry, and returns its
    /// index. `None` if the key or value is longer than `u32::MAX` (the
    /// write path refuses such values before; nothing is encoded then).
    pub fn push(&mut self, cf: u32, key: &[u8], value: &[u8]) -> Option<BlobIndex> {
        let key_len = u32::try_from(key.len()).ok()?;
        let value_len = u32::try_from(value.len()).ok()?;
        let at = place(self.end(), u64::from(value_len));
        let pad = usize::try_from(at - self.end()).ok()?;
        self.values.resize(self.values.len() + pad, 0);
        self.values.extend_from_slice(value);
        let crc = value_crc(cf, key, value);
        let start = self.keys.len();
        self.keys.extend_from_slice(&key_len.to_le_bytes());
        self.keys.extend_from_slice(&value_len.to_le_bytes());
        self.keys.extend_from_slice(&cf.to_le_bytes());
        self.keys.extend_from_slice(&at.to_le_bytes());
        self.keys.extend_from_slice(&crc.to_le_bytes());
        self.keys.extend_from_slice(key);
        let ecrc = mask_crc(crc32c::crc32c(self.keys.get(start..).unwrap_or_default()));
        self.keys.extend_from_slice(&ecrc.to_le_bytes());
        self.entries += 1;
        Some(BlobIndex {
            file: self.file,
            offset: at,
            value_len: u64::from(value_len),
            crc: Some(crc),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn aligned_values_start_on_pages_and_others_are_packed() {
        let mut g = GroupEncoder::new(7, 16, 0);
        let a = g.push(0, b"a", &[1u8; 100]).unwrap();
        let b = g.push(0, b"b", &[2u8; 4096]).unwrap();
        let c = g.push(0, b"c", &[3u8; 4096]).unwrap();
        let d = g.push(0, b"d", &[4u8; 10]).unwrap();
        let e = g.push(0, b"e", &[5u8; 8192]).unwrap();
        assert_eq!(
            [a.offset, b.offset, c.offset, d.offset, e.offset],
            [16, 4096, 8192, 12288, 16384]
        );
        assert_eq!(g.end(), 16384 + 8192);
        assert_eq!(g.values[(116 - 16)..(4096 - 16)], vec![0u8; 4096 - 116]);
        assert_eq!(g.entries, 5);
        assert_eq!(place(0, 0), 0);
        assert_eq!(place(1, 0), 1);
    }

    #[test]
    fn entry_matches_the_doc_example_and_detects_damage() {
        let mut g = GroupEncoder::new(7, 4096, 0);
        let idx = g.push(0, b"k", &[9u8; 4096]).unwrap();
        assert_eq!(g.keys.len(), 29);
        assert_eq!(
            &g.keys[..20],
            &[1, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(g.keys[24], b'k');
        let Decoded::Entry(e) = decode_entry(&g.keys).unwrap() else {
            panic!("footer")
        };
        assert_eq!(e.index(7), idx);
        assert_eq!(idx.crc, Some(value_crc(0, b"k", &[9u8; 4096])));
        for i in 0..g.keys.len() {
            let mut d = g.keys.clone();
            d[i] ^= 0x20;
            assert!(
                !matches!(decode_entry(&d), Ok(Decoded::Entry(ref x)) if *x == e),
                "flip at {i} not detected"
            );
        }
    }

    #[test]
    fn header_footer_and_index_round_trip() {
        let h = encode_keylog_header(5);
        assert_eq!(check_keylog_header(&h, 5), Ok(()));
        assert!(check_keylog_header(&h, 6).is_err());
        assert!(check_keylog_header(&h[..23], 5).is_err());
        let mut bad = h;
        bad[13] ^= 1;
        assert!(check_keylog_header(&bad, 5).is_err());
        let f = encode_keylog_footer(3, 12288);
        assert_eq!(decode_keylog_footer(&f), Some((3, 12288)));
        assert_eq!(decode_entry(&f), Ok(Decoded::Footer));
        let mut g = f;
        g[14] ^= 1;
        assert_eq!(decode_keylog_footer(&g), None);
        let idx = BlobIndex {
            file: 7,
            offset: 4096,
            value_len: 4096,
            crc: Some(0xAABB_CCDD),
        };
        let e = idx.encode();
        assert_eq!(e.as_slice().len(), 28);
        assert_eq!(&e.as_slice()[24..], &[0xDD, 0xCC, 0xBB, 0xAA]);
        assert_eq!(BlobIndex::decode(e.as_slice()), Some(idx));
        assert_eq!(BlobIndex::decode(&e.as_slice()[..27]), None);
        // The checksum covers the column family and the key, not only the value.
        assert_ne!(value_crc(0, b"k", b"v"), value_crc(1, b"k", b"v"));
        assert_ne!(value_crc(0, b"k", b"v"), value_crc(0, b"j", b"v"));
    }
}
