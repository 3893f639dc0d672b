//! The `shale` backend: ShaleDB through its public `Db` API.
//!
//! Behind the `shale` cargo feature (on by default; `--no-default-features` builds the harness
//! with the `memory` backend only). Written against this API:
//!
//! ```text
//! Options { create_if_missing, write_buffer_size, block_cache_size, bloom_bits_per_key,
//!           compression_per_level: Vec<CompressionType::{None, Lz4, Zstd}>, .. }
//! Db::open(path, Options) -> Result<Db>            (Db: Send + Sync)
//! db.put_opt(&WriteOptions { sync, disable_wal }, k, v) / delete_opt / write(&wo, WriteBatch)
//! db.get(k) -> Result<Option<Vec<u8>>>
//! db.iter(&ReadOptions::default()) -> Result<DbIterator> (owned, no lifetime) with seek /
//!   seek_to_first / seek_to_last / valid / key / value / next / prev
//! db.flush(), db.property("shale.stats") -> Option<String>, db.close()
//! ```
//!
//! (Checked against the integration branch's `crates/shaledb/src/db`; numeric option types are
//! converted with `try_into`, so a change of integer width still compiles.)
//!
//! Mapping of db_bench flags: `--write_buffer_size` → `write_buffer_size`, `--cache_size` →
//! `block_cache_size`, `--bloom_bits` → `bloom_bits_per_key` (0 = no filter, as db_bench's
//! default -1), `--block_size` → `block_size` (db_bench's default 4096, as RocksDB and fjall
//! use; the engine's own default is 16 KiB), `--compression_type` → `compression_per_level` with one entry, i.e. the same
//! codec on every level as RocksDB's `compression` (snappy mapped to LZ4). Durability matches
//! RocksDB's default: every write goes to the WAL (flushed to the OS); `--sync` syncs it.

use crate::engine::{
    BatchOp, Compression, CursorStart, EngineFactory, EngineOptions, KvCursor, KvEngine, WriteOpts,
};
use crate::error::{EngineError, UnsupportedFlag};
use shaledb::{CompressionType, Db, Options, ReadOptions, WriteBatch, WriteOptions};

/// The iterator type returned by `Db::iter`: owned, it keeps its own view of the DB.
type ShaleIter = shaledb::DbIterator;

/// Opens ShaleDB databases.
pub struct ShaleFactory;

// The option fields' integer types are the engine's choice; `try_into` converts whatever they
// are (a no-op when they are already u64/u32), and `Options` is built by mutation as documented.
#[allow(clippy::field_reassign_with_default, clippy::useless_conversion)]
fn options_for(o: &EngineOptions) -> Result<Options, EngineError> {
    let mut opts = Options::default();
    opts.create_if_missing = true;
    opts.write_buffer_size = o.write_buffer_size.try_into().map_err(EngineError::new)?;
    opts.block_cache_size = o.cache_size.try_into().map_err(EngineError::new)?;
    // 0 (harness self-tests) keeps the engine's default.
    if o.block_size > 0 {
        opts.block_size = o.block_size.try_into().map_err(EngineError::new)?;
    }
    opts.bloom_bits_per_key = o
        .bloom_bits
        .unwrap_or(0)
        .try_into()
        .map_err(EngineError::new)?;
    // One entry: "missing entries use the last one", so every level gets the same codec.
    opts.compression_per_level = vec![match o.compression {
        Compression::None => CompressionType::None,
        Compression::Lz4 => CompressionType::Lz4,
        Compression::Zstd => CompressionType::Zstd,
    }];
    opts.concurrent_memtable_insert = o.concurrent_memtable_insert;
    opts.wal_mapped_writes = o.wal_mapped_writes;
    opts.lone_writes = o.lone_writes;
    opts.min_blob_size = o.min_blob_size.try_into().map_err(EngineError::new)?;
    opts.blob_direct_io = o.blob_direct_io;
    opts.blob_direct_reads = o.direct_reads;
    opts.blob_cache_size = o.blob_cache_size.try_into().map_err(EngineError::new)?;
    (opts.blob_readahead, opts.blob_readahead_threads) = o.blob_readahead;
    if let Some(n) = o.recovery_threads {
        opts.recovery_threads = n;
    }
    match o.cache_index_and_filter_blocks {
        None => {}
        Some(false) => opts.pin_index_and_filter_all_levels = true,
        // L0 and L1 always pin theirs; putting them in the cache is not an option.
        Some(true) => {
            return Err(EngineError::new(UnsupportedFlag(
                "--cache_index_and_filter_blocks=true: ShaleDB always keeps L0 and L1 index \
                 and filter blocks in memory; only false (pin every level) is supported",
            )))
        }
    }
    Ok(opts)
}

impl EngineFactory for ShaleFactory {
    fn name(&self) -> &'static str {
        "shale"
    }

    fn open(&self, o: &EngineOptions) -> Result<Box<dyn KvEngine>, EngineError> {
        let db = Db::open(&o.path, options_for(o)?).map_err(EngineError::new)?;
        Ok(Box::new(ShaleEngine {
            db,
            value_files: o.min_blob_size > 0,
        }))
    }

    fn describe(&self, o: &EngineOptions) -> Vec<String> {
        vec![format!(
            "Engine:     ShaleDB {} (write_buffer_size {}, block_cache_size {}, block_size {}, bloom_bits_per_key {}, recovery_threads {}, index/filter pinned on {})",
            env!("CARGO_PKG_VERSION"),
            o.write_buffer_size,
            o.cache_size,
            o.block_size,
            o.bloom_bits.unwrap_or(0),
            o.recovery_threads.map_or_else(|| "default".to_string(), |n| n.to_string()),
            if o.cache_index_and_filter_blocks == Some(false) {
                "every level"
            } else {
                "L0, L1"
            }
        )]
    }
}

/// A ShaleDB instance behind the harness interface.
pub struct ShaleEngine {
    db: Db,
    /// Key-value separation is on (`--enable_blob_files` with `--min_blob_size` > 0).
    value_files: bool,
}

impl ShaleEngine {
    /// The database (the transactions of `txnmix` begin on it, see `shale_txn`).
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }
}

// `..Default::default()` keeps this compiling if WriteOptions grows fields.
#[allow(clippy::needless_update)]
fn write_options(wo: WriteOpts) -> WriteOptions {
    WriteOptions {
        sync: wo.sync,
        disable_wal: wo.disable_wal,
        ..Default::default()
    }
}

impl KvEngine for ShaleEngine {
    fn put(&self, wo: WriteOpts, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        self.db
            .put_opt(&write_options(wo), key, value)
            .map_err(EngineError::new)
    }

    fn delete(&self, wo: WriteOpts, key: &[u8]) -> Result<(), EngineError> {
        self.db
            .delete_opt(&write_options(wo), key)
            .map_err(EngineError::new)
    }

    fn write(&self, wo: WriteOpts, batch: &[BatchOp<'_>]) -> Result<(), EngineError> {
        let mut b = WriteBatch::new();
        for op in batch {
            match *op {
                BatchOp::Put(k, v) => b.put(k, v),
                BatchOp::Delete(k) => b.delete(k),
            }
        }
        self.db
            .write(&write_options(wo), b)
            .map_err(EngineError::new)
    }

    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool, EngineError> {
        // One reused buffer per thread: the read allocates nothing for the value.
        thread_local! {
            static VALUE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        VALUE.with(|cell| {
            let mut fresh = Vec::new();
            let mut guard = cell.try_borrow_mut();
            let buf = match guard.as_deref_mut() {
                Ok(b) => b,
                Err(_) => &mut fresh,
            };
            let hit = self
                .db
                .get_into(&ReadOptions::default(), shaledb::DEFAULT_CF_ID, key, buf)
                .map_err(EngineError::new)?;
            if hit {
                found(buf);
            }
            Ok(hit)
        })
    }

    fn cursor(&self, start: CursorStart<'_>) -> Result<Box<dyn KvCursor + '_>, EngineError> {
        let mut it: ShaleIter = self
            .db
            .iter(&ReadOptions::default())
            .map_err(EngineError::new)?;
        let forward = match start {
            CursorStart::First => {
                it.seek_to_first().map_err(EngineError::new)?;
                true
            }
            CursorStart::Last => {
                it.seek_to_last().map_err(EngineError::new)?;
                false
            }
            CursorStart::Seek(k) => {
                it.seek(k).map_err(EngineError::new)?;
                true
            }
        };
        Ok(Box::new(ShaleCursor { it, forward }))
    }

    fn flush(&self) -> Result<(), EngineError> {
        self.db.flush().map_err(EngineError::new)
    }

    fn stats(&self) -> Option<String> {
        self.db.property("shale.stats")
    }

    /// `Db::collect_blob_garbage(0.75)`: every sealed value file less than 75% live is
    /// rewritten (the threshold `blob_bench gc` uses, docs/benchmarks.md).
    fn collect_garbage(&self) -> Result<Option<String>, EngineError> {
        if !self.value_files {
            return Ok(None);
        }
        let s = self
            .db
            .collect_blob_garbage(0.75)
            .map_err(EngineError::new)?;
        Ok(Some(format!(
            "collect_blob_garbage(0.75): {} files scanned, {} rewritten, {:.1} MiB copied, {} \
             deleted, {} waiting",
            s.files_scanned,
            s.files_rewritten,
            s.bytes_rewritten as f64 / 1_048_576.0,
            s.files_deleted,
            s.files_waiting
        )))
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.db.close().map_err(EngineError::new)
    }

    fn txn(&self) -> Option<&dyn crate::txn::TxnEngine> {
        Some(self)
    }
}

struct ShaleCursor {
    it: ShaleIter,
    forward: bool,
}

impl KvCursor for ShaleCursor {
    fn valid(&self) -> bool {
        self.it.valid()
    }

    fn key(&self) -> &[u8] {
        self.it.key()
    }

    fn value(&self) -> &[u8] {
        self.it.value()
    }

    fn advance(&mut self) -> Result<(), EngineError> {
        if self.forward {
            self.it.next().map_err(EngineError::new)
        } else {
            self.it.prev().map_err(EngineError::new)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::flags::{Command, Flags};
    use crate::runner::engine_options;

    fn engine_opts(args: &[&str]) -> EngineOptions {
        match Flags::parse(args.iter().copied()).unwrap() {
            Command::Run(flags) => engine_options(&flags),
            Command::Help => panic!("not a run"),
        }
    }

    #[test]
    fn cache_index_and_filter_blocks_maps_to_pinning_every_level() {
        let o = engine_opts(&[]);
        assert_eq!(o.cache_index_and_filter_blocks, None);
        assert!(!options_for(&o).unwrap().pin_index_and_filter_all_levels);

        let o = engine_opts(&["--cache_index_and_filter_blocks=false"]);
        assert_eq!(o.cache_index_and_filter_blocks, Some(false));
        assert!(options_for(&o).unwrap().pin_index_and_filter_all_levels);

        let o = engine_opts(&["--cache_index_and_filter_blocks=true"]);
        let e = options_for(&o).unwrap_err();
        assert!(
            e.to_string().contains("cache_index_and_filter_blocks=true"),
            "{e}"
        );
    }
}
