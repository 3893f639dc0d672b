//! Constants and the fragment header codec shared by [`super::LogWriter`] and
//! [`super::LogReader`]. The byte layout is specified in `docs/format-wal.md`.
//!
//! A fragment is an 11-byte header followed by its payload, and never crosses
//! a 32 KiB block boundary:
//!
//! ```text
//! 0        4        6      7             11
//! +--------+--------+------+-------------+-----------------+
//! | crc u32| len u16| type | log_no u32  | payload (len B) |
//! +--------+--------+------+-------------+-----------------+
//! crc = mask(crc32c(type ++ log_no ++ payload)), all integers little-endian
//! ```
//!
//! Worked example: an empty FULL record of log 7 is the 11 bytes
//! `crc(4) 00 00 01 07 00 00 00`.

use crate::util::coding::{mask_crc, Reader};

/// Size of a block. Fragments never cross a block boundary, so a reader can
/// resynchronise at the next multiple of this after damage.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Bytes in a fragment header: crc 4 | length 2 | type 1 | log number 4.
pub const HEADER_SIZE: usize = 11;

/// Magic bytes at the start of the file-header payload.
pub const MAGIC: [u8; 8] = *b"SHALEWAL";

/// Version of the log format (block size, header layout, record types).
pub const FORMAT_VERSION: u32 = 1;

/// Payload of the file-header record: magic 8 | version u32 | log number u64.
pub const FILE_HEADER_PAYLOAD_LEN: usize = 20;

/// Bytes the file-header record occupies at offset 0.
#[cfg(test)]
pub const FILE_HEADER_RECORD_LEN: usize = HEADER_SIZE + FILE_HEADER_PAYLOAD_LEN;

/// Largest payload one fragment can carry (fits in the u16 length field).
pub const MAX_FRAGMENT_PAYLOAD: usize = BLOCK_SIZE - HEADER_SIZE;

// The length field is a u16; a fragment payload must always fit.
const _: () = assert!(MAX_FRAGMENT_PAYLOAD <= u16::MAX as usize);

/// Fragment types (the `type` byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordType {
    /// Never written as a header; an all-zero header is preallocated space.
    Zero = 0,
    /// A whole record in one fragment.
    Full = 1,
    /// First fragment of a record that continues in the next block.
    First = 2,
    /// Inner fragment (a whole block's worth of payload).
    Middle = 3,
    /// Last fragment of a multi-fragment record.
    Last = 4,
    /// The file header; only valid at offset 0.
    FileHeader = 5,
}

impl RecordType {
    /// Decodes a type byte; `None` for unknown bytes.
    pub fn from_u8(b: u8) -> Option<RecordType> {
        match b {
            0 => Some(RecordType::Zero),
            1 => Some(RecordType::Full),
            2 => Some(RecordType::First),
            3 => Some(RecordType::Middle),
            4 => Some(RecordType::Last),
            5 => Some(RecordType::FileHeader),
            _ => None,
        }
    }
}

/// The low 32 bits of a log number, as stored in every fragment header.
#[inline]
pub fn log_tag(log_number: u64) -> u32 {
    // Truncation is the format: only the low 32 bits are stored.
    (log_number & u64::from(u32::MAX)) as u32
}

/// The masked CRC32C stored in a header: covers type, log number and payload.
#[inline]
pub fn fragment_crc(rtype: RecordType, tag: u32, payload: &[u8]) -> u32 {
    let mut head = [0u8; 5];
    head[0] = rtype as u8;
    head[1..].copy_from_slice(&tag.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head), payload);
    mask_crc(crc)
}

/// Encodes a fragment header. `payload.len()` must be at most
/// [`MAX_FRAGMENT_PAYLOAD`] (the writer's fragmentation guarantees it).
pub fn encode_header(rtype: RecordType, tag: u32, payload: &[u8]) -> [u8; HEADER_SIZE] {
    debug_assert!(payload.len() <= MAX_FRAGMENT_PAYLOAD);
    let len = u16::try_from(payload.len()).unwrap_or(u16::MAX);
    let mut h = [0u8; HEADER_SIZE];
    h[0..4].copy_from_slice(&fragment_crc(rtype, tag, payload).to_le_bytes());
    h[4..6].copy_from_slice(&len.to_le_bytes());
    h[6] = rtype as u8;
    h[7..11].copy_from_slice(&tag.to_le_bytes());
    h
}

/// A fragment whose checksum verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment<'a> {
    /// Its type (never [`RecordType::Zero`]).
    pub rtype: RecordType,
    /// The low 32 bits of the log number it was written under.
    pub tag: u32,
    /// Its payload.
    pub payload: &'a [u8],
}

impl Fragment<'_> {
    /// Bytes the fragment occupies, header included.
    pub fn encoded_len(&self) -> usize {
        HEADER_SIZE + self.payload.len()
    }
}

/// What the bytes at a fragment position hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A fragment with a correct checksum (of any log number).
    Fragment(Fragment<'a>),
    /// An all-zero header (or all-zero bytes up to end of file): preallocated
    /// or never-written space.
    Zero,
    /// The file ends inside this fragment.
    Truncated,
    /// The header or payload is damaged.
    Damaged(&'static str),
}

/// Parses the fragment at the front of `avail`.
///
/// `avail` holds the bytes from the fragment position up to the end of its
/// block or the end of the file, whichever comes first; `block_left` is the
/// distance to the end of the block (`>= HEADER_SIZE`). If `avail` is shorter
/// than `block_left`, the file ends inside the block.
pub fn parse_fragment(avail: &[u8], block_left: usize) -> Parsed<'_> {
    let file_ends_in_block = avail.len() < block_left;
    let mut r = Reader::new(avail);
    let (Some(crc), Some(len), Some(type_byte), Some(tag)) = (r.u32(), r.bytes(2), r.u8(), r.u32())
    else {
        // Fewer than HEADER_SIZE bytes before end of file.
        return if avail.iter().all(|&b| b == 0) {
            Parsed::Zero
        } else {
            Parsed::Truncated
        };
    };
    let len = usize::from(u16::from_le_bytes([
        len.first().copied().unwrap_or(0),
        len.get(1).copied().unwrap_or(0),
    ]));
    if crc == 0 && len == 0 && type_byte == 0 && tag == 0 {
        return Parsed::Zero;
    }
    if len > block_left.saturating_sub(HEADER_SIZE) {
        return Parsed::Damaged("fragment length exceeds its block");
    }
    let Some(payload) = r.bytes(len) else {
        return if file_ends_in_block {
            Parsed::Truncated
        } else {
            // Unreachable when `avail` really spans to the block end, but
            // never trust the caller with an index.
            Parsed::Damaged("fragment length exceeds its block")
        };
    };
    let Some(rtype) = RecordType::from_u8(type_byte).filter(|t| *t != RecordType::Zero) else {
        return Parsed::Damaged("unknown fragment type");
    };
    if fragment_crc(rtype, tag, payload) != crc {
        return Parsed::Damaged("fragment checksum mismatch");
    }
    Parsed::Fragment(Fragment {
        rtype,
        tag,
        payload,
    })
}

/// Encodes the file-header payload for `log_number`.
pub fn encode_file_header(log_number: u64) -> [u8; FILE_HEADER_PAYLOAD_LEN] {
    let mut p = [0u8; FILE_HEADER_PAYLOAD_LEN];
    p[0..8].copy_from_slice(&MAGIC);
    p[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    p[12..20].copy_from_slice(&log_number.to_le_bytes());
    p
}

/// A decoded file-header payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// Format version found.
    pub version: u32,
    /// Full 64-bit log number found.
    pub log_number: u64,
}

/// Decodes a file-header payload; `Err` names the failed check. The version
/// is returned unchecked so that the caller can report it.
pub fn decode_file_header(payload: &[u8]) -> Result<FileHeader, &'static str> {
    if payload.len() != FILE_HEADER_PAYLOAD_LEN {
        return Err("file header has the wrong length");
    }
    let mut r = Reader::new(payload);
    if r.bytes(MAGIC.len()) != Some(&MAGIC[..]) {
        return Err("bad magic number in file header");
    }
    match (r.u32(), r.u64()) {
        (Some(version), Some(log_number)) => Ok(FileHeader {
            version,
            log_number,
        }),
        _ => Err("file header has the wrong length"),
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index buffers they just built
mod tests {
    use super::*;

    fn fragment(rtype: RecordType, tag: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = encode_header(rtype, tag, payload).to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn header_round_trips() {
        let f = fragment(RecordType::Full, 7, b"hello");
        assert_eq!(&f[4..11], &[5, 0, 1, 7, 0, 0, 0]);
        match parse_fragment(&f, BLOCK_SIZE) {
            Parsed::Fragment(fr) => {
                assert_eq!(fr.rtype, RecordType::Full);
                assert_eq!(fr.tag, 7);
                assert_eq!(fr.payload, b"hello");
                assert_eq!(fr.encoded_len(), 16);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn checksum_covers_type_log_number_and_payload() {
        let good = fragment(RecordType::Full, 7, b"hello");
        for i in 0..good.len() {
            if (4..6).contains(&i) {
                continue; // length: covered indirectly, checked below
            }
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            assert!(
                matches!(parse_fragment(&bad, BLOCK_SIZE), Parsed::Damaged(_)),
                "flip at {i} not detected"
            );
        }
        let mut longer = good.clone();
        longer[4] = 6;
        longer.push(b'!');
        assert!(matches!(
            parse_fragment(&longer, BLOCK_SIZE),
            Parsed::Damaged(_)
        ));
    }

    #[test]
    fn zero_truncated_and_oversized_are_told_apart() {
        assert_eq!(parse_fragment(&[0; 20], BLOCK_SIZE), Parsed::Zero);
        assert_eq!(parse_fragment(&[0; 3], BLOCK_SIZE), Parsed::Zero);
        assert_eq!(parse_fragment(&[1, 0, 0], BLOCK_SIZE), Parsed::Truncated);
        let f = fragment(RecordType::Full, 1, &[9; 100]);
        assert_eq!(parse_fragment(&f[..50], BLOCK_SIZE), Parsed::Truncated);
        // The same bytes where the block ends after 50 bytes: damage.
        assert!(matches!(parse_fragment(&f[..50], 50), Parsed::Damaged(_)));
    }

    #[test]
    fn file_header_round_trips_and_rejects_bad_magic() {
        let p = encode_file_header(0x1_0000_0002);
        assert_eq!(
            decode_file_header(&p),
            Ok(FileHeader {
                version: FORMAT_VERSION,
                log_number: 0x1_0000_0002
            })
        );
        let mut bad = p;
        bad[0] = b'X';
        assert!(decode_file_header(&bad).is_err());
        assert!(decode_file_header(&p[..19]).is_err());
        assert_eq!(log_tag(0x1_0000_0002), 2);
    }
}
