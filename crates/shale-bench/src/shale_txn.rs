//! ShaleDB's pessimistic transactions behind the harness's [`TxnEngine`] (for `txnmix`).
//!
//! Written against `shaledb::txn`: `db.begin(TxnOptions { isolation, lock_wait_timeout,
//! write_options })` -> `Txn` with `get`, `get_for_update`, `put`, `commit()`, `rollback()`.
//! Every write and `get_for_update` takes an exclusive row lock held to the end (strict 2PL);
//! under Snapshot Isolation a key committed after the snapshot fails with `WriteConflict`
//! once the transaction has read without a lock (before, its snapshot moves past it).
//!
//! | `--isolation`  | ShaleDB                              |
//! |----------------|--------------------------------------|
//! | `rc`           | `Isolation::ReadCommitted`           |
//! | `si`           | `Isolation::SnapshotIsolation`       |
//! | `serializable` | `Isolation::Serializable`            |
//!
//! Errors: `WriteConflict`, `Deadlock`, `LockTimeout` and `SerializationFailure` are aborts
//! the workload retries; anything else fails it.

use crate::engine::WriteOpts;
use crate::error::EngineError;
use crate::shale::ShaleEngine;
use crate::txn::{AbortKind, KvTxn, TxnEngine, TxnError, TxnIsolation, TxnOpts};
use shaledb::txn::{Isolation, Txn, TxnOptions};
use shaledb::WriteOptions;

/// Maps `--isolation` to ShaleDB's level.
fn isolation(i: TxnIsolation) -> Result<Isolation, EngineError> {
    match i {
        TxnIsolation::ReadCommitted => Ok(Isolation::ReadCommitted),
        TxnIsolation::Snapshot => Ok(Isolation::SnapshotIsolation),
        TxnIsolation::Serializable => Ok(Isolation::Serializable),
    }
}

/// Sorts ShaleDB's errors into retryable aborts and failures.
fn classify(e: shaledb::Error) -> TxnError {
    match e {
        shaledb::Error::WriteConflict { .. } => TxnError::Abort(AbortKind::WriteConflict),
        shaledb::Error::Deadlock { .. } => TxnError::Abort(AbortKind::Deadlock),
        shaledb::Error::LockTimeout { .. } => TxnError::Abort(AbortKind::LockTimeout),
        shaledb::Error::SerializationFailure { .. } => {
            TxnError::Abort(AbortKind::SerializationFailure)
        }
        other => TxnError::Failed(EngineError::new(other)),
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

struct ShaleTxn(Txn);

impl KvTxn for ShaleTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.0.get(key).map_err(classify)
    }

    fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.0.get_for_update(key).map_err(classify)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.0.put(key, value).map_err(classify)
    }

    fn commit(self: Box<Self>) -> Result<(), TxnError> {
        self.0.commit().map_err(classify)
    }

    fn rollback(self: Box<Self>) -> Result<(), TxnError> {
        self.0.rollback();
        Ok(())
    }
}

impl TxnEngine for ShaleEngine {
    fn begin(&self, opts: &TxnOpts) -> Result<Box<dyn KvTxn + '_>, EngineError> {
        let t = self.db().begin(TxnOptions {
            isolation: isolation(opts.isolation)?,
            lock_wait_timeout: opts.lock_timeout,
            write_options: write_options(opts.wo),
        });
        Ok(Box::new(ShaleTxn(t)))
    }

    fn describe_txn(&self, opts: &TxnOpts) -> String {
        let level = match isolation(opts.isolation) {
            Ok(l) => format!("{l:?}"),
            Err(e) => e.to_string(),
        };
        format!(
            "ShaleDB pessimistic transactions (row locks, strict 2PL, deadlock detection), isolation {level}"
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::engine::{EngineFactory, EngineOptions};
    use crate::shale::ShaleFactory;

    fn open(dir: &std::path::Path) -> Box<dyn crate::KvEngine> {
        let o = EngineOptions {
            path: dir.to_path_buf(),
            write_buffer_size: 1 << 20,
            cache_size: 1 << 20,
            bloom_bits: None,
            block_size: 4096,
            compression: crate::Compression::None,
            statistics: false,
            recovery_threads: None,
            concurrent_memtable_insert: true,
            wal_mapped_writes: true,
            lone_writes: true,
            min_blob_size: 0,
            blob_direct_io: false,
            direct_reads: false,
            blob_cache_size: 0,
            blob_readahead: (0, 0),
            cache_index_and_filter_blocks: None,
        };
        ShaleFactory.open(&o).unwrap()
    }

    fn opts(isolation: TxnIsolation) -> TxnOpts {
        TxnOpts {
            isolation,
            lock_timeout: std::time::Duration::from_millis(50),
            wo: WriteOpts::default(),
        }
    }

    #[test]
    fn si_write_conflict_and_lock_timeout_are_aborts() {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let txn = e.txn().unwrap();
        let si = opts(TxnIsolation::Snapshot);
        let mut t1 = txn.begin(&si).unwrap();
        let mut t2 = txn.begin(&si).unwrap();
        // A read without a lock: t2's snapshot can no longer move past a
        // newer version (docs/isolation.md).
        assert_eq!(t2.get(b"other").unwrap(), None);
        t1.put(b"k", b"1").unwrap();
        // t1 holds the row lock: t2 times out.
        assert!(matches!(
            t2.get_for_update(b"k"),
            Err(TxnError::Abort(AbortKind::LockTimeout))
        ));
        t1.commit().unwrap();
        // Committed after t2's snapshot: first committer wins.
        assert!(matches!(
            t2.get_for_update(b"k"),
            Err(TxnError::Abort(AbortKind::WriteConflict))
        ));
        t2.rollback().unwrap();
        assert_eq!(e.get_vec(b"k").unwrap(), Some(b"1".to_vec()));
        e.close().unwrap();
    }

    #[test]
    fn serializable_write_skew_is_a_serialization_failure() {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let txn = e.txn().unwrap();
        let ser = opts(TxnIsolation::Serializable);
        let mut t1 = txn.begin(&ser).unwrap();
        let mut t2 = txn.begin(&ser).unwrap();
        assert_eq!(t1.get(b"a").unwrap(), None);
        assert_eq!(t2.get(b"b").unwrap(), None);
        t1.put(b"b", b"1").unwrap();
        t2.put(b"a", b"1").unwrap();
        t1.commit().unwrap();
        assert!(matches!(
            t2.commit(),
            Err(TxnError::Abort(AbortKind::SerializationFailure))
        ));
        assert!(txn
            .describe_txn(&opts(TxnIsolation::ReadCommitted))
            .contains("ReadCommitted"));
        e.close().unwrap();
    }
}
