//! RocksDB transactions behind the harness's `TxnEngine`.
//!
//! | `--isolation` | pessimistic (`TransactionDB`)              | optimistic (`OptimisticTransactionDB`) |
//! |---------------|--------------------------------------------|-----------------------------------------|
//! | `rc`          | no snapshot: `get_for_update` locks, then reads the latest value | no snapshot: commit checks each key was not written after it was first read |
//! | `si`          | `set_snapshot(true)`: `get_for_update` also fails (`Busy`) if the key was written after the snapshot | `set_snapshot(true)`: commit checks no key was written after the snapshot |
//! | `serializable`| refused (RocksDB has no such level)        | refused                                  |
//!
//! Pessimistic transactions detect deadlocks (`set_deadlock_detect(true)`, off by default in
//! RocksDB; ShaleDB always detects them) and wait at most `--transaction_lock_timeout` ms for
//! a lock. `get_for_update` is exclusive. Errors: `Busy` is a write conflict unless its
//! message names a deadlock; `TimedOut` a lock timeout; `TryAgain` (optimistic: the memtable
//! history was too short to check a conflict) is counted as a write conflict. Everything
//! else fails the run.

use crate::engine::{write_options, Db, RocksEngine};
use rocksdb::{ErrorKind, OptimisticTransactionOptions, Transaction, TransactionOptions};
use shale_bench::txn::{AbortKind, KvTxn, TxnEngine, TxnError, TxnIsolation, TxnOpts, Unsupported};
use shale_bench::EngineError;

/// Sorts RocksDB's errors into retryable aborts and failures.
fn classify(e: rocksdb::Error) -> TxnError {
    match e.kind() {
        ErrorKind::Busy if e.to_string().contains("Deadlock") => {
            TxnError::Abort(AbortKind::Deadlock)
        }
        ErrorKind::Busy | ErrorKind::TryAgain => TxnError::Abort(AbortKind::WriteConflict),
        ErrorKind::TimedOut => TxnError::Abort(AbortKind::LockTimeout),
        _ => TxnError::Failed(EngineError::new(e)),
    }
}

/// Whether the transaction takes a snapshot at begin.
fn snapshot(i: TxnIsolation) -> Result<bool, EngineError> {
    match i {
        TxnIsolation::ReadCommitted => Ok(false),
        TxnIsolation::Snapshot => Ok(true),
        TxnIsolation::Serializable => Err(EngineError::new(Unsupported(
            "serializable: RocksDB has no serializable transactions",
        ))),
    }
}

struct RocksTxn<'a, D>(Transaction<'a, D>);

impl<D> KvTxn for RocksTxn<'_, D> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.0.get(key).map_err(classify)
    }

    fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.0.get_for_update(key, true).map_err(classify)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.0.put(key, value).map_err(classify)
    }

    fn commit(self: Box<Self>) -> Result<(), TxnError> {
        self.0.commit().map_err(classify)
    }

    fn rollback(self: Box<Self>) -> Result<(), TxnError> {
        self.0.rollback().map_err(classify)
    }
}

impl TxnEngine for RocksEngine {
    fn begin(&self, opts: &TxnOpts) -> Result<Box<dyn KvTxn + '_>, EngineError> {
        let snap = snapshot(opts.isolation)?;
        let wo = write_options(opts.wo);
        Ok(match &self.db {
            Db::Pessimistic(db) => {
                let mut t = TransactionOptions::default();
                t.set_snapshot(snap);
                t.set_deadlock_detect(true);
                t.set_lock_timeout(
                    i64::try_from(opts.lock_timeout.as_millis()).unwrap_or(i64::MAX),
                );
                Box::new(RocksTxn(db.transaction_opt(&wo, &t)))
            }
            Db::Optimistic(db) => {
                let mut t = OptimisticTransactionOptions::default();
                t.set_snapshot(snap);
                Box::new(RocksTxn(db.transaction_opt(&wo, &t)))
            }
        })
    }

    fn describe_txn(&self, opts: &TxnOpts) -> String {
        let snap = match snapshot(opts.isolation) {
            Ok(s) => format!("set_snapshot({s})"),
            Err(e) => e.to_string(),
        };
        match self.db {
            Db::Pessimistic(_) => format!(
                "RocksDB TransactionDB: exclusive get_for_update, {snap}, deadlock_detect, lock_timeout {} ms",
                opts.lock_timeout.as_millis()
            ),
            Db::Optimistic(_) => {
                format!("RocksDB OptimisticTransactionDB: conflicts validated at commit, {snap}")
            }
        }
    }
}
