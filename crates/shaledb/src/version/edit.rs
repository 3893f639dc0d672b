//! A `VersionEdit` is one manifest record: the difference between two versions.
//!
//! Encoding: a sequence of `tag varint32` + fields (docs/format.md, "Manifest").
//! Unknown tags are corruption, so an old binary never misreads a newer manifest
//! (the manifest header carries a format version as well).

use super::extent_meta::ExtentMeta;
use crate::util::coding::{put_length_prefixed, put_varint32, put_varint64, Reader};

const TAG_LOG_NUMBER: u32 = 1;
const TAG_NEXT_FILE: u32 = 2;
const TAG_LAST_SEQ: u32 = 3;
const TAG_NEXT_EXTENT_ID: u32 = 4;
const TAG_ADD_CF: u32 = 5;
const TAG_DROP_CF: u32 = 6;
const TAG_DELETE_EXTENT: u32 = 7;
const TAG_ADD_EXTENT: u32 = 8;
const TAG_NEXT_CF_ID: u32 = 9;
const TAG_NEXT_RUN: u32 = 10;
/// Lifetime counters (docs/format.md, "Manifest"); far from the others so
/// new extent tags can take the numbers in between.
const TAG_LIFETIME_COUNTERS: u32 = 20;
/// Most lifetime counters an edit may carry (a bound for damaged input).
const MAX_LIFETIME_COUNTERS: u32 = 64;

/// Changes applied atomically to the version set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// WAL segments numbered below this hold only flushed data.
    pub log_number: Option<u64>,
    /// Next unused file number.
    pub next_file_number: Option<u64>,
    /// Largest sequence that is durable in extents or in WAL segments `>= log_number`.
    pub last_sequence: Option<u64>,
    /// Next unused extent id.
    pub next_extent_id: Option<u64>,
    /// Next unused column-family id.
    pub next_cf_id: Option<u32>,
    /// Next unused L0 run number.
    pub next_run: Option<u64>,
    /// Column families created: (id, name).
    pub add_cfs: Vec<(u32, String)>,
    /// Column families dropped.
    pub drop_cfs: Vec<u32>,
    /// Extents removed: (cf, level, extent id).
    pub deleted: Vec<(u32, u8, u64)>,
    /// Extents added: (cf, level, meta). An id both deleted and added moves the extent.
    pub added: Vec<(u32, u8, ExtentMeta)>,
    /// The database's lifetime counters as of this edit (absolute values;
    /// the last edit that has them wins). Their meaning, by position, is
    /// `db::stats::Lifetime`'s; a reader ignores positions it does not know.
    pub lifetime_counters: Option<Vec<u64>>,
}

/// Why an edit failed to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EditDecodeError {
    /// The record ended inside a field.
    #[error("version edit truncated")]
    Truncated,
    /// A tag this version does not know.
    #[error("unknown version edit tag {0}")]
    UnknownTag(u32),
    /// A name that is not UTF-8.
    #[error("column family name is not UTF-8")]
    BadName,
    /// More lifetime counters than any version writes.
    #[error("{0} lifetime counters (at most {MAX_LIFETIME_COUNTERS})")]
    TooManyCounters(u32),
}

impl VersionEdit {
    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.added.len() * 64);
        let opt = |out: &mut Vec<u8>, tag: u32, v: Option<u64>| {
            if let Some(v) = v {
                put_varint32(out, tag);
                put_varint64(out, v);
            }
        };
        opt(&mut out, TAG_LOG_NUMBER, self.log_number);
        opt(&mut out, TAG_NEXT_FILE, self.next_file_number);
        opt(&mut out, TAG_LAST_SEQ, self.last_sequence);
        opt(&mut out, TAG_NEXT_EXTENT_ID, self.next_extent_id);
        opt(&mut out, TAG_NEXT_CF_ID, self.next_cf_id.map(u64::from));
        opt(&mut out, TAG_NEXT_RUN, self.next_run);
        for (id, name) in &self.add_cfs {
            put_varint32(&mut out, TAG_ADD_CF);
            put_varint32(&mut out, *id);
            put_length_prefixed(&mut out, name.as_bytes());
        }
        for id in &self.drop_cfs {
            put_varint32(&mut out, TAG_DROP_CF);
            put_varint32(&mut out, *id);
        }
        for (cf, level, id) in &self.deleted {
            put_varint32(&mut out, TAG_DELETE_EXTENT);
            put_varint32(&mut out, *cf);
            out.push(*level);
            put_varint64(&mut out, *id);
        }
        for (cf, level, meta) in &self.added {
            put_varint32(&mut out, TAG_ADD_EXTENT);
            put_varint32(&mut out, *cf);
            out.push(*level);
            meta.encode(&mut out);
        }
        if let Some(counters) = &self.lifetime_counters {
            let n = counters.len().min(MAX_LIFETIME_COUNTERS as usize);
            put_varint32(&mut out, TAG_LIFETIME_COUNTERS);
            put_varint32(&mut out, u32::try_from(n).unwrap_or(MAX_LIFETIME_COUNTERS));
            for v in counters.iter().take(n) {
                put_varint64(&mut out, *v);
            }
        }
        out
    }

    /// Decodes an edit.
    pub fn decode(data: &[u8]) -> Result<VersionEdit, EditDecodeError> {
        use EditDecodeError::Truncated;
        let mut r = Reader::new(data);
        let mut e = VersionEdit::default();
        while !r.is_empty() {
            let tag = r.varint32().ok_or(Truncated)?;
            match tag {
                TAG_LOG_NUMBER => e.log_number = Some(r.varint64().ok_or(Truncated)?),
                TAG_NEXT_FILE => e.next_file_number = Some(r.varint64().ok_or(Truncated)?),
                TAG_LAST_SEQ => e.last_sequence = Some(r.varint64().ok_or(Truncated)?),
                TAG_NEXT_EXTENT_ID => e.next_extent_id = Some(r.varint64().ok_or(Truncated)?),
                TAG_NEXT_CF_ID => e.next_cf_id = Some(r.varint32().ok_or(Truncated)?),
                TAG_NEXT_RUN => e.next_run = Some(r.varint64().ok_or(Truncated)?),
                TAG_ADD_CF => {
                    let id = r.varint32().ok_or(Truncated)?;
                    let name = r.length_prefixed().ok_or(Truncated)?;
                    let name =
                        String::from_utf8(name.to_vec()).map_err(|_| EditDecodeError::BadName)?;
                    e.add_cfs.push((id, name));
                }
                TAG_DROP_CF => e.drop_cfs.push(r.varint32().ok_or(Truncated)?),
                TAG_DELETE_EXTENT => {
                    let cf = r.varint32().ok_or(Truncated)?;
                    let level = r.u8().ok_or(Truncated)?;
                    let id = r.varint64().ok_or(Truncated)?;
                    e.deleted.push((cf, level, id));
                }
                TAG_ADD_EXTENT => {
                    let cf = r.varint32().ok_or(Truncated)?;
                    let level = r.u8().ok_or(Truncated)?;
                    let meta = ExtentMeta::decode(&mut r).ok_or(Truncated)?;
                    e.added.push((cf, level, meta));
                }
                TAG_LIFETIME_COUNTERS => {
                    let n = r.varint32().ok_or(Truncated)?;
                    if n > MAX_LIFETIME_COUNTERS {
                        return Err(EditDecodeError::TooManyCounters(n));
                    }
                    let mut v = Vec::with_capacity(n as usize); // n <= 64
                    for _ in 0..n {
                        v.push(r.varint64().ok_or(Truncated)?);
                    }
                    e.lifetime_counters = Some(v);
                }
                other => return Err(EditDecodeError::UnknownTag(other)),
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta(id: u64) -> ExtentMeta {
        ExtentMeta {
            id,
            file_number: 7,
            slot: 3,
            size: 2_000_000,
            smallest: b"a".to_vec(),
            largest: b"zz".to_vec(),
            smallest_seq: 1,
            largest_seq: 99,
            num_entries: 10,
            num_deletions: 2,
            num_range_deletions: 1,
            run: 0,
        }
    }

    #[test]
    fn edit_round_trips() {
        let e = VersionEdit {
            log_number: Some(5),
            next_file_number: Some(9),
            last_sequence: Some(1 << 40),
            next_extent_id: Some(77),
            next_cf_id: Some(3),
            next_run: Some(4),
            add_cfs: vec![(2, "users".into())],
            drop_cfs: vec![1],
            deleted: vec![(0, 1, 4)],
            added: vec![(0, 2, meta(4)), (2, 1, meta(5))],
            lifetime_counters: Some(vec![0, 1, u64::MAX, 1 << 33]),
        };
        assert_eq!(VersionEdit::decode(&e.encode()), Ok(e));
    }

    #[test]
    fn a_damaged_counter_list_is_refused() {
        let mut b = Vec::new();
        put_varint32(&mut b, TAG_LIFETIME_COUNTERS);
        put_varint32(&mut b, 1000);
        assert_eq!(
            VersionEdit::decode(&b),
            Err(EditDecodeError::TooManyCounters(1000))
        );
        let mut b = Vec::new();
        put_varint32(&mut b, TAG_LIFETIME_COUNTERS);
        put_varint32(&mut b, 3);
        put_varint64(&mut b, 7);
        assert_eq!(VersionEdit::decode(&b), Err(EditDecodeError::Truncated));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = VersionEdit::decode(&data);
        }

        #[test]
        fn truncation_is_detected(cut in 0usize..60) {
            let e = VersionEdit { added: vec![(0, 1, meta(1))], ..Default::default() };
            let enc = e.encode();
            if cut < enc.len() {
                prop_assert!(VersionEdit::decode(&enc[..cut]).map(|d| d != e).unwrap_or(true));
            }
        }
    }
}
