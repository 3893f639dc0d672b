//! Internal keys: the user key followed by an 8-byte trailer.
//!
//! Layout (see docs/format.md, "Internal key"):
//!
//! ```text
//! +----------------+-------------------------------------------+
//! | user key bytes | trailer: u64 LE = (sequence << 8) | kind  |
//! +----------------+-------------------------------------------+
//! ```
//!
//! Ordering: user key ascending (bytewise), then trailer *descending*, so the
//! newest version of a key comes first. A sequence is 56 bits.
//!
//! Worked example: `put(a,1)@5, put(a,2)@9, del(b)@7` sort as
//! `a@9:Put, a@5:Put, b@7:Delete`.

use std::cmp::Ordering;

/// A 56-bit, monotonically increasing commit sequence number.
pub type SequenceNumber = u64;

/// Largest representable sequence (2^56 - 1).
pub const MAX_SEQUENCE: SequenceNumber = (1 << 56) - 1;

/// Bytes in the internal-key trailer.
pub const TRAILER_LEN: usize = 8;

/// The kind of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A point tombstone.
    Delete = 0,
    /// A value.
    Put = 1,
    /// A range tombstone `[key, value)`; value holds the exclusive end key.
    RangeDelete = 2,
    /// A value stored in a value file; the entry's value is the 28-byte (24 for a format-version-1 file)
    /// BlobIndex pointing at it (docs/format-blob.md).
    BlobIndex = 3,
}

/// The kind used in seek targets: the largest, so a seek for `(k, s)` lands
/// on the newest entry of `k` with sequence `<= s`.
pub const KIND_FOR_SEEK: ValueKind = ValueKind::BlobIndex;

impl ValueKind {
    /// Decodes a kind byte; `None` for an unknown byte.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::RangeDelete),
            3 => Some(ValueKind::BlobIndex),
            _ => None,
        }
    }

    /// True for the kinds that carry a value a read returns (`Put`, `BlobIndex`).
    pub fn is_value(self) -> bool {
        matches!(self, ValueKind::Put | ValueKind::BlobIndex)
    }
}

/// Packs a sequence and a kind into a trailer.
#[inline]
pub fn pack_trailer(seq: SequenceNumber, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | kind as u64
}

/// Appends `user_key ++ trailer(seq, kind)` to `out`.
#[inline]
pub fn append_internal_key(
    out: &mut Vec<u8>,
    user_key: &[u8],
    seq: SequenceNumber,
    kind: ValueKind,
) {
    out.extend_from_slice(user_key);
    out.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Builds an owned internal key.
pub fn make_internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind);
    v
}

/// A decoded view of an internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// Sequence number.
    pub seq: SequenceNumber,
    /// Entry kind.
    pub kind: ValueKind,
}

/// Decodes an internal key; `None` if it is shorter than a trailer or has an unknown kind.
#[inline]
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let (user_key, trailer) = ikey.split_at(split);
    let t = u64::from_le_bytes(trailer.try_into().ok()?);
    let kind = ValueKind::from_u8((t & 0xff) as u8)?;
    Some(ParsedKey {
        user_key,
        seq: t >> 8,
        kind,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short).
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    ikey.get(..ikey.len().saturating_sub(TRAILER_LEN))
        .unwrap_or(ikey)
}

/// The trailer of an internal key (0 if it is too short).
#[inline]
pub fn trailer(ikey: &[u8]) -> u64 {
    ikey.len()
        .checked_sub(TRAILER_LEN)
        .and_then(|s| ikey.get(s..))
        .and_then(|t| t.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

/// Compares two internal keys: user key ascending, trailer descending.
#[inline]
pub fn compare_internal_keys(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_version_sorts_first() {
        let a9 = make_internal_key(b"a", 9, ValueKind::Put);
        let a5 = make_internal_key(b"a", 5, ValueKind::Put);
        let b7 = make_internal_key(b"b", 7, ValueKind::Delete);
        assert_eq!(compare_internal_keys(&a9, &a5), Ordering::Less);
        assert_eq!(compare_internal_keys(&a5, &b7), Ordering::Less);
        let p = parse_internal_key(&b7).expect("valid");
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"b"[..], 7, ValueKind::Delete)
        );
    }

    #[test]
    fn short_or_unknown_keys_do_not_parse() {
        assert!(parse_internal_key(b"short").is_none());
        let mut k = make_internal_key(b"x", 1, ValueKind::Put);
        let last = k.len() - TRAILER_LEN;
        k[last] = 77;
        assert!(parse_internal_key(&k).is_none());
    }
}
