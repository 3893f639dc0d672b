//! A small per-thread pool of byte buffers for block reads.
//!
//! Why: a point read that misses the block cache reads a ~4 KiB data block
//! into a fresh buffer and inserts it into the cache, which evicts (and
//! frees) an older block. Under the contest's random reads (8 MiB block
//! cache, 1M keys) that allocate/free pair ran on every get, and glibc's
//! free of 4 KiB chunks (coalescing with free neighbours) was ~10 % of the
//! read phase's CPU (docs/benchmarks.md, "Block buffers reused"). A dropped
//! block now gives its buffer back here, and the next block read on the
//! same thread takes it: the thread that inserts a block is usually the one
//! whose insert evicted the last one, so the buffers circulate per thread
//! without a lock.
//!
//! Worked example: thread T reads block A (pool empty: allocates 4,120
//! bytes), caches it; later T's insert of block B evicts A, whose drop
//! gives A's buffer to T's pool; T's next miss takes it (resized to the new
//! block's length, so only a length difference is zero-filled).
//!
//! Bounds: at most [`MAX_KEPT`] buffers per thread, each of capacity at most
//! [`MAX_CAPACITY`] (a larger one, e.g. a decompressed block of a large
//! value, goes back to the allocator).

use std::cell::RefCell;

/// Buffers kept per thread.
pub(crate) const MAX_KEPT: usize = 8;
/// Largest capacity kept (bytes).
pub(crate) const MAX_CAPACITY: usize = 64 << 10;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of exactly `len` bytes (their contents are unspecified: old
/// bytes of a reused buffer, or zeros): a kept buffer of capacity between
/// `len` and twice `len` if the thread has one, else a new one. The upper
/// bound matters: the block cache charges a block its buffer's capacity, so
/// a small block in a large reused buffer would crowd the cache.
pub(crate) fn take(len: usize) -> Vec<u8> {
    let reused = POOL
        .try_with(|p| {
            let mut p = p.borrow_mut();
            let fits = |b: &Vec<u8>| b.capacity() >= len && b.capacity() / 2 <= len;
            let at = p.iter().rposition(fits)?;
            Some(p.swap_remove(at))
        })
        .ok()
        .flatten();
    let mut buf = reused.unwrap_or_default();
    buf.resize(len, 0);
    buf
}

/// Keeps `buf` for a later [`take`] on this thread, if it is small enough
/// and the pool is not full (else it is freed).
pub(crate) fn give(buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > MAX_CAPACITY {
        return;
    }
    // During thread teardown the pool may be gone: the buffer is freed.
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if p.len() < MAX_KEPT {
                p.push(buf);
            }
        }
    });
}

/// Buffers kept by this thread (tests).
#[cfg(test)]
pub(crate) fn kept() -> usize {
    POOL.with(|p| p.borrow().len())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_is_taken_again_with_the_asked_length() {
        // Each test runs on its own thread: the pool starts empty.
        assert_eq!(kept(), 0);
        let mut a = take(4096);
        assert_eq!(a.len(), 4096);
        a.fill(7);
        let ptr = a.as_ptr();
        give(a);
        assert_eq!(kept(), 1);
        let b = take(4000);
        assert_eq!((b.len(), b.as_ptr()), (4000, ptr), "the same allocation");
        assert_eq!(kept(), 0);
        // Longer than any kept buffer: a new one, zero-filled.
        give(b);
        let c = take(5000);
        assert_eq!(c.len(), 5000);
        assert!(c.iter().all(|&x| x == 0));
        assert_eq!(kept(), 1, "the short buffer stays kept");
    }

    #[test]
    fn a_buffer_more_than_twice_as_large_is_not_taken() {
        give(Vec::with_capacity(16 << 10));
        let small = take(4096);
        assert!(
            small.capacity() < 16 << 10,
            "a fresh buffer, not the 16 KiB one"
        );
        assert_eq!(kept(), 1);
        let big = take(9000);
        assert_eq!(big.capacity(), 16 << 10, "9,000 bytes may use it");
        assert_eq!(kept(), 0);
    }

    #[test]
    fn the_pool_is_bounded_in_count_and_size() {
        for _ in 0..MAX_KEPT + 5 {
            give(vec![0u8; 100]);
        }
        assert_eq!(kept(), MAX_KEPT);
        for _ in 0..MAX_KEPT {
            let _ = take(60);
        }
        assert_eq!(kept(), 0);
        give(vec![0u8; MAX_CAPACITY + 1]);
        give(Vec::new());
        assert_eq!(kept(), 0);
    }

    #[test]
    fn pools_are_per_thread() {
        give(vec![1u8; 64]);
        let other = std::thread::spawn(kept).join().unwrap();
        assert_eq!((kept(), other), (1, 0));
    }
}
