//! The memtable: point entries in a concurrent [`SkipList`], range
//! tombstones in a small locked list, plus counters.
//!
//! Worked example: `add(5, Put, "a", "1")`, `add(9, Delete, "a", "")`,
//! `add(7, RangeDelete, "b", "d")`. Then `get("a", 8)` is `Put@5 "1"`,
//! `get("a", 20)` is `Delete@9`, `get("a", 4)` is `None`;
//! `max_covering_tombstone("c", 20)` is 7 and `("c", 6)` is 0.
//!
//! Locking: the skiplist needs none (lock-free reads, CAS inserts). The
//! range-tombstone list is guarded by its `RwLock`; `range_del_count` is
//! bumped after the push (still under the lock), so a reader that sees 0
//! skips the lock entirely — the common case costs one atomic load. A
//! tombstone being added concurrently with a read belongs to a write whose
//! sequence is not yet visible to that reader, so missing it is correct.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam::utils::CachePadded;
use parking_lot::RwLock;

use super::filter::MemFilter;
use super::skiplist::{Cursor, SkipList};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::types::{
    pack_trailer, parse_internal_key, SequenceNumber, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE,
};

/// Approximate bookkeeping bytes per range tombstone (two `Vec`s and a seq).
const TOMBSTONE_OVERHEAD: usize = 56;

/// Result of [`MemTable::get`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemGet<'a> {
    /// `Put` or `Delete`.
    pub kind: ValueKind,
    /// Sequence of the entry found.
    pub seq: SequenceNumber,
    /// The value (empty for a delete).
    pub value: &'a [u8],
}

/// A range tombstone `[begin, end)` at `seq`.
struct RangeTombstone {
    begin: Vec<u8>,
    end: Vec<u8>,
    seq: SequenceNumber,
}

/// Counters every writer updates, on their own cache line so they do not
/// slow readers of the fields next to them.
struct Stats {
    num_entries: AtomicU64,
    num_deletes: AtomicU64,
    smallest_seq: AtomicU64,
    largest_seq: AtomicU64,
}

/// An in-memory write buffer; `Send + Sync`, written and read concurrently.
pub struct MemTable {
    id: u64,
    list: Arc<SkipList>,
    /// Number of range tombstones; 0 lets readers skip the lock.
    range_del_count: AtomicUsize,
    range_del_bytes: AtomicUsize,
    /// Guards the range tombstones (writers push, readers scan).
    range_dels: RwLock<Vec<RangeTombstone>>,
    stats: CachePadded<Stats>,
    /// The buffer size the filter is sized for; 0 when the options turn
    /// it off.
    filter_for: usize,
    /// The user keys of the point entries (`filter.rs`), made at the first
    /// one (so an idle column family's memtable allocates none) and set
    /// before each entry is linked.
    filter: OnceLock<MemFilter>,
}

impl MemTable {
    /// An empty memtable fed by WAL segment `id`.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn new(id: u64) -> Self {
        Self::with_chunk_size(id, super::arena::DEFAULT_CHUNK_SIZE)
    }

    /// An empty memtable whose arena grows in chunks of `chunk_size` bytes.
    /// The database picks a chunk well below its write buffer size, so that
    /// memory accounting (whole chunks) tracks the data closely.
    pub fn with_chunk_size(id: u64, chunk_size: usize) -> Self {
        MemTable {
            id,
            list: Arc::new(SkipList::with_arena(super::arena::Arena::with_chunk_size(
                chunk_size,
            ))),
            range_del_count: AtomicUsize::new(0),
            range_del_bytes: AtomicUsize::new(0),
            range_dels: RwLock::new(Vec::new()),
            stats: CachePadded::new(Stats {
                num_entries: AtomicU64::new(0),
                num_deletes: AtomicU64::new(0),
                smallest_seq: AtomicU64::new(u64::MAX),
                largest_seq: AtomicU64::new(0),
            }),
            filter_for: 0,
            filter: OnceLock::new(),
        }
    }

    /// The same memtable with a filter over its point entries' user keys
    /// (docs/architecture.md, "The memtable filter"), sized for a buffer
    /// of `write_buffer_size` bytes. Call before the first `add`.
    pub fn with_filter(mut self, write_buffer_size: usize) -> Self {
        self.filter_for = write_buffer_size.max(1);
        self
    }

    /// The WAL segment number that feeds this memtable.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Adds an entry. Thread-safe. `kind` is `Put` or `Delete` (empty
    /// value); a `RangeDelete` goes to the range-tombstone list with
    /// `user_key` as the begin and `value` as the exclusive end.
    ///
    /// Callers give every entry a unique sequence; an exact duplicate
    /// (same key, seq and kind) is ignored and not counted.
    ///
    /// # Panics
    /// If `seq > MAX_SEQUENCE` (debug builds), or a key or value is 4 GiB or larger.
    pub fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        match kind {
            ValueKind::RangeDelete => {
                let mut list = self.range_dels.write();
                list.push(RangeTombstone {
                    begin: user_key.to_vec(),
                    end: value.to_vec(),
                    seq,
                });
                self.range_del_bytes.fetch_add(
                    user_key.len() + value.len() + TOMBSTONE_OVERHEAD,
                    Ordering::Relaxed,
                );
                // Release: a reader that sees the count also sees the push.
                self.range_del_count.store(list.len(), Ordering::Release);
            }
            ValueKind::Put | ValueKind::Delete | ValueKind::BlobIndex => {
                // Before the insert's Release CAS publishes the entry: a
                // get ordered after this write then sees the bits set.
                if self.filter_for > 0 {
                    self.filter
                        .get_or_init(|| MemFilter::for_buffer(self.filter_for))
                        .add(user_key);
                }
                if !self.list.insert(user_key, pack_trailer(seq, kind), value) {
                    return;
                }
            }
        }
        let s = &self.stats;
        s.num_entries.fetch_add(1, Ordering::Relaxed);
        if !kind.is_value() {
            s.num_deletes.fetch_add(1, Ordering::Relaxed);
        }
        // Loads first: sequences mostly grow, so the RMW is rarely needed for
        // the minimum.
        if seq < s.smallest_seq.load(Ordering::Relaxed) {
            s.smallest_seq.fetch_min(seq, Ordering::Relaxed);
        }
        if seq > s.largest_seq.load(Ordering::Relaxed) {
            s.largest_seq.fetch_max(seq, Ordering::Relaxed);
        }
    }

    /// The newest point entry of `user_key` with `seq <= snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<MemGet<'_>> {
        // No filter yet: no entry was added with one, so the walk is short.
        if let Some(f) = self.filter.get() {
            if !f.may_contain(user_key) {
                return None;
            }
        }
        let target = pack_trailer(snapshot.min(MAX_SEQUENCE), KIND_FOR_SEEK);
        let (key, value) = self.list.get_ge(user_key, target)?;
        let parsed = parse_internal_key(key)?;
        if parsed.user_key != user_key {
            return None;
        }
        Some(MemGet {
            kind: parsed.kind,
            seq: parsed.seq,
            value,
        })
    }

    /// The largest sequence `<= snapshot` of a range tombstone covering
    /// `user_key`, or 0. One atomic load when there are no range tombstones;
    /// otherwise a linear scan under the read lock.
    pub fn max_covering_tombstone(
        &self,
        user_key: &[u8],
        snapshot: SequenceNumber,
    ) -> SequenceNumber {
        if self.range_del_count.load(Ordering::Acquire) == 0 {
            return 0;
        }
        self.range_dels
            .read()
            .iter()
            .filter(|t| {
                t.seq <= snapshot && t.begin.as_slice() <= user_key && user_key < t.end.as_slice()
            })
            .map(|t| t.seq)
            .max()
            .unwrap_or(0)
    }

    /// All range tombstones as `(begin, end, seq)`, in insertion order.
    pub fn range_tombstones(&self) -> Vec<(Vec<u8>, Vec<u8>, SequenceNumber)> {
        if self.range_del_count.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.range_dels
            .read()
            .iter()
            .map(|t| (t.begin.clone(), t.end.clone(), t.seq))
            .collect()
    }

    /// An iterator over the point entries; keeps the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator {
            cursor: self.list.cursor(),
            _table: Arc::clone(self),
        }
    }

    /// Arena bytes plus the range-tombstone list.
    pub fn approximate_memory_usage(&self) -> usize {
        self.list.memory_usage() + self.range_del_bytes.load(Ordering::Relaxed)
    }

    /// Entries added (points and range tombstones; ignored duplicates excluded).
    pub fn num_entries(&self) -> u64 {
        self.stats.num_entries.load(Ordering::Relaxed)
    }

    /// Point deletes plus range tombstones added.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn num_deletes(&self) -> u64 {
        self.stats.num_deletes.load(Ordering::Relaxed)
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.num_entries() == 0
    }

    /// Smallest sequence added, `u64::MAX` when empty.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn smallest_seq(&self) -> SequenceNumber {
        self.stats.smallest_seq.load(Ordering::Relaxed)
    }

    /// Largest sequence added, 0 when empty.
    pub fn largest_seq(&self) -> SequenceNumber {
        self.stats.largest_seq.load(Ordering::Relaxed)
    }
}

// The engine shares memtables across writer and reader threads.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<MemTable>();
};

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("id", &self.id)
            .field("num_entries", &self.num_entries())
            .field("memory", &self.approximate_memory_usage())
            .finish()
    }
}

/// Iterator over a memtable's point entries (internal keys, sorted by
/// [`crate::types::compare_internal_keys`]). Sees entries added after it was
/// created if it reaches them. `prev` and the seeks are `O(log n)` searches.
pub struct MemTableIterator {
    cursor: Cursor,
    /// Keeps the memtable (and so its arena) alive while iterating.
    _table: Arc<MemTable>,
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.cursor.seek_to_first();
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.cursor.seek_to_last();
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.cursor.seek(target);
        Ok(())
    }
    fn seek_forward(&mut self, target: &[u8]) -> Result<()> {
        self.cursor.seek_forward(target);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.cursor.seek_for_prev(target);
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.cursor.next();
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.cursor.prev();
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.cursor.key()
    }
    fn value(&self) -> &[u8] {
        self.cursor.value()
    }
}

#[cfg(test)]
#[path = "memtable_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "stress_tests.rs"]
mod stress_tests;
