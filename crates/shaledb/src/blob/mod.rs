//! Key-value separation: large values live in append-only value files
//! (`NNNNNN.blob`); the LSM keeps a 28-byte [`format::BlobIndex`] (24 bytes for a
//! format-version-1 file) under the
//! entry kind `BlobIndex`. Byte layout: docs/format-blob.md.
//!
//! - `format.rs`: header, record, footer and index codecs.
//! - `keylog.rs`: format version 2: value placement (4 KiB values on
//!   4 KiB pages) and the key log's codecs; `scan2.rs`: its scans.
//! - `writer.rs`: the active value file, appended by the group-commit leader.
//! - `staged.rs`: with `blob_direct_io`, the active file's stage file and
//!   writer thread (puts do not wait for `O_DIRECT` writes);
//!   `stage_recovery.rs` merges a stage file back at open.
//! - `reader.rs`: point reads of a value and record scans.
//! - `gc.rs`: garbage collection (rewrite live records, re-point keys).
//! - `cache.rs`: the value cache with single-flight reads.
//! - `dead.rs`: dead bytes per file, counted by compaction (`BLOBDEAD`).
//!
//! Lifetime of a value file: readers (gets, iterators) clone the current
//! [`FileSet`] before and after they read the visible sequence
//! ([`FileView`]), so every file a BlobIndex they can see points at is in
//! one of the two. GC removes a rewritten
//! file from the current set only when no snapshot older than the re-point
//! write exists; the file itself is unlinked when the last `Arc` of its
//! [`BlobFile`] (held by file sets of in-flight readers) drops.

pub(crate) mod cache;
pub(crate) mod dead;
pub(crate) mod format;
pub(crate) mod gc;
pub(crate) mod keylog;
pub(crate) mod limiter;
pub(crate) mod readahead;
pub(crate) mod reader;
pub(crate) mod scan2;
pub(crate) mod stage_recovery;
pub(crate) mod stage_ring;
pub(crate) mod staged;
pub(crate) mod writer;

use crate::env::{FileSystem, RandomAccessFile};
use crate::error::Result;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub use gc::BlobGcStats;

/// One value file, open for positioned reads.
pub(crate) struct BlobFile {
    pub number: u64,
    pub path: PathBuf,
    pub file: Arc<dyn RandomAccessFile>,
    /// Format version (1 or 2; 0 for a file emptied at open): fixed for
    /// the life of the file.
    pub version: u32,
    /// Bytes written so far (header + records + footer; version 2: header
    /// and values).
    pub bytes: AtomicU64,
    /// Version 2: bytes of the key log (0 for version 1).
    pub keylog_bytes: AtomicU64,
    /// No more appends (footer written or file recovered at open).
    pub sealed: AtomicBool,
    /// Rewritten by GC: unlink when the last handle drops.
    obsolete: AtomicBool,
    fs: Arc<dyn FileSystem>,
    /// The store's value cache (`Options::blob_cache_size`), if any.
    pub cache: Option<Arc<cache::ValueCache>>,
    /// While a staged active file is written: its stage file and written
    /// length (records past it are read from the stage). Looked at only
    /// while the file is not sealed.
    pub stage: Mutex<Option<Arc<staged::StageView>>>,
    /// Lone writes (`db/lone_write.rs`) whose values are in this file and
    /// whose keys are not yet published: GC leaves the file alone until
    /// none is left, since it would count their values dead. Raised under
    /// the store's `active` lock, so a sealed file's count only falls.
    pub unpublished: AtomicU64,
}

/// A lone write's claim on the file its values went to
/// ([`BlobFile::unpublished`]); dropped once the write is published.
pub(crate) struct UnpublishedValues(Arc<BlobFile>);

impl UnpublishedValues {
    /// Counts one more unpublished write in `file` (caller holds the
    /// store's `active` lock and `file` is the active file).
    pub(crate) fn new(file: &Arc<BlobFile>) -> Self {
        file.unpublished.fetch_add(1, Ordering::AcqRel);
        UnpublishedValues(file.clone())
    }
}

impl Drop for UnpublishedValues {
    fn drop(&mut self) {
        self.0.unpublished.fetch_sub(1, Ordering::AcqRel);
    }
}

impl BlobFile {
    fn new(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        number: u64,
        (version, bytes, keylog_bytes, sealed): (u32, u64, u64, bool),
        (direct_reads, cache): (bool, &Option<Arc<cache::ValueCache>>),
    ) -> Result<Self> {
        let path = format::blob_path(dir, number);
        let file = if direct_reads {
            fs.open_random_direct(&path)?
        } else {
            fs.open_random(&path)?
        };
        Ok(BlobFile {
            number,
            path,
            file,
            version,
            bytes: AtomicU64::new(bytes),
            keylog_bytes: AtomicU64::new(keylog_bytes),
            sealed: AtomicBool::new(sealed),
            obsolete: AtomicBool::new(false),
            fs: fs.clone(),
            cache: cache.clone(),
            stage: Mutex::new(None),
            unpublished: AtomicU64::new(0),
        })
    }

    /// The stage of this file while it is written (none once sealed).
    pub fn stage_view(&self) -> Option<Arc<staged::StageView>> {
        if self.sealed.load(Ordering::Acquire) {
            return None;
        }
        self.stage.lock().clone()
    }

    /// Bytes on disk: the value file and (version 2) its key log.
    pub fn disk_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire) + self.keylog_bytes.load(Ordering::Acquire)
    }
}

impl Drop for BlobFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            // The value file first: a key log without its value file is an
            // orphan (removed at open), while a value file without its key
            // log would be emptied at open, and an old WAL record naming an
            // empty file reads as a torn tail (a missing file does not).
            if let Err(e) = self.fs.remove_file(&self.path) {
                tracing::warn!("could not remove obsolete value file: {e}");
            }
            let keys = self.path.with_extension(keylog::KEYLOG_SUFFIX);
            if self.fs.exists(&keys) {
                if let Err(e) = self.fs.remove_file(&keys) {
                    tracing::warn!("could not remove obsolete key log: {e}");
                }
            }
        }
    }
}

/// The value files readers may use, by number.
pub(crate) type FileSet = BTreeMap<u64, Arc<BlobFile>>;

/// The value files one read (a get, or an iterator for its life) may use:
/// the set taken *before* it read its sequence, which holds every file a
/// GC removal could take away from it (a file leaves the set only once its
/// re-point write is visible, so a read that saw an older sequence had the
/// set from before), and the set taken *after*, which holds every file a
/// write it can see points into (a file joins the set before any BlobIndex
/// pointing into it is published).
///
/// Empty (`None`, no allocation) in a database without value files.
#[derive(Clone, Default)]
pub(crate) struct FileView {
    before: Option<Arc<FileSet>>,
    after: Option<Arc<FileSet>>,
}

impl FileView {
    /// The view is built in two halves around the reads of the super
    /// version and the sequence (`db/read.rs`): this is the set before;
    /// [`FileView::finish`] takes the set after the sequence is read.
    pub fn start(store: Option<&BlobStore>) -> Option<Arc<FileSet>> {
        store.map(BlobStore::current)
    }

    /// The second half of [`FileView::start`].
    pub fn finish(store: Option<&BlobStore>, before: Option<Arc<FileSet>>) -> Self {
        match (store, before) {
            (Some(store), Some(before)) => FileView {
                before: Some(before),
                after: Some(store.current()),
            },
            _ => FileView::default(),
        }
    }

    /// The file `number`, if this read may use it.
    pub fn get(&self, number: u64) -> Option<&Arc<BlobFile>> {
        let after = self.after.as_ref().and_then(|s| s.get(&number));
        after.or_else(|| self.before.as_ref().and_then(|s| s.get(&number)))
    }
}

/// Counters of garbage collection, for properties.
#[derive(Default)]
pub(crate) struct BlobCounters {
    pub gc_runs: AtomicU64,
    pub gc_files_rewritten: AtomicU64,
    pub gc_bytes_rewritten: AtomicU64,
    pub gc_files_deleted: AtomicU64,
}

/// All value files of a database.
pub(crate) struct BlobStore {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// Values of at least this many bytes are separated (> 0).
    pub min_blob_size: usize,
    file_size: u64,
    /// Value files are written with `O_DIRECT` where supported.
    direct: bool,
    /// Values are read with `O_DIRECT` where supported (GC scans are not).
    direct_reads: bool,
    /// Tests only: new files are written in format version 1.
    write_v1: bool,
    /// Bytes of a staged file's ring (stage format 2).
    stage_ring: u64,
    /// A sealed file's ring kept for the next active file (staged.rs).
    spare_ring: staged::SpareRing,
    /// Cache of values by (file, offset) (`Options::blob_cache_size`).
    cache: Option<Arc<cache::ValueCache>>,
    files: RwLock<Arc<FileSet>>,
    /// The file the group-commit leader appends to (created lazily).
    active: Mutex<Option<writer::ActiveFile>>,
    /// Files sealed (footer appended) but not yet fsynced: synced with the
    /// active file before a WAL segment is synced whole.
    unsynced: Mutex<Vec<Box<dyn crate::env::WritableFile>>>,
    next_number: AtomicU64,
    /// Rewritten files waiting for old snapshots: (re-point sequence, file).
    retired: Mutex<Vec<(u64, Arc<BlobFile>)>>,
    /// Serializes garbage collection runs.
    gc_lock: Mutex<()>,
    /// Dead record bytes per file (compaction's count, persisted in
    /// `BLOBDEAD`; see dead.rs for why it only errs high).
    dead: Mutex<dead::DeadCounts>,
    pub counters: BlobCounters,
}

impl BlobStore {
    /// True if scans read ahead: a value cache with reader threads.
    pub fn reads_ahead(&self) -> bool {
        self.cache.as_ref().is_some_and(|c| c.readahead.is_some())
    }

    /// Opens the value files in `dir`: a file without a valid footer (the
    /// active file at a crash, or one whose unsynced footer was lost) gets
    /// its torn tail cut; all are sealed (new writes go to a new file).
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        min_blob_size: usize,
        file_size: u64,
        direct: bool,
        (direct_reads, write_v1, stage_ring): (bool, bool, u64),
        (cache_size, readahead_threads): (usize, usize),
    ) -> Result<BlobStore> {
        let cache = match cache_size {
            0 => None,
            n => Some(Arc::new(cache::ValueCache::new(n, readahead_threads)?)),
        };
        let mut numbers: Vec<u64> = fs
            .list_dir(dir)?
            .iter()
            .filter_map(|n| format::parse_blob_name(n))
            .collect();
        numbers.sort_unstable();
        let staged: Vec<u64> = fs
            .list_dir(dir)?
            .iter()
            .filter_map(|n| staged::parse_stage_name(n))
            .collect();
        for n in staged {
            stage_recovery::recover(&fs, dir, n)?;
        }
        // A key log is created before its value file and removed before it:
        // one without its value file held nothing acknowledged.
        let orphans: Vec<u64> = fs
            .list_dir(dir)?
            .iter()
            .filter_map(|n| keylog::parse_keylog_name(n))
            .filter(|n| numbers.binary_search(n).is_err())
            .collect();
        for n in orphans {
            scan2::remove_keylog(&fs, dir, n)?;
        }
        let mut set = FileSet::new();
        for &n in &numbers {
            let version = reader::cut_torn_tail(&fs, dir, n)?;
            // A file emptied by the cut stays (a WAL record pointing into
            // it is then found torn by recovery); GC removes it later.
            let size = fs.file_size(&format::blob_path(dir, n))?;
            let keys = keylog::keylog_path(dir, n);
            let key_bytes = if version == format::VERSION_2 {
                fs.file_size(&keys)?
            } else {
                0
            };
            let sizes = (version, size, key_bytes, true);
            let f = BlobFile::new(&fs, dir, n, sizes, (direct_reads, &cache))?;
            set.insert(n, Arc::new(f));
        }
        let next = numbers.last().map_or(1, |n| n + 1);
        let dead = BlobStore::load_dead(&fs, dir, &numbers)?;
        Ok(BlobStore {
            fs,
            dir: dir.to_path_buf(),
            min_blob_size,
            file_size,
            direct,
            direct_reads,
            write_v1,
            stage_ring: if stage_ring == 0 {
                stage_ring::RING_SIZE
            } else {
                stage_ring
            },
            spare_ring: Arc::new(Mutex::new(None)),
            cache,
            files: RwLock::new(Arc::new(set)),
            active: Mutex::new(None),
            unsynced: Mutex::new(Vec::new()),
            next_number: AtomicU64::new(next),
            retired: Mutex::new(Vec::new()),
            gc_lock: Mutex::new(()),
            dead: Mutex::new(dead),
            counters: BlobCounters::default(),
        })
    }

    /// The current file set (clone it before reading the visible sequence).
    pub fn current(&self) -> Arc<FileSet> {
        self.files.read().clone()
    }

    fn new_number(&self) -> u64 {
        self.next_number.fetch_add(1, Ordering::AcqRel)
    }

    fn add_file(&self, f: Arc<BlobFile>) {
        let mut files = self.files.write();
        let mut set = FileSet::clone(&files);
        set.insert(f.number, f);
        *files = Arc::new(set);
    }

    /// Retires a rewritten file: it stays readable until
    /// [`BlobStore::release_retired`] finds `gc_seq` visible and older than
    /// every snapshot.
    pub fn retire(&self, gc_seq: u64, f: Arc<BlobFile>) {
        self.retired.lock().push((gc_seq, f));
    }

    /// Numbers of the retired files.
    pub fn retired_numbers(&self) -> std::collections::BTreeSet<u64> {
        self.retired.lock().iter().map(|(_, f)| f.number).collect()
    }

    /// Removes from the current set the retired files whose `gc_seq` is at
    /// or below `visible` and at or below the oldest snapshot (`None`: no
    /// snapshot is live) and marks them obsolete: each is unlinked when its
    /// last reader drops it. Returns how many were removed.
    pub fn release_retired(&self, visible: u64, oldest_snapshot: Option<u64>) -> usize {
        let mut retired = self.retired.lock();
        let (free, keep): (Vec<_>, Vec<_>) = retired
            .drain(..)
            .partition(|(seq, _)| *seq <= visible && oldest_snapshot.is_none_or(|s| s >= *seq));
        *retired = keep;
        drop(retired);
        if free.is_empty() {
            return 0;
        }
        let mut files = self.files.write();
        let mut set = FileSet::clone(&files);
        for (_, f) in &free {
            f.obsolete.store(true, Ordering::Release);
            set.remove(&f.number);
        }
        *files = Arc::new(set);
        drop(files);
        self.counters
            .gc_files_deleted
            .fetch_add(free.len() as u64, Ordering::Relaxed);
        free.len()
    }

    /// (number of value files, their bytes).
    pub fn usage(&self) -> (usize, u64) {
        let set = self.current();
        let bytes = set.values().map(|f| f.disk_bytes()).sum();
        (set.len(), bytes)
    }
}

/// Persists the dead value bytes merges found, before their version edit
/// is logged (dead.rs: the count may err high, never low).
pub(crate) fn note_dead<'a>(
    inner: &crate::db::DbInner,
    results: impl Iterator<Item = &'a crate::compaction::MergeResult>,
) -> Result<()> {
    match inner.blobs.as_ref() {
        Some(store) => store.add_dead(results.map(|r| &r.blob_dead)),
        None => Ok(()),
    }
}

/// The `shale.blob-*` properties (`None` for other names).
///
/// - `shale.blob-file-count`, `shale.blob-bytes`: value files and their bytes;
/// - `shale.blob-live-bytes`: value bytes the newest LSM entries point at
///   (scans the keys of every column family, not the values);
/// - `shale.blob-live-ratio`: live bytes / value-file bytes (1.000 if none);
/// - `shale.blob-gc-runs`, `shale.blob-gc-files-rewritten`,
///   `shale.blob-gc-bytes-rewritten`, `shale.blob-gc-files-deleted`;
/// - `shale.blob-cache-hits`, `shale.blob-cache-misses`,
///   `shale.blob-cache-usage`: the value cache (0 without one);
/// - `shale.blob-readahead-reads`, `shale.blob-readahead-dropped`: records
///   read ahead of scans, and jobs dropped on a full queue (readahead.rs);
/// - `shale.blob-dead-bytes`: dead record bytes counted by compaction
///   (cheap, no scan; files counted [`dead::UNREFERENCED`] count whole);
/// - `shale.blob-space-amp`: value-file bytes / (value-file bytes - dead
///   bytes), from that count (1.000 if none);
/// - `shale.blob-files`: one line per file, "number bytes dead live-ratio".
pub(crate) fn property(inner: &Arc<crate::db::DbInner>, name: &str) -> Option<String> {
    let name = name.strip_prefix("shale.blob-")?;
    let store = inner.blobs.as_ref();
    let (files, bytes) = store.map_or((0, 0), |s| s.usage());
    let ld = |f: fn(&BlobCounters) -> &AtomicU64| {
        store.map_or(0, |s| f(&s.counters).load(Ordering::Relaxed))
    };
    Some(match name {
        "file-count" => files.to_string(),
        "bytes" => bytes.to_string(),
        "live-bytes" => live_bytes(inner).ok()?.to_string(),
        "live-ratio" => {
            let live = live_bytes(inner).ok()?;
            let ratio = if bytes == 0 {
                1.0
            } else {
                live as f64 / bytes as f64
            };
            format!("{ratio:.3}")
        }
        "cache-hits" | "cache-misses" | "cache-usage" => {
            let (hits, misses, usage) = store
                .and_then(|s| s.cache.as_ref())
                .map(|c| c.stats())
                .unwrap_or_default();
            match name {
                "cache-hits" => hits,
                "cache-misses" => misses,
                _ => usage,
            }
            .to_string()
        }
        "readahead-reads" | "readahead-dropped" => {
            let (reads, dropped) = store
                .and_then(|s| s.cache.as_ref())
                .and_then(|c| c.readahead.as_ref())
                .map(|r| r.stats())
                .unwrap_or_default();
            if name == "readahead-reads" {
                reads
            } else {
                dropped
            }
            .to_string()
        }
        "dead-bytes" => counted(store).1.to_string(),
        "space-amp" => {
            let (bytes, dead) = counted(store);
            format!("{:.3}", space_amp(bytes, dead))
        }
        "files" => store.map_or_else(String::new, |s| {
            s.estimates()
                .iter()
                .map(|e| {
                    format!(
                        "{} {} {} {:.3}\n",
                        e.number,
                        e.bytes,
                        e.dead.min(e.record_bytes),
                        e.live_ratio
                    )
                })
                .collect()
        }),
        "gc-runs" => ld(|c| &c.gc_runs).to_string(),
        "gc-files-rewritten" => ld(|c| &c.gc_files_rewritten).to_string(),
        "gc-bytes-rewritten" => ld(|c| &c.gc_bytes_rewritten).to_string(),
        "gc-files-deleted" => ld(|c| &c.gc_files_deleted).to_string(),
        _ => return None,
    })
}

/// (value-file bytes, counted dead bytes) over the current files.
fn counted(store: Option<&Arc<BlobStore>>) -> (u64, u64) {
    store.map_or((0, 0), |s| {
        s.estimates().iter().fold((0, 0), |(b, d), e| {
            (b + e.bytes, d + e.dead.min(e.record_bytes))
        })
    })
}

/// Bytes on disk per live byte (1.0 with nothing on disk).
fn space_amp(bytes: u64, dead: u64) -> f64 {
    let live = bytes.saturating_sub(dead);
    if live == 0 {
        if bytes == 0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        bytes as f64 / live as f64
    }
}

/// Sum of the value lengths of the newest BlobIndex entries of all keys.
fn live_bytes(inner: &Arc<crate::db::DbInner>) -> Result<u64> {
    if inner.blobs.is_none() {
        return Ok(0);
    }
    let cfs: Vec<u32> = inner.sv.get().cfs.keys().copied().collect();
    let mut live = 0;
    for cf in cfs {
        let mut it = crate::db::db_iter::new_raw_iterator(inner, cf)?;
        it.seek_to_first()?;
        while it.valid() {
            if it.value_is_blob() {
                live += format::BlobIndex::decode(it.value()).map_or(0, |i| i.value_len);
            }
            it.next()?;
        }
    }
    Ok(live)
}

/// One line for `shale.stats`.
pub(crate) fn stats_line(inner: &crate::db::DbInner) -> Option<String> {
    let s = inner.blobs.as_ref()?;
    let (files, bytes) = s.usage();
    let (_, dead) = counted(Some(s));
    let c = &s.counters;
    let mut worst = s.estimates();
    worst.sort_by(|a, b| a.live_ratio.total_cmp(&b.live_ratio));
    let worst: Vec<String> = worst
        .iter()
        .take(4)
        .map(|e| format!("{}: {:.3}", e.number, e.live_ratio))
        .collect();
    Some(format!(
        "value files: {files} files, {bytes} bytes, {dead} counted dead, space amplification {:.3}; lowest live ratios [{}]; gc: {} runs, {} files rewritten, {} bytes rewritten, {} files deleted",
        space_amp(bytes, dead),
        worst.join(", "),
        c.gc_runs.load(Ordering::Relaxed),
        c.gc_files_rewritten.load(Ordering::Relaxed),
        c.gc_bytes_rewritten.load(Ordering::Relaxed),
        c.gc_files_deleted.load(Ordering::Relaxed),
    ))
}
