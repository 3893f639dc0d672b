//! The two RocksDB databases behind the harness's `KvEngine`: open options, plain reads and
//! writes (the preload, the final scan, and the db_bench workloads if asked for).

use rocksdb::{
    BlockBasedOptions, Cache, DBAccess, DBCompressionType, DBRawIteratorWithThreadMode,
    OptimisticTransactionDB, Options, TransactionDB, TransactionDBOptions,
    WriteBatchWithTransaction, WriteOptions,
};
use shale_bench::txn::TxnEngine;
use shale_bench::{
    BatchOp, Compression, CursorStart, EngineError, EngineFactory, EngineOptions, KvCursor,
    KvEngine, WriteOpts,
};
use std::path::Path;

/// Which transactional database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `TransactionDB`: row locks taken by writes and `get_for_update`.
    Pessimistic,
    /// `OptimisticTransactionDB`: conflicts found at commit.
    Optimistic,
}

impl Mode {
    /// `pessimistic` / `optimistic`.
    pub fn parse(v: &str) -> Option<Mode> {
        match v {
            "pessimistic" => Some(Mode::Pessimistic),
            "optimistic" => Some(Mode::Optimistic),
            _ => None,
        }
    }
}

/// An open database of either kind.
pub enum Db {
    Pessimistic(TransactionDB),
    Optimistic(OptimisticTransactionDB),
}

/// Opens RocksDB transactional databases of one mode.
pub struct RocksFactory(pub Mode);

fn options(o: &EngineOptions) -> Result<Options, EngineError> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(usize::try_from(o.write_buffer_size).map_err(EngineError::new)?);
    opts.set_compression_type(match o.compression {
        Compression::None => DBCompressionType::None,
        Compression::Lz4 => DBCompressionType::Lz4,
        Compression::Zstd => DBCompressionType::Zstd,
    });
    let mut table = BlockBasedOptions::default();
    if o.cache_size > 0 {
        let cache = Cache::new_lru_cache(usize::try_from(o.cache_size).map_err(EngineError::new)?)
            .map_err(EngineError::new)?;
        table.set_block_cache(&cache);
    } else {
        table.disable_cache();
    }
    if let Some(bits) = o.bloom_bits {
        table.set_bloom_filter(f64::from(bits), false);
    }
    opts.set_block_based_table_factory(&table);
    Ok(opts)
}

pub(crate) fn write_options(wo: WriteOpts) -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(wo.sync);
    w.disable_wal(wo.disable_wal);
    w
}

impl EngineFactory for RocksFactory {
    fn name(&self) -> &'static str {
        match self.0 {
            Mode::Pessimistic => "rocksdb-pessimistic",
            Mode::Optimistic => "rocksdb-optimistic",
        }
    }

    fn open(&self, o: &EngineOptions) -> Result<Box<dyn KvEngine>, EngineError> {
        let opts = options(o)?;
        let db = match self.0 {
            Mode::Pessimistic => {
                // Default lock table (16 stripes, 1000 ms default lock timeout); each
                // transaction sets its own timeout and deadlock detection (see `txn`).
                let topts = TransactionDBOptions::default();
                Db::Pessimistic(
                    TransactionDB::open(&opts, &topts, &o.path).map_err(EngineError::new)?,
                )
            }
            Mode::Optimistic => Db::Optimistic(
                OptimisticTransactionDB::open(&opts, &o.path).map_err(EngineError::new)?,
            ),
        };
        Ok(Box::new(RocksEngine { db }))
    }

    fn destroy(&self, path: &Path) -> Result<(), EngineError> {
        match std::fs::remove_dir_all(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn describe(&self, o: &EngineOptions) -> Vec<String> {
        vec![format!(
            "Engine:     RocksDB {} via rust-rocksdb 0.20.1 and the system librocksdb \
             (write_buffer_size {}, block cache {}, bloom bits {})",
            match self.0 {
                Mode::Pessimistic => "TransactionDB",
                Mode::Optimistic => "OptimisticTransactionDB",
            },
            o.write_buffer_size,
            o.cache_size,
            o.bloom_bits.map_or("none".to_string(), |b| b.to_string())
        )]
    }
}

/// A RocksDB database behind the harness interface.
pub struct RocksEngine {
    pub(crate) db: Db,
}

struct RocksCursor<'a, D: DBAccess> {
    it: DBRawIteratorWithThreadMode<'a, D>,
    forward: bool,
}

impl<D: DBAccess> KvCursor for RocksCursor<'_, D> {
    fn valid(&self) -> bool {
        self.it.valid()
    }
    fn key(&self) -> &[u8] {
        self.it.key().unwrap_or_default()
    }
    fn value(&self) -> &[u8] {
        self.it.value().unwrap_or_default()
    }
    fn advance(&mut self) -> Result<(), EngineError> {
        if self.forward {
            self.it.next();
        } else {
            self.it.prev();
        }
        self.it.status().map_err(EngineError::new)
    }
}

fn position<'a, D: DBAccess>(
    mut it: DBRawIteratorWithThreadMode<'a, D>,
    start: CursorStart<'_>,
) -> Result<Box<dyn KvCursor + 'a>, EngineError> {
    let forward = match start {
        CursorStart::First => {
            it.seek_to_first();
            true
        }
        CursorStart::Last => {
            it.seek_to_last();
            false
        }
        CursorStart::Seek(k) => {
            it.seek(k);
            true
        }
    };
    it.status().map_err(EngineError::new)?;
    Ok(Box::new(RocksCursor { it, forward }))
}

impl KvEngine for RocksEngine {
    fn put(&self, wo: WriteOpts, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        self.write(wo, &[BatchOp::Put(key, value)])
    }

    fn delete(&self, wo: WriteOpts, key: &[u8]) -> Result<(), EngineError> {
        self.write(wo, &[BatchOp::Delete(key)])
    }

    fn write(&self, wo: WriteOpts, batch: &[BatchOp<'_>]) -> Result<(), EngineError> {
        let mut b = WriteBatchWithTransaction::<true>::default();
        for op in batch {
            match *op {
                BatchOp::Put(k, v) => b.put(k, v),
                BatchOp::Delete(k) => b.delete(k),
            }
        }
        let w = write_options(wo);
        match &self.db {
            Db::Pessimistic(db) => db.write_opt(b, &w),
            Db::Optimistic(db) => db.write_opt(b, &w),
        }
        .map_err(EngineError::new)
    }

    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool, EngineError> {
        let v = match &self.db {
            Db::Pessimistic(db) => db.get_pinned(key),
            Db::Optimistic(db) => db.get_pinned(key),
        }
        .map_err(EngineError::new)?;
        Ok(v.map(|v| found(&v)).is_some())
    }

    fn cursor(&self, start: CursorStart<'_>) -> Result<Box<dyn KvCursor + '_>, EngineError> {
        match &self.db {
            Db::Pessimistic(db) => position(db.raw_iterator(), start),
            Db::Optimistic(db) => position(db.raw_iterator(), start),
        }
    }

    fn flush(&self) -> Result<(), EngineError> {
        match &self.db {
            // rust-rocksdb 0.20 has no flush on TransactionDB.
            Db::Pessimistic(_) => Ok(()),
            Db::Optimistic(db) => db.flush().map_err(EngineError::new),
        }
    }

    fn stats(&self) -> Option<String> {
        match &self.db {
            Db::Pessimistic(_) => None,
            Db::Optimistic(db) => db.property_value("rocksdb.stats").ok().flatten(),
        }
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(()) // dropping the handle closes the database
    }

    fn txn(&self) -> Option<&dyn TxnEngine> {
        Some(self)
    }
}
