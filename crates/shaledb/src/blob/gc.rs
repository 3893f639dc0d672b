//! Garbage collection of value files (docs/format-blob.md, section 3).
//!
//! Which files: the background pass takes the sealed files whose live
//! ratio by compaction's dead-byte count (dead.rs) is below the threshold,
//! lowest first, and reads each once, copying its live records as it goes.
//! [`crate::Db::collect_blob_garbage`] looks at every sealed file: one the
//! count already flags is read once the same way; any other is first
//! measured by a read-only pass (the count misses versions that compaction
//! has not dropped yet) and rewritten only if that pass finds it below the
//! threshold.
//!
//! Steps for one file `F`, each crash-safe:
//! 1. the output `G` is counted all dead ([`UNREFERENCED`], persisted) and
//!    only then created; live records are copied to it; footer, fsync,
//!    directory fsync. A crash leaves `G` counted dead and unreferenced: a
//!    later pass finds nothing live in it and removes it. If the live bytes
//!    read reach the threshold share of `F` (the count was high), `G` is
//!    deleted, the pass goes on read-only and `F`'s count becomes the
//!    measured one;
//! 2. the keys are re-pointed by one synced write that the group-commit
//!    leader filters (only keys whose newest entry is still the old
//!    BlobIndex); a crash before it is durable leaves `F` referenced and
//!    `G` counted dead. Then `G`'s count becomes the bytes of the records
//!    whose key no longer points at them (a newer write won the re-point,
//!    or came after it), settled with the counts locked (dead.rs);
//! 3. `F` is counted [`UNREFERENCED`] and retired with `gc_seq` = the last
//!    allocated sequence: it leaves the current file set once every sequence
//!    up to `gc_seq` is visible and no snapshot older than `gc_seq` lives,
//!    and is unlinked when the last reader holding it drops (a crash before
//!    that leaves `F` on disk, counted dead, with no live record: a later
//!    pass removes it).
//!
//! The background pass is rate-limited (`Options::blob_gc_bytes_per_sec`,
//! bytes of `F` read), sleeping in short steps so that shutdown is prompt.

use super::dead::{record_bytes, UNREFERENCED};
use super::format::{BlobIndex, IndexBytes, HEADER_LEN};
use super::keylog::GroupEncoder;
use super::limiter::Limiter;
use super::reader::{scan, ScanEnd, ScannedRecord, Values};
use super::writer::NewFile;
use super::{BlobFile, BlobStore};
use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::types::ValueKind;
use crate::write_batch::{BatchOp, WriteBatch};
use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Live bytes / record bytes over the files read whole (1.0 if none).
    pub live_ratio: f64,
    /// Files left alone because a record before their end failed its check.
    pub files_damaged: u64,
    /// Outputs deleted because the file turned out to be above the
    /// threshold (its dead-byte count was high).
    pub rewrites_abandoned: u64,
}

/// A GC request to the leader: point `key` at `new` if it still points at `old`.
pub(crate) struct Repoint {
    pub cf: u32,
    pub key: Vec<u8>,
    pub old: IndexBytes,
    pub new: IndexBytes,
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

/// Bytes of a scanned record, in the dead-byte count's unit.
fn rec_len(r: &ScannedRecord) -> u64 {
    r.index.counted_len(r.key.len())
}

/// Which files a pass takes.
#[derive(Clone, Copy, PartialEq)]
enum Pick {
    /// Every sealed file (the explicit call).
    All,
    /// Those whose counted live ratio is below the threshold (background).
    Counted,
}

/// The explicit call: every sealed file, unpaced.
pub(crate) fn collect(inner: &Arc<DbInner>, max_live_ratio: f64) -> Result<BlobGcStats> {
    run(inner, max_live_ratio, Pick::All, &mut Limiter::new(0))
}

/// One background pass: the files compaction's count flags, paced.
pub(crate) fn collect_counted(
    inner: &Arc<DbInner>,
    max_live_ratio: f64,
    limiter: &mut Limiter,
) -> Result<BlobGcStats> {
    run(inner, max_live_ratio, Pick::Counted, limiter)
}

fn run(inner: &Arc<DbInner>, ratio: f64, pick: Pick, limiter: &mut Limiter) -> Result<BlobGcStats> {
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
    store.prune_dead();
    let retired: BTreeSet<u64> = store.retired_numbers();
    // Only sealed files: the active file takes appends while GC runs (and
    // may change under it: a sealed flag, once set, stays set). The newest
    // file is never rewritten either: value-file numbers are not recorded
    // anywhere else, so the next open derives the next number from the
    // newest file on disk, and a number must never be used twice (old WAL
    // records may still name it).
    let files = store.current();
    let newest = files.keys().next_back().copied();
    let mut candidates: Vec<(f64, Arc<BlobFile>)> = store
        .estimates()
        .into_iter()
        .filter(|e| e.sealed && Some(e.number) != newest && !retired.contains(&e.number))
        .filter(|e| pick == Pick::All || e.live_ratio < ratio)
        .filter_map(|e| Some((e.live_ratio, files.get(&e.number)?.clone())))
        // Lone writes still publishing keys into it: next pass.
        .filter(|(_, f)| f.unpublished.load(Ordering::Acquire) == 0)
        .collect();
    if pick == Pick::Counted {
        candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let (mut live_all, mut total_all) = (0u64, 0u64);
    for (est, f) in candidates {
        stats.files_scanned += 1;
        let eager = est < ratio;
        let base = store.dead_of(f.number);
        let m = if eager {
            rewrite(inner, store, &f, (ratio, base), limiter, &mut stats)?
        } else {
            let m = measure(inner, store, &f, limiter)?;
            match m {
                Some((live, total)) if (live as f64) < ratio * total as f64 || total == 0 => {
                    let base = store.dead_of(f.number);
                    rewrite(inner, store, &f, (ratio, base), limiter, &mut stats)?
                }
                Some((live, total)) => {
                    store.set_measured(f.number, total - live, base)?;
                    m
                }
                None => None,
            }
        };
        // `None`: damaged, found by the measuring pass or by the copy (a
        // version-2 measure reads no value, so only the copy meets a bad one).
        match m {
            Some((live, total)) => {
                live_all += live;
                total_all += total;
            }
            None => stats.files_damaged += 1,
        }
    }
    stats.files_deleted += release(inner, store) as u64;
    stats.files_waiting = store.retired_numbers().len() as u64;
    if total_all > 0 {
        stats.live_ratio = live_all as f64 / total_all as f64;
    }
    Ok(stats)
}

/// A sealed file ends in its footer or (cut at open) at its last whole
/// record; a bad record (version 2: entry or live value) before that is
/// damage. Rewriting would drop the live records after it: such a file is
/// left alone (reads of the damaged record report it as Corruption).
fn damaged(end: &ScanEnd, f: &BlobFile) -> bool {
    match &end.damage {
        Some((path, at, why)) => {
            tracing::warn!(
                "value file {} damaged ({why} in {} at {at}): not collected",
                f.path.display(),
                path.display()
            );
            true
        }
        None => false,
    }
}

/// Read-only pass: (live, total) record bytes of `f`, `None` if damaged.
fn measure(
    inner: &DbInner,
    store: &BlobStore,
    f: &BlobFile,
    limiter: &mut Limiter,
) -> Result<Option<(u64, u64)>> {
    let (mut live, mut total) = (0u64, 0u64);
    let file = scan_file(store, f)?;
    // Liveness needs the keys only: a version-2 pass reads no value.
    let end = scan(&store.fs, file.as_ref(), &f.path, Values::Skip, |r| {
        let len = rec_len(&r);
        limiter.take(len, &inner.shutting_down)?;
        total += len;
        if is_live(inner, r.cf, &r.key, f.number, r.offset)? {
            live += len;
        }
        Ok(())
    })?;
    if damaged(&end, f) {
        return Ok(None);
    }
    Ok(Some((live, total)))
}

/// The output of a rewrite in progress: always format version 2.
struct Output {
    new: NewFile,
    /// The pending group of values and key-log entries.
    enc: GroupEncoder,
    repoints: Vec<Repoint>,
}

impl Output {
    fn start(store: &BlobStore) -> Result<Output> {
        let number = store.new_number();
        // Counted dead before it exists: a crash leaves no uncounted file.
        store.set_dead(number, Some(UNREFERENCED))?;
        Ok(Output {
            new: store.create_numbered(number, false)?,
            enc: GroupEncoder::new(number, HEADER_LEN as u64, 1 << 20),
            repoints: Vec::new(),
        })
    }

    /// Copies scanned record `r`, whose value is `value`.
    fn push(&mut self, r: &ScannedRecord, value: &[u8]) -> Result<()> {
        let new = self
            .enc
            .push(r.cf, &r.key, value)
            .ok_or_else(|| Error::InvalidArgument("value longer than 4 GiB".into()))?;
        self.new.records += 1;
        self.repoints.push(Repoint {
            cf: r.cf,
            key: r.key.clone(),
            old: r.index.encode(),
            new: new.encode(),
        });
        if self.enc.values.len() >= 1 << 20 {
            self.flush()?;
        }
        Ok(())
    }

    /// Appends the pending values, then their entries.
    fn flush(&mut self) -> Result<()> {
        let next = GroupEncoder::new(self.enc.file(), self.enc.end(), 1 << 20);
        let done = std::mem::replace(&mut self.enc, next);
        self.new.w.append(&done.values)?;
        self.new.w.flush()?;
        if let Some(k) = self.new.keys.as_mut() {
            k.append(&done.keys)?;
            k.flush()?;
        }
        Ok(())
    }

    /// Deletes the output (never referenced) and forgets its count.
    fn abandon(self, store: &BlobStore) -> Result<()> {
        let NewFile {
            w, keys, handle, ..
        } = self.new;
        drop(w);
        drop(keys);
        // Value file first, as `BlobFile`'s drop does.
        store.fs.remove_file(&handle.path)?;
        super::scan2::remove_keylog(&store.fs, &store.dir, handle.number)?;
        store.set_dead(handle.number, None)
    }
}

/// One pass over `f` that copies its live records while they stay below
/// the threshold share of the file; then re-points and retires `f`.
/// Returns the measured (live, total) record bytes, `None` if damaged.
fn rewrite(
    inner: &Arc<DbInner>,
    store: &BlobStore,
    f: &Arc<BlobFile>,
    (ratio, base): (f64, u64),
    limiter: &mut Limiter,
    stats: &mut BlobGcStats,
) -> Result<Option<(u64, u64)>> {
    let file = scan_file(store, f)?;
    let budget = ratio * record_bytes(f.disk_bytes(), true, f.version) as f64;
    let (mut live, mut total) = (0u64, 0u64);
    let mut out: Option<Output> = None;
    let mut copying = true;
    let mut abandoned = None;
    // Version 2: the pass reads the key log, and the values of live
    // records only; a live value that fails its check is damage.
    let mut bad_value = None;
    let scanned = scan(&store.fs, file.as_ref(), &f.path, Values::Skip, |r| {
        let len = rec_len(&r);
        limiter.take(len, &inner.shutting_down)?;
        total += len;
        if !is_live(inner, r.cf, &r.key, f.number, r.offset)? {
            return Ok(());
        }
        live += len;
        if copying && live as f64 >= budget {
            copying = false;
            abandoned = out.take();
        }
        if copying {
            let value = match &r.value {
                Some(v) => std::borrow::Cow::Borrowed(v.as_slice()),
                None => match super::scan2::load_value(file.as_ref(), &r) {
                    Some(v) => std::borrow::Cow::Owned(v),
                    None => {
                        bad_value = Some(r.offset);
                        return Err(Error::corruption(
                            &f.path,
                            r.offset,
                            "value fails its check",
                        ));
                    }
                },
            };
            let o = match out.as_mut() {
                Some(o) => o,
                None => out.insert(Output::start(store)?),
            };
            o.push(&r, &value)?;
        }
        Ok(())
    });
    if let Some(a) = abandoned {
        stats.rewrites_abandoned += 1;
        a.abandon(store)?;
    }
    let end = match scanned {
        Ok(end) => end,
        Err(Error::Corruption { .. }) if bad_value.is_some() => {
            tracing::warn!(
                "value file {} damaged (a live value at {}): not collected",
                f.path.display(),
                bad_value.unwrap_or(0)
            );
            if let Some(o) = out {
                o.abandon(store)?;
            }
            return Ok(None);
        }
        Err(e) => {
            if let Some(o) = out {
                o.abandon(store)?;
            }
            return Err(e);
        }
    };
    if damaged(&end, f) {
        if let Some(o) = out {
            o.abandon(store)?;
        }
        return Ok(None);
    }
    if !copying {
        store.set_measured(f.number, total - live, base)?;
        return Ok(Some((live, total)));
    }
    if let Some(o) = out {
        install(inner, store, o, stats)?;
    }
    stats.files_rewritten += 1;
    store
        .counters
        .gc_files_rewritten
        .fetch_add(1, Ordering::Relaxed);
    // Every write that made a record dead has a sequence at or below the
    // last allocated one.
    let gc_seq = inner.wal.lock().last_sequence;
    store.set_dead(f.number, Some(UNREFERENCED))?;
    store.retire(gc_seq, f.clone());
    Ok(Some((live, total)))
}

/// Seals the output, publishes it, re-points the keys, and counts the
/// records whose re-point was skipped as dead.
fn install(
    inner: &Arc<DbInner>,
    store: &BlobStore,
    mut o: Output,
    stats: &mut BlobGcStats,
) -> Result<()> {
    o.flush()?;
    store.seal_file(&mut o.new)?;
    store.add_file(o.new.handle.clone());
    let copied: u64 = o
        .repoints
        .iter()
        .filter_map(|r| BlobIndex::decode(r.new.as_slice()))
        .map(|i| i.value_len)
        .sum();
    stats.records_rewritten += o.repoints.len() as u64;
    stats.bytes_rewritten += copied;
    store
        .counters
        .gc_bytes_rewritten
        .fetch_add(copied, Ordering::Relaxed);
    let number = o.new.handle.number;
    let checks: Vec<(u32, Vec<u8>, IndexBytes)> = o
        .repoints
        .iter()
        .map(|r| (r.cf, r.key.clone(), r.new))
        .collect();
    crate::db::write::write_repoints(inner, o.repoints)?;
    // Dead in the output: records whose re-point a newer write pre-empted,
    // and records re-pointed but overwritten since (a merge may count
    // those again later: high, not low).
    store.settle_output(number, || {
        let mut dead = 0u64;
        for (cf, key, new) in checks {
            let pointed = matches!(
                crate::db::read::latest_raw(inner, cf, &key)?,
                Some((ValueKind::BlobIndex, v)) if v.as_slice() == new.as_slice()
            );
            if !pointed {
                dead += BlobIndex::decode(new.as_slice()).map_or(0, |i| i.counted_len(key.len()));
            }
        }
        Ok(dead)
    })
}

/// The background GC thread (`Options::blob_gc_live_ratio` > 0): every
/// `interval`, one [`collect_counted`] pass at that ratio, paced to
/// `Options::blob_gc_bytes_per_sec`; it also releases files kept for
/// snapshots that have ended since. Exits at shutdown (a pass in progress
/// stops at its next record and deletes its unreferenced output).
pub(crate) fn spawn_background(
    inner: &Arc<DbInner>,
    ratio: f64,
    interval: Duration,
) -> Result<std::thread::JoinHandle<()>> {
    let inner = inner.clone();
    std::thread::Builder::new()
        .name("shale-blob-gc".to_owned())
        .spawn(move || {
            let mut next = Instant::now() + interval;
            loop {
                // Sleep in short steps so shutdown is not delayed.
                while Instant::now() < next {
                    if inner.shutting_down.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20).min(interval));
                }
                if inner.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                let mut limiter = Limiter::new(inner.opts.blob_gc_bytes_per_sec);
                match collect_counted(&inner, ratio, &mut limiter) {
                    Ok(_) | Err(Error::Closed) => {}
                    Err(e) => tracing::warn!("value-file GC failed: {e}"),
                }
                next = Instant::now() + interval;
            }
        })
        .map_err(|e| Error::io("spawn thread", "shale-blob-gc", e))
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
                if matches!(&cur, Some((ValueKind::BlobIndex, v)) if v.as_slice() == r.old.as_slice())
                {
                    b.put_blob_index_cf(r.cf, &r.key, r.new.as_slice());
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
