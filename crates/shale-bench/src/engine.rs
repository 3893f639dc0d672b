//! The interface between the harness and a storage engine.
//!
//! A backend implements [`EngineFactory`] (open a DB directory with [`EngineOptions`] derived
//! from the db_bench flags) and [`KvEngine`] (the operations the benchmarks issue). Operations
//! take `&self` and engines are `Send + Sync`: benchmark threads share one engine, as db_bench's
//! threads share one `DB*`.
//!
//! Mapping of db_bench calls:
//!
//! | db_bench                          | here                                        |
//! |-----------------------------------|---------------------------------------------|
//! | `DB::Write(wo, batch of 1)`       | [`KvEngine::put`] (or [`KvEngine::delete`])  |
//! | `DB::Write(wo, batch of N)`       | [`KvEngine::write`]                          |
//! | `DB::Get`                         | [`KvEngine::get`] (value shown to a closure) |
//! | `NewIterator` + `Seek`/`SeekToFirst`/`SeekToLast` | [`KvEngine::cursor`]         |
//! | `Iterator::Next` / `Prev`         | [`KvCursor::advance`] (direction fixed at creation) |
//!
//! Example, a benchmark's inner loop: `engine.get(&key, &mut |v| bytes += v.len())?` returns
//! `true` when found; `engine.cursor(CursorStart::Seek(&key))?` is positioned at the first key
//! `>= key`.

use crate::error::EngineError;
use std::path::{Path, PathBuf};

/// Block compression requested by `--compression_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// `none`.
    None,
    /// `lz4` (and `snappy`, mapped).
    Lz4,
    /// `zstd`.
    Zstd,
}

impl Compression {
    /// RocksDB's `CompressionTypeToString` name, printed in the header.
    pub fn rocksdb_name(self) -> &'static str {
        match self {
            Compression::None => "NoCompression",
            Compression::Lz4 => "LZ4",
            Compression::Zstd => "ZSTD",
        }
    }
}

/// Engine configuration derived from the flags.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineOptions {
    /// DB directory.
    pub path: PathBuf,
    /// Memtable size in bytes (`--write_buffer_size`).
    pub write_buffer_size: u64,
    /// Block cache capacity in bytes (`--cache_size`, negative mapped to 0).
    pub cache_size: u64,
    /// Bloom filter bits per key; `None` means no filter.
    pub bloom_bits: Option<u32>,
    /// Uncompressed bytes of a data block (`--block_size`).
    pub block_size: u64,
    /// Block compression.
    pub compression: Compression,
    /// Whether `--statistics` was given (engines may enable extra counters).
    pub statistics: bool,
    /// Threads replaying the write-ahead log at open (`--recovery_threads`); `None` leaves
    /// the engine's default. Engines without parallel replay ignore it.
    pub recovery_threads: Option<usize>,
    /// Writers of a commit group insert into the memtable in parallel
    /// (`--allow_concurrent_memtable_write`, db_bench's name; ShaleDB's commit pipeline).
    pub concurrent_memtable_insert: bool,
    /// WAL segments written through a memory map (`--wal_mapped_writes`, ShaleDB only).
    pub wal_mapped_writes: bool,
    /// Unsynced writes log and insert without group commit (`--lone_writes`, ShaleDB only).
    pub lone_writes: bool,
    /// Key-value separation (`--enable_blob_files` with `--min_blob_size`, db_bench's
    /// names): values of at least this many bytes go to value files; 0 = off.
    pub min_blob_size: u64,
    /// Value files written with O_DIRECT (`--blob_direct_io`, ShaleDB only).
    pub blob_direct_io: bool,
    /// Values read with O_DIRECT (`--use_direct_reads`, db_bench's name).
    pub direct_reads: bool,
    /// Bytes of the value cache (`--blob_cache_size`, ShaleDB only).
    pub blob_cache_size: u64,
    /// Scan readahead window and reader threads (`--blob_readahead`,
    /// `--blob_readahead_threads`, ShaleDB only).
    pub blob_readahead: (usize, usize),
    /// `--cache_index_and_filter_blocks` if given: `Some(false)` = every level's index and
    /// filter held in memory beside the block cache, `Some(true)` = read through it; `None`
    /// = the engine's own default.
    pub cache_index_and_filter_blocks: Option<bool>,
}

/// Options of one write, like RocksDB's `WriteOptions`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOpts {
    /// Make the write durable (fsync/fdatasync the log) before returning.
    pub sync: bool,
    /// Skip the write-ahead log.
    pub disable_wal: bool,
}

/// One entry of a write batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Insert or overwrite.
    Put(&'a [u8], &'a [u8]),
    /// Delete.
    Delete(&'a [u8]),
}

/// Where a new cursor starts, and so in which direction [`KvCursor::advance`] moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CursorStart<'a> {
    /// `SeekToFirst`, then forward.
    First,
    /// `SeekToLast`, then backward.
    Last,
    /// `Seek(key)` (first key `>= key`), then forward.
    Seek(&'a [u8]),
}

/// A positioned iterator over a consistent view of the engine.
pub trait KvCursor {
    /// Whether the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Current key. Only meaningful when [`valid`](Self::valid).
    fn key(&self) -> &[u8];
    /// Current value. Only meaningful when [`valid`](Self::valid).
    fn value(&self) -> &[u8];
    /// Moves to the next entry in the cursor's direction.
    fn advance(&mut self) -> Result<(), EngineError>;
}

/// The operations the benchmarks issue. Implementations must be usable from many threads.
pub trait KvEngine: Send + Sync {
    /// Inserts or overwrites one key.
    fn put(&self, wo: WriteOpts, key: &[u8], value: &[u8]) -> Result<(), EngineError>;
    /// Deletes one key.
    fn delete(&self, wo: WriteOpts, key: &[u8]) -> Result<(), EngineError>;
    /// Applies a batch atomically.
    fn write(&self, wo: WriteOpts, batch: &[BatchOp<'_>]) -> Result<(), EngineError>;
    /// Point lookup: calls `found` with a view of the value and returns `true` if the key
    /// exists. Engines should not copy the value just for the harness.
    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool, EngineError>;
    /// A new iterator positioned at `start`.
    fn cursor(&self, start: CursorStart<'_>) -> Result<Box<dyn KvCursor + '_>, EngineError>;
    /// Flushes memtables to disk (the `flush` benchmark).
    fn flush(&self) -> Result<(), EngineError>;
    /// The engine's statistics text for `--statistics`, if it has any.
    fn stats(&self) -> Option<String>;
    /// Closes the engine cleanly (called before the DB is destroyed or the run ends).
    fn close(self: Box<Self>) -> Result<(), EngineError>;

    /// The engine's transactions, for `txnmix`; `None` (the default) if it has none.
    fn txn(&self) -> Option<&dyn crate::txn::TxnEngine> {
        None
    }

    /// Collects the garbage of key-value separation (dead values in value files) now and
    /// returns what it did; `None` (the default) if the engine has no such call. Used by the
    /// `contest` benchmark's `--contest_space` phase.
    fn collect_garbage(&self) -> Result<Option<String>, EngineError> {
        Ok(None)
    }

    /// Convenience: the value as an owned vector.
    fn get_vec(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        let mut out = None;
        self.get(key, &mut |v| out = Some(v.to_vec()))?;
        Ok(out)
    }
}

/// Opens engines of one kind.
pub trait EngineFactory: Sync {
    /// Short name for `--engine` and the header (`shale`, `fjall`, `memory`).
    fn name(&self) -> &'static str;
    /// Opens (creating if missing) the DB at `opts.path`.
    fn open(&self, opts: &EngineOptions) -> Result<Box<dyn KvEngine>, EngineError>;
    /// Removes a DB (`DestroyDB`). The default removes the directory.
    fn destroy(&self, path: &Path) -> Result<(), EngineError> {
        match std::fs::remove_dir_all(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
    /// Extra header lines describing how the flags were mapped to this engine.
    fn describe(&self, _opts: &EngineOptions) -> Vec<String> {
        Vec::new()
    }
    /// Whether what was written survives the process (false for the `memory` backend, whose
    /// crash checks are skipped and whose data must not be closed between phases).
    fn persistent(&self) -> bool {
        true
    }
    /// The write-ahead log an open of the DB at `path` would replay. The default counts the
    /// `*.log` files in the directory (ShaleDB's and RocksDB's WAL segments).
    fn wal_files(&self, path: &Path) -> Result<WalFiles, EngineError> {
        Ok(WalFiles::in_dir(path, "log")?)
    }
}

/// Size of the write-ahead log files of a DB directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalFiles {
    /// Total bytes.
    pub bytes: u64,
    /// Number of files.
    pub files: usize,
}

impl WalFiles {
    /// Sums the regular files of `dir` whose extension is `ext` (not recursive). A file counts
    /// `min(length, allocated bytes)`: fjall sets a new journal's length to 64 MiB up front
    /// (a sparse file), so its length says nothing about what was logged, while the allocated
    /// blocks do; for fully written files the length is the smaller one.
    pub fn in_dir(dir: &Path, ext: &str) -> std::io::Result<WalFiles> {
        let mut w = WalFiles::default();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_file() && entry.path().extension().is_some_and(|e| e == ext) {
                w.bytes += meta.len().min(allocated(&meta));
                w.files += 1;
            }
        }
        Ok(w)
    }
}

#[cfg(unix)]
fn allocated(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.blocks().saturating_mul(512) // st_blocks is in 512-byte units
}

#[cfg(not(unix))]
fn allocated(meta: &std::fs::Metadata) -> u64 {
    meta.len()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn wal_files_count_logged_bytes_not_preallocated_length() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("000001.log"), vec![7u8; 1000]).unwrap();
        std::fs::write(dir.path().join("notes.txt"), vec![7u8; 5000]).unwrap();
        std::fs::create_dir(dir.path().join("sub.log")).unwrap();
        // A fjall-style journal: 64 MiB long, 10 bytes written.
        let mut f = std::fs::File::create(dir.path().join("0.jnl")).unwrap();
        f.set_len(64 << 20).unwrap();
        f.write_all(b"0123456789").unwrap();
        drop(f);
        let logs = WalFiles::in_dir(dir.path(), "log").unwrap();
        assert_eq!(
            logs,
            WalFiles {
                bytes: 1000,
                files: 1
            }
        );
        let jnl = WalFiles::in_dir(dir.path(), "jnl").unwrap();
        assert_eq!(jnl.files, 1);
        assert!((10..1 << 20).contains(&jnl.bytes), "{jnl:?}");
        assert!(WalFiles::in_dir(&dir.path().join("missing"), "log").is_err());
    }
}
