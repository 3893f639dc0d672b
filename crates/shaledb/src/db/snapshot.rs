//! Snapshots: registered read sequences that compaction must preserve.
//!
//! A [`Snapshot`] holds a sequence `S`; while it lives, compaction keeps, for
//! every key, the newest version `<= S` (see `compaction::gc`).
//!
//! The list is a sorted vector of (sequence, handles), not a map: every
//! transaction under Snapshot Isolation registers one snapshot and drops it
//! at its end, and a map allocates a node when its first entry comes and
//! frees it when the last goes, which is once per statement on a quiet
//! server. The vector keeps its capacity, and a new snapshot almost always
//! takes the newest sequence, so it is an increment of the last entry or a
//! push at the end. Live snapshots are few (one per open transaction), so
//! the shift a release in the middle makes is short.

use parking_lot::Mutex;
use std::sync::Arc;

/// The live snapshots of a database: sequence -> number of handles.
#[derive(Debug, Default)]
pub struct SnapshotList {
    /// Sorted by sequence, one entry per distinct sequence, counts >= 1.
    live: Mutex<Vec<(u64, usize)>>,
}

/// Counts one more handle of `seq` in `live` (sorted, see [`SnapshotList`]).
fn add_handle(live: &mut Vec<(u64, usize)>, seq: u64) {
    match live.last_mut() {
        Some((last, n)) if *last == seq => *n += 1,
        Some((last, _)) if *last > seq => match live.binary_search_by_key(&seq, |e| e.0) {
            Ok(i) => {
                if let Some((_, n)) = live.get_mut(i) {
                    *n += 1;
                }
            }
            Err(i) => live.insert(i, (seq, 1)),
        },
        _ => live.push((seq, 1)),
    }
}

impl SnapshotList {
    /// Registers a snapshot at `seq`.
    pub fn acquire(self: &Arc<Self>, seq: u64) -> Snapshot {
        add_handle(&mut self.live.lock(), seq);
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
        add_handle(&mut live, seq);
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
        let seq = match live.first() {
            Some(&(oldest, _)) => oldest,
            None => visible.load(std::sync::atomic::Ordering::Acquire),
        };
        add_handle(&mut live, seq);
        Snapshot {
            seq,
            list: self.clone(),
        }
    }

    fn release(&self, seq: u64) {
        let mut live = self.live.lock();
        // The newest is the common case (a transaction that ran alone).
        let at = match live.last() {
            Some(&(last, _)) if last == seq => Some(live.len() - 1),
            _ => live.binary_search_by_key(&seq, |e| e.0).ok(),
        };
        let Some(i) = at else { return };
        let emptied = match live.get_mut(i) {
            Some((_, n)) => {
                *n -= 1;
                *n == 0
            }
            None => false,
        };
        if emptied {
            live.remove(i);
        }
    }

    /// Sorted sequences of all live snapshots.
    pub fn sequences(&self) -> Vec<u64> {
        self.live.lock().iter().map(|e| e.0).collect()
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicU64;

    /// Acquires and drops snapshots in a scrambled order (newest, oldest,
    /// middle, repeated sequences, clones) and checks the live list against
    /// a map of handle counts after every step.
    #[test]
    fn list_matches_a_count_map() {
        let list = Arc::new(SnapshotList::default());
        let visible = AtomicU64::new(0);
        let mut model: BTreeMap<u64, usize> = BTreeMap::new();
        let mut held: Vec<Snapshot> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 6 {
                0 | 1 => {
                    visible.store(step / 3, std::sync::atomic::Ordering::Release);
                    let s = list.acquire_latest(&visible);
                    *model.entry(s.sequence()).or_insert(0) += 1;
                    held.push(s);
                }
                2 => {
                    let s = list.acquire((x >> 8) % (step / 3 + 1));
                    *model.entry(s.sequence()).or_insert(0) += 1;
                    held.push(s);
                }
                3 => {
                    let s = list.acquire_oldest(&visible);
                    assert_eq!(
                        Some(s.sequence()),
                        model.keys().next().copied().or(Some(s.sequence()))
                    );
                    *model.entry(s.sequence()).or_insert(0) += 1;
                    held.push(s);
                }
                4 if !held.is_empty() => {
                    let i = usize::try_from(x >> 16).unwrap() % held.len();
                    let c = held[i].clone();
                    *model.entry(c.sequence()).or_insert(0) += 1;
                    held.push(c);
                }
                _ if !held.is_empty() => {
                    let i = usize::try_from(x >> 16).unwrap() % held.len();
                    let s = held.swap_remove(i);
                    let n = model.get_mut(&s.sequence()).unwrap();
                    *n -= 1;
                    if *n == 0 {
                        model.remove(&s.sequence());
                    }
                    drop(s);
                }
                _ => {}
            }
            let want: Vec<(u64, usize)> = model.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(*list.live.lock(), want, "step {step}");
        }
        held.clear();
        assert!(list.sequences().is_empty());
    }
}
