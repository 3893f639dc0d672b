//! Point reads (docs/architecture.md, "Read path").

use super::{CfSuper, DbInner, ReadOptions, SuperVersion};
use crate::error::{Error, Result};
use crate::types::{SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::version::Extent;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The newest version of a key found in one source (its value is in the
/// caller's buffer).
struct Hit {
    kind: ValueKind,
    seq: SequenceNumber,
}

/// What a read sees: the super version, then the sequence (in that order:
/// see docs/architecture.md, "Read path"; `get_into` keeps it too).
/// The value files around both (blob/mod.rs, "Lifetime of a value file").
/// For readers that keep the super version (iterators): a reference taken
/// from the thread's cached copy, without the `sv` lock.
pub(crate) fn read_view(
    inner: &DbInner,
    ro: &ReadOptions,
) -> (crate::blob::FileView, Arc<SuperVersion>, SequenceNumber) {
    let blobs = inner.blobs.as_deref();
    let before = crate::blob::FileView::start(blobs);
    let sv = inner.sv.with(Arc::clone);
    let snapshot = read_sequence(inner, ro);
    (crate::blob::FileView::finish(blobs, before), sv, snapshot)
}

/// The read's snapshot sequence: the caller's snapshot, or the newest
/// visible one.
fn read_sequence(inner: &DbInner, ro: &ReadOptions) -> SequenceNumber {
    match &ro.snapshot {
        Some(s) => s.sequence(),
        None => inner.visible_sequence.load(Ordering::Acquire),
    }
}

pub(crate) fn get(
    inner: &Arc<DbInner>,
    ro: &ReadOptions,
    cf: u32,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    let mut value = Vec::new();
    Ok(get_into(inner, ro, cf, key, &mut value)?.then_some(value))
}

/// Point read into the caller's buffer: `Ok(true)` with the value in
/// `value` (cleared first), `Ok(false)` if absent (`value` then empty). No
/// allocation once `value` has room, except for block reads on a cache miss.
pub(crate) fn get_into(
    inner: &Arc<DbInner>,
    ro: &ReadOptions,
    cf: u32,
    key: &[u8],
    value: &mut Vec<u8>,
) -> Result<bool> {
    get_into_at(
        inner,
        ro.snapshot.as_ref().map(|s| s.sequence()),
        cf,
        key,
        value,
    )
}

/// [`get_into`] at `sequence` (`None`: the newest visible one). The caller
/// keeps a snapshot of `sequence` registered for the whole call (a
/// transaction reads at the snapshot it holds), so compaction keeps the
/// versions this read may need; this saves cloning (registering) the
/// snapshot again per read.
pub(crate) fn get_into_at(
    inner: &Arc<DbInner>,
    sequence: Option<SequenceNumber>,
    cf: u32,
    key: &[u8],
    value: &mut Vec<u8>,
) -> Result<bool> {
    value.clear();
    inner.check_open()?;
    // The value files around the sequence: every file a visible BlobIndex
    // points at is in the view (blob/mod.rs, "Lifetime of a value file").
    // The first half is taken before the super version, as `around` does.
    let blobs = inner.blobs.as_deref();
    let before = crate::blob::FileView::start(blobs);
    inner.sv.with(|sv| {
        let snapshot = sequence.unwrap_or_else(|| inner.visible_sequence.load(Ordering::Acquire));
        let files = crate::blob::FileView::finish(blobs, before);
        let cfs = sv
            .cfs
            .get(&cf)
            .ok_or_else(|| Error::ColumnFamilyNotFound(cf.to_string()))?;
        inner.stats.gets.add(1);
        let (hit, max_tomb) = newest_in_cf(cfs, key, snapshot, value)?;
        match hit.and_then(|h| resolve(h, max_tomb)) {
            Some(ValueKind::BlobIndex) => {
                point_value(inner, &files, (cf, key), value)?;
                Ok(true)
            }
            Some(_) => Ok(true),
            None => {
                value.clear();
                Ok(false)
            }
        }
    })
}

/// For a writer that holds `key`'s exclusive lock: the sequence of the newest
/// version of `key` (as [`latest_seq_of`]; 0 if none) and, when that is at
/// or below `snapshot`, whether the key has a value there, in `value`
/// (cleared first; a value file's value read as `get_into` reads it). One
/// lookup serves the first-committer-wins check and the read that follows
/// it: with nothing newer than the snapshot, the newest version is the one
/// the snapshot sees.
pub(crate) fn get_newest(
    inner: &Arc<DbInner>,
    cf: u32,
    key: &[u8],
    snapshot: SequenceNumber,
    value: &mut Vec<u8>,
) -> Result<(SequenceNumber, bool)> {
    value.clear();
    inner.check_open()?;
    let blobs = inner.blobs.as_deref();
    let before = crate::blob::FileView::start(blobs);
    inner.sv.with(|sv| {
        let files = crate::blob::FileView::finish(blobs, before);
        let cfs = sv
            .cfs
            .get(&cf)
            .ok_or_else(|| Error::ColumnFamilyNotFound(cf.to_string()))?;
        inner.stats.gets.add(1);
        let (hit, max_tomb) = newest_in_cf(cfs, key, MAX_SEQUENCE, value)?;
        let newest = hit.as_ref().map_or(0, |h| h.seq).max(max_tomb);
        if newest > snapshot {
            value.clear();
            return Ok((newest, false));
        }
        match hit.and_then(|h| resolve(h, max_tomb)) {
            Some(ValueKind::BlobIndex) => {
                point_value(inner, &files, (cf, key), value)?;
                Ok((newest, true))
            }
            Some(_) => Ok((newest, true)),
            None => {
                value.clear();
                Ok((newest, false))
            }
        }
    })
}

/// Resolves a hit against the newest covering range tombstone seen so far:
/// the kind (`Put` or `BlobIndex`; the stored value is the hit's), or `None`.
fn resolve(hit: Hit, max_tombstone: SequenceNumber) -> Option<ValueKind> {
    if hit.seq < max_tombstone || !hit.kind.is_value() {
        return None;
    }
    Some(hit.kind)
}

/// The newest visible value entry of `key` at `snapshot`, unresolved: a
/// `BlobIndex` entry's value is the index.
pub(crate) fn get_in_cf(
    cfs: &CfSuper,
    key: &[u8],
    snapshot: SequenceNumber,
) -> Result<Option<(ValueKind, Vec<u8>)>> {
    let mut value = Vec::new();
    let (hit, max_tomb) = newest_in_cf(cfs, key, snapshot, &mut value)?;
    Ok(hit
        .and_then(|h| resolve(h, max_tomb))
        .map(|kind| (kind, value)))
}

/// The newest entry of `key` in `cf` including unpublished writes,
/// unresolved (`None` if deleted, absent or the cf is gone). Blob GC uses
/// it to tell live records from dead ones and, in the group-commit leader,
/// to re-point only keys that still point at the rewritten record.
pub(crate) fn latest_raw(
    inner: &DbInner,
    cf: u32,
    key: &[u8],
) -> Result<Option<(ValueKind, Vec<u8>)>> {
    let sv = inner.sv.get();
    let Some(cfs) = sv.cfs.get(&cf) else {
        return Ok(None);
    };
    get_in_cf(cfs, key, MAX_SEQUENCE)
}

/// The sequence of the newest version of `key` in `cf` (a put, a delete or a
/// covering range delete), regardless of snapshots: the first-committer-wins
/// check of Snapshot Isolation compares it with the transaction's snapshot.
/// Versions not yet visible (a write group still being applied) count too,
/// which can only make the check more conservative.
pub(crate) fn latest_seq_of(
    inner: &Arc<DbInner>,
    cf: u32,
    key: &[u8],
) -> Result<Option<SequenceNumber>> {
    let sv = inner.sv.get();
    let cfs = sv
        .cfs
        .get(&cf)
        .ok_or_else(|| Error::ColumnFamilyNotFound(cf.to_string()))?;
    let (hit, max_tomb) = newest_in_cf(cfs, key, MAX_SEQUENCE, &mut Vec::new())?;
    let newest = hit.map_or(0, |h| h.seq).max(max_tomb);
    Ok((newest > 0).then_some(newest))
}

/// The newest version of `key` at or below `snapshot`, and the newest range
/// tombstone covering `key` seen in the sources searched before it (sources
/// are searched newest first, so older tombstones cannot matter). The hit's
/// value is copied into `value`.
fn newest_in_cf(
    cfs: &CfSuper,
    key: &[u8],
    snapshot: SequenceNumber,
    value: &mut Vec<u8>,
) -> Result<(Option<Hit>, SequenceNumber)> {
    let mut max_tomb = 0;
    for mem in std::iter::once(&cfs.mem).chain(cfs.imm.iter()) {
        max_tomb = max_tomb.max(mem.max_covering_tombstone(key, snapshot));
        if let Some(g) = mem.get(key, snapshot) {
            value.clear();
            value.extend_from_slice(g.value);
            let hit = Hit {
                kind: g.kind,
                seq: g.seq,
            };
            return Ok((Some(hit), max_tomb));
        }
    }
    let v = &cfs.version;
    for run in &v.l0 {
        if let Some(hit) = get_in_run(&run.extents, key, snapshot, true, &mut max_tomb, value)? {
            return Ok((Some(hit), max_tomb));
        }
    }
    for (i, level) in v.levels.iter().enumerate() {
        let pin = i == 0;
        if let Some(hit) = get_in_run(level, key, snapshot, pin, &mut max_tomb, value)? {
            return Ok((Some(hit), max_tomb));
        }
    }
    Ok((None, max_tomb))
}

/// Looks up `key` in a sorted run. Adjacent extents may share a boundary user
/// key (a key with many versions), so the search continues into the next
/// extent while its smallest key is `key`.
fn get_in_run(
    run: &[Arc<Extent>],
    key: &[u8],
    snapshot: SequenceNumber,
    pin: bool,
    max_tomb: &mut SequenceNumber,
    value: &mut Vec<u8>,
) -> Result<Option<Hit>> {
    let start = run.partition_point(|e| e.meta.largest.as_slice() < key);
    for ext in run.get(start..).unwrap_or(&[]) {
        if ext.meta.smallest.as_slice() > key {
            break;
        }
        let reader = ext.reader_ref(pin)?;
        if ext.meta.num_range_deletions > 0 {
            for (b, e, s) in reader.range_tombstones()? {
                if s <= snapshot && b.as_slice() <= key && key < e.as_slice() {
                    *max_tomb = (*max_tomb).max(s);
                }
            }
        }
        if let Some((kind, seq)) = reader.get_into(key, snapshot, value)? {
            return Ok(Some(Hit { kind, seq }));
        }
    }
    Ok(None)
}

/// A point read's value from its value file (`value` holds the BlobIndex
/// on entry): read alone, without the scans' single flight.
fn point_value(
    inner: &DbInner,
    files: &crate::blob::FileView,
    (cf, key): (u32, &[u8]),
    value: &mut Vec<u8>,
) -> Result<()> {
    crate::blob::reader::read_value_into(
        files,
        &inner.dir,
        cf,
        key,
        value,
        crate::blob::reader::Sharing::Alone,
    )
}
