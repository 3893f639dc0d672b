//! One shard of the block cache: a byte-bounded LRU list split at a
//! midpoint into a *young* and an *old* segment (InnoDB's buffer pool LRU).
//!
//! Entries live in a slab (`nodes`) linked into two doubly linked lists by
//! index, most recently used at each list's head; a hash map finds a key's
//! slot. All operations are O(1). The owning [`super::BlockCache`] guards
//! each shard with its own mutex, so nothing here is synchronized.
//!
//! Read as one list, young then old, this is a plain LRU: a normal insert
//! and every hit put the entry at the young head; the young tail spills to
//! the old head whenever the young segment holds more than
//! [`YOUNG_SHARE_EIGHTHS`]/8 of the capacity; eviction takes the old tail.
//! Example (capacity 100): insert A(40), B(40), get(A), insert C(40) evicts
//! B (the least recently used), leaving `C, A` with usage 80.
//!
//! A low-priority insert ([`LruShard::insert_cold`], for blocks read by a
//! bulk scan) goes to the *midpoint* instead: to the young tail while the
//! young segment has room, else to the old head. So a scan larger than the
//! cache fills free room, and then cycles through the old segment only: the
//! young segment (what other reads use, and the scan's own blocks that were
//! hit again) stays. A smaller scan's blocks wait in the old segment, and
//! its next pass hits and promotes them. Example (capacity 80, young 50):
//! five normal inserts of 10 fill the young segment; any number of cold
//! inserts of 10 then keep only the last three of them (the old segment)
//! and all five young entries.
//!
//! Invariants: `lists[s].usage` is the sum of the charges of the nodes
//! linked in segment `s`, each node's `seg` names the list it is in; after
//! every call the total usage is `<= capacity` and the young usage is
//! `<= young_capacity` unless the young list is empty; every index in
//! `map`, the lists' ends and the links is `< nodes.len()` and names a
//! linked node; `free` lists the unlinked slots.

use super::{CacheKey, KeyHasherBuilder};
use crate::extent::Block;
use std::collections::HashMap;
use std::sync::Arc;

/// "No node" in links.
const NIL: u32 = u32::MAX;

/// The young segment's share of a shard, in eighths (InnoDB keeps 37% old).
pub(crate) const YOUNG_SHARE_EIGHTHS: usize = 5;

/// Segment index of the young list.
const YOUNG: usize = 0;
/// Segment index of the old list.
const OLD: usize = 1;

struct Node {
    key: CacheKey,
    /// `None` only for a free slot.
    block: Option<Arc<Block>>,
    charge: usize,
    prev: u32,
    next: u32,
    /// [`YOUNG`] or [`OLD`]: the list the node is linked in.
    seg: usize,
}

/// Ends and charge of one segment's list.
#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    usage: usize,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
    usage: 0,
};

/// A byte-bounded, midpoint-insertion LRU map from [`CacheKey`] to blocks.
pub(crate) struct LruShard {
    map: HashMap<CacheKey, u32, KeyHasherBuilder>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    lists: [List; 2],
    capacity: usize,
    young_capacity: usize,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
}

impl LruShard {
    /// An empty shard holding at most `capacity` bytes of charge.
    pub fn new(capacity: usize) -> Self {
        LruShard {
            map: HashMap::with_hasher(KeyHasherBuilder),
            nodes: Vec::new(),
            free: Vec::new(),
            lists: [EMPTY, EMPTY],
            capacity,
            young_capacity: capacity / 8 * YOUNG_SHARE_EIGHTHS,
            hits: 0,
            misses: 0,
            inserts: 0,
            evictions: 0,
        }
    }

    /// Bytes charged now.
    pub fn usage(&self) -> usize {
        self.lists[YOUNG].usage + self.lists[OLD].usage
    }

    /// Entries held.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    // Indices passed here come from `map`, the lists' ends or node links,
    // all of which only ever hold indices of existing slots (see invariants).
    #[allow(clippy::indexing_slicing)] // index proven in range by the invariants
    fn node(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    /// The list of segment `seg` (`seg & 1`: always [`YOUNG`] or [`OLD`]).
    fn list(&mut self, seg: usize) -> &mut List {
        #[allow(clippy::indexing_slicing)] // seg & 1 < 2 == lists.len()
        &mut self.lists[seg & 1]
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next, seg, charge) = {
            let n = self.node(i);
            (n.prev, n.next, n.seg, n.charge)
        };
        let list = self.list(seg);
        list.usage -= charge;
        if prev == NIL {
            list.head = next;
        }
        if next == NIL {
            list.tail = prev;
        }
        if prev != NIL {
            self.node(prev).next = next;
        }
        if next != NIL {
            self.node(next).prev = prev;
        }
    }

    /// Links slot `i` into segment `seg`, at its head (`front`) or tail.
    fn link(&mut self, i: u32, seg: usize, front: bool) {
        let seg = seg & 1;
        let List { head, tail, .. } = *self.list(seg);
        let charge = {
            let n = self.node(i);
            n.seg = seg;
            n.prev = if front { NIL } else { tail };
            n.next = if front { head } else { NIL };
            n.charge
        };
        let list = self.list(seg);
        list.usage += charge;
        if front {
            list.head = i;
            if head == NIL {
                list.tail = i;
            } else {
                self.node(head).prev = i;
            }
        } else {
            list.tail = i;
            if tail == NIL {
                list.head = i;
            } else {
                self.node(tail).next = i;
            }
        }
    }

    /// Spills the young tail to the old head until the young segment fits.
    fn rebalance(&mut self) {
        while self.lists[YOUNG].usage > self.young_capacity {
            let t = self.lists[YOUNG].tail;
            if t == NIL {
                break;
            }
            self.unlink(t);
            self.link(t, OLD, true);
        }
    }

    /// Unlinks and frees slot `i`, returning its block.
    fn remove_slot(&mut self, i: u32) -> Option<Arc<Block>> {
        self.unlink(i);
        let n = self.node(i);
        let key = n.key;
        let block = n.block.take();
        self.map.remove(&key);
        self.free.push(i);
        block
    }

    /// True if `key` is cached (not counted, not marked as used).
    pub fn contains(&self, key: &CacheKey) -> bool {
        self.map.contains_key(key)
    }

    /// The block under `key`, marking it most recently used (a hit in the
    /// old segment promotes the entry to the young head).
    pub fn get(&mut self, key: &CacheKey) -> Option<Arc<Block>> {
        match self.map.get(key).copied() {
            Some(i) => {
                self.hits += 1;
                self.unlink(i);
                self.link(i, YOUNG, true);
                self.rebalance();
                self.node(i).block.clone()
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Inserts (or replaces) `key` as the most recently used entry, evicting
    /// least recently used entries until it fits. An entry larger than the
    /// whole shard is not kept (counted as inserted and evicted).
    pub fn insert(&mut self, key: CacheKey, block: Arc<Block>, charge: usize) {
        self.insert_at(key, block, charge, true);
    }

    /// Like [`LruShard::insert`], but at the midpoint (see the module docs):
    /// the young tail while the young segment has room, else the old head.
    pub fn insert_cold(&mut self, key: CacheKey, block: Arc<Block>, charge: usize) {
        self.insert_at(key, block, charge, false);
    }

    fn insert_at(&mut self, key: CacheKey, block: Arc<Block>, charge: usize, hot: bool) {
        self.inserts += 1;
        if let Some(&i) = self.map.get(&key) {
            self.remove_slot(i);
        }
        if charge > self.capacity {
            self.evictions += 1;
            return;
        }
        let node = Node {
            key,
            block: Some(block),
            charge,
            prev: NIL,
            next: NIL,
            seg: YOUNG,
        };
        let i = match self.free.pop() {
            Some(i) => {
                *self.node(i) = node;
                i
            }
            None => {
                let Ok(i) = u32::try_from(self.nodes.len()) else {
                    return;
                };
                if i == NIL {
                    return;
                }
                self.nodes.push(node);
                i
            }
        };
        if hot {
            self.link(i, YOUNG, true);
            self.rebalance();
        } else if self.lists[YOUNG].usage + charge <= self.young_capacity {
            self.link(i, YOUNG, false);
        } else {
            self.link(i, OLD, true);
        }
        self.map.insert(key, i);
        // Evict from the old tail, then the young tail; the new entry itself
        // last (it fits alone: charge <= capacity).
        while self.usage() > self.capacity {
            let victim = match (self.lists[OLD].tail, self.lists[YOUNG].tail) {
                (NIL, NIL) => break,
                (o, y) if o == i && y != NIL => y,
                (NIL, y) => y,
                (o, _) => o,
            };
            self.remove_slot(victim);
            self.evictions += 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index fixtures they built
mod tests {
    use super::*;

    fn blk() -> Arc<Block> {
        Arc::new(Block::raw(vec![0; 8]))
    }

    fn key(i: u64) -> CacheKey {
        CacheKey {
            extent_id: 1,
            offset: i,
        }
    }

    /// Walks both lists checking links, segments and usages.
    fn check(s: &LruShard) {
        let mut seen = 0;
        for seg in [YOUNG, OLD] {
            let (mut i, mut prev, mut usage) = (s.lists[seg].head, NIL, 0);
            while i != NIL {
                let n = &s.nodes[i as usize];
                assert_eq!((n.seg, n.prev), (seg, prev));
                usage += n.charge;
                seen += 1;
                prev = i;
                i = n.next;
            }
            assert_eq!(s.lists[seg].tail, prev);
            assert_eq!(s.lists[seg].usage, usage);
        }
        assert_eq!(seen, s.map.len());
        assert!(s.usage() <= s.capacity);
        assert!(s.lists[YOUNG].usage <= s.young_capacity || s.lists[YOUNG].head == NIL);
    }

    #[test]
    fn documented_example() {
        let mut s = LruShard::new(100);
        s.insert(key(1), blk(), 40);
        s.insert(key(2), blk(), 40);
        assert!(s.get(&key(1)).is_some());
        s.insert(key(3), blk(), 40);
        check(&s);
        assert!(s.get(&key(2)).is_none());
        assert!(s.get(&key(1)).is_some());
        assert!(s.get(&key(3)).is_some());
        assert_eq!((s.usage(), s.len()), (80, 2));
        assert_eq!((s.hits, s.misses, s.inserts, s.evictions), (3, 1, 3, 1));
    }

    #[test]
    fn normal_inserts_evict_in_lru_order_across_the_midpoint() {
        // Capacity 80 (young 50), entries of 10: eight fit.
        let mut s = LruShard::new(80);
        for i in 0..8 {
            s.insert(key(i), blk(), 10);
        }
        assert!(s.get(&key(0)).is_some(), "0 (in the old segment) promoted");
        for i in 8..14 {
            s.insert(key(i), blk(), 10);
            check(&s);
        }
        // The six least recently used went: 1..=6, in that order.
        let kept: Vec<u64> = (0..14).filter(|&i| s.get(&key(i)).is_some()).collect();
        assert_eq!(kept, vec![0, 7, 8, 9, 10, 11, 12, 13]);
    }

    #[test]
    fn documented_cold_example_scan_keeps_the_young_segment() {
        let mut s = LruShard::new(80);
        for i in 0..5 {
            s.insert(key(i), blk(), 10);
        }
        for i in 100..1000 {
            s.insert_cold(key(i), blk(), 10);
            check(&s);
        }
        let kept: Vec<u64> = (0..1000).filter(|&i| s.map.contains_key(&key(i))).collect();
        assert_eq!(kept, vec![0, 1, 2, 3, 4, 997, 998, 999]);
    }

    #[test]
    fn cold_inserts_fill_free_room_and_stay() {
        // An empty shard: the first 5 cold entries take the young room, the
        // next 3 the old segment; a long cold scan after that cycles the old
        // segment only.
        let mut s = LruShard::new(80);
        for i in 0..1000 {
            s.insert_cold(key(i), blk(), 10);
            check(&s);
        }
        for i in 0..5 {
            assert!(s.get(&key(i)).is_some(), "{i}");
        }
        assert_eq!(s.len(), 8);
    }

    #[test]
    fn a_small_cold_scan_is_promoted_on_its_second_pass() {
        let mut s = LruShard::new(80);
        for i in 0..5 {
            s.insert(key(i), blk(), 10);
        }
        // Pass 1 of a 2-entry scan: both wait in the old segment.
        for i in [50, 51] {
            assert!(s.get(&key(i)).is_none());
            s.insert_cold(key(i), blk(), 10);
        }
        // Pass 2 hits and promotes them, spilling 0 and 1 to the old head.
        for i in [50, 51] {
            assert!(s.get(&key(i)).is_some());
        }
        check(&s);
        // A large scan now cycles the old segment: 0 and 1 go, 50/51 stay.
        for i in 100..200 {
            s.insert_cold(key(i), blk(), 10);
        }
        let kept: Vec<u64> = (0..100).filter(|&i| s.map.contains_key(&key(i))).collect();
        assert_eq!(kept, vec![2, 3, 4, 50, 51]);
    }

    #[test]
    fn replace_oversized_and_slot_reuse() {
        let mut s = LruShard::new(100);
        s.insert(key(1), blk(), 30);
        s.insert(key(1), blk(), 50);
        assert_eq!((s.usage(), s.len()), (50, 1));
        s.insert(key(2), blk(), 101);
        assert_eq!((s.usage(), s.len(), s.evictions), (50, 1, 1));
        for i in 0..1000 {
            if i % 3 == 0 {
                s.insert_cold(key(i % 7), blk(), 20);
            } else {
                s.insert(key(i % 7), blk(), 20);
            }
            check(&s);
        }
        assert!(s.nodes.len() <= 8, "slots are reused: {}", s.nodes.len());
        // A cold entry too big for the old segment's share still fits.
        s.insert_cold(key(99), blk(), 90);
        check(&s);
        assert!(s.get(&key(99)).is_some());
    }
}
