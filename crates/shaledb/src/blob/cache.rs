//! The value cache (`Options::blob_cache_size`, docs/format-blob.md section
//! 5): an LRU of checked `key || value` entries by (file, offset), plus
//! *single flight*: while one reader reads a record from the device, other
//! readers of the same record wait for it instead of reading it too. That is
//! what makes threads scanning the same keys at once (they run in lockstep,
//! all missing the same value at the same moment) read each value once.

use crate::cache::{BlockCache, CacheKey};
use crate::error::Result;
use crate::extent::Block;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::Arc;

/// A read in progress: done when `done` is set.
#[derive(Default)]
struct Flight {
    done: Mutex<bool>,
    cv: Condvar,
}

/// The shared value cache of a [`super::BlobStore`].
pub(crate) struct ValueCache {
    lru: Arc<BlockCache>,
    flights: Mutex<HashMap<(u64, u64), Arc<Flight>>>,
    /// The reader threads of scan readahead (`None`: no readahead).
    pub readahead: Option<super::readahead::ReadaheadPool>,
}

/// Marks a flight done and wakes its waiters, also on error or panic.
struct Landing<'a> {
    cache: &'a ValueCache,
    key: (u64, u64),
    flight: Arc<Flight>,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        self.cache.flights.lock().remove(&self.key);
        *self.flight.done.lock() = true;
        self.flight.cv.notify_all();
    }
}

impl ValueCache {
    /// A cache of `bytes`, with `readahead_threads` reader threads for
    /// scan readahead (0: none).
    pub fn new(bytes: usize, readahead_threads: usize) -> Result<ValueCache> {
        Ok(ValueCache {
            lru: BlockCache::new(bytes),
            flights: Mutex::new(HashMap::new()),
            readahead: super::readahead::ReadaheadPool::start(readahead_threads)?,
        })
    }

    fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        self.lru.get(CacheKey {
            extent_id: file,
            offset,
        })
    }

    /// The cached entry of (file, offset), or `read`'s (which returns the
    /// checked `key || value` and is cached). If another reader is reading
    /// the same record, waits for it and takes its entry; if it failed,
    /// reads itself (and meets the same error).
    pub fn get_or_read(
        &self,
        file: u64,
        offset: u64,
        read: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Arc<Block>> {
        if let Some(hit) = self.get(file, offset) {
            return Ok(hit);
        }
        let key = (file, offset);
        let mine = Arc::new(Flight::default());
        let waiting = {
            let mut flights = self.flights.lock();
            match flights.get(&key) {
                Some(f) => Some(f.clone()),
                None => {
                    flights.insert(key, mine.clone());
                    None
                }
            }
        };
        if let Some(f) = waiting {
            let mut done = f.done.lock();
            while !*done {
                f.cv.wait(&mut done);
            }
            drop(done);
            if let Some(hit) = self.get(file, offset) {
                return Ok(hit);
            }
            // The reader failed (or its entry was evicted at once).
            return self.read_into(file, offset, read);
        }
        let _landing = Landing {
            cache: self,
            key,
            flight: mine,
        };
        self.read_into(file, offset, read)
    }

    /// The cached entry of (file, offset), or `read`'s (checked `key ||
    /// value`, then cached), without single flight: a concurrent reader of
    /// the same record may read it too (both entries are the same bytes;
    /// the later insert replaces the earlier).
    pub fn get_or_read_alone(
        &self,
        file: u64,
        offset: u64,
        read: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Arc<Block>> {
        match self.get(file, offset) {
            Some(hit) => Ok(hit),
            None => self.read_into(file, offset, read),
        }
    }

    /// Readahead: reads (file, offset) with `read` into the cache unless
    /// it is cached or a read of it is in flight. Returns whether it read;
    /// an error is dropped (the scan's own read meets and reports it).
    pub fn prefetch(&self, file: u64, offset: u64, read: impl FnOnce() -> Result<Vec<u8>>) -> bool {
        let key = (file, offset);
        let mine = Arc::new(Flight::default());
        {
            // Both checks under the flights lock: a landing read inserts
            // its entry before it leaves `flights`, so a record is always
            // in one of the two while it is being or has been read.
            let mut flights = self.flights.lock();
            let cached = self.lru.contains(CacheKey {
                extent_id: file,
                offset,
            });
            if cached || flights.contains_key(&key) {
                return false;
            }
            flights.insert(key, mine.clone());
        }
        let _landing = Landing {
            cache: self,
            key,
            flight: mine,
        };
        self.read_into(file, offset, read).is_ok()
    }

    fn read_into(
        &self,
        file: u64,
        offset: u64,
        read: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Arc<Block>> {
        let block = Arc::new(Block::raw(read()?));
        self.lru.insert(
            CacheKey {
                extent_id: file,
                offset,
            },
            block.clone(),
        );
        Ok(block)
    }

    /// (hits, misses, bytes charged).
    pub fn stats(&self) -> (u64, u64, u64) {
        let s = self.lru.stats();
        (s.hits, s.misses, s.usage_bytes)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn concurrent_misses_of_one_record_read_it_once() {
        let cache = Arc::new(ValueCache::new(1 << 20, 0).unwrap());
        let reads = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (cache, reads) = (cache.clone(), reads.clone());
                std::thread::spawn(move || {
                    let b = cache
                        .get_or_read(3, 16, || {
                            reads.fetch_add(1, Ordering::SeqCst);
                            // Long enough that the others arrive meanwhile.
                            std::thread::sleep(std::time::Duration::from_millis(100));
                            Ok(b"kvalue".to_vec())
                        })
                        .unwrap();
                    assert_eq!(b.contents(), b"kvalue");
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert!(cache.flights.lock().is_empty());
    }

    #[test]
    fn a_point_read_alone_reads_a_miss_caches_it_and_then_hits() {
        let cache = ValueCache::new(1 << 20, 0).unwrap();
        let e = cache
            .get_or_read_alone(4, 32, || Ok(b"kv".to_vec()))
            .unwrap();
        assert_eq!(e.contents(), b"kv");
        assert!(
            cache.flights.lock().is_empty(),
            "no flight for a point read"
        );
        let hit = cache.get_or_read_alone(4, 32, || unreachable!()).unwrap();
        assert_eq!(hit.contents(), b"kv");
        // A failed read caches nothing: the next read tries again.
        let err = cache.get_or_read_alone(4, 64, || {
            Err(crate::error::Error::corruption("f", 64, "bad"))
        });
        assert!(err.is_err());
        let again = cache
            .get_or_read_alone(4, 64, || Ok(b"k2".to_vec()))
            .unwrap();
        assert_eq!(again.contents(), b"k2");
        assert_eq!(cache.stats().0, 1, "one hit");
    }

    #[test]
    fn a_prefetch_reads_a_record_once_and_a_scan_then_hits_it() {
        let cache = ValueCache::new(1 << 20, 0).unwrap();
        assert!(cache.prefetch(2, 64, || Ok(b"kv".to_vec())));
        // Cached now: neither another prefetch nor the scan reads it again.
        assert!(!cache.prefetch(2, 64, || unreachable!()));
        assert_eq!(
            cache
                .get_or_read(2, 64, || unreachable!())
                .unwrap()
                .contents(),
            b"kv"
        );
        assert_eq!(cache.stats().0, 1, "the prefetch's check is not a hit");
        // A failed prefetch caches nothing and leaves no flight behind.
        assert!(
            !cache.prefetch(2, 128, || Err(crate::error::Error::corruption(
                "f", 128, "bad"
            )))
        );
        assert!(cache.flights.lock().is_empty());
        assert_eq!(
            cache
                .get_or_read(2, 128, || Ok(b"k2".to_vec()))
                .unwrap()
                .contents(),
            b"k2"
        );
    }

    #[test]
    fn a_prefetch_does_not_read_a_record_in_flight() {
        let cache = Arc::new(ValueCache::new(1 << 20, 0).unwrap());
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let reader = {
            let cache = cache.clone();
            std::thread::spawn(move || {
                cache
                    .get_or_read(5, 0, || {
                        started_tx.send(()).unwrap();
                        std::thread::sleep(std::time::Duration::from_millis(100));
                        Ok(b"kv".to_vec())
                    })
                    .unwrap();
            })
        };
        started_rx.recv().unwrap();
        assert!(!cache.prefetch(5, 0, || unreachable!()));
        reader.join().unwrap();
    }

    #[test]
    fn a_failed_read_lets_the_waiters_read_themselves() {
        let cache = ValueCache::new(1 << 20, 0).unwrap();
        let err = cache.get_or_read(1, 0, || Err(crate::error::Error::corruption("f", 0, "bad")));
        assert!(err.is_err());
        assert!(cache.flights.lock().is_empty());
        let ok = cache.get_or_read(1, 0, || Ok(b"kv".to_vec())).unwrap();
        assert_eq!(ok.contents(), b"kv");
        let (hits, misses, _) = cache.stats();
        assert_eq!((hits, misses), (0, 2));
        cache.get_or_read(1, 0, || unreachable!()).unwrap();
        assert_eq!(cache.stats().0, 1);
    }
}
