//! The public database: [`Db`].
//!
//! Worked example:
//!
//! ```no_run
//! use shaledb::{Db, Options, WriteBatch};
//! let db = Db::open("/tmp/shale-example", Options::default())?;
//! db.put(b"k1", b"v1")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"k2", b"v2");
//! batch.delete(b"k1");
//! db.write(&Default::default(), batch)?;          // atomic
//! assert_eq!(db.get(b"k1")?, None);
//! let snap = db.snapshot();
//! db.put(b"k2", b"v3")?;
//! let ro = shaledb::ReadOptions { snapshot: Some(snap), ..Default::default() };
//! assert_eq!(db.get_opt(&ro, 0, b"k2")?, Some(b"v2".to_vec()));
//! # Ok::<(), shaledb::Error>(())
//! ```
//!
//! Locks, outermost first (never taken in the other order):
//! 1. `write.queue` — the group-commit queue (short);
//! 2. `wal` — held by the group leader for the whole group (WAL append, memtable insert, switch);
//! 3. `state` — memtable generations, column families, busy flags, background error;
//! 4. `sv` — the published [`SuperVersion`] (a read lock is all readers take,
//!    and only when their thread's cached copy is stale: `db/sv_cache.rs`);
//! 5. the per-thread slots of `sv` (held only to take or put back a copy).

mod background;
pub(crate) mod db_iter;
mod ingest;
mod lone_write;
pub mod options;
pub(crate) mod read;
mod recovery;
mod replay;
mod replay_budget;
mod rewrite;
mod snapshot;
mod stats;
mod sv_cache;
mod validate;

pub(crate) use read::latest_seq_of as latest_seq_of_key;
pub(crate) use validate::range_changed_since;
pub(crate) mod write;

pub use db_iter::DbIterator;
pub use ingest::{IngestBuilder, IngestStats};
pub use options::{Options, ReadOptions, WriteOptions};
pub use rewrite::RewriteStats;
pub use snapshot::Snapshot;
pub use write::WalMark;

use crate::cache::BlockCache;
use crate::compaction::filter::CompactionFilterFactory;
use crate::env::{FileLock, FileSystem};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::txn::lock_manager::LockManager;
use crate::version::{CfVersion, ExtentSpace, Version, VersionEdit, VersionSet, DEFAULT_CF_ID};
use crate::wal::LogWriter;
use crate::write_batch::WriteBatch;
use parking_lot::{Condvar, Mutex, RwLock};
use snapshot::SnapshotList;
use stats::DbStats;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Name of the lock file.
const LOCK_FILE: &str = "LOCK";

/// Path of WAL segment `number`.
pub(crate) fn wal_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

/// A column family handle: its id. Id 0 is the default column family.
pub type CfId = u32;

/// The memtables fed by one WAL segment, one per column family.
#[derive(Clone)]
pub(crate) struct Generation {
    /// The WAL segment number.
    pub wal_number: u64,
    pub mems: BTreeMap<CfId, Arc<MemTable>>,
}

/// Arena chunk of a memtable: 1/16 of the write buffer, between 16 KiB and 1 MiB.
pub(crate) fn memtable_chunk_size(write_buffer_size: usize) -> usize {
    (write_buffer_size / 16).clamp(16 << 10, 1 << 20)
}

/// An empty memtable fed by WAL segment `wal_number`, for a buffer of
/// `buffer_size` bytes, with a filter if `opts` asks for one.
pub(crate) fn new_memtable(wal_number: u64, buffer_size: usize, opts: &Options) -> Arc<MemTable> {
    let mem = MemTable::with_chunk_size(wal_number, memtable_chunk_size(buffer_size));
    Arc::new(if opts.memtable_filter {
        mem.with_filter(buffer_size)
    } else {
        mem
    })
}

impl Generation {
    pub(crate) fn new(
        wal_number: u64,
        cfs: impl Iterator<Item = CfId>,
        buffer_size: usize,
        opts: &Options,
    ) -> Self {
        Generation {
            wal_number,
            mems: cfs
                .map(|id| (id, new_memtable(wal_number, buffer_size, opts)))
                .collect(),
        }
    }

    fn memory_usage(&self) -> usize {
        self.mems
            .values()
            .map(|m| m.approximate_memory_usage())
            .sum()
    }
}

/// What a reader of one column family needs, consistent at one instant.
pub(crate) struct CfSuper {
    pub mem: Arc<MemTable>,
    /// Frozen memtables, newest first.
    pub imm: Vec<Arc<MemTable>>,
    pub version: Arc<CfVersion>,
    /// The extents that hold range tombstones, with the `pin` flag of their
    /// level: found once per super version, so that building an iterator
    /// does not walk every extent's metadata to find (usually) none.
    pub tombstone_extents: Vec<(Arc<crate::version::Extent>, bool)>,
}

impl CfSuper {
    pub(crate) fn new(
        mem: Arc<MemTable>,
        imm: Vec<Arc<MemTable>>,
        version: Arc<CfVersion>,
    ) -> Self {
        let tombstone_extents = version
            .all_extents()
            .filter(|(_, e)| e.meta.num_range_deletions > 0)
            .map(|(level, e)| (e.clone(), level <= 1))
            .collect();
        CfSuper {
            mem,
            imm,
            version,
            tombstone_extents,
        }
    }
}

/// Memtables + version of every column family, swapped atomically.
pub(crate) struct SuperVersion {
    pub cfs: BTreeMap<CfId, CfSuper>,
    /// Position in the sequence of published super versions (set by
    /// [`sv_cache::SvCache::install`]): what a thread's cached copy is
    /// checked against.
    pub number: u64,
}

/// Mutable database state. Guarded by `DbInner::state`.
pub(crate) struct DbState {
    pub active: Generation,
    /// Frozen generations, oldest first.
    pub frozen: VecDeque<Generation>,
    pub cf_names: BTreeMap<String, CfId>,
    /// Column families whose L1 a job is changing.
    pub l1_busy: BTreeSet<CfId>,
    /// The first background error; sticky.
    pub bg_error: Option<Error>,
    /// A flush job is running.
    pub flush_running: bool,
    /// A compaction job is running.
    pub compaction_running: bool,
    /// Round-robin position of L(n) -> L(n+1) compaction: (cf, level) -> next key.
    pub compact_cursor: BTreeMap<(CfId, usize), Vec<u8>>,
}

/// The WAL writer side. Guarded by `DbInner::wal`; held by the group leader.
pub(crate) struct WalState {
    pub writer: Option<LogWriter>,
    pub number: u64,
    /// Last sequence assigned (maybe not yet visible).
    pub last_sequence: u64,
}

pub(crate) struct DbInner {
    pub opts: Options,
    pub dir: PathBuf,
    pub fs: Arc<dyn FileSystem>,
    _lock: Box<dyn FileLock>,
    pub versions: VersionSet,
    pub cache: Option<Arc<BlockCache>>,
    pub state: Mutex<DbState>,
    /// Signalled when background work finishes or is needed.
    pub bg_cv: Condvar,
    /// The published super version, cached per thread.
    pub sv: sv_cache::SvCache,
    pub wal: Mutex<WalState>,
    pub write: write::WriteQueue,
    /// Lone writes logged and not yet published (`lone_write.rs`).
    pub(crate) lone: lone_write::InFlight,
    /// Largest sequence whose writes are all visible.
    pub visible_sequence: AtomicU64,
    pub snapshots: Arc<SnapshotList>,
    pub shutting_down: AtomicBool,
    /// Mirrors `state.bg_error.is_some()` for the lock-free write fast path.
    pub bg_error_flag: AtomicBool,
    pub stats: DbStats,
    /// Row locks of pessimistic transactions (`crate::txn`).
    pub lock_manager: LockManager,
    /// Next transaction id handed out by `Db::begin`.
    pub next_txn_id: AtomicU64,
    /// Transactions between prepare and commit/rollback (`crate::txn::prepared`).
    pub prepared: crate::txn::prepared::PreparedRegistry,
    /// Value files (key-value separation); `None` when `min_blob_size` is 0
    /// and the directory holds no value file.
    pub blobs: Option<Arc<crate::blob::BlobStore>>,
    /// Compaction filters by column family (`compaction/filter.rs`), set
    /// by [`Db::set_compaction_filter`]; read when a merge job starts.
    pub compaction_filters: RwLock<HashMap<CfId, Arc<dyn CompactionFilterFactory>>>,
}

impl DbInner {
    /// `Err(Error::Closed)` once [`Db::close`] ran on any handle (or the last
    /// handle was dropped while something still held the state).
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }
}

/// An open database: a cheap handle (two `Arc`s), `Clone + Send + Sync`.
///
/// Clones share one database. It is shut down when [`Db::close`] is called
/// on any handle or when the last handle is dropped; after `close`, the
/// operations of the remaining handles (and of transactions, which own a
/// handle) fail with [`Error::Closed`]. The directory lock is released only
/// when nothing refers to the database any more (no handle, transaction or
/// iterator), so a reopen never races a reader of the old instance.
#[derive(Clone)]
pub struct Db {
    inner: Arc<DbInner>,
    owner: Arc<Owner>,
}

/// Shuts the database down when the last [`Db`] handle goes. Background
/// threads hold `Arc<DbInner>`, never an `Owner`, so they cannot keep it alive.
struct Owner {
    inner: Arc<DbInner>,
    /// Background threads, joined by the shutdown.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Db {
    /// Opens (or creates) the database in `path`.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let dir = path.as_ref().to_path_buf();
        let fs = opts.fs.clone();
        let exists = fs.exists(&dir.join(crate::version::version_set::CURRENT));
        if !exists && !opts.create_if_missing {
            return Err(Error::NotFound(dir));
        }
        if exists && opts.error_if_exists {
            return Err(Error::AlreadyExists(dir));
        }
        fs.create_dir_all(&dir)?;
        let lock = fs.lock(&dir.join(LOCK_FILE)).map_err(|e| match e {
            Error::Locked(_) => Error::Locked(dir.clone()),
            other => other,
        })?;
        let cache = (opts.block_cache_size > 0).then(|| BlockCache::new(opts.block_cache_size));
        let next_file = Arc::new(AtomicU64::new(2));
        let space = ExtentSpace::new(
            fs.clone(),
            dir.clone(),
            opts.extent_size as u64,
            opts.extents_per_file,
            next_file.clone(),
            cache.clone(),
            opts.pin_index_and_filter_all_levels,
        );
        let (versions, recovered) = VersionSet::open(
            fs.clone(),
            dir.clone(),
            space.clone(),
            opts.num_levels,
            opts.max_manifest_size,
            next_file,
        )?;
        space.remove_unused_files()?;
        let blobs = crate::blob::BlobStore::open(
            fs.clone(),
            &dir,
            opts.min_blob_size,
            opts.blob_file_size,
            opts.blob_direct_io,
            (
                opts.blob_direct_reads,
                opts.blob_write_format_v1,
                opts.blob_stage_ring_size,
            ),
            (opts.blob_cache_size, opts.blob_readahead_threads),
        )?;
        let blobs = (opts.min_blob_size > 0 || blobs.usage().0 > 0).then(|| Arc::new(blobs));
        let version = versions.current();
        let cf_names = version
            .cfs
            .values()
            .map(|c| (c.name.clone(), c.id))
            .collect::<BTreeMap<_, _>>();
        let inner = Arc::new(DbInner {
            state: Mutex::new(DbState {
                active: Generation::new(
                    0,
                    version.cfs.keys().copied(),
                    opts.write_buffer_size,
                    &opts,
                ),
                frozen: VecDeque::new(),
                cf_names,
                l1_busy: BTreeSet::new(),
                bg_error: None,
                flush_running: false,
                compaction_running: false,
                compact_cursor: BTreeMap::new(),
            }),
            sv: sv_cache::SvCache::new(SuperVersion {
                cfs: BTreeMap::new(),
                number: 0,
            }),
            wal: Mutex::new(WalState {
                writer: None,
                number: 0,
                last_sequence: recovered.last_sequence,
            }),
            write: write::WriteQueue::default(),
            lone: lone_write::InFlight::default(),
            visible_sequence: AtomicU64::new(recovered.last_sequence),
            snapshots: Arc::new(SnapshotList::default()),
            shutting_down: AtomicBool::new(false),
            bg_error_flag: AtomicBool::new(false),
            stats: DbStats::default(),
            lock_manager: LockManager::default(),
            next_txn_id: AtomicU64::new(1),
            prepared: Default::default(),
            compaction_filters: RwLock::new(HashMap::new()),
            blobs,
            bg_cv: Condvar::new(),
            opts,
            dir,
            fs,
            _lock: lock,
            versions,
            cache,
        });
        inner.stats.restore_lifetime(&recovered.lifetime_counters);
        let in_doubt = recovery::recover(&inner, recovered.log_number)?;
        let db = Db {
            owner: Arc::new(Owner {
                inner: inner.clone(),
                threads: Mutex::new(Vec::new()),
            }),
            inner,
        };
        db.restore_prepared(in_doubt)?;
        if db.inner.opts.background_threads {
            *db.owner.threads.lock() = background::spawn(&db.inner)?;
        }
        let gc_ratio = db.inner.opts.blob_gc_live_ratio;
        if gc_ratio > 0.0 && db.inner.blobs.is_some() {
            let interval = std::time::Duration::from_millis(db.inner.opts.blob_gc_interval_ms);
            let t = crate::blob::gc::spawn_background(&db.inner, gc_ratio, interval)?;
            db.owner.threads.lock().push(t);
        }
        Ok(db)
    }

    /// Writes `key = value` in the default column family.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    /// Writes `key = value` with options.
    pub fn put_opt(&self, wo: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::with_capacity(key.len() + value.len() + 24);
        b.put(key, value);
        self.write(wo, b)
    }

    /// Writes `key = value` in column family `cf`.
    pub fn put_cf(&self, cf: CfId, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_cf(cf, key, value);
        self.write(&WriteOptions::default(), b)
    }

    /// Deletes `key` from the default column family.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    /// Deletes `key` with options.
    pub fn delete_opt(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(wo, b)
    }

    /// Deletes `key` from column family `cf`.
    pub fn delete_cf(&self, cf: CfId, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_cf(cf, key);
        self.write(&WriteOptions::default(), b)
    }

    /// Deletes every key in `[begin, end)` of the default column family.
    pub fn delete_range(&self, begin: &[u8], end: &[u8]) -> Result<()> {
        self.delete_range_cf(DEFAULT_CF_ID, begin, end)
    }

    /// Deletes every key in `[begin, end)` of column family `cf`.
    pub fn delete_range_cf(&self, cf: CfId, begin: &[u8], end: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range_cf(cf, begin, end);
        self.write(&WriteOptions::default(), b)
    }

    /// Applies a batch atomically (all of it or none of it, across column families).
    pub fn write(&self, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
        write::write(&self.inner, wo, batch)
    }

    /// Reads `key` from the default column family at the latest state.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        read::get(&self.inner, &ReadOptions::default(), DEFAULT_CF_ID, key)
    }

    /// Reads `key` from column family `cf`.
    pub fn get_cf(&self, cf: CfId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        read::get(&self.inner, &ReadOptions::default(), cf, key)
    }

    /// Reads `key` from column family `cf` with options (e.g. at a snapshot).
    pub fn get_opt(&self, ro: &ReadOptions, cf: CfId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        read::get(&self.inner, ro, cf, key)
    }

    /// Reads `key` of column family `cf` into `value` (cleared first):
    /// `Ok(true)` if found. Reusing `value` across calls saves the
    /// allocation `get` makes per found key (docs/architecture.md, "Read path").
    pub fn get_into(
        &self,
        ro: &ReadOptions,
        cf: CfId,
        key: &[u8],
        value: &mut Vec<u8>,
    ) -> Result<bool> {
        read::get_into(&self.inner, ro, cf, key, value)
    }

    /// An iterator over the default column family.
    pub fn iter(&self, ro: &ReadOptions) -> Result<DbIterator> {
        self.iter_cf(ro, DEFAULT_CF_ID)
    }

    /// An iterator over column family `cf`.
    pub fn iter_cf(&self, ro: &ReadOptions, cf: CfId) -> Result<DbIterator> {
        db_iter::new_iterator(&self.inner, ro, cf)
    }

    /// A snapshot of the current state.
    pub fn snapshot(&self) -> Snapshot {
        // A group publishes its last sequence only once all of it is in
        // the memtables, so the visible sequence is never half a group;
        // `acquire_latest` explains why no write-path lock is needed.
        self.inner
            .snapshots
            .acquire_latest(&self.inner.visible_sequence)
    }

    /// A snapshot at the oldest live snapshot's sequence, or at the latest
    /// state when there is none: every reader, now or later, reads at or
    /// above it. Taken under the snapshot list's lock, so that oldest one
    /// cannot be released in between (a compaction filter reads here to
    /// decide what no reader can need, `CompactionFilter::drop_entry`).
    pub fn oldest_snapshot(&self) -> Snapshot {
        self.inner
            .snapshots
            .acquire_oldest(&self.inner.visible_sequence)
    }

    /// The sequence of the last acknowledged write.
    pub fn latest_sequence(&self) -> u64 {
        self.inner.visible_sequence.load(Ordering::Acquire)
    }

    /// Creates a column family; returns its id.
    pub fn create_cf(&self, name: &str) -> Result<CfId> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::InvalidArgument(
                "column family names have 1 to 255 bytes".into(),
            ));
        }
        let inner = &self.inner;
        let _w = lone_write::lock_quiet(inner);
        let mut st = inner.state.lock();
        if st.cf_names.contains_key(name) {
            return Err(Error::ColumnFamilyExists(name.to_owned()));
        }
        let id = inner.versions.new_cf_id();
        inner.versions.log_and_apply(VersionEdit {
            add_cfs: vec![(id, name.to_owned())],
            ..Default::default()
        })?;
        st.cf_names.insert(name.to_owned(), id);
        let wal_number = st.active.wal_number;
        st.active.mems.insert(
            id,
            new_memtable(wal_number, inner.opts.write_buffer_size, &inner.opts),
        );
        background::install_super_version(inner, &st);
        Ok(id)
    }

    /// Drops a column family and all its data. The default one cannot be dropped.
    pub fn drop_cf(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        let _w = lone_write::lock_quiet(inner);
        let mut st = inner.state.lock();
        let id = *st
            .cf_names
            .get(name)
            .ok_or_else(|| Error::ColumnFamilyNotFound(name.to_owned()))?;
        if id == DEFAULT_CF_ID {
            return Err(Error::InvalidArgument(
                "the default column family cannot be dropped".into(),
            ));
        }
        while st.l1_busy.contains(&id) || st.flush_running {
            inner.bg_cv.wait(&mut st);
        }
        inner.versions.log_and_apply(VersionEdit {
            drop_cfs: vec![id],
            ..Default::default()
        })?;
        st.cf_names.remove(name);
        st.active.mems.remove(&id);
        for g in st.frozen.iter_mut() {
            g.mems.remove(&id);
        }
        background::install_super_version(inner, &st);
        Ok(())
    }

    /// The id of column family `name`.
    pub fn cf_id(&self, name: &str) -> Result<CfId> {
        self.inner
            .state
            .lock()
            .cf_names
            .get(name)
            .copied()
            .ok_or_else(|| Error::ColumnFamilyNotFound(name.to_owned()))
    }

    /// Names of all column families, sorted.
    pub fn list_cfs(&self) -> Vec<String> {
        self.inner.state.lock().cf_names.keys().cloned().collect()
    }

    /// Freezes the memtables and waits until everything written so far is in extents.
    pub fn flush(&self) -> Result<()> {
        background::flush_and_wait(&self.inner)
    }

    /// Compacts every level of every column family down to the last level, then
    /// waits for it (keys outside `[begin, end]` may be compacted too).
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let _ = (begin, end);
        background::compact_all(&self.inner)
    }

    /// Sets (or with `None` removes) the compaction filter of column family
    /// `cf` (docs/architecture.md, "Compaction filters"). Merge jobs that
    /// start afterwards use it; it is not persisted, so set it again after
    /// each open.
    pub fn set_compaction_filter(
        &self,
        cf: CfId,
        factory: Option<Arc<dyn CompactionFilterFactory>>,
    ) -> Result<()> {
        self.inner.check_open()?;
        let mut filters = self.inner.compaction_filters.write();
        match factory {
            Some(f) => filters.insert(cf, f),
            None => filters.remove(&cf),
        };
        Ok(())
    }

    /// Compacts everything down to the last level, then rewrites every
    /// last-level extent of `cf` overlapping `[begin, end)` (even one a
    /// compaction would move by reference) so that the column family's
    /// compaction filter sees each value there. Extents are rewritten a
    /// window at a time; other writes and reads go on meanwhile.
    pub fn rewrite_range(&self, cf: CfId, begin: &[u8], end: &[u8]) -> Result<RewriteStats> {
        self.inner.check_open()?;
        rewrite::rewrite_range(&self.inner, cf, begin, end)
    }

    /// The sequence of the oldest live snapshot (held by a [`Snapshot`], a
    /// transaction at Snapshot Isolation or an open iterator), if any.
    pub fn oldest_snapshot_sequence(&self) -> Option<u64> {
        self.inner.snapshots.sequences().first().copied()
    }

    /// A property: `shale.stats` (human-readable), `shale.num-extents-at-level<N>`,
    /// `shale.bytes-at-level<N>`, `shale.memtable-bytes`, `shale.cache-hits`,
    /// `shale.cache-misses`, `shale.write-amplification`, `shale.stall-micros`,
    /// `shale.compaction-bytes-reused`, `shale.l0-runs`.
    pub fn property(&self, name: &str) -> Option<String> {
        stats::property(&self.inner, name)
    }

    /// Garbage collection of value files (docs/format-blob.md, section 3):
    /// every sealed value file whose live bytes are below `max_live_ratio`
    /// of its record bytes has its live values copied to a new file and its
    /// keys re-pointed (never over a newer write). A rewritten file is
    /// deleted once no snapshot, iterator or read that could still see it
    /// is left; until then it is counted in `files_waiting`.
    pub fn collect_blob_garbage(&self, max_live_ratio: f64) -> Result<crate::blob::BlobGcStats> {
        crate::blob::gc::collect(&self.inner, max_live_ratio)
    }

    /// Verifies every block checksum of every extent and every record
    /// checksum of every sealed value file; the first damage is an
    /// `Error::Corruption` naming the file and offset. Returns the number of
    /// extents and value files checked.
    pub fn verify_checksums(&self) -> Result<u64> {
        let version: Arc<Version> = self.inner.versions.current();
        let mut n = 0;
        for cf in version.cfs.values() {
            for (_, ext) in cf.all_extents() {
                ext.reader(false)?.verify_checksums()?;
                n += 1;
            }
        }
        if let Some(blobs) = &self.inner.blobs {
            n += crate::blob::reader::verify_files(blobs)?;
        }
        Ok(n)
    }

    /// Describes the extents the current version keeps in data file `name`
    /// (e.g. `000012.sdt`): slots, key ranges, blocks and properties.
    pub fn describe_data_file(&self, name: &str) -> Result<String> {
        use std::fmt::Write as _;
        let base = Path::new(name)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(name);
        let number: u64 = base
            .strip_suffix(".sdt")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| {
                Error::InvalidArgument(format!("{name} is not a data file name (NNNNNN.sdt)"))
            })?;
        let version = self.inner.versions.current();
        let mut out = String::new();
        let mut found = 0;
        for cf in version.cfs.values() {
            for (level, ext) in cf.all_extents() {
                if ext.meta.file_number != number {
                    continue;
                }
                found += 1;
                let m = &ext.meta;
                let _ = writeln!(
                    out,
                    "extent {} cf={} L{level} slot={} size={} keys=[{:?} .. {:?}] seq=[{}, {}]",
                    m.id,
                    cf.name,
                    m.slot,
                    m.size,
                    String::from_utf8_lossy(&m.smallest),
                    String::from_utf8_lossy(&m.largest),
                    m.smallest_seq,
                    m.largest_seq
                );
                out.push_str(&ext.reader(false)?.describe()?);
            }
        }
        if found == 0 {
            return Err(Error::InvalidArgument(format!(
                "no live extent in data file {name}"
            )));
        }
        Ok(out)
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Shuts the database down for every handle: stops background work and
    /// flushes the WAL to the OS. Returns the sticky background error, if any.
    /// Later operations through other handles fail with [`Error::Closed`].
    pub fn close(self) -> Result<()> {
        self.owner.shutdown()
    }
}

impl Owner {
    fn shutdown(&self) -> Result<()> {
        let inner = &self.inner;
        inner.shutting_down.store(true, Ordering::SeqCst);
        {
            let _st = inner.state.lock();
            inner.bg_cv.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        let mut wal = lone_write::lock_quiet(inner);
        if let Some(w) = wal.writer.as_mut() {
            w.flush()?;
        }
        if let Some(b) = &inner.blobs {
            b.close()?;
        }
        drop(wal);
        let st = inner.state.lock();
        match &st.bg_error {
            Some(e) => Err(Error::Background(Arc::new(e.clone()))),
            None => {
                drop(st);
                // Record the lifetime counters with the writes since the
                // last flush, so the next open starts from exact figures
                // (after a crash they are exact up to the last flush).
                inner.versions.log_and_apply(VersionEdit {
                    lifetime_counters: Some(inner.stats.lifetime(&inner.visible_sequence)),
                    ..Default::default()
                })?;
                Ok(())
            }
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if !self.inner.shutting_down.load(Ordering::SeqCst) {
            let _ = self.shutdown();
        }
    }
}

/// Hooks for the transaction layer (`crate::txn`).
impl Db {
    /// The shared state (for the transaction layer).
    pub(crate) fn inner(&self) -> &Arc<DbInner> {
        &self.inner
    }

    /// The row lock table shared by this database's transactions.
    pub(crate) fn lock_manager(&self) -> &LockManager {
        &self.inner.lock_manager
    }

    /// A fresh transaction id (never 0, unique for this `Db`).
    pub(crate) fn next_txn_id(&self) -> u64 {
        self.inner.next_txn_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The sequence of the newest version (put, delete or covering range
    /// delete) of `key` in `cf`, regardless of any snapshot.
    pub(crate) fn latest_seq_of(
        &self,
        cf: CfId,
        key: &[u8],
    ) -> Result<Option<crate::types::SequenceNumber>> {
        read::latest_seq_of(&self.inner, cf, key)
    }

    /// See `read::get_newest`: the newest version's sequence of `key` and,
    /// if it is at or below `snapshot`, its value.
    pub(crate) fn get_newest(
        &self,
        cf: CfId,
        key: &[u8],
        snapshot: crate::types::SequenceNumber,
        value: &mut Vec<u8>,
    ) -> Result<(crate::types::SequenceNumber, bool)> {
        read::get_newest(&self.inner, cf, key, snapshot, value)
    }
}

/// Test hooks that drive background work by hand (feature `test-hooks`).
#[cfg(feature = "test-hooks")]
impl Db {
    /// Runs pending flushes and compactions on the calling thread until none is
    /// needed (for tests with `background_threads = false`).
    pub fn run_background_work(&self) -> Result<()> {
        background::run_until_idle(&self.inner)
    }
}
