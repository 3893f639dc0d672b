//! Row lock manager: shared/exclusive locks on `(column family, user key)`,
//! held by transactions until they end (strict two-phase locking).
//!
//! In the X-Engine model all reads are snapshot reads and take no lock; writes
//! (and locking reads) take an exclusive row lock held to commit/rollback, and
//! the transaction layer checks first-committer-wins against the row's latest
//! sequence after the lock is granted. Shared locks exist for locking reads
//! (`SELECT ... LOCK IN SHARE MODE`) and for Serializable.
//!
//! # Design
//!
//! * The table is split into `partitions` hash partitions, each a
//!   `Mutex<HashMap<cf, HashMap<key, LockEntry>>>`. An uncontended `lock` or
//!   `unlock_all` touches only the partition mutex of its key(s); entries exist
//!   only while a key is locked or waited for.
//! * A `LockEntry` (file `lock_manager/entry.rs`) holds the granted holders and a FIFO queue of
//!   waiters. Requests are granted strictly in queue order, so a new `Shared`
//!   request never overtakes a queued `Exclusive` one (no writer starvation);
//!   upgrades (`S` held, `X` wanted) queue in front.
//! * A waiter sleeps on its own condition variable (with the partition mutex);
//!   whoever grants it (a releasing transaction, or a waiter that timed out and
//!   left the head of the queue) marks it granted and signals exactly it.
//! * Deadlocks are detected eagerly, before sleeping, on a global wait-for graph
//!   (a single mutex, touched only by requests that wait and by releases on keys
//!   that have waiters); see `lock_manager/deadlock.rs` for the algorithm and its depth bound.
//!   The requester that would close a cycle is the victim: its request is
//!   removed from the queue and it gets [`Error::Deadlock`].
//!
//! Locks: `partition.table` guards every entry of that partition (holders,
//! queues, wait slots' `granted` flags). `graph` guards the wait-for graph. Order
//! is partition, then graph; never two partitions at once.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use shaledb::test_hooks::{LockManager, LockMode}; // internal: `test-hooks` only
//!
//! let lm = LockManager::new(64);
//! let t = Duration::from_millis(10);
//! lm.lock(1, 0, b"row", LockMode::Shared, t).unwrap();
//! lm.lock(2, 0, b"row", LockMode::Shared, t).unwrap(); // S/S compatible
//! assert!(matches!(
//!     lm.lock(3, 0, b"row", LockMode::Exclusive, t),
//!     Err(shaledb::Error::LockTimeout { .. })
//! ));
//! lm.unlock_all(1, &[(0, b"row".to_vec())]);
//! lm.unlock_all(2, &[(0, b"row".to_vec())]);
//! lm.lock(3, 0, b"row", LockMode::Exclusive, t).unwrap();
//! assert_eq!(lm.is_locked_by(3, 0, b"row"), Some(LockMode::Exclusive));
//! ```
//!
//! A transaction must not have two `lock` calls outstanding at once (it waits on
//! at most one key); a second concurrent call that would wait is refused with
//! `InvalidArgument` (a best-effort misuse check, not a guarantee).

mod deadlock;
mod entry;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is the failure report
mod tests;

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use deadlock::WaitForGraph;
pub use deadlock::DEADLOCK_DETECT_DEPTH;
use entry::{Acquire, LockEntry, WaitSlot, Waiter};

use crate::{Error, Result};

/// Transaction identifier; unique among live (including prepared) transactions.
pub type TxnId = u64;

/// Partition count used by [`LockManager::default`].
pub const DEFAULT_PARTITIONS: usize = 64;

/// Lock mode. `Shared` is compatible with `Shared`; `Exclusive` with nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Read lock.
    Shared,
    /// Write lock.
    Exclusive,
}

/// The tables' hasher: foldhash, seeded per process (hashbrown's default;
/// SipHash was 6 % of an INSERT's instructions, about ten hashes of each
/// locked key per transaction). Keys are user data, so the seed is random.
type Hasher = foldhash::fast::RandomState;

/// `cf -> key -> entry` for the keys of one partition. A column family's
/// map stays when its last key is released (it is reused by the next lock
/// instead of being allocated again for every transaction).
type Table = HashMap<u32, HashMap<Vec<u8>, LockEntry, Hasher>, Hasher>;

#[derive(Debug, Default)]
struct Partition {
    table: Mutex<Table>,
}

/// Row lock table. `Send + Sync`; share it behind an `Arc`.
pub struct LockManager {
    partitions: Box<[Partition]>,
    hasher: Hasher,
    graph: Mutex<WaitForGraph>,
}

impl std::fmt::Debug for LockManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockManager")
            .field("partitions", &self.partitions.len())
            .finish_non_exhaustive()
    }
}

impl Default for LockManager {
    fn default() -> Self {
        LockManager::new(DEFAULT_PARTITIONS)
    }
}

impl LockManager {
    /// A lock table with `partitions` hash partitions (0 is treated as 1).
    pub fn new(partitions: usize) -> Self {
        let n = partitions.max(1);
        LockManager {
            partitions: (0..n).map(|_| Partition::default()).collect(),
            hasher: Hasher::default(),
            graph: Mutex::new(WaitForGraph::default()),
        }
    }

    fn partition_index(&self, cf: u32, key: &[u8]) -> usize {
        // At least 1 partition; usize -> u64 is lossless on every supported target.
        let len = u64::try_from(self.partitions.len()).unwrap_or(u64::MAX);
        let rem = self.hasher.hash_one((cf, key)) % len.max(1);
        // `rem < partitions.len()`, so it fits in usize.
        usize::try_from(rem).unwrap_or(0)
    }

    fn partition(&self, cf: u32, key: &[u8]) -> &Partition {
        let idx = self.partition_index(cf, key);
        #[allow(clippy::indexing_slicing)] // partition_index() < partitions.len()
        &self.partitions[idx]
    }

    /// Acquires `mode` on `(cf, key)` for `txn`, blocking until it is granted,
    /// `timeout` passes ([`Error::LockTimeout`]; a zero timeout never blocks) or
    /// waiting would close a cycle in the wait-for graph ([`Error::Deadlock`];
    /// the requester is the victim and is left in no queue). On error nothing
    /// changed for `txn`: locks it already held stay held.
    ///
    /// Re-entrant: holding `Exclusive` satisfies any request, holding `Shared`
    /// satisfies `Shared`. Holding `Shared` and asking `Exclusive` upgrades,
    /// waiting until `txn` is the only holder; two transactions upgrading the
    /// same key deadlock, and the second is the victim.
    pub fn lock(
        &self,
        txn: TxnId,
        cf: u32,
        key: &[u8],
        mode: LockMode,
        timeout: Duration,
    ) -> Result<()> {
        let part = self.partition(cf, key);
        let mut table = part.table.lock();
        let keys = table.entry(cf).or_default();
        let entry = match keys.get_mut(key) {
            None => {
                // Fast path: nobody holds or waits for this key.
                keys.insert(key.to_vec(), LockEntry::granted_to(txn, mode));
                return Ok(());
            }
            Some(entry) => entry,
        };
        let upgrade = match entry.try_acquire(txn, mode) {
            Acquire::Granted => return Ok(()),
            Acquire::Wait { upgrade } => upgrade,
        };
        if timeout.is_zero() {
            return Err(Error::LockTimeout { key: key.to_vec() });
        }
        if entry.is_waiting(txn) {
            return Err(concurrent_wait(txn));
        }
        // `None`: the deadline is beyond what `Instant` can represent; wait forever.
        let deadline = Instant::now().checked_add(timeout);
        let slot = Arc::new(WaitSlot::default());
        entry.enqueue(Waiter {
            txn,
            mode,
            upgrade,
            slot: Arc::clone(&slot),
        });
        {
            let mut graph = self.graph.lock();
            let misuse = graph.is_waiting(txn);
            if !misuse {
                sync_graph(&mut graph, entry, &[]);
                if !graph.has_cycle_through(txn, DEADLOCK_DETECT_DEPTH) {
                    drop(graph);
                    return self.wait(table, cf, key, txn, &slot, deadline);
                }
            }
            // Victim (or misuse): leave the queue and restore the others' edges.
            entry.remove_waiter(txn);
            let mut gone = entry.promote();
            if !misuse {
                gone.push(txn);
            }
            sync_graph(&mut graph, entry, &gone);
            if misuse {
                return Err(concurrent_wait(txn));
            }
        }
        Err(Error::Deadlock { key: key.to_vec() })
    }

    /// Sleeps until `slot` is granted or `deadline` passes; `txn` is queued on
    /// `(cf, key)` and registered in the wait-for graph.
    fn wait(
        &self,
        mut table: MutexGuard<'_, Table>,
        cf: u32,
        key: &[u8],
        txn: TxnId,
        slot: &WaitSlot,
        deadline: Option<Instant>,
    ) -> Result<()> {
        loop {
            let timed_out = match deadline {
                Some(d) => slot.cv.wait_until(&mut table, d).timed_out(),
                None => {
                    slot.cv.wait(&mut table);
                    false
                }
            };
            // The granter already updated holders and the graph.
            if slot.is_granted() {
                return Ok(());
            }
            if timed_out {
                self.abandon_wait(&mut table, cf, key, txn);
                return Err(Error::LockTimeout { key: key.to_vec() });
            }
            // Spurious wakeup: sleep again.
        }
    }

    /// Removes `txn`'s queued request on `(cf, key)`, grants whoever that
    /// unblocks and updates the graph.
    fn abandon_wait(&self, table: &mut Table, cf: u32, key: &[u8], txn: TxnId) {
        let mut gone = vec![txn];
        if let Some(keys) = table.get_mut(&cf) {
            if let Some(entry) = keys.get_mut(key) {
                entry.remove_waiter(txn);
                gone.extend(entry.promote());
                sync_graph(&mut self.graph.lock(), entry, &gone);
                if entry.is_idle() {
                    remove_entry(table, cf, key);
                }
                return;
            }
        }
        // Unreachable while invariant 2 holds (an entry with waiters has
        // holders, so it is never dropped); keep the graph clean regardless.
        debug_assert!(false, "waiter's lock entry vanished");
        self.graph.lock().remove(txn);
    }

    /// Releases every lock `txn` holds among `keys` (unknown or foreign keys are
    /// ignored) and grants the waiters this unblocks. Each partition is locked
    /// once for all of its keys.
    pub fn unlock_all(&self, txn: TxnId, keys: &[(u32, Vec<u8>)]) {
        let mut by_part: Vec<(usize, u32, &[u8])> = keys
            .iter()
            .map(|(cf, k)| (self.partition_index(*cf, k), *cf, k.as_slice()))
            .collect();
        by_part.sort_unstable_by_key(|(p, _, _)| *p);
        for group in by_part.chunk_by(|a, b| a.0 == b.0) {
            let Some((_, cf, key)) = group.first() else {
                continue;
            };
            let mut table = self.partition(*cf, key).table.lock();
            for (_, cf, key) in group {
                self.release_one(&mut table, txn, *cf, key);
            }
        }
    }

    fn release_one(&self, table: &mut Table, txn: TxnId, cf: u32, key: &[u8]) {
        let Some(entry) = table.get_mut(&cf).and_then(|keys| keys.get_mut(key)) else {
            return;
        };
        if !entry.release(txn) {
            return;
        }
        if entry.has_waiters() {
            let granted = entry.promote();
            sync_graph(&mut self.graph.lock(), entry, &granted);
        }
        if entry.is_idle() {
            remove_entry(table, cf, key);
        }
    }

    /// The mode `txn` holds on `(cf, key)`, if any.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn is_locked_by(&self, txn: TxnId, cf: u32, key: &[u8]) -> Option<LockMode> {
        let table = self.partition(cf, key).table.lock();
        table.get(&cf)?.get(key)?.held_mode(txn)
    }

    /// Number of granted `(transaction, key)` locks. Partitions are counted one
    /// at a time, so under concurrency the sum is not an atomic snapshot.
    #[cfg(test)]
    pub fn num_locks(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| {
                let table = p.table.lock();
                table
                    .values()
                    .flat_map(|keys| keys.values())
                    .map(LockEntry::num_holders)
                    .sum::<usize>()
            })
            .sum()
    }

    /// Number of requests queued on `(cf, key)` (tests).
    #[cfg(test)]
    fn num_waiters(&self, cf: u32, key: &[u8]) -> usize {
        let table = self.partition(cf, key).table.lock();
        table
            .get(&cf)
            .and_then(|keys| keys.get(key))
            .map_or(0, LockEntry::num_waiters)
    }

    /// Number of transactions in the wait-for graph (tests).
    #[cfg(test)]
    fn num_graph_waiters(&self) -> usize {
        self.graph.lock().len()
    }

    /// Number of entries in the table, idle or not (tests).
    #[cfg(test)]
    fn num_entries(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| p.table.lock().values().map(HashMap::len).sum::<usize>())
            .sum()
    }
}

/// Drops `gone` from the graph and rewrites the edges of `entry`'s waiters.
fn sync_graph(graph: &mut WaitForGraph, entry: &LockEntry, gone: &[TxnId]) {
    for t in gone {
        graph.remove(*t);
    }
    for (waiter, blockers) in entry.waiter_blockers() {
        graph.set_edges(waiter, blockers);
    }
}

fn remove_entry(table: &mut Table, cf: u32, key: &[u8]) {
    if let Some(keys) = table.get_mut(&cf) {
        keys.remove(key);
    }
}

fn concurrent_wait(txn: TxnId) -> Error {
    Error::InvalidArgument(format!(
        "transaction {txn} already has a lock request waiting"
    ))
}
