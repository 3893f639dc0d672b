//! Byte layout of value files and of the BlobIndex (docs/format-blob.md).

use crate::util::coding::{mask_crc, unmask_crc, Reader};
use std::path::{Path, PathBuf};

/// Magic at the start of every value file.
pub const MAGIC: &[u8; 8] = b"SHALEBLB";
/// Magic at the end of a sealed value file's footer.
pub const FOOTER_MAGIC: &[u8; 8] = b"SHALEBFT";
/// The one format version this code writes and reads.
pub const VERSION: u32 = 1;
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
/// Bytes of an encoded [`BlobIndex`].
pub const INDEX_LEN: usize = 24;
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

/// Where a value lives: the LSM value of a `BlobIndex` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobIndex {
    /// Value file number.
    pub file: u64,
    /// Offset of the record in the file.
    pub offset: u64,
    /// Length of the value.
    pub value_len: u64,
}

impl BlobIndex {
    /// The 24-byte encoding.
    pub fn encode(&self) -> [u8; INDEX_LEN] {
        let mut out = [0u8; INDEX_LEN];
        for (dst, v) in out
            .chunks_exact_mut(8)
            .zip([self.file, self.offset, self.value_len])
        {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Decodes an index; `None` unless `bytes` is exactly 24 bytes.
    pub fn decode(bytes: &[u8]) -> Option<BlobIndex> {
        if bytes.len() != INDEX_LEN {
            return None;
        }
        let mut r = Reader::new(bytes);
        Some(BlobIndex {
            file: r.u64()?,
            offset: r.u64()?,
            value_len: r.u64()?,
        })
    }

    /// Bytes of the whole record this index points at, for a key of `key_len`.
    pub fn record_len(&self, key_len: usize) -> Option<usize> {
        usize::try_from(self.value_len)
            .ok()?
            .checked_add(key_len)?
            .checked_add(RECORD_OVERHEAD)
    }
}

/// The file header.
pub fn encode_header() -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&out[..12]));
    out[12..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Why a header is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// Bad magic or CRC.
    Bad(&'static str),
    /// A version this code does not read.
    Version(u32),
}

/// Checks a file header.
pub fn check_header(bytes: &[u8]) -> Result<(), HeaderError> {
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
    if version != VERSION {
        return Err(HeaderError::Version(version));
    }
    Ok(())
}

/// Appends one record to `out`.
pub fn encode_record(out: &mut Vec<u8>, cf: u32, key: &[u8], value: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(&cf.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = mask_crc(crc32c::crc32c(out.get(start..).unwrap_or_default()));
    out.extend_from_slice(&crc.to_le_bytes());
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
    let mut out = [0u8; FOOTER_LEN];
    out[..4].copy_from_slice(&FOOTER_MARK.to_le_bytes());
    out[4..12].copy_from_slice(&records.to_le_bytes());
    out[12..20].copy_from_slice(&data_end.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&out[..20]));
    out[20..24].copy_from_slice(&crc.to_le_bytes());
    out[24..32].copy_from_slice(FOOTER_MAGIC);
    out[32..].copy_from_slice(&VERSION.to_le_bytes());
    out
}

/// Decodes a footer: `(records, data_end)`, `None` if it is not a valid one.
pub fn decode_footer(bytes: &[u8]) -> Option<(u64, u64)> {
    let mut r = Reader::new(bytes);
    let mark = r.u32()?;
    let records = r.u64()?;
    let data_end = r.u64()?;
    let crc = r.u32()?;
    let magic = r.bytes(8)?;
    let version = r.u32()?;
    let ok = mark == FOOTER_MARK
        && magic == FOOTER_MAGIC
        && version == VERSION
        && unmask_crc(crc) == crc32c::crc32c(bytes.get(..20)?);
    ok.then_some((records, data_end))
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
        };
        let e = i.encode();
        assert_eq!(
            e.to_vec(),
            [
                vec![7, 0, 0, 0, 0, 0, 0, 0],
                vec![16, 0, 0, 0, 0, 0, 0, 0],
                vec![0, 16, 0, 0, 0, 0, 0, 0]
            ]
            .concat()
        );
        assert_eq!(BlobIndex::decode(&e), Some(i));
        assert_eq!(BlobIndex::decode(&e[..23]), None);
    }

    #[test]
    fn record_round_trips_and_detects_damage() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 0, b"k", b"vv");
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
        assert_eq!(check_header(&encode_header()), Ok(()));
        let mut h = encode_header();
        h[3] ^= 1;
        assert!(check_header(&h).is_err());
        let f = encode_footer(3, 1000);
        assert_eq!(decode_footer(&f), Some((3, 1000)));
        let mut g = f;
        g[5] ^= 1;
        assert_eq!(decode_footer(&g), None);
    }
}
