//! The sharded block cache: decoded blocks shared by all extent readers.
//!
//! Keys are `(extent_id, block offset)`. Extent ids are never reused, so an
//! entry can never be stale and nothing is ever invalidated; blocks of
//! deleted extents simply age out.
//!
//! The cache is split into up to 16 shards (a power of two, each at least
//! 512 KiB so a shard holds many 16 KiB blocks); a key's shard is chosen by
//! the top bits of its hash. Each shard is an independent byte-bounded LRU
//! (`lru::LruShard`) behind its own mutex, which guards its list, map,
//! usage and counters. The charge of an entry is the block's memory plus a
//! fixed per-entry overhead ([`ENTRY_OVERHEAD`]), so `usage_bytes <=
//! capacity_bytes` bounds real memory, apart from blocks that are evicted
//! while a reader still holds them (freed when the reader drops them).
//!
//! Example: `BlockCache::new(8 << 20)` has 16 shards of 512 KiB; a 16 KiB
//! block costs ~16.2 KiB, so each shard holds ~31 blocks.

mod lru;

use crate::extent::Block;
use lru::LruShard;
use parking_lot::Mutex;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

/// Most shards used.
const MAX_SHARDS: usize = 16;
/// Smallest shard worth splitting off.
const MIN_SHARD_BYTES: usize = 512 << 10;

/// Bytes charged per entry on top of the block: slab node, map slot and
/// the `Arc` header, rounded up.
pub const ENTRY_OVERHEAD: usize = 96;

/// Identifies a block: its extent's never-reused id and its offset in the extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Unique id of the extent (never reused).
    pub extent_id: u64,
    /// Offset of the block inside the extent.
    pub offset: u64,
}

/// How a block read on a cache miss enters the cache
/// ([`crate::ReadOptions::cache_priority`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CachePriority {
    /// As the most recently used entry (point reads, short range scans).
    #[default]
    High,
    /// At the midpoint of its shard's LRU list, for bulk scans (a full-table
    /// aggregate, an index build): it takes free room, but a scan larger
    /// than the cache cycles through the old segment only and does not push
    /// out what was cached before it (see `lru.rs`).
    /// InnoDB's midpoint insertion and RocksDB's `fill_cache = false` serve
    /// the same end.
    Low,
    /// Not cached at all: compaction reads its inputs this way, since they
    /// are deleted when it ends (RocksDB's compactions set `fill_cache =
    /// false` for the same reason). Blocks already cached still serve hits.
    Bypass,
}

/// Counters of a [`BlockCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found the block.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Calls to `insert`.
    pub inserts: u64,
    /// Entries dropped to make room (or too large to keep at all).
    pub evictions: u64,
    /// Bytes charged now.
    pub usage_bytes: u64,
    /// The configured bound.
    pub capacity_bytes: u64,
}

/// A 64-bit mix of the two key halves (also picks the shard).
#[inline]
fn hash_key(k: &CacheKey) -> u64 {
    let mut h = k.extent_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k.offset;
    h ^= h >> 32;
    h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
    h ^ (h >> 32)
}

/// Cheap hasher for the shard maps (keys are two u64s, not attacker-chosen
/// strings, so SipHash's DoS resistance is not needed).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0xd6e8_feb8_6659_fd93);
        h ^ (h >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(23) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Builds [`KeyHasher`]s.
#[derive(Clone, Copy, Default)]
pub(crate) struct KeyHasherBuilder;

impl BuildHasher for KeyHasherBuilder {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher::default()
    }
}

/// A sharded, byte-bounded LRU cache of decoded blocks.
pub struct BlockCache {
    shards: Box<[Mutex<LruShard>]>,
    /// log2 of the shard count.
    shard_bits: u32,
    capacity: usize,
}

impl BlockCache {
    /// A cache bounded to `capacity_bytes` of charge.
    pub fn new(capacity_bytes: usize) -> Arc<BlockCache> {
        let mut n = 1usize;
        while n < MAX_SHARDS && capacity_bytes / (n * 2) >= MIN_SHARD_BYTES {
            n *= 2;
        }
        let per_shard = capacity_bytes / n;
        let shards = (0..n)
            .map(|_| Mutex::new(LruShard::new(per_shard)))
            .collect();
        Arc::new(BlockCache {
            shards,
            shard_bits: n.trailing_zeros(),
            capacity: capacity_bytes,
        })
    }

    fn shard(&self, key: &CacheKey) -> &Mutex<LruShard> {
        // Top `shard_bits` bits of the hash: `i < 2^shard_bits == shards.len()`.
        let i = hash_key(key).checked_shr(64 - self.shard_bits).unwrap_or(0) as usize;
        #[allow(clippy::indexing_slicing)] // i < shards.len(), see above
        &self.shards[i]
    }

    /// The cached block, if present (marks it recently used).
    pub fn get(&self, key: CacheKey) -> Option<Arc<Block>> {
        self.shard(&key).lock().get(&key)
    }

    /// True if `key` is cached; neither counted as a hit or miss nor
    /// marked as used (a readahead's check before it reads).
    pub fn contains(&self, key: CacheKey) -> bool {
        self.shard(&key).lock().contains(&key)
    }

    /// Caches `block` under `key`, evicting older blocks as needed.
    pub fn insert(&self, key: CacheKey, block: Arc<Block>) {
        let charge = block.memory_usage() + ENTRY_OVERHEAD;
        self.shard(&key).lock().insert(key, block, charge);
    }

    /// Caches `block` under `key` at the midpoint of its shard's LRU list
    /// (low priority, for blocks a bulk scan reads): it takes free room, but
    /// once the shard is full it goes before anything in the young segment,
    /// so a scan larger than the cache does not flush the cache (see `lru.rs`).
    pub fn insert_low_priority(&self, key: CacheKey, block: Arc<Block>) {
        let charge = block.memory_usage() + ENTRY_OVERHEAD;
        self.shard(&key).lock().insert_cold(key, block, charge);
    }

    /// [`BlockCache::insert`] or [`BlockCache::insert_low_priority`].
    pub fn insert_with(&self, key: CacheKey, block: Arc<Block>, priority: CachePriority) {
        match priority {
            CachePriority::High => self.insert(key, block),
            CachePriority::Low => self.insert_low_priority(key, block),
            CachePriority::Bypass => {}
        }
    }

    /// Current counters, summed over the shards.
    pub fn stats(&self) -> CacheStats {
        let mut s = CacheStats {
            capacity_bytes: self.capacity as u64,
            ..CacheStats::default()
        };
        for shard in self.shards.iter() {
            let g = shard.lock();
            s.hits += g.hits;
            s.misses += g.misses;
            s.inserts += g.inserts;
            s.evictions += g.evictions;
            s.usage_bytes += g.usage() as u64;
        }
        s
    }

    /// Number of cached blocks.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// True if nothing is cached.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index fixtures they built
mod tests {
    use super::*;

    fn block(n: usize) -> Arc<Block> {
        Arc::new(Block::raw(vec![0u8; n]))
    }

    fn key(e: u64, o: u64) -> CacheKey {
        CacheKey {
            extent_id: e,
            offset: o,
        }
    }

    #[test]
    fn shard_count_scales_with_capacity() {
        assert_eq!(BlockCache::new(0).shards.len(), 1);
        assert_eq!(BlockCache::new(100 << 10).shards.len(), 1);
        assert_eq!(BlockCache::new(1 << 20).shards.len(), 2);
        assert_eq!(BlockCache::new(8 << 20).shards.len(), 16);
        assert_eq!(BlockCache::new(1 << 30).shards.len(), 16);
    }

    #[test]
    fn stats_count_hits_misses_inserts() {
        let c = BlockCache::new(1 << 20);
        assert!(c.get(key(1, 0)).is_none());
        let b = block(100);
        c.insert(key(1, 0), b.clone());
        let got = c.get(key(1, 0)).expect("hit");
        assert!(Arc::ptr_eq(&got, &b));
        assert!(c.get(key(2, 0)).is_none());
        assert!(c.get(key(1, 1)).is_none());
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.inserts, s.evictions), (1, 3, 1, 0));
        assert_eq!(s.usage_bytes as usize, b.memory_usage() + ENTRY_OVERHEAD);
        assert_eq!(s.capacity_bytes, 1 << 20);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn eviction_keeps_usage_within_capacity() {
        let cap = 2 << 20;
        let c = BlockCache::new(cap);
        for i in 0..2000u64 {
            c.insert(
                key(i / 10, i * 16384),
                block(16384 + (i as usize % 5) * 100),
            );
            assert!(c.stats().usage_bytes <= cap as u64);
        }
        let s = c.stats();
        assert!(s.evictions > 1000, "{s:?}");
        assert!(
            s.usage_bytes > cap as u64 / 2,
            "cache should stay well used: {s:?}"
        );
        assert_eq!(s.inserts, 2000);
        // Recently inserted blocks survive, the oldest are gone.
        assert!(c.get(key(199, 1999 * 16384)).is_some());
        assert!(c.get(key(0, 0)).is_none());
    }

    #[test]
    fn tiny_cache_keeps_nothing_and_stays_bounded() {
        let c = BlockCache::new(1000);
        c.insert(key(1, 0), block(4096));
        assert!(c.get(key(1, 0)).is_none());
        let s = c.stats();
        assert_eq!((s.usage_bytes, s.evictions), (0, 1));
    }

    #[test]
    fn concurrent_use_is_safe_and_bounded() {
        let cap = 1 << 20;
        let c = BlockCache::new(cap);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let c = &c;
                s.spawn(move || {
                    for i in 0..500u64 {
                        let k = key(t, i % 100);
                        if c.get(k).is_none() {
                            c.insert(k, block(4000));
                        }
                    }
                });
            }
        });
        let s = c.stats();
        assert!(s.usage_bytes <= cap as u64);
        assert_eq!(s.hits + s.misses, 2000);
        assert_eq!(s.inserts, s.misses);
    }
}
