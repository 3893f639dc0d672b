//! The `memory` backend: a `BTreeMap` behind an `RwLock`. It exists to test the harness itself
//! (key generation, found counts, report lines) without a real engine; its numbers say nothing
//! about storage engines.
//!
//! Locking: one `RwLock` guards the whole map; writers take it exclusively per operation,
//! readers shared. A cursor does not hold the lock between steps: each `advance` looks up the
//! successor of the current key, so it sees concurrent writes (no snapshot) — fine for tests.

use crate::engine::{
    BatchOp, CursorStart, EngineFactory, EngineOptions, KvCursor, KvEngine, WriteOpts,
};
use crate::error::EngineError;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{PoisonError, RwLock};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// The in-memory engine. Contents vanish when it is closed.
#[derive(Default)]
pub struct MemoryEngine {
    map: RwLock<Map>,
    /// Versions for the optimistic transactions of `txnmix` (see [`crate::txn::memory`]).
    txns: crate::txn::memory::TxnTable,
}

impl MemoryEngine {
    /// An empty engine.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Map> {
        // A panicking writer cannot leave the map half-updated (each operation is one
        // BTreeMap call), so a poisoned lock is still consistent.
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_lock(&self) -> std::sync::RwLockWriteGuard<'_, Map> {
        self.map.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of keys (for tests).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// The transaction table (its mutex is taken before the map lock).
    pub(crate) fn txn_table(&self) -> &crate::txn::memory::TxnTable {
        &self.txns
    }

    /// Inserts without a `WriteOpts` (a committing transaction).
    pub(crate) fn insert_raw(&self, key: Vec<u8>, value: Vec<u8>) {
        self.write_lock().insert(key, value);
    }
}

impl KvEngine for MemoryEngine {
    fn put(&self, _wo: WriteOpts, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        self.write_lock().insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&self, _wo: WriteOpts, key: &[u8]) -> Result<(), EngineError> {
        self.write_lock().remove(key);
        Ok(())
    }

    fn write(&self, _wo: WriteOpts, batch: &[BatchOp<'_>]) -> Result<(), EngineError> {
        let mut map = self.write_lock();
        for op in batch {
            match *op {
                BatchOp::Put(k, v) => {
                    map.insert(k.to_vec(), v.to_vec());
                }
                BatchOp::Delete(k) => {
                    map.remove(k);
                }
            }
        }
        Ok(())
    }

    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool, EngineError> {
        match self.read().get(key) {
            Some(v) => {
                found(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn cursor(&self, start: CursorStart<'_>) -> Result<Box<dyn KvCursor + '_>, EngineError> {
        let map = self.read();
        let (entry, forward) = match start {
            CursorStart::First => (map.iter().next(), true),
            CursorStart::Last => (map.iter().next_back(), false),
            CursorStart::Seek(k) => (
                map.range::<[u8], _>((Bound::Included(k), Bound::Unbounded))
                    .next(),
                true,
            ),
        };
        let current = entry.map(|(k, v)| (k.clone(), v.clone()));
        drop(map);
        Ok(Box::new(MemoryCursor {
            engine: self,
            current,
            forward,
        }))
    }

    fn flush(&self) -> Result<(), EngineError> {
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        Some(format!("memory.keys: {}\n", self.len()))
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }

    fn txn(&self) -> Option<&dyn crate::txn::TxnEngine> {
        Some(self)
    }
}

struct MemoryCursor<'a> {
    engine: &'a MemoryEngine,
    current: Option<(Vec<u8>, Vec<u8>)>,
    forward: bool,
}

impl KvCursor for MemoryCursor<'_> {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        self.current
            .as_ref()
            .map(|(k, _)| k.as_slice())
            .unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.current
            .as_ref()
            .map(|(_, v)| v.as_slice())
            .unwrap_or_default()
    }

    fn advance(&mut self) -> Result<(), EngineError> {
        let Some((k, _)) = self.current.take() else {
            return Ok(());
        };
        let map = self.engine.read();
        let next = if self.forward {
            map.range::<[u8], _>((Bound::Excluded(k.as_slice()), Bound::Unbounded))
                .next()
        } else {
            map.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(k.as_slice())))
                .next_back()
        };
        self.current = next.map(|(k, v)| (k.clone(), v.clone()));
        Ok(())
    }
}

/// Factory for [`MemoryEngine`]; `open` ignores the path and never touches the disk.
pub struct MemoryFactory;

impl EngineFactory for MemoryFactory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn open(&self, _opts: &EngineOptions) -> Result<Box<dyn KvEngine>, EngineError> {
        Ok(Box::new(MemoryEngine::new()))
    }

    fn destroy(&self, _path: &std::path::Path) -> Result<(), EngineError> {
        Ok(())
    }

    fn describe(&self, _opts: &EngineOptions) -> Vec<String> {
        vec!["Engine:     memory (BTreeMap + RwLock; harness self-test only)".into()]
    }

    fn persistent(&self) -> bool {
        false
    }

    fn wal_files(&self, _path: &std::path::Path) -> Result<crate::engine::WalFiles, EngineError> {
        Ok(crate::engine::WalFiles::default())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn crud_and_cursors() {
        let e = MemoryEngine::new();
        let wo = WriteOpts::default();
        for k in [b"b", b"d", b"a", b"c"] {
            e.put(wo, k, k).unwrap();
        }
        e.write(wo, &[BatchOp::Delete(b"c"), BatchOp::Put(b"e", b"E")])
            .unwrap();
        assert_eq!(e.get_vec(b"e").unwrap(), Some(b"E".to_vec()));
        assert_eq!(e.get_vec(b"c").unwrap(), None);
        e.delete(wo, b"e").unwrap();

        let collect = |start| {
            let mut c = e.cursor(start).unwrap();
            let mut out = Vec::new();
            while c.valid() {
                out.push(c.key().to_vec());
                c.advance().unwrap();
            }
            out
        };
        assert_eq!(
            collect(CursorStart::First),
            vec![b"a".to_vec(), b"b".to_vec(), b"d".to_vec()]
        );
        assert_eq!(
            collect(CursorStart::Last),
            vec![b"d".to_vec(), b"b".to_vec(), b"a".to_vec()]
        );
        assert_eq!(collect(CursorStart::Seek(b"bb")), vec![b"d".to_vec()]);
        assert!(collect(CursorStart::Seek(b"z")).is_empty());
        assert_eq!(e.len(), 3);
    }
}
