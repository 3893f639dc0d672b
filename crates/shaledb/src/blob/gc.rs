//! Garbage collection of value files (docs/format-blob.md, section 3).
//!
//! Steps for one sealed file `F` whose live ratio is below the threshold,
//! each crash-safe:
//! 1. copy the live records to a new file `G`; footer, fsync, directory
//!    fsync (a crash leaves `G` unreferenced: a later GC finds it dead);
//! 2. re-point the keys with one synced write that the group-commit leader
//!    filters (only keys whose newest entry is still the old BlobIndex); a
//!    crash before it is durable leaves `F` referenced and `G` dead;
//! 3. retire `F` with `gc_seq` = the last allocated sequence: it leaves the
//!    current file set once every sequence up to `gc_seq` is visible and no
//!    snapshot older than `gc_seq` lives, and is unlinked when the last
//!    reader holding it drops (a crash before that leaves `F` on disk with
//!    no live record: a later GC deletes it).

use super::format::{BlobIndex, HEADER_LEN};
use super::reader::{scan, ScanEnd};
use super::{BlobFile, BlobStore};
use crate::db::DbInner;
use crate::error::Result;
use crate::types::ValueKind;
use crate::write_batch::{BatchOp, WriteBatch};
use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What one [`crate::Db::collect_blob_garbage`] call did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlobGcStats {
    /// Sealed value files examined.
    pub files_scanned: u64,
    /// Files whose live records were copied to a new file (or that had none).
    pub files_rewritten: u64,
    /// Records copied.
    pub records_rewritten: u64,
    /// Value bytes copied.
    pub bytes_rewritten: u64,
    /// Files removed from the file set (unlinked once no reader holds them).
    pub files_deleted: u64,
    /// Rewritten files kept for snapshots older than their re-point write.
    pub files_waiting: u64,
    /// Live bytes / record bytes over the files scanned (1.0 if none).
    pub live_ratio: f64,
    /// Files left alone because a record before their end failed its check.
    pub files_damaged: u64,
}

/// A GC request to the leader: point `key` at `new` if it still points at `old`.
pub(crate) struct Repoint {
    pub cf: u32,
    pub key: Vec<u8>,
    pub old: [u8; 24],
    pub new: [u8; 24],
}

/// A handle for scanning `f`: its own buffered one when values are read
/// with `O_DIRECT` (a scan reads many small headers).
fn scan_file(store: &BlobStore, f: &BlobFile) -> Result<Arc<dyn crate::env::RandomAccessFile>> {
    if store.direct_reads {
        store.fs.open_random(&f.path)
    } else {
        Ok(f.file.clone())
    }
}

fn oldest_snapshot(inner: &DbInner) -> Option<u64> {
    inner.snapshots.sequences().first().copied()
}

/// Retired files whose re-point write is visible and older than every snapshot.
fn release(inner: &DbInner, store: &BlobStore) -> usize {
    let visible = inner.visible_sequence.load(Ordering::Acquire);
    store.release_retired(visible, oldest_snapshot(inner))
}

/// True if the newest entry of (cf, key) is a BlobIndex at (file, offset).
fn is_live(inner: &DbInner, cf: u32, key: &[u8], file: u64, offset: u64) -> Result<bool> {
    Ok(match crate::db::read::latest_raw(inner, cf, key)? {
        Some((ValueKind::BlobIndex, v)) => {
            BlobIndex::decode(&v).is_some_and(|i| i.file == file && i.offset == offset)
        }
        _ => false,
    })
}

pub(crate) fn collect(inner: &Arc<DbInner>, max_live_ratio: f64) -> Result<BlobGcStats> {
    let mut stats = BlobGcStats {
        live_ratio: 1.0,
        ..Default::default()
    };
    let Some(store) = inner.blobs.as_ref() else {
        return Ok(stats);
    };
    inner.check_open()?;
    let _gc = store.gc_lock.lock();
    store.counters.gc_runs.fetch_add(1, Ordering::Relaxed);
    stats.files_deleted += release(inner, store) as u64;
    let retired: BTreeSet<u64> = store.retired_numbers();
    // Only sealed files: the active file takes appends while GC runs (and
    // may change under it: a sealed flag, once set, stays set). The newest
    // file is never rewritten either: value-file numbers are not recorded
    // anywhere else, so the next open derives the next number from the
    // newest file on disk, and a number must never be used twice (old WAL
    // records may still name it).
    let files = store.current();
    let newest = files.keys().next_back().copied();
    let candidates: Vec<Arc<BlobFile>> = files
        .values()
        .filter(|f| f.sealed.load(Ordering::Acquire) && Some(f.number) != newest)
        .filter(|f| !retired.contains(&f.number))
        .cloned()
        .collect();
    let (mut live_all, mut total_all) = (0u64, 0u64);
    for f in candidates {
        stats.files_scanned += 1;
        // Pass 1: live bytes.
        let (mut live, mut total) = (0u64, 0u64);
        let file = scan_file(store, &f)?;
        let end = scan(file.as_ref(), &f.path, |r| {
            let len = r.value.len() as u64;
            total += len;
            if is_live(inner, r.cf, &r.key, f.number, r.offset)? {
                live += len;
            }
            Ok(())
        })?;
        // A sealed file ends in its footer or (cut at open) at its last
        // whole record; a bad record before that is damage. Rewriting would
        // drop the live records after it: leave the file alone (reads of
        // the damaged record report it as Corruption).
        if let ScanEnd::Torn(at) = end {
            if at < file.len()? {
                tracing::warn!(
                    "value file {} damaged at {at}: not collected",
                    f.path.display()
                );
                stats.files_damaged += 1;
                continue;
            }
        }
        live_all += live;
        total_all += total;
        let ratio = if total == 0 {
            0.0
        } else {
            live as f64 / total as f64
        };
        if ratio >= max_live_ratio {
            continue;
        }
        if live > 0 {
            rewrite(inner, store, &f, &mut stats)?;
        }
        stats.files_rewritten += 1;
        store
            .counters
            .gc_files_rewritten
            .fetch_add(1, Ordering::Relaxed);
        // Every write that made a record dead has a sequence at or below
        // the last allocated one.
        let gc_seq = inner.wal.lock().last_sequence;
        store.retire(gc_seq, f);
    }
    stats.files_deleted += release(inner, store) as u64;
    stats.files_waiting = store.retired_numbers().len() as u64;
    if total_all > 0 {
        stats.live_ratio = live_all as f64 / total_all as f64;
    }
    Ok(stats)
}

/// Copies the live records of `f` to a new sealed file and re-points them.
fn rewrite(
    inner: &Arc<DbInner>,
    store: &BlobStore,
    f: &Arc<BlobFile>,
    stats: &mut BlobGcStats,
) -> Result<()> {
    let bytes_before = stats.bytes_rewritten;
    let mut out = store.create_file()?;
    let number = out.handle.number;
    let mut repoints = Vec::new();
    let mut buf = Vec::new();
    let mut pos = HEADER_LEN as u64;
    let end = scan(scan_file(store, f)?.as_ref(), &f.path, |r| {
        if !is_live(inner, r.cf, &r.key, f.number, r.offset)? {
            return Ok(());
        }
        let old = BlobIndex {
            file: f.number,
            offset: r.offset,
            value_len: r.value.len() as u64,
        };
        let new = BlobIndex {
            file: number,
            offset: pos + buf.len() as u64,
            value_len: r.value.len() as u64,
        };
        super::format::encode_record(&mut buf, r.cf, &r.key, &r.value);
        out.records += 1;
        stats.records_rewritten += 1;
        stats.bytes_rewritten += r.value.len() as u64;
        repoints.push(Repoint {
            cf: r.cf,
            key: r.key,
            old: old.encode(),
            new: new.encode(),
        });
        if buf.len() >= 1 << 20 {
            out.w.append(&buf)?;
            out.w.flush()?;
            pos += buf.len() as u64;
            buf.clear();
        }
        Ok(())
    })?;
    if let ScanEnd::Torn(at) = end {
        tracing::warn!(
            "value file {} ends without a footer at {at}",
            f.path.display()
        );
    }
    out.w.append(&buf)?;
    store.seal_file(&mut out)?;
    store.add_file(out.handle.clone());
    store
        .counters
        .gc_bytes_rewritten
        .fetch_add(stats.bytes_rewritten - bytes_before, Ordering::Relaxed);
    crate::db::write::write_repoints(inner, repoints)
}

/// The background GC thread (`Options::blob_gc_live_ratio` > 0): every
/// `interval`, one [`collect`] pass at that ratio; it also releases files
/// kept for snapshots that have ended since. Exits at shutdown.
pub(crate) fn spawn_background(
    inner: &Arc<DbInner>,
    ratio: f64,
    interval: std::time::Duration,
) -> Result<std::thread::JoinHandle<()>> {
    let inner = inner.clone();
    std::thread::Builder::new()
        .name("shale-blob-gc".to_owned())
        .spawn(move || {
            let mut next = std::time::Instant::now() + interval;
            loop {
                // Sleep in short steps so shutdown is not delayed.
                while std::time::Instant::now() < next {
                    if inner.shutting_down.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20).min(interval));
                }
                if inner.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                match collect(&inner, ratio) {
                    Ok(_) | Err(crate::error::Error::Closed) => {}
                    Err(e) => tracing::warn!("value-file GC failed: {e}"),
                }
                next = std::time::Instant::now() + interval;
            }
        })
        .map_err(|e| crate::error::Error::io("spawn thread", "shale-blob-gc", e))
}

/// Turns the re-point requests of blob GC in a write group into BlobIndex
/// puts of the keys whose newest entry still is the old BlobIndex. Called
/// by the group-commit leader (holding `wal`, so no other group is being
/// applied) with each member's (batch, re-point request, disable_wal); a key
/// also written by an earlier member of the group (or a cf with a range
/// delete in it) is left alone, as that write is newer. An empty re-point
/// batch is not logged.
pub(crate) fn apply_repoints<'a>(
    inner: &DbInner,
    group: impl Iterator<
        Item = (
            &'a mut WriteBatch,
            &'a mut Option<Vec<Repoint>>,
            &'a mut bool,
        ),
    >,
) -> Result<()> {
    let mut group: Vec<_> = group.collect();
    if group.iter().all(|(_, r, _)| r.is_none()) {
        return Ok(());
    }
    let mut written: HashSet<(u32, Vec<u8>)> = HashSet::new();
    let mut ranged: HashSet<u32> = HashSet::new();
    for (batch, repoint, disable_wal) in group.iter_mut() {
        if let Some(reps) = repoint.take() {
            let mut b = WriteBatch::new();
            for r in reps {
                if ranged.contains(&r.cf) || written.contains(&(r.cf, r.key.clone())) {
                    continue;
                }
                let cur = crate::db::read::latest_raw(inner, r.cf, &r.key)?;
                if matches!(&cur, Some((ValueKind::BlobIndex, v)) if v.as_slice() == r.old) {
                    b.put_blob_index_cf(r.cf, &r.key, &r.new);
                }
            }
            if b.is_empty() {
                **disable_wal = true;
            }
            **batch = b;
        }
        for op in batch.iter().map_while(|op| op.ok()) {
            match op {
                BatchOp::RangeDelete { cf, .. } => {
                    ranged.insert(cf);
                }
                op => {
                    written.insert((op.cf(), op.key().to_vec()));
                }
            }
        }
    }
    Ok(())
}
