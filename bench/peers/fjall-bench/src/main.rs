//! `fjall-bench`: the shale-bench harness (db_bench flags, workloads and report lines) running
//! against fjall 3.x, a pure-Rust LSM-tree engine, as a peer for ShaleDB's benchmarks.
//!
//! A separate cargo workspace so fjall's dependency tree stays out of the engine's build.
//!
//! Configuration, chosen to match what `db_bench` gives RocksDB for the same flags:
//!
//! * one database with one keyspace (`bench`), like RocksDB's default column family;
//! * `--cache_size` → `Database::builder().cache_size` (fjall's block cache);
//! * `--write_buffer_size` → the keyspace's `max_memtable_size`;
//! * `--bloom_bits=N` (N > 0) → bloom filters with N bits per key on every level; otherwise no
//!   filters (db_bench's default `-1` builds none for RocksDB);
//! * `--compression_type` → data-block compression on every level; fjall 3 has no zstd, so zstd
//!   falls back to LZ4 (the header says so);
//! * durability as RocksDB's default WAL: every write is appended to fjall's journal and flushed
//!   to the OS (`manual_journal_persist(false)`, fjall's default); `--sync` commits each write
//!   with `PersistMode::SyncData` (fdatasync), like RocksDB's `WriteOptions::sync`;
//! * the journal is not compressed (`journal_compression(None)`; fjall's default compresses
//!   entries of 4 KiB and more with LZ4), like RocksDB's WAL (`wal_compression` is off by
//!   default) and ShaleDB's;
//! * `max_journaling_size` (fjall's `max_total_wal_size`) is `max(512 MiB, 4 *
//!   --write_buffer_size)`, RocksDB's dynamic `max_total_wal_size` default, so a write buffer
//!   larger than 128 MiB (the `recover` benchmark's) is not flushed early because of the
//!   journal's size;
//! * `--disable_wal` has no fjall equivalent and is ignored (reported in the header);
//! * `--block_size` → the keyspace's data block size (db_bench's default 4 KiB, also fjall's and
//!   RocksDB's); background workers left at fjall's default;
//! * `--cache_index_and_filter_blocks`, if given: `false` pins index and filter blocks on every
//!   level (RocksDB's default: table readers hold them beside the block cache), `true` pins none;
//!   not given keeps fjall's default (index pinned on L0 and L1, filter on L0). fjall stores the
//!   policy with the keyspace when it is created, so the fill run must be given it too.
//! * `--enable_blob_files=true --min_blob_size=N` (db_bench's BlobDB flags, also shale-bench's)
//!   → fjall's key-value separation (`KeyspaceCreateOptions::with_kv_separation` with
//!   `KvSeparationOptions::separation_threshold(N)`): values of at least N bytes go to blob
//!   files, the tree keeps a pointer. Blob compression follows `--compression_type`; blob file
//!   size (64 MiB) and its GC thresholds stay fjall's defaults. Like the pinning policy it is
//!   stored with the keyspace when it is created. fjall has no direct I/O: `--use_direct_reads`
//!   and `--blob_direct_io` are ignored (the header says so).

use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
    PinningPolicy,
};
use fjall::{
    CompressionType, Database, Iter, Keyspace, KeyspaceCreateOptions, KvSeparationOptions,
    PersistMode, Slice,
};
use shale_bench::{
    BatchOp, Compression, CursorStart, EngineError, EngineFactory, EngineOptions, KvCursor,
    KvEngine, WalFiles, WriteOpts,
};
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    shale_bench::cli_main(&[&FjallFactory])
}

/// Opens fjall databases.
struct FjallFactory;

fn compression(c: Compression) -> CompressionType {
    match c {
        Compression::None => CompressionType::None,
        // fjall 3.x supports LZ4 only; zstd requests fall back to it.
        Compression::Lz4 | Compression::Zstd => CompressionType::Lz4,
    }
}

/// `--block_size` as fjall's u32 (4 KiB, the default of all three engines, if it does not fit
/// or is 0).
fn block_size(o: &EngineOptions) -> u32 {
    u32::try_from(o.block_size)
        .ok()
        .filter(|&b| b > 0)
        .unwrap_or(4096)
}

fn keyspace_options(o: &EngineOptions) -> KeyspaceCreateOptions {
    let filter = match o.bloom_bits {
        // Bits per key as f32: a small integer, exactly representable.
        Some(bits) => FilterPolicy::all(FilterPolicyEntry::Bloom(
            BloomConstructionPolicy::BitsPerKey(bits as f32),
        )),
        None => FilterPolicy::disabled(),
    };
    let mut ks = KeyspaceCreateOptions::default();
    if let Some(cached) = o.cache_index_and_filter_blocks {
        ks = ks
            .index_block_pinning_policy(PinningPolicy::all(!cached))
            .filter_block_pinning_policy(PinningPolicy::all(!cached));
    }
    if let Some(opts) = kv_separation(o) {
        ks = ks.with_kv_separation(Some(opts));
    }
    ks.max_memtable_size(o.write_buffer_size)
        .filter_policy(filter)
        .data_block_compression_policy(CompressionPolicy::all(compression(o.compression)))
        .data_block_size_policy(BlockSizePolicy::all(block_size(o)))
        .manual_journal_persist(false)
}

/// Key-value separation for `--enable_blob_files=true --min_blob_size=N` (N > 0): values of at
/// least N bytes (u32::MAX if N does not fit) go to blob files, compressed as the data blocks.
fn kv_separation(o: &EngineOptions) -> Option<KvSeparationOptions> {
    (o.min_blob_size > 0).then(|| {
        KvSeparationOptions::default()
            .separation_threshold(u32::try_from(o.min_blob_size).unwrap_or(u32::MAX))
            .compression(compression(o.compression))
    })
}

impl EngineFactory for FjallFactory {
    fn name(&self) -> &'static str {
        "fjall"
    }

    fn open(&self, o: &EngineOptions) -> Result<Box<dyn KvEngine>, EngineError> {
        let db = Database::builder(&o.path)
            .cache_size(o.cache_size)
            .manual_journal_persist(false)
            .journal_compression(CompressionType::None)
            .max_journaling_size(max_journaling_size(o))
            .open()
            .map_err(EngineError::new)?;
        let opts = keyspace_options(o);
        let ks = db.keyspace("bench", || opts).map_err(EngineError::new)?;
        Ok(Box::new(FjallEngine { db, ks }))
    }

    /// fjall's journal segments are `<db>/<n>.jnl`.
    fn wal_files(&self, path: &Path) -> Result<WalFiles, EngineError> {
        Ok(WalFiles::in_dir(path, "jnl")?)
    }

    fn describe(&self, o: &EngineOptions) -> Vec<String> {
        let mut v = vec![format!(
            "Engine:     fjall 3.x (cache_size {}, max_memtable_size {}, bloom {}, compression {})",
            o.cache_size,
            o.write_buffer_size,
            o.bloom_bits
                .map_or("off".to_string(), |b| format!("{b} bits/key")),
            compression(o.compression)
        )];
        if o.compression == Compression::Zstd {
            v.push("NOTE:       fjall 3 has no zstd; using LZ4 instead".into());
        }
        v.push("NOTE:       --disable_wal is not supported by fjall and is ignored".into());
        if let Some(kv) = kv_separation(o) {
            v.push(format!(
                "KV sep.:    values >= {} B in blob files ({} MiB target, compression {})",
                kv.separation_threshold,
                kv.file_target_size >> 20,
                kv.compression
            ));
        }
        if o.direct_reads || o.blob_direct_io {
            v.push(
                "NOTE:       fjall has no direct I/O; --use_direct_reads and --blob_direct_io \
                 are ignored"
                    .into(),
            );
        }
        if let Some(cached) = o.cache_index_and_filter_blocks {
            v.push(format!(
                "Pinning:    index and filter blocks pinned on {} level",
                if cached { "no" } else { "every" }
            ));
        }
        v
    }
}

/// RocksDB's `max_total_wal_size` default (4 x the write buffers), at least fjall's 512 MiB.
fn max_journaling_size(o: &EngineOptions) -> u64 {
    o.write_buffer_size.saturating_mul(4).max(512 << 20)
}

struct FjallEngine {
    db: Database,
    ks: Keyspace,
}

impl FjallEngine {
    fn commit_synced(&self, batch: &[BatchOp<'_>], wo: WriteOpts) -> Result<(), EngineError> {
        let mut b = self.db.batch();
        if wo.sync {
            b = b.durability(Some(PersistMode::SyncData));
        }
        for op in batch {
            match *op {
                BatchOp::Put(k, v) => b.insert(&self.ks, k, v),
                BatchOp::Delete(k) => b.remove(&self.ks, k),
            }
        }
        b.commit().map_err(EngineError::new)
    }
}

impl KvEngine for FjallEngine {
    fn put(&self, wo: WriteOpts, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        if wo.sync {
            self.commit_synced(&[BatchOp::Put(key, value)], wo)
        } else {
            self.ks.insert(key, value).map_err(EngineError::new)
        }
    }

    fn delete(&self, wo: WriteOpts, key: &[u8]) -> Result<(), EngineError> {
        if wo.sync {
            self.commit_synced(&[BatchOp::Delete(key)], wo)
        } else {
            self.ks.remove(key).map_err(EngineError::new)
        }
    }

    fn write(&self, wo: WriteOpts, batch: &[BatchOp<'_>]) -> Result<(), EngineError> {
        self.commit_synced(batch, wo)
    }

    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool, EngineError> {
        match self.ks.get(key).map_err(EngineError::new)? {
            Some(v) => {
                found(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn cursor(&self, start: CursorStart<'_>) -> Result<Box<dyn KvCursor + '_>, EngineError> {
        let (iter, forward) = match start {
            CursorStart::First => (self.ks.iter(), true),
            CursorStart::Last => (self.ks.iter(), false),
            CursorStart::Seek(k) => (self.ks.range::<&[u8], _>(k..), true),
        };
        let mut c = FjallCursor {
            iter,
            forward,
            current: None,
        };
        c.advance()?;
        Ok(Box::new(c))
    }

    fn flush(&self) -> Result<(), EngineError> {
        self.ks.rotate_memtable_and_wait().map_err(EngineError::new)
    }

    fn stats(&self) -> Option<String> {
        Some(format!(
            "fjall.tables: {}\nfjall.l0_tables: {}\nfjall.disk_space: {}\n\
             fjall.journal_count: {}\nfjall.compactions_completed: {}\n\
             fjall.time_compacting_us: {}\nfjall.cache_size: {} / {}\n\
             fjall.blob_files: {}\nfjall.fragmented_blob_bytes: {}\n",
            self.ks.table_count(),
            self.ks.l0_table_count(),
            self.db.disk_space().unwrap_or(0),
            self.db.journal_count(),
            self.db.compactions_completed(),
            self.db.time_compacting().as_micros(),
            self.db.cache_size(),
            self.db.cache_capacity(),
            self.ks.blob_file_count(),
            self.ks.fragmented_blob_bytes(),
        ))
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        // Dropping the database stops and joins its background workers.
        let FjallEngine { db, ks } = *self;
        drop(ks);
        drop(db);
        Ok(())
    }
}

/// An owned fjall iterator (it keeps its snapshot alive) plus the current pair, so `key()` and
/// `value()` can lend slices as RocksDB's iterator does.
struct FjallCursor {
    iter: Iter,
    forward: bool,
    current: Option<(Slice, Slice)>,
}

impl KvCursor for FjallCursor {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k)
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v)
    }

    fn advance(&mut self) -> Result<(), EngineError> {
        let next = if self.forward {
            self.iter.next()
        } else {
            self.iter.next_back()
        };
        self.current = match next {
            Some(guard) => Some(guard.into_inner().map_err(EngineError::new)?),
            None => None,
        };
        Ok(())
    }
}
