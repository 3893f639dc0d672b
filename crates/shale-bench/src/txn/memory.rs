//! Transactions of the `memory` backend, for testing `txnmix` itself: optimistic concurrency
//! control with backward validation, like RocksDB's `OptimisticTransactionDB`.
//!
//! A transaction buffers its writes and remembers, for each key read with `get_for_update`,
//! the version it saw (the commit number of the transaction that last wrote the key, 0 if
//! none). Commit takes the table's mutex, checks that none of those versions changed (else
//! [`AbortKind::WriteConflict`]), applies the writes to the map and bumps their versions. Plain
//! `get`s are not validated (read committed), and writes outside transactions do not bump
//! versions: they do not conflict with transactions. Example: T1 and T2 both read `k` at
//! version 0; T1 commits first (k now at version 1); T2's commit sees 1 != 0 and aborts.
//!
//! Locking: [`TxnTable::versions`] (a mutex) is taken before the engine's map lock, by commits
//! and by `get_for_update`, so a version and the value read with it belong together.

use super::engine::{AbortKind, KvTxn, TxnEngine, TxnError, TxnIsolation, TxnOpts, Unsupported};
use crate::engine::KvEngine;
use crate::error::EngineError;
use crate::memory::MemoryEngine;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Versions of the keys written by committed transactions.
#[derive(Default)]
pub(crate) struct TxnTable {
    /// Guards commits: key -> commit number of its last transactional write, and the last
    /// commit number.
    versions: Mutex<Versions>,
}

#[derive(Default)]
struct Versions {
    by_key: HashMap<Vec<u8>, u64>,
    last_commit: u64,
}

impl TxnTable {
    fn lock(&self) -> MutexGuard<'_, Versions> {
        // Commits update the map and the versions before unlocking and cannot panic between
        // (no fallible step), so a poisoned table is still consistent.
        self.versions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct MemTxn<'a> {
    engine: &'a MemoryEngine,
    /// Keys read for update and the version seen.
    reads: Vec<(Vec<u8>, u64)>,
    writes: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl KvTxn for MemTxn<'_> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        if let Some(v) = self.writes.get(key) {
            return Ok(Some(v.clone()));
        }
        Ok(self.engine.get_vec(key)?)
    }

    fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        if let Some(v) = self.writes.get(key) {
            return Ok(Some(v.clone()));
        }
        let table = self.engine.txn_table().lock();
        let version = table.by_key.get(key).copied().unwrap_or(0);
        let value = self.engine.get_vec(key)?;
        drop(table);
        self.reads.push((key.to_vec(), version));
        Ok(value)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.writes.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<(), TxnError> {
        let mut table = self.engine.txn_table().lock();
        for (key, seen) in &self.reads {
            if table.by_key.get(key).copied().unwrap_or(0) != *seen {
                return Err(TxnError::Abort(AbortKind::WriteConflict));
            }
        }
        table.last_commit += 1;
        let commit = table.last_commit;
        for (k, v) in self.writes {
            self.engine.insert_raw(k.clone(), v);
            table.by_key.insert(k, commit);
        }
        Ok(())
    }

    fn rollback(self: Box<Self>) -> Result<(), TxnError> {
        Ok(())
    }
}

impl TxnEngine for MemoryEngine {
    fn begin(&self, opts: &TxnOpts) -> Result<Box<dyn KvTxn + '_>, EngineError> {
        if opts.isolation == TxnIsolation::Serializable {
            return Err(EngineError::new(Unsupported(
                "memory: no serializable transactions",
            )));
        }
        Ok(Box::new(MemTxn {
            engine: self,
            reads: Vec::new(),
            writes: BTreeMap::new(),
        }))
    }

    fn describe_txn(&self, _opts: &TxnOpts) -> String {
        "memory: optimistic, get_for_update validated at commit (test backend)".into()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::engine::WriteOpts;
    use std::time::Duration;

    fn opts() -> TxnOpts {
        TxnOpts {
            isolation: TxnIsolation::Snapshot,
            lock_timeout: Duration::from_secs(1),
            wo: WriteOpts::default(),
        }
    }

    #[test]
    fn second_committer_of_a_read_key_aborts() {
        let e = MemoryEngine::new();
        e.put(WriteOpts::default(), b"k", b"0").unwrap();
        let mut t1 = e.begin(&opts()).unwrap();
        let mut t2 = e.begin(&opts()).unwrap();
        assert_eq!(t1.get_for_update(b"k").unwrap(), Some(b"0".to_vec()));
        assert_eq!(t2.get_for_update(b"k").unwrap(), Some(b"0".to_vec()));
        t1.put(b"k", b"1").unwrap();
        t2.put(b"k", b"2").unwrap();
        assert_eq!(t1.get(b"k").unwrap(), Some(b"1".to_vec())); // own write
        t1.commit().unwrap();
        assert!(matches!(
            t2.commit(),
            Err(TxnError::Abort(AbortKind::WriteConflict))
        ));
        assert_eq!(e.get_vec(b"k").unwrap(), Some(b"1".to_vec()));
        // A retry after the conflict sees the new version and commits.
        let mut t3 = e.begin(&opts()).unwrap();
        assert_eq!(t3.get_for_update(b"k").unwrap(), Some(b"1".to_vec()));
        t3.put(b"k", b"2").unwrap();
        t3.commit().unwrap();
        assert_eq!(e.get_vec(b"k").unwrap(), Some(b"2".to_vec()));
    }

    #[test]
    fn rollback_discards_and_serializable_is_refused() {
        let e = MemoryEngine::new();
        let mut t = e.begin(&opts()).unwrap();
        t.put(b"k", b"v").unwrap();
        t.rollback().unwrap();
        assert_eq!(e.get_vec(b"k").unwrap(), None);
        let ser = TxnOpts {
            isolation: TxnIsolation::Serializable,
            ..opts()
        };
        assert!(e.begin(&ser).is_err());
    }
}
