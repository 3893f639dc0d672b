//! Snapshots: registered read sequences that compaction must preserve.
//!
//! A [`Snapshot`] holds a sequence `S`; while it lives, compaction keeps, for
//! every key, the newest version `<= S` (see `compaction::gc`).

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The live snapshots of a database: sequence -> number of handles.
#[derive(Debug, Default)]
pub struct SnapshotList {
    live: Mutex<BTreeMap<u64, usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at `seq`.
    pub fn acquire(self: &Arc<Self>, seq: u64) -> Snapshot {
        *self.live.lock().entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            list: self.clone(),
        }
    }

    /// Registers a snapshot at the latest visible sequence. The sequence is
    /// read under the list's mutex, the one [`SnapshotList::sequences`]
    /// takes: a compaction that listed the snapshots before this one exists
    /// only drops versions shadowed by a newer version it already had, and
    /// everything it had was published (frozen memtables hold only published
    /// writes), so the sequence read here is at least that newer version's.
    /// No write-path lock is needed.
    pub fn acquire_latest(self: &Arc<Self>, visible: &std::sync::atomic::AtomicU64) -> Snapshot {
        let mut live = self.live.lock();
        let seq = visible.load(std::sync::atomic::Ordering::Acquire);
        *live.entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            list: self.clone(),
        }
    }

    /// Registers a snapshot at the oldest live one's sequence, or at the
    /// latest visible sequence when there is none (see
    /// [`SnapshotList::acquire_latest`]); under the list's mutex, so the
    /// oldest cannot go away before this one holds its sequence.
    pub fn acquire_oldest(self: &Arc<Self>, visible: &std::sync::atomic::AtomicU64) -> Snapshot {
        let mut live = self.live.lock();
        let seq = match live.keys().next() {
            Some(&oldest) => oldest,
            None => visible.load(std::sync::atomic::Ordering::Acquire),
        };
        *live.entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            list: self.clone(),
        }
    }

    fn release(&self, seq: u64) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                live.remove(&seq);
            }
        }
    }

    /// Sorted sequences of all live snapshots.
    pub fn sequences(&self) -> Vec<u64> {
        self.live.lock().keys().copied().collect()
    }
}

/// A consistent read point. Reads through it see exactly the writes committed
/// before it was taken. Released when the last clone is dropped.
pub struct Snapshot {
    seq: u64,
    list: Arc<SnapshotList>,
}

impl Snapshot {
    /// The sequence this snapshot reads at.
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    /// True if this snapshot was taken from the database whose list is `list`.
    pub(crate) fn belongs_to(&self, list: &Arc<SnapshotList>) -> bool {
        Arc::ptr_eq(&self.list, list)
    }
}

impl Clone for Snapshot {
    fn clone(&self) -> Self {
        self.list.acquire(self.seq)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.release(self.seq);
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot({})", self.seq)
    }
}
