//! A chunked, thread-safe bump allocator for memtable nodes.
//!
//! Memory comes from chunks of `chunk_size` bytes (1 MiB by default). Each
//! chunk starts with a small header holding an atomic `used` offset; an
//! allocation is one `fetch_add` on the current chunk's offset, so many
//! threads allocate at once without a lock. When the offset runs past the
//! end, the thread takes the refill lock, installs a fresh chunk (unless
//! another thread already did) and retries. Requests larger than a quarter
//! of a chunk get a dedicated chunk of their own, so a huge value never
//! wastes most of a regular chunk.
//!
//! Nothing is ever freed individually: all chunks are released together when
//! the arena is dropped (with its memtable).
//!
//! Worked example with a 64-byte chunk (header = 16 bytes): `alloc(20)`
//! rounds to 24 and returns `chunk+16` (used 16 -> 40); `alloc(8)` returns
//! `chunk+40` (used -> 48); `alloc(24)` sees `48 + 24 > 64`, installs a new
//! chunk and returns `new+16`. The last 16 bytes of the first chunk are waste.
//!
//! Invariants:
//! - `current` always points at the header of a live, initialized chunk.
//! - Every chunk is recorded in `chunks` (with its layout) before it can be
//!   used, and is deallocated only in `Drop`.
//! - A byte range `[off, off+size)` of a chunk is handed out at most once,
//!   because the offsets come from a single atomic `fetch_add`.

use std::alloc::{self, Layout};
use std::mem::{align_of, size_of};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Default chunk size: 1 MiB.
pub const DEFAULT_CHUNK_SIZE: usize = 1 << 20;

/// Alignment of every allocation (enough for `u64` and atomic pointers).
pub const ALIGN: usize = 8;

const _: () = assert!(ALIGN >= align_of::<AtomicPtr<u8>>() && ALIGN >= align_of::<u64>());

/// Header at the start of every regular chunk.
#[repr(C)]
struct ChunkHeader {
    /// Offset of the next free byte (starts at `HEADER`). May overshoot `cap`
    /// after failed attempts; such a chunk is simply full.
    used: AtomicUsize,
    /// Total bytes of the chunk, header included.
    cap: usize,
}

const HEADER: usize = size_of::<ChunkHeader>();
const _: () = assert!(HEADER.is_multiple_of(ALIGN));

/// Smallest chunk accepted, so that a chunk always holds its header plus data.
const MIN_CHUNK_SIZE: usize = 256;

/// A thread-safe bump allocator; see the module docs.
pub struct Arena {
    chunk_size: usize,
    /// The chunk allocations are carved from (Release on install, Acquire on use).
    current: AtomicPtr<ChunkHeader>,
    /// Every chunk ever allocated, for `Drop`. The mutex is also the refill
    /// lock: chunk installation happens only while holding it.
    chunks: Mutex<Vec<(NonNull<u8>, Layout)>>,
    /// Bytes of all chunks allocated so far.
    memory_usage: AtomicUsize,
}

// SAFETY: the arena owns its chunks exclusively (raw pointers to memory it
// allocated). Shared access goes through atomics (`current`, `used`) and the
// `chunks` mutex, and each allocated range is handed to exactly one caller, so
// using an `&Arena` from many threads is sound, as is moving it to another.
unsafe impl Send for Arena {}
// SAFETY: see `Send` above.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena with 1 MiB chunks.
    pub fn new() -> Self {
        Self::with_chunk_size(DEFAULT_CHUNK_SIZE)
    }

    /// An arena with chunks of `chunk_size` bytes (at least 256, rounded up to 8).
    pub fn with_chunk_size(chunk_size: usize) -> Self {
        let chunk_size = round_up(chunk_size.max(MIN_CHUNK_SIZE));
        let mut chunks = Vec::new();
        let first = new_chunk(&mut chunks, chunk_size);
        Arena {
            chunk_size,
            current: AtomicPtr::new(init_header(first, chunk_size)),
            chunks: Mutex::new(chunks),
            memory_usage: AtomicUsize::new(chunk_size),
        }
    }

    /// Returns `size` bytes (rounded up to a multiple of 8), 8-aligned,
    /// uninitialized, exclusively the caller's, valid until the arena drops.
    ///
    /// # Panics
    /// If `size` overflows `isize` or the process is out of memory.
    pub fn alloc(&self, size: usize) -> NonNull<u8> {
        let size = round_up(size.max(1));
        if size > self.chunk_size / 4 {
            return self.alloc_dedicated(size);
        }
        loop {
            let chunk = self.current.load(Ordering::Acquire);
            // SAFETY: `current` always points at an initialized header of a
            // chunk that lives until the arena drops (invariants above); the
            // Acquire load pairs with the Release store in `refill`, so the
            // header's initialization is visible.
            let header = unsafe { &*chunk };
            // Relaxed: the counter only partitions the chunk; no other data is
            // published through it.
            let off = header.used.fetch_add(size, Ordering::Relaxed);
            if off <= header.cap && size <= header.cap - off {
                // SAFETY: `off + size <= cap`, so the range lies inside the
                // chunk's allocation, and `chunk` carries that allocation's
                // provenance (it was made from the allocation pointer).
                let p = unsafe { chunk.cast::<u8>().add(off) };
                // SAFETY: derived from a non-null allocation pointer by an
                // in-bounds offset.
                return unsafe { NonNull::new_unchecked(p) };
            }
            self.refill(chunk);
        }
    }

    /// Bytes of all chunks allocated so far (what the arena holds from the OS).
    pub fn memory_usage(&self) -> usize {
        self.memory_usage.load(Ordering::Relaxed)
    }

    /// Installs a new chunk unless another thread already replaced `full`.
    #[cold]
    fn refill(&self, full: *mut ChunkHeader) {
        let mut chunks = self.chunks.lock();
        if self.current.load(Ordering::Relaxed) != full {
            return; // Someone refilled while we waited for the lock.
        }
        let base = new_chunk(&mut chunks, self.chunk_size);
        self.memory_usage
            .fetch_add(self.chunk_size, Ordering::Relaxed);
        // Release: publishes the header written by `init_header`.
        self.current
            .store(init_header(base, self.chunk_size), Ordering::Release);
    }

    #[cold]
    fn alloc_dedicated(&self, size: usize) -> NonNull<u8> {
        let mut chunks = self.chunks.lock();
        let p = new_chunk(&mut chunks, size);
        self.memory_usage.fetch_add(size, Ordering::Relaxed);
        p
    }
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for (p, layout) in self.chunks.get_mut().drain(..) {
            // SAFETY: `p` was returned by `alloc::alloc(layout)` in
            // `new_chunk` and is freed exactly once, here. `&mut self` proves
            // no allocation from this arena is still borrowed through it.
            unsafe { alloc::dealloc(p.as_ptr(), layout) };
        }
    }
}

/// Rounds up to a multiple of [`ALIGN`].
///
/// # Panics
/// On overflow (a request near `usize::MAX` cannot be satisfied anyway).
fn round_up(n: usize) -> usize {
    match n.checked_add(ALIGN - 1) {
        Some(v) => v & !(ALIGN - 1),
        None => panic!("arena allocation of {n} bytes overflows"),
    }
}

/// Allocates a chunk of `size` bytes and records it in `chunks`.
fn new_chunk(chunks: &mut Vec<(NonNull<u8>, Layout)>, size: usize) -> NonNull<u8> {
    let layout = match Layout::from_size_align(size, ALIGN) {
        Ok(l) => l,
        Err(_) => panic!("arena chunk of {size} bytes overflows isize"),
    };
    // SAFETY: `layout` has a non-zero size (callers pass at least
    // MIN_CHUNK_SIZE or a rounded, non-zero request).
    let raw = unsafe { alloc::alloc(layout) };
    let Some(p) = NonNull::new(raw) else {
        alloc::handle_alloc_error(layout)
    };
    chunks.push((p, layout));
    p
}

/// Writes a fresh header at the start of `base` and returns it.
fn init_header(base: NonNull<u8>, cap: usize) -> *mut ChunkHeader {
    let header = base.as_ptr().cast::<ChunkHeader>();
    // SAFETY: `base` is a fresh, 8-aligned allocation of `cap >= MIN_CHUNK_SIZE`
    // bytes, so a header fits; no other thread can see it yet.
    unsafe {
        header.write(ChunkHeader {
            used: AtomicUsize::new(HEADER),
            cap,
        })
    };
    header
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Fills `len` bytes at `p` with `tag`.
    fn fill(p: NonNull<u8>, len: usize, tag: u8) {
        // SAFETY: the test owns `len` bytes at `p` (just allocated).
        unsafe { std::ptr::write_bytes(p.as_ptr(), tag, len) };
    }

    fn check(p: NonNull<u8>, len: usize, tag: u8) -> bool {
        // SAFETY: `p` points at `len` initialized bytes owned by the test.
        let s = unsafe { std::slice::from_raw_parts(p.as_ptr(), len) };
        s.iter().all(|&b| b == tag)
    }

    #[test]
    fn allocations_are_aligned_disjoint_and_survive_refills() {
        let arena = Arena::with_chunk_size(256);
        let mut got = Vec::new();
        for i in 0..200usize {
            let len = 1 + i % 50;
            let p = arena.alloc(len);
            assert_eq!(p.as_ptr() as usize % ALIGN, 0);
            fill(p, len, i as u8);
            got.push((p, len, i as u8));
        }
        for &(p, len, tag) in &got {
            assert!(check(p, len, tag), "allocation {tag} was overwritten");
        }
        assert!(arena.memory_usage() > 256, "refills must be counted");
    }

    #[test]
    fn oversized_requests_get_their_own_chunk() {
        let arena = Arena::with_chunk_size(1024);
        let small = arena.alloc(16);
        fill(small, 16, 1);
        let before = arena.memory_usage();
        let big = arena.alloc(10_000);
        fill(big, 10_000, 2);
        assert_eq!(arena.memory_usage(), before + 10_000);
        // The regular chunk keeps serving small requests after the big one.
        let small2 = arena.alloc(16);
        assert_eq!(small2.as_ptr() as usize, small.as_ptr() as usize + 16);
        assert!(check(small, 16, 1) && check(big, 10_000, 2));
    }

    #[test]
    fn zero_and_exact_sizes() {
        let arena = Arena::with_chunk_size(256);
        let a = arena.alloc(0);
        let b = arena.alloc(0);
        assert_ne!(a, b, "zero-size requests still get distinct addresses");
        assert_eq!(arena.memory_usage(), 256);
        // A request of exactly chunk/4 stays in the regular chunk.
        let c = arena.alloc(64);
        assert_eq!(arena.memory_usage(), 256);
        fill(c, 64, 9);
        assert!(check(c, 64, 9));
    }

    #[test]
    fn concurrent_allocations_never_overlap() {
        // Under Miri a few refills per thread are enough to race them.
        let per_thread = if cfg!(miri) { 150 } else { 2000 };
        let arena = Arc::new(Arena::with_chunk_size(512));
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let arena = Arc::clone(&arena);
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..per_thread {
                        let len = 8 + (i * 7 + usize::from(t)) % 120;
                        let p = arena.alloc(len);
                        fill(p, len, t);
                        mine.push((p, len));
                    }
                    for &(p, len) in &mine {
                        assert!(check(p, len, t), "another thread wrote into our bytes");
                    }
                    // Addresses only, for the overlap check on the main thread.
                    mine.iter()
                        .map(|&(p, len)| (p.as_ptr() as usize, len))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<(usize, usize)> = Vec::new();
        for t in threads {
            all.extend(t.join().expect("allocator thread panicked"));
        }
        all.sort_unstable();
        for w in all.windows(2) {
            if let [(a, alen), (b, _)] = w {
                assert!(a + alen <= *b, "ranges overlap");
            }
        }
    }
}
