//! [`WriteBatch`]: a group of updates applied atomically, and the payload of
//! one WAL record. Byte layout: `docs/format-wal.md`, "WriteBatch".
//!
//! ```text
//! +--------------+-----------+-----+-----+-----+
//! | sequence u64 | count u32 | op0 | op1 | ... |      (little-endian)
//! +--------------+-----------+-----+-----+-----+
//! op = kind u8 | cf varint32 | key len varint | key | [value len varint | value]
//! ```
//!
//! `kind` is the [`ValueKind`] byte: 0 Delete (no value), 1 Put, 2
//! RangeDelete (the value is the exclusive end key), 3 BlobIndex (the value
//! is a 28-byte (version 1: 24-byte) reference into a value file, docs/format-blob.md; engine only). Kinds 0x10..=0x12 are
//! two-phase-commit markers ([`TxnMarker`]): at most one, right after the
//! header, not counted in `count`; the engine writes them, a user batch
//! carrying one is refused. Kinds 0x13..=0x1F are reserved.
//!
//! Op `i` gets sequence `sequence + i`. Since every batch names its own
//! sequences, batches can be inserted into a memtable in any order (replay
//! can be parallel): the result depends only on the sequences.
//!
//! Worked example: `put(b"k", b"v")` then `delete(b"x")` with sequence 5 is
//! `05 00 00 00 00 00 00 00 | 02 00 00 00 | 01 00 01 6B 01 76 | 00 00 01 78`;
//! `k` gets sequence 5 and the tombstone of `x` sequence 6.
//!
//! Count limit: a batch holds at most `u32::MAX` ops. The push methods keep
//! an exact count that cannot wrap; a larger batch stores `u32::MAX` in its
//! header (so it can never decode as something else) and
//! [`WriteBatch::check`] refuses it before it is written.

use crate::error::{Error, Result};
use crate::txn::marker::TxnMarker;
use crate::types::ValueKind;
use crate::util::coding::{put_length_prefixed, put_varint32, Reader};
use std::path::PathBuf;

/// Bytes of the batch header: sequence u64 + count u32.
pub const BATCH_HEADER_LEN: usize = 12;

/// Kind bytes of two-phase commit: 0x10..=0x12 are [`TxnMarker`]s (only as
/// the first op), the rest is reserved.
#[cfg(test)]
pub const RESERVED_2PC_KINDS: std::ops::RangeInclusive<u8> = 0x10..=0x1F;

/// Why batch bytes could not be decoded. The DB maps it to
/// `Error::Corruption` naming the WAL file and record offset
/// (see [`BatchDecodeError::into_corruption`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchDecodeError {
    /// The bytes end inside the header or an op, or a varint is malformed.
    #[error("write batch truncated or malformed")]
    Truncated,
    /// An op kind that is unknown, or reserved (0x10..=0x1F, two-phase commit).
    #[error("write batch op has unknown or reserved kind {0:#04x}")]
    BadKind(u8),
    /// The header's count differs from the number of ops in the bytes.
    #[error("write batch header counts {header} ops but holds {actual}")]
    CountMismatch {
        /// Count stored in the header.
        header: u32,
        /// Ops actually present.
        actual: u64,
    },
}

impl BatchDecodeError {
    /// The engine error for a batch read from `file` at `offset`.
    pub fn into_corruption(self, file: impl Into<PathBuf>, offset: u64) -> Error {
        Error::corruption(file, offset, self.to_string())
    }
}

/// One decoded op, borrowing from the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Sets `key` to `value`.
    Put {
        /// Column family id.
        cf: u32,
        /// User key.
        key: &'a [u8],
        /// Value.
        value: &'a [u8],
    },
    /// Deletes `key`.
    Delete {
        /// Column family id.
        cf: u32,
        /// User key.
        key: &'a [u8],
    },
    /// Sets `key` to a value stored in a value file: `index` is the 28-byte (version 1: 24-byte)
    /// BlobIndex (docs/format-blob.md). Only the engine writes these.
    BlobIndex {
        /// Column family id.
        cf: u32,
        /// User key.
        key: &'a [u8],
        /// Encoded BlobIndex.
        index: &'a [u8],
    },
    /// Deletes every key in `[begin, end)`.
    RangeDelete {
        /// Column family id.
        cf: u32,
        /// First key deleted.
        begin: &'a [u8],
        /// First key not deleted.
        end: &'a [u8],
    },
}

impl<'a> BatchOp<'a> {
    /// The entry kind this op inserts.
    pub fn kind(&self) -> ValueKind {
        match self {
            BatchOp::Put { .. } => ValueKind::Put,
            BatchOp::Delete { .. } => ValueKind::Delete,
            BatchOp::RangeDelete { .. } => ValueKind::RangeDelete,
            BatchOp::BlobIndex { .. } => ValueKind::BlobIndex,
        }
    }
    /// Column family id.
    pub fn cf(&self) -> u32 {
        match *self {
            BatchOp::Put { cf, .. }
            | BatchOp::Delete { cf, .. }
            | BatchOp::BlobIndex { cf, .. }
            | BatchOp::RangeDelete { cf, .. } => cf,
        }
    }
    /// The key (the begin key of a range delete).
    pub fn key(&self) -> &'a [u8] {
        match *self {
            BatchOp::Put { key, .. }
            | BatchOp::Delete { key, .. }
            | BatchOp::BlobIndex { key, .. } => key,
            BatchOp::RangeDelete { begin, .. } => begin,
        }
    }
    /// The memtable value: the value of a put, the end key of a range
    /// delete, empty for a delete.
    pub fn value(&self) -> &'a [u8] {
        match *self {
            BatchOp::Put { value, .. } => value,
            BatchOp::BlobIndex { index, .. } => index,
            BatchOp::Delete { .. } => &[],
            BatchOp::RangeDelete { end, .. } => end,
        }
    }
}

/// An ordered group of updates, applied atomically. The default column
/// family has id 0.
#[derive(Clone, Debug)]
pub struct WriteBatch {
    /// Header + ops, exactly the WAL payload.
    rep: Vec<u8>,
    /// Exact op count (the header saturates at `u32::MAX`).
    count: u64,
    /// Longest key and value pushed, or `None` if the batch holds bytes
    /// from [`WriteBatch::from_data`] (then computed on demand).
    max_lens: Option<(usize, usize)>,
    /// Offset of the first data op: the header plus a 2PC marker, if any.
    ops_start: usize,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

impl WriteBatch {
    /// An empty batch with sequence 0.
    pub fn new() -> Self {
        WriteBatch::with_capacity(0)
    }

    /// An empty batch with room for about `bytes` bytes of encoding.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(bytes.max(BATCH_HEADER_LEN));
        rep.resize(BATCH_HEADER_LEN, 0);
        WriteBatch {
            rep,
            count: 0,
            max_lens: Some((0, 0)),
            ops_start: BATCH_HEADER_LEN,
        }
    }

    /// A batch that is `marker` followed by the data ops of `data` (whose
    /// own marker, if any, is dropped). Sequence 0.
    pub(crate) fn with_txn_marker(marker: &TxnMarker, data: &WriteBatch) -> WriteBatch {
        let mut rep = Vec::with_capacity(data.rep.len() + 16);
        rep.resize(BATCH_HEADER_LEN, 0);
        marker.encode(&mut rep);
        let ops_start = rep.len();
        rep.extend_from_slice(data.ops_bytes());
        let mut b = WriteBatch {
            rep,
            count: data.count,
            max_lens: data.max_lens,
            ops_start,
        };
        b.write_count();
        b
    }

    /// The 2PC marker this batch starts with, if any.
    pub fn txn_marker(&self) -> Option<TxnMarker> {
        let bytes = self.rep.get(BATCH_HEADER_LEN..self.ops_start)?;
        if bytes.is_empty() {
            return None;
        }
        TxnMarker::decode(&mut Reader::new(bytes))
    }

    /// The same data ops without the marker (sequence 0).
    pub(crate) fn without_txn_marker(&self) -> WriteBatch {
        let mut b = WriteBatch::with_capacity(BATCH_HEADER_LEN + self.ops_bytes().len());
        b.rep.extend_from_slice(self.ops_bytes());
        b.count = self.count;
        b.max_lens = self.max_lens;
        b.write_count();
        b
    }

    /// Sequences the write path assigns to this batch: one per data op, but
    /// exactly one for a prepare or rollback record (whose ops are not
    /// applied; the sequence identifies the prepare).
    pub(crate) fn sequences_used(&self) -> u64 {
        match self.txn_marker() {
            Some(TxnMarker::Prepare { .. } | TxnMarker::Rollback { .. }) => 1,
            _ => self.count,
        }
    }

    /// False for a prepare or rollback record: its ops go to no memtable.
    pub(crate) fn applies_data(&self) -> bool {
        !matches!(
            self.txn_marker(),
            Some(TxnMarker::Prepare { .. } | TxnMarker::Rollback { .. })
        )
    }

    fn ops_bytes(&self) -> &[u8] {
        self.rep.get(self.ops_start..).unwrap_or_default()
    }

    /// Sets `key` to `value` in the default column family.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.put_cf(0, key, value);
    }

    /// Deletes `key` in the default column family.
    pub fn delete(&mut self, key: &[u8]) {
        self.delete_cf(0, key);
    }

    /// Deletes `[begin, end)` in the default column family.
    pub fn delete_range(&mut self, begin: &[u8], end: &[u8]) {
        self.delete_range_cf(0, begin, end);
    }

    /// Sets `key` to `value` in column family `cf`.
    pub fn put_cf(&mut self, cf: u32, key: &[u8], value: &[u8]) {
        self.push(ValueKind::Put, cf, key, Some(value));
        self.note_lens(key.len(), value.len());
    }

    /// Deletes `key` in column family `cf`.
    pub fn delete_cf(&mut self, cf: u32, key: &[u8]) {
        self.push(ValueKind::Delete, cf, key, None);
        self.note_lens(key.len(), 0);
    }

    /// Deletes `[begin, end)` in column family `cf`.
    pub fn delete_range_cf(&mut self, cf: u32, begin: &[u8], end: &[u8]) {
        self.push(ValueKind::RangeDelete, cf, begin, Some(end));
        self.note_lens(begin.len().max(end.len()), 0);
    }

    /// Stores `key` in column family `cf` as a reference to a value file
    /// (`index` is an encoded BlobIndex). Engine only: user batches
    /// carrying one are refused by the write path.
    pub(crate) fn put_blob_index_cf(&mut self, cf: u32, key: &[u8], index: &[u8]) {
        self.push(ValueKind::BlobIndex, cf, key, Some(index));
        self.note_lens(key.len(), index.len());
    }

    /// Appends a decoded op unchanged.
    pub(crate) fn push_op(&mut self, op: &BatchOp<'_>) {
        match *op {
            BatchOp::Put { cf, key, value } => self.put_cf(cf, key, value),
            BatchOp::Delete { cf, key } => self.delete_cf(cf, key),
            BatchOp::RangeDelete { cf, begin, end } => self.delete_range_cf(cf, begin, end),
            BatchOp::BlobIndex { cf, key, index } => self.put_blob_index_cf(cf, key, index),
        }
    }

    /// Number of ops (saturates at `u32::MAX`; see [`Self::check`]).
    pub fn count(&self) -> u32 {
        u32::try_from(self.count).unwrap_or(u32::MAX)
    }

    /// True if the batch holds no ops.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes all ops and resets the sequence to 0.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_LEN, 0);
        self.count = 0;
        self.max_lens = Some((0, 0));
        self.ops_start = BATCH_HEADER_LEN;
    }

    /// Sequence of the first op.
    pub fn sequence(&self) -> u64 {
        Reader::new(&self.rep).u64().unwrap_or(0)
    }

    /// Sets the sequence of the first op (op `i` gets `seq + i`).
    pub fn set_sequence(&mut self, seq: u64) {
        if let Some(h) = self.rep.get_mut(0..8) {
            h.copy_from_slice(&seq.to_le_bytes());
        }
    }

    /// The encoded batch: the WAL record payload.
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Bytes of the encoding (memory and WAL cost).
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Wraps encoded bytes (a WAL record). The header and a leading 2PC
    /// marker are checked here; [`Self::iter`] or [`Self::validate`] check
    /// the ops.
    pub fn from_data(data: Vec<u8>) -> Result<WriteBatch, BatchDecodeError> {
        let mut r = Reader::new(&data);
        let count = match (r.u64(), r.u32()) {
            (Some(_), Some(count)) => count,
            _ => return Err(BatchDecodeError::Truncated),
        };
        let mut ops_start = BATCH_HEADER_LEN;
        if r.remaining()
            .first()
            .is_some_and(|&k| TxnMarker::is_marker_kind(k))
        {
            let before = r.remaining().len();
            TxnMarker::decode(&mut r).ok_or(BatchDecodeError::Truncated)?;
            ops_start += before - r.remaining().len();
        }
        Ok(WriteBatch {
            rep: data,
            count: u64::from(count),
            max_lens: None,
            ops_start,
        })
    }

    /// Appends the ops of `other`, so that both commit as one atomic batch;
    /// the counts add up. The sequence of `self` is kept. (Group commit does
    /// not use this: it logs each batch of a group as its own WAL record.)
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(other.ops_bytes());
        self.count = self.count.saturating_add(other.count);
        self.write_count();
        self.max_lens = match (self.max_lens, other.max_lens) {
            (Some((k1, v1)), Some((k2, v2))) => Some((k1.max(k2), v1.max(v2))),
            _ => None,
        };
    }

    /// Refuses a batch that cannot be encoded: more than `u32::MAX` ops.
    /// The DB calls this before writing a batch.
    pub fn check(&self) -> Result<()> {
        if self.count > u64::from(u32::MAX) {
            return Err(Error::InvalidArgument(format!(
                "write batch has {} ops, at most {} are allowed",
                self.count,
                u32::MAX
            )));
        }
        Ok(())
    }

    /// Decodes every op without yielding them: a batch that passes can be
    /// applied without a decode error half way.
    pub fn validate(&self) -> Result<(), BatchDecodeError> {
        self.iter().try_for_each(|op| op.map(|_| ()))
    }

    /// The ops in order. A truncated op, a bad kind or a count that differs
    /// from the header yields one `Err`, after which the iterator ends.
    pub fn iter(&self) -> BatchIter<'_> {
        let mut r = Reader::new(&self.rep);
        let header = match (r.u64(), r.u32()) {
            (Some(_), Some(count)) => Some(count),
            _ => None,
        };
        BatchIter {
            r: Reader::new(self.ops_bytes()),
            header: header.unwrap_or(0),
            seen: 0,
            done: false,
            bad_header: header.is_none(),
        }
    }

    /// Longest key (including range-delete end keys) and longest value, for
    /// the DB's size limits. Ops that do not decode are ignored.
    pub fn max_key_and_value_len(&self) -> (usize, usize) {
        if let Some(lens) = self.max_lens {
            return lens;
        }
        self.iter()
            .map_while(|op| op.ok())
            .fold((0, 0), |(k, v), op| match op {
                BatchOp::RangeDelete { begin, end, .. } => (k.max(begin.len()).max(end.len()), v),
                op => (k.max(op.key().len()), v.max(op.value().len())),
            })
    }

    fn push(&mut self, kind: ValueKind, cf: u32, key: &[u8], value: Option<&[u8]>) {
        self.rep.push(kind as u8);
        put_varint32(&mut self.rep, cf);
        put_length_prefixed(&mut self.rep, key);
        if let Some(v) = value {
            put_length_prefixed(&mut self.rep, v);
        }
        self.count = self.count.saturating_add(1);
        self.write_count();
    }

    fn note_lens(&mut self, key: usize, value: usize) {
        if let Some((k, v)) = &mut self.max_lens {
            *k = (*k).max(key);
            *v = (*v).max(value);
        }
    }

    /// Stores the count in the header, saturated (never wrapped).
    fn write_count(&mut self) {
        let count = self.count().to_le_bytes();
        if let Some(h) = self.rep.get_mut(8..BATCH_HEADER_LEN) {
            h.copy_from_slice(&count);
        }
    }
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = Result<BatchOp<'a>, BatchDecodeError>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

/// Iterator over the ops of a [`WriteBatch`].
pub struct BatchIter<'a> {
    r: Reader<'a>,
    header: u32,
    seen: u64,
    done: bool,
    bad_header: bool,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchOp<'a>, BatchDecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

impl<'a> BatchIter<'a> {
    fn step(&mut self) -> Option<Result<BatchOp<'a>, BatchDecodeError>> {
        if self.bad_header {
            return Some(Err(BatchDecodeError::Truncated));
        }
        if self.r.is_empty() {
            if self.seen == u64::from(self.header) {
                return None;
            }
            return Some(Err(self.mismatch(self.seen)));
        }
        if self.seen == u64::from(self.header) {
            // More ops than the header says: count them for the error.
            let mut actual = self.seen;
            while !self.r.is_empty() {
                if let Err(e) = decode_op(&mut self.r) {
                    return Some(Err(e));
                }
                actual += 1;
            }
            return Some(Err(self.mismatch(actual)));
        }
        let op = decode_op(&mut self.r);
        self.seen += 1;
        Some(op)
    }

    fn mismatch(&self, actual: u64) -> BatchDecodeError {
        BatchDecodeError::CountMismatch {
            header: self.header,
            actual,
        }
    }
}

fn decode_op<'a>(r: &mut Reader<'a>) -> Result<BatchOp<'a>, BatchDecodeError> {
    use BatchDecodeError::Truncated;
    let kind_byte = r.u8().ok_or(Truncated)?;
    let kind = ValueKind::from_u8(kind_byte).ok_or(BatchDecodeError::BadKind(kind_byte))?;
    let cf = r.varint32().ok_or(Truncated)?;
    let key = r.length_prefixed().ok_or(Truncated)?;
    Ok(match kind {
        ValueKind::Put => BatchOp::Put {
            cf,
            key,
            value: r.length_prefixed().ok_or(Truncated)?,
        },
        ValueKind::Delete => BatchOp::Delete { cf, key },
        ValueKind::BlobIndex => BatchOp::BlobIndex {
            cf,
            key,
            index: r.length_prefixed().ok_or(Truncated)?,
        },
        ValueKind::RangeDelete => BatchOp::RangeDelete {
            cf,
            begin: key,
            end: r.length_prefixed().ok_or(Truncated)?,
        },
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index buffers they just built
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ops(b: &WriteBatch) -> Vec<BatchOp<'_>> {
        b.iter().collect::<Result<Vec<_>, _>>().expect("decodes")
    }

    #[test]
    fn worked_example_bytes() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        b.delete(b"x");
        b.set_sequence(5);
        assert_eq!(
            b.data(),
            &[5, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, b'k', 1, b'v', 0, 0, 1, b'x']
        );
        assert_eq!(b.sequence(), 5);
        assert_eq!(b.count(), 2);
        assert_eq!(b.approximate_size(), 22);
    }

    #[test]
    fn all_kinds_round_trip_through_bytes() {
        let mut b = WriteBatch::with_capacity(100);
        assert!(b.is_empty());
        b.put_cf(3, b"a", b"1");
        b.delete_cf(300, b"bb");
        b.delete_range_cf(7, b"c", b"f");
        b.put(b"", b"");
        b.set_sequence(u64::MAX >> 8);
        let copy = WriteBatch::from_data(b.data().to_vec()).expect("header");
        assert_eq!(copy.sequence(), u64::MAX >> 8);
        assert_eq!(copy.count(), 4);
        let got = ops(&copy);
        assert_eq!(
            got,
            vec![
                BatchOp::Put {
                    cf: 3,
                    key: b"a",
                    value: b"1"
                },
                BatchOp::Delete {
                    cf: 300,
                    key: b"bb"
                },
                BatchOp::RangeDelete {
                    cf: 7,
                    begin: b"c",
                    end: b"f"
                },
                BatchOp::Put {
                    cf: 0,
                    key: b"",
                    value: b""
                },
            ]
        );
        assert_eq!(got[2].kind(), ValueKind::RangeDelete);
        assert_eq!((got[2].key(), got[2].value()), (&b"c"[..], &b"f"[..]));
        assert_eq!((got[1].cf(), got[1].value()), (300, &b""[..]));
        assert_eq!(copy.max_key_and_value_len(), b.max_key_and_value_len());
        assert_eq!(b.max_key_and_value_len(), (2, 1));
        assert!(copy.validate().is_ok());
    }

    #[test]
    fn txn_markers_wrap_data_ops() {
        let mut data = WriteBatch::new();
        data.put(b"a", b"1");
        data.delete(b"b");
        let prep = TxnMarker::Prepare {
            xid: b"x1".to_vec(),
        };
        let mut p = WriteBatch::with_txn_marker(&prep, &data);
        p.set_sequence(40);
        assert_eq!(p.txn_marker(), Some(prep.clone()));
        assert_eq!(p.count(), 2);
        assert_eq!(p.sequences_used(), 1);
        assert!(!p.applies_data());
        // The marker is not an op; the bytes decode to the same batch.
        assert_eq!(ops(&p), ops(&data));
        let back = WriteBatch::from_data(p.data().to_vec()).expect("decodes");
        assert_eq!(back.txn_marker(), Some(prep));
        assert_eq!(back.sequence(), 40);
        assert_eq!(ops(&back), ops(&data));
        assert_eq!(ops(&back.without_txn_marker()), ops(&data));
        assert_eq!(back.without_txn_marker().txn_marker(), None);

        let commit = TxnMarker::Commit {
            xid: b"x1".to_vec(),
            prepare_seq: 40,
        };
        let c = WriteBatch::with_txn_marker(&commit, &back);
        assert_eq!(c.sequences_used(), 2);
        assert!(c.applies_data());
        assert_eq!(ops(&c), ops(&data));
        // Appending a marked batch copies only its data ops.
        let mut plain = WriteBatch::new();
        plain.put(b"z", b"9");
        plain.append(&c);
        assert_eq!(plain.txn_marker(), None);
        assert_eq!(plain.count(), 3);
        assert_eq!(ops(&plain)[1..], ops(&data)[..]);
        // A truncated marker is refused when the bytes are wrapped.
        let cut = c.data()[..BATCH_HEADER_LEN + 3].to_vec();
        assert_eq!(
            WriteBatch::from_data(cut).err(),
            Some(BatchDecodeError::Truncated)
        );
    }

    #[test]
    fn clear_resets_everything() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        b.set_sequence(9);
        b.clear();
        assert_eq!(b.data(), WriteBatch::default().data());
        assert_eq!(b.max_key_and_value_len(), (0, 0));
        assert_eq!(b.iter().count(), 0);
    }

    #[test]
    fn append_concatenates_and_keeps_the_first_sequence() {
        let mut a = WriteBatch::new();
        a.put(b"a", b"1");
        a.set_sequence(10);
        let mut b = WriteBatch::new();
        b.delete_range(b"b", b"zzzz");
        b.put(b"c", b"333");
        b.set_sequence(99);
        a.append(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.sequence(), 10);
        assert_eq!(ops(&a).len(), 3);
        assert_eq!(a.max_key_and_value_len(), (4, 3));
        // A decoded batch appended: lengths computed on demand.
        a.append(&WriteBatch::from_data(b.data().to_vec()).expect("ok"));
        assert_eq!(a.count(), 5);
        assert_eq!(a.max_key_and_value_len(), (4, 3));
    }

    #[test]
    fn count_overflow_saturates_and_is_refused() {
        // A header claiming u32::MAX - 1 ops (no need to build them).
        let mut data = vec![0u8; BATCH_HEADER_LEN];
        data[8..12].copy_from_slice(&(u32::MAX - 1).to_le_bytes());
        let mut big = WriteBatch::from_data(data).expect("header");
        assert!(big.check().is_ok());
        let mut small = WriteBatch::new();
        small.put(b"a", b"b");
        small.put(b"c", b"d");
        small.put(b"e", b"f");
        big.append(&small);
        assert_eq!(big.count(), u32::MAX);
        assert_eq!(&big.data()[8..12], &u32::MAX.to_le_bytes());
        assert!(matches!(big.check(), Err(Error::InvalidArgument(_))));
        big.put(b"g", b"h");
        assert!(big.check().is_err());
        // The bytes never decode as a (wrapped) small batch.
        assert!(big.validate().is_err());
    }

    #[test]
    fn decode_errors() {
        assert_eq!(
            WriteBatch::from_data(vec![0; 11]).err(),
            Some(BatchDecodeError::Truncated)
        );
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        let good = b.data().to_vec();

        // Header says 2, one op present.
        let mut two = good.clone();
        two[8] = 2;
        let wb = WriteBatch::from_data(two).expect("header");
        let items: Vec<_> = wb.iter().collect();
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[1],
            Err(BatchDecodeError::CountMismatch {
                header: 2,
                actual: 1
            })
        );

        // Header says 0 but there are ops: no op is yielded.
        let mut zero = good.clone();
        zero[8] = 0;
        let wb = WriteBatch::from_data(zero).expect("header");
        let items: Vec<_> = wb.iter().collect();
        assert_eq!(
            items,
            vec![Err(BatchDecodeError::CountMismatch {
                header: 0,
                actual: 1
            })]
        );

        // Reserved 2PC kinds and unknown kinds.
        for kind in [0x13u8, 0x1F, 4, 0xFF] {
            let mut bad = good.clone();
            bad[BATCH_HEADER_LEN] = kind;
            let wb = WriteBatch::from_data(bad).expect("header");
            assert_eq!(wb.validate(), Err(BatchDecodeError::BadKind(kind)));
        }
        assert!(RESERVED_2PC_KINDS.contains(&0x15));

        // Every strict prefix fails, never decodes as fewer ops.
        for cut in BATCH_HEADER_LEN..good.len() {
            let wb = WriteBatch::from_data(good[..cut].to_vec()).expect("header");
            assert!(wb.validate().is_err(), "cut {cut}");
        }
        let e = BatchDecodeError::Truncated.into_corruption("000001.log", 77);
        assert!(matches!(e, Error::Corruption { offset: 77, .. }));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u32, Vec<u8>, Vec<u8>),
        Del(u32, Vec<u8>),
        Range(u32, Vec<u8>, Vec<u8>),
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..300);
        let cf = prop_oneof![Just(0u32), any::<u32>()];
        prop_oneof![
            (cf.clone(), bytes(), bytes()).prop_map(|(c, k, v)| Op::Put(c, k, v)),
            (cf.clone(), bytes()).prop_map(|(c, k)| Op::Del(c, k)),
            (cf, bytes(), bytes()).prop_map(|(c, b, e)| Op::Range(c, b, e)),
        ]
    }

    fn build(ops: &[Op]) -> WriteBatch {
        let mut b = WriteBatch::new();
        for op in ops {
            match op {
                Op::Put(c, k, v) => b.put_cf(*c, k, v),
                Op::Del(c, k) => b.delete_cf(*c, k),
                Op::Range(c, s, e) => b.delete_range_cf(*c, s, e),
            }
        }
        b
    }

    fn same(op: &Op, got: &BatchOp<'_>) -> bool {
        match (op, *got) {
            (Op::Put(c, k, v), BatchOp::Put { cf, key, value }) => {
                *c == cf && k == key && v == value
            }
            (Op::Del(c, k), BatchOp::Delete { cf, key }) => *c == cf && k == key,
            (Op::Range(c, s, e), BatchOp::RangeDelete { cf, begin, end }) => {
                *c == cf && s == begin && e == end
            }
            _ => false,
        }
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(
            first in proptest::collection::vec(op_strategy(), 0..20),
            second in proptest::collection::vec(op_strategy(), 0..20),
            seq in any::<u64>(),
        ) {
            let mut b = build(&first);
            b.set_sequence(seq);
            b.append(&build(&second));
            let decoded = WriteBatch::from_data(b.data().to_vec()).expect("header");
            prop_assert_eq!(decoded.sequence(), seq);
            prop_assert_eq!(decoded.count() as usize, first.len() + second.len());
            let got = ops(&decoded);
            prop_assert_eq!(got.len(), first.len() + second.len());
            for (want, got) in first.iter().chain(&second).zip(&got) {
                prop_assert!(same(want, got), "{:?} != {:?}", want, got);
            }
            prop_assert_eq!(decoded.max_key_and_value_len(), b.max_key_and_value_len());
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(b) = WriteBatch::from_data(data) {
                let items: Vec<_> = b.iter().collect();
                // At most one error, and only as the last item.
                let errs = items.iter().filter(|i| i.is_err()).count();
                prop_assert!(errs <= 1);
                if errs == 1 {
                    prop_assert!(items.last().is_some_and(|i| i.is_err()));
                }
                prop_assert_eq!(b.validate().is_ok(), errs == 0);
                let _ = b.max_key_and_value_len();
            }
        }

        #[test]
        fn damaged_encodings_never_panic(
            ops_in in proptest::collection::vec(op_strategy(), 1..8),
            cut in any::<proptest::sample::Index>(),
            flip in any::<proptest::sample::Index>(),
            mask in 1u8..,
        ) {
            let b = build(&ops_in);
            let mut data = b.data().to_vec();
            let at = flip.index(data.len());
            data[at] ^= mask;
            data.truncate(cut.index(data.len() + 1));
            if let Ok(d) = WriteBatch::from_data(data) {
                let _ = d.validate();
                let _ = d.iter().count();
            }
        }
    }
}
