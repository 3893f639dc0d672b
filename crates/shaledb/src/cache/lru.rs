//! One shard of the block cache: a byte-bounded LRU list.
//!
//! Entries live in a slab (`nodes`) linked into a doubly linked list by
//! index, most recently used at `head`; a hash map finds a key's slot. All
//! operations are O(1). The owning [`super::BlockCache`] guards each shard
//! with its own mutex, so nothing here is synchronized.
//!
//! Invariants: `usage` is the sum of the charges of the linked nodes and is
//! `<= capacity` after every call; every index in `map`, `head`, `tail` and
//! the links is `< nodes.len()` and names a linked node; `free` lists the
//! unlinked slots.
//!
//! Example (capacity 100): insert A(40), B(40), get(A), insert C(40) evicts
//! B (the least recently used), leaving the list `C, A` with usage 80.
//!
//! A low-priority insert ([`LruShard::insert_cold`], for blocks read by a
//! bulk scan) links the new entry at the *tail* instead: it fills free room
//! like any insert, but once the shard is full the next insert evicts it
//! first. So a scan of a table larger than the cache displaces at most one
//! cached block per shard (the tail when it started), and the blocks cached
//! before it keep serving hits. Example (capacity 100): insert A(40),
//! B(40), insert_cold S1(20), insert_cold S2(20) evicts S1 (the tail), not
//! A; the list is `B, A, S2`.

use super::{CacheKey, KeyHasherBuilder};
use crate::extent::Block;
use std::collections::HashMap;
use std::sync::Arc;

/// "No node" in links.
const NIL: u32 = u32::MAX;

struct Node {
    key: CacheKey,
    /// `None` only for a free slot.
    block: Option<Arc<Block>>,
    charge: usize,
    prev: u32,
    next: u32,
}

/// A byte-bounded LRU map from [`CacheKey`] to blocks.
pub(crate) struct LruShard {
    map: HashMap<CacheKey, u32, KeyHasherBuilder>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    usage: usize,
    capacity: usize,
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
            head: NIL,
            tail: NIL,
            usage: 0,
            capacity,
            hits: 0,
            misses: 0,
            inserts: 0,
            evictions: 0,
        }
    }

    /// Bytes charged now.
    pub fn usage(&self) -> usize {
        self.usage
    }

    /// Entries held.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    // Indices passed here come from `map`, `head`/`tail` or node links, all
    // of which only ever hold indices of existing slots (see invariants).
    #[allow(clippy::indexing_slicing)] // index proven in range by the invariants
    fn node(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let n = self.node(i);
            (n.prev, n.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.node(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.node(next).prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let n = self.node(i);
            n.prev = NIL;
            n.next = old;
        }
        if old == NIL {
            self.tail = i;
        } else {
            self.node(old).prev = i;
        }
        self.head = i;
    }

    fn push_back(&mut self, i: u32) {
        let old = self.tail;
        {
            let n = self.node(i);
            n.prev = old;
            n.next = NIL;
        }
        if old == NIL {
            self.head = i;
        } else {
            self.node(old).next = i;
        }
        self.tail = i;
    }

    /// Unlinks and frees slot `i`, returning its block.
    fn remove_slot(&mut self, i: u32) -> Option<Arc<Block>> {
        self.unlink(i);
        let n = self.node(i);
        let charge = n.charge;
        let key = n.key;
        let block = n.block.take();
        self.usage -= charge;
        self.map.remove(&key);
        self.free.push(i);
        block
    }

    /// The block under `key`, marking it most recently used.
    pub fn get(&mut self, key: &CacheKey) -> Option<Arc<Block>> {
        match self.map.get(key).copied() {
            Some(i) => {
                self.hits += 1;
                self.unlink(i);
                self.push_front(i);
                self.node(i).block.clone()
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Inserts (or replaces) `key`, evicting least recently used entries
    /// until it fits. An entry larger than the whole shard is not kept
    /// (counted as inserted and evicted).
    pub fn insert(&mut self, key: CacheKey, block: Arc<Block>, charge: usize) {
        self.insert_at(key, block, charge, true);
    }

    /// Like [`LruShard::insert`], but the entry becomes the *least* recently
    /// used one (see the module docs): it is the next to be evicted unless
    /// a `get` promotes it first.
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
        while self.usage + charge > self.capacity && self.tail != NIL {
            self.remove_slot(self.tail);
            self.evictions += 1;
        }
        let node = Node {
            key,
            block: Some(block),
            charge,
            prev: NIL,
            next: NIL,
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
            self.push_front(i);
        } else {
            self.push_back(i);
        }
        self.map.insert(key, i);
        self.usage += charge;
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

    #[test]
    fn documented_example() {
        let mut s = LruShard::new(100);
        s.insert(key(1), blk(), 40);
        s.insert(key(2), blk(), 40);
        assert!(s.get(&key(1)).is_some());
        s.insert(key(3), blk(), 40);
        assert!(s.get(&key(2)).is_none());
        assert!(s.get(&key(1)).is_some());
        assert!(s.get(&key(3)).is_some());
        assert_eq!((s.usage(), s.len()), (80, 2));
        assert_eq!((s.hits, s.misses, s.inserts, s.evictions), (3, 1, 3, 1));
    }

    #[test]
    fn cold_inserts_fill_room_then_evict_each_other() {
        // The module docs' example.
        let mut s = LruShard::new(100);
        s.insert(key(1), blk(), 40);
        s.insert(key(2), blk(), 40);
        s.insert_cold(key(10), blk(), 20);
        assert_eq!((s.usage(), s.evictions), (100, 0), "free room is filled");
        s.insert_cold(key(11), blk(), 20);
        assert_eq!(s.evictions, 1);
        assert!(
            s.get(&key(10)).is_none(),
            "the previous cold entry went first"
        );
        // A long "scan" of cold inserts keeps the hot entries.
        for i in 12..1000 {
            s.insert_cold(key(i), blk(), 20);
            assert!(s.usage() <= 100);
        }
        assert!(s.get(&key(1)).is_some() && s.get(&key(2)).is_some());
        // A normal insert evicts from the tail too: the last cold entry.
        s.insert(key(3), blk(), 20);
        assert!(s.get(&key(999)).is_none());
        assert!(s.get(&key(3)).is_some() && s.get(&key(1)).is_some());
        assert_eq!(s.usage(), 100);
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
            s.insert(key(i % 7), blk(), 20);
            assert!(s.usage() <= 100);
        }
        assert!(s.nodes.len() <= 8, "slots are reused: {}", s.nodes.len());
    }
}
