//! Byte layout of value files and of the BlobIndex (docs/format-blob.md).

use crate::error::Error;
use crate::util::coding::{mask_crc, unmask_crc, Reader};
use std::path::{Path, PathBuf};

/// Magic at the start of every value file.
pub const MAGIC: &[u8; 8] = b"SHALEBLB";
/// Magic at the end of a sealed value file's footer.
pub const FOOTER_MAGIC: &[u8; 8] = b"SHALEBFT";
/// Format version 1: records of key and value back to back (read, never
/// written except by tests that build a version-1 database).
pub const VERSION: u32 = 1;
/// Format version 2: page-aligned values, metadata in the key log (written).
pub const VERSION_2: u32 = 2;
/// Values whose length is a multiple of this start at a multiple of it (version 2).
pub const PAGE: u64 = 4096;
/// Bytes of the file header.
pub const HEADER_LEN: usize = 16;
/// Bytes of a record before the key (key len, value len, cf).
pub const RECORD_HEADER_LEN: usize = 12;
/// Bytes of a record besides key and value.
pub const RECORD_OVERHEAD: usize = RECORD_HEADER_LEN + 4;
/// Bytes of the footer.
pub const FOOTER_LEN: usize = 36;
/// Key length that marks the footer.
pub const FOOTER_MARK: u32 = u32::MAX;
/// Bytes of an encoded version-1 [`BlobIndex`].
pub const INDEX_LEN: usize = 24;
/// Bytes of an encoded version-2 [`BlobIndex`].
pub const INDEX_LEN_V2: usize = 28;
/// File-name suffix of value files.
pub const SUFFIX: &str = "blob";

/// Path of value file `number` in `dir`.
pub fn blob_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.{SUFFIX}"))
}

/// The number of a value file name (`000007.blob` -> 7).
pub fn parse_blob_name(name: &str) -> Option<u64> {
    name.strip_suffix(&format!(".{SUFFIX}"))?.parse().ok()
}

/// Where a value lives: the LSM value of a `BlobIndex` entry. Version 1
/// (24 bytes, `crc` = `None`) points at a record of a version-1 file;
/// version 2 (28 bytes) at a bare value of a version-2 file, with the
/// value checksum (docs/format-blob.md, sections 2 and 7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobIndex {
    /// Value file number.
    pub file: u64,
    /// Offset of the record (version 1) or of the value (version 2).
    pub offset: u64,
    /// Length of the value.
    pub value_len: u64,
    /// Version 2: masked crc32c of cf (u32 LE) || key || value.
    pub crc: Option<u32>,
}

/// An encoded [`BlobIndex`]: 24 or 28 bytes, without an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexBytes {
    buf: [u8; INDEX_LEN_V2],
    len: usize,
}

impl IndexBytes {
    /// The encoded bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

impl BlobIndex {
    /// The encoding: 24 bytes for version 1, 28 for version 2.
    pub fn encode(&self) -> IndexBytes {
        let mut buf = [0u8; INDEX_LEN_V2];
        for (dst, v) in buf
            .chunks_exact_mut(8)
            .zip([self.file, self.offset, self.value_len])
        {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        let len = match self.crc {
            Some(crc) => {
                buf[INDEX_LEN..].copy_from_slice(&crc.to_le_bytes());
                INDEX_LEN_V2
            }
            None => INDEX_LEN,
        };
        IndexBytes { buf, len }
    }

    /// Decodes an index; `None` unless `bytes` is 24 (version 1) or 28
    /// (version 2) bytes.
    pub fn decode(bytes: &[u8]) -> Option<BlobIndex> {
        if bytes.len() != INDEX_LEN && bytes.len() != INDEX_LEN_V2 {
            return None;
        }
        let mut r = Reader::new(bytes);
        Some(BlobIndex {
            file: r.u64()?,
            offset: r.u64()?,
            value_len: r.u64()?,
            crc: if bytes.len() == INDEX_LEN_V2 {
                Some(r.u32()?)
            } else {
                None
            },
        })
    }

    /// The value-file format version this index points into.
    pub fn version(&self) -> u32 {
        if self.crc.is_some() {
            VERSION_2
        } else {
            VERSION
        }
    }

    /// Bytes read at `offset` for a key of `key_len`: the whole record
    /// (version 1) or the value alone (version 2).
    pub fn record_len(&self, key_len: usize) -> Option<usize> {
        let v = usize::try_from(self.value_len).ok()?;
        if self.crc.is_some() {
            return Some(v);
        }
        v.checked_add(key_len)?.checked_add(RECORD_OVERHEAD)
    }

    /// Bytes GC and the dead-byte count account for this value: the
    /// version-1 record length `16 + key + value`, for both versions (one
    /// unit, docs/format-blob.md section 7.5).
    pub fn counted_len(&self, key_len: usize) -> u64 {
        (key_len as u64)
            .saturating_add(self.value_len)
            .saturating_add(RECORD_OVERHEAD as u64)
    }
}

/// The version-2 value checksum: masked crc32c of cf (u32 LE) || key || value.
pub fn value_crc(cf: u32, key: &[u8], value: &[u8]) -> u32 {
    let c = crc32c::crc32c(&cf.to_le_bytes());
    let c = crc32c::crc32c_append(c, key);
    mask_crc(crc32c::crc32c_append(c, value))
}

/// The file header of a version-`version` file.
pub fn encode_header(version: u32) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&out[..12]));
    out[12..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Why the header of a value file ([`check_header`]) or of a key log
/// (`keylog::check_keylog_header`) is refused. The reasons name the file
/// kind ("bad magic" / "bad key-log magic"), and [`HeaderError::into_error`]
/// adds the file's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Short, bad magic, bad checksum, or (a key log) another value file's
    /// number.
    #[error("{0}")]
    Bad(&'static str),
    /// A version this code does not read.
    #[error("unsupported version {0}")]
    Version(u32),
}

impl HeaderError {
    /// The engine's error for this refusal of the header of `file`:
    /// corruption at offset 0, or an unsupported version.
    pub fn into_error(self, file: &Path) -> Error {
        match self {
            HeaderError::Bad(why) => Error::corruption(file, 0, why),
            HeaderError::Version(version) => Error::UnsupportedVersion {
                file: file.to_path_buf(),
                version,
            },
        }
    }
}

/// Checks a file header; returns its version (1 or 2).
pub fn check_header(bytes: &[u8]) -> Result<u32, HeaderError> {
    let mut r = Reader::new(bytes);
    let magic = r.bytes(8).ok_or(HeaderError::Bad("short header"))?;
    let version = r.u32().ok_or(HeaderError::Bad("short header"))?;
    let crc = r.u32().ok_or(HeaderError::Bad("short header"))?;
    if magic != MAGIC {
        return Err(HeaderError::Bad("bad magic"));
    }
    let body = bytes.get(..12).ok_or(HeaderError::Bad("short header"))?;
    if unmask_crc(crc) != crc32c::crc32c(body) {
        return Err(HeaderError::Bad("header checksum mismatch"));
    }
    if version != VERSION && version != VERSION_2 {
        return Err(HeaderError::Version(version));
    }
    Ok(version)
}

/// Appends one version-1 record to `out` (the write path writes version 2;
/// this encoder stays for tests that build a version-1 file). Lengths
/// above `u32::MAX` are refused (the write path bounds values to 4 GiB).
pub fn encode_record(out: &mut Vec<u8>, cf: u32, key: &[u8], value: &[u8]) -> Option<()> {
    let start = out.len();
    out.extend_from_slice(&u32::try_from(key.len()).ok()?.to_le_bytes());
    out.extend_from_slice(&u32::try_from(value.len()).ok()?.to_le_bytes());
    out.extend_from_slice(&cf.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = mask_crc(crc32c::crc32c(out.get(start..).unwrap_or_default()));
    out.extend_from_slice(&crc.to_le_bytes());
    Some(())
}

/// The lengths and cf of a record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Key length (`FOOTER_MARK` for a footer).
    pub key_len: u32,
    /// Value length.
    pub value_len: u32,
    /// Column family id.
    pub cf: u32,
}

impl RecordHeader {
    /// Decodes the first 12 bytes of a record.
    pub fn decode(bytes: &[u8]) -> Option<RecordHeader> {
        let mut r = Reader::new(bytes);
        Some(RecordHeader {
            key_len: r.u32()?,
            value_len: r.u32()?,
            cf: r.u32()?,
        })
    }

    /// Bytes of the whole record.
    pub fn record_len(&self) -> usize {
        self.key_len as usize + self.value_len as usize + RECORD_OVERHEAD
    }
}

/// A record decoded and checked, borrowing from the read buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Column family id.
    pub cf: u32,
    /// User key.
    pub key: &'a [u8],
    /// Value.
    pub value: &'a [u8],
}

/// Decodes a whole record (exactly `record_len` bytes) and checks its CRC.
pub fn decode_record(bytes: &[u8]) -> Result<Record<'_>, &'static str> {
    let h = RecordHeader::decode(bytes).ok_or("short record")?;
    if h.key_len == FOOTER_MARK {
        return Err("footer where a record was expected");
    }
    if bytes.len() != h.record_len() {
        return Err("record length mismatch");
    }
    let crc_at = bytes.len() - 4;
    let (body, crc) = bytes.split_at(crc_at);
    let crc = u32::from_le_bytes(crc.try_into().map_err(|_| "short record")?);
    if unmask_crc(crc) != crc32c::crc32c(body) {
        return Err("record checksum mismatch");
    }
    let mut r = Reader::new(body.get(RECORD_HEADER_LEN..).ok_or("short record")?);
    let key = r.bytes(h.key_len as usize).ok_or("short record")?;
    let value = r.bytes(h.value_len as usize).ok_or("short record")?;
    Ok(Record {
        cf: h.cf,
        key,
        value,
    })
}

/// The footer of a file with `records` records ending at `data_end`.
pub fn encode_footer(records: u64, data_end: u64) -> [u8; FOOTER_LEN] {
    encode_sealing_footer(records, data_end, FOOTER_MAGIC, VERSION)
}

/// Decodes a footer: `(records, data_end)`, `None` if it is not a valid one.
pub fn decode_footer(bytes: &[u8]) -> Option<(u64, u64)> {
    decode_sealing_footer(bytes, FOOTER_MAGIC, VERSION)
}

/// The 36-byte footer that seals a version-1 value file and a key log
/// (keylog.rs): mark, a count, an end offset, the checksum of those
/// 20 bytes, then the file kind's `magic` and `version`.
pub(super) fn encode_sealing_footer(
    count: u64,
    end: u64,
    magic: &[u8; 8],
    version: u32,
) -> [u8; FOOTER_LEN] {
    let mut out = [0u8; FOOTER_LEN];
    out[..4].copy_from_slice(&FOOTER_MARK.to_le_bytes());
    out[4..12].copy_from_slice(&count.to_le_bytes());
    out[12..20].copy_from_slice(&end.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&out[..20]));
    out[20..24].copy_from_slice(&crc.to_le_bytes());
    out[24..32].copy_from_slice(magic);
    out[32..].copy_from_slice(&version.to_le_bytes());
    out
}

/// Decodes [`encode_sealing_footer`]'s bytes: `(count, end)`, `None` unless
/// the mark, checksum, `magic` and `version` all match.
pub(super) fn decode_sealing_footer(
    bytes: &[u8],
    magic: &[u8; 8],
    version: u32,
) -> Option<(u64, u64)> {
    let mut r = Reader::new(bytes);
    let mark = r.u32()?;
    let count = r.u64()?;
    let end = r.u64()?;
    let crc = r.u32()?;
    let stored_magic = r.bytes(8)?;
    let stored_version = r.u32()?;
    let ok = mark == FOOTER_MARK
        && stored_magic == magic
        && stored_version == version
        && unmask_crc(crc) == crc32c::crc32c(bytes.get(..20)?);
    ok.then_some((count, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_round_trips_and_matches_the_doc_example() {
        let i = BlobIndex {
            file: 7,
            offset: 16,
            value_len: 4096,
            crc: None,
        };
        let e = i.encode();
        let e = e.as_slice();
        assert_eq!(
            e.to_vec(),
            [
                vec![7, 0, 0, 0, 0, 0, 0, 0],
                vec![16, 0, 0, 0, 0, 0, 0, 0],
                vec![0, 16, 0, 0, 0, 0, 0, 0]
            ]
            .concat()
        );
        assert_eq!(BlobIndex::decode(e), Some(i));
        assert_eq!(BlobIndex::decode(&e[..23]), None);
    }

    #[test]
    fn record_round_trips_and_detects_damage() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 0, b"k", b"vv").unwrap();
        assert_eq!(buf.len(), 19);
        assert_eq!(&buf[..12], &[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
        let r = decode_record(&buf).expect("valid");
        assert_eq!((r.cf, r.key, r.value), (0, &b"k"[..], &b"vv"[..]));
        for i in 0..buf.len() {
            let mut d = buf.clone();
            d[i] ^= 0x40;
            assert!(decode_record(&d).is_err(), "flip at {i} not detected");
        }
        assert!(decode_record(&buf[..18]).is_err());
    }

    #[test]
    fn header_and_footer_check() {
        assert_eq!(check_header(&encode_header(VERSION)), Ok(VERSION));
        assert_eq!(check_header(&encode_header(VERSION_2)), Ok(VERSION_2));
        assert_eq!(
            check_header(&encode_header(3)),
            Err(HeaderError::Version(3))
        );
        let mut h = encode_header(VERSION);
        h[3] ^= 1;
        assert!(check_header(&h).is_err());
        let f = encode_footer(3, 1000);
        assert_eq!(decode_footer(&f), Some((3, 1000)));
        let mut g = f;
        g[5] ^= 1;
        assert_eq!(decode_footer(&g), None);
    }

    #[test]
    fn a_refused_header_becomes_an_error_naming_the_file_and_its_kind() {
        let keylog = Path::new("db/000007.bkey");
        let e = HeaderError::Bad("bad key-log magic").into_error(keylog);
        assert!(e.is_corruption());
        let shown = e.to_string();
        assert!(shown.contains("000007.bkey") && shown.contains("bad key-log magic"));
        match HeaderError::Version(3).into_error(keylog) {
            Error::UnsupportedVersion { file, version } => {
                assert_eq!((file.as_path(), version), (keylog, 3));
            }
            other => panic!("{other:?}"),
        }
    }
}
