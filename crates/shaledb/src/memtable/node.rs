//! Skiplist node layout in the arena, the unsafe accessors for it, and the
//! allocation-free key comparisons used by the search.
//!
//! # Layout
//!
//! One arena allocation per node. The node pointer points at the level-0
//! successor; the links of higher levels sit *below* it, so the key is at a
//! fixed offset whatever the height and a short tower shares the key's cache
//! line:
//!
//! ```text
//!  base                                         node
//!  | link[h-1] | ... | link[1] | next0 | oldest | key_len u32 | value_len u32 | key | value |
//!    16 bytes each:                8 B     8 B
//!    next ptr + prefix bound
//! ```
//!
//! The key is the full internal key `user_key ++ trailer (u64 LE)`, so it is
//! handed out as a slice. A 16-byte user key with a 100-byte value and the
//! expected one extra link costs 24 + 24 + 100 + 16 = 164 bytes (+ rounding).
//!
//! # Version jumps (`oldest`)
//!
//! A row updated many times between flushes has one node per version, newest
//! first, side by side at level 0. A scan that has returned the newest
//! visible version must get past all the older ones: one cache miss per node
//! stepped, or a seek from the head (~20 misses). X-Engine keeps a key's
//! versions off the main list for this reason; here each node carries
//! `oldest`, a later node *of the same user key* (the oldest version of the
//! key linked when this node was, null if there was none), so
//! [`super::skiplist::Cursor::seek_forward`] jumps over the versions in one
//! load. The inserter sets it from its level-0 successor before the node is
//! published and nobody writes it again. It is only a hint: a version linked
//! later with an older sequence (parallel memtable inserts) lands after it,
//! and the jump then walks the rest; the jump target always has the node's
//! user key, so it lies after the node and before every later user key.
//!
//! # Branching factor 2
//!
//! RocksDB uses 4. Here the prefix bounds below remove most loads of nodes
//! that end a level, so the cost is the nodes moved *onto*: about
//! `(1-p)/p * log_{1/p}(n)`, i.e. `1.44 ln n` for p = 1/2 against
//! `2.16 ln n` for p = 1/4. Measured on 1M random 16-byte keys: about 30%
//! fewer node visits and 25-35% faster inserts and gets, for ~7% more memory
//! (one 16-byte link per node on average instead of a third).
//!
//! # Prefix bounds (levels >= 1)
//!
//! Each upper link also holds `prefix`: an upper bound of the first 8 bytes
//! (big-endian, zero-padded) of its successor's user key. If `prefix >
//! prefix(target)`, the successor is certainly greater than the target, so a
//! search can drop a level *without touching the successor* — one cache miss
//! saved per level. Successors only ever get replaced by smaller keys
//! (inserts land between a node and its successor), so writers keep the
//! bound with `fetch_min` after each successful link. Until that `fetch_min`
//! lands, the bound may be too large, which only makes a search drop a level
//! early: always safe for a search that continues below, so the bound is
//! used only where the search continues (never at level 0, and never for the
//! levels an insert links into). A bound read ahead of the link it belongs
//! to (already lowered for a successor the reader does not see yet) only
//! makes the search compare exactly. So all prefix accesses are Relaxed.
//!
//! Example: `head.link[1] = (c, prefix "c\0\0\0\0\0\0\0")`; a search for `b`
//! drops from level 1 to 0 at `head` without loading `c`.

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64};

use super::arena::Arena;

/// Tallest tower. With branching 2 a table of `n` entries wants `log2(n)`
/// levels: 20 covers 1M entries exactly; at 4M the top level holds ~4 nodes,
/// a negligible extra walk.
pub const MAX_HEIGHT: usize = 20;

/// A node reaches each further level with probability 1/2 (1 random bit).
const BRANCHING_BITS: u32 = 1;

/// The fixed part of a node; the key and value follow it.
#[repr(C)]
pub(super) struct Node {
    next0: AtomicPtr<Node>,
    /// A later node of the same user key (see "Version jumps"); null if none.
    oldest: AtomicPtr<Node>,
    key_len: u32,
    value_len: u32,
}

/// A link of level >= 1.
#[repr(C)]
struct Link {
    next: AtomicPtr<Node>,
    /// Upper bound of `key_prefix` of `next`'s user key (`u64::MAX` for null).
    prefix: AtomicU64,
}

const NODE_HEADER: usize = size_of::<Node>();
const LINK: usize = size_of::<Link>();
const TRAILER: usize = 8;

// `Link::next` and `Node::next0` are both at offset 0, so the level-`l`
// successor pointer is always at `node - l * LINK`.
const _: () = assert!(LINK == 16 && NODE_HEADER == 24);
// Lengths are stored as u32 and widened with `as usize`, lossless here.
const _: () = assert!(size_of::<usize>() >= size_of::<u32>());

/// The level-`level` successor slot of `node`.
///
/// # Safety
/// `node` was built by [`new_node`] with a height greater than `level`, and
/// its arena outlives `'a`.
#[inline]
pub(super) unsafe fn next<'a>(node: *mut Node, level: usize) -> &'a AtomicPtr<Node> {
    // SAFETY: for level 0 this is `next0` (offset 0 of the repr(C) node); for
    // level l >= 1 it is `Link::next` (offset 0) of the link `l * LINK` bytes
    // below. By the contract (height > level) that link lies inside the
    // node's arena allocation, which `node` was derived from (so the offset
    // keeps its provenance), and `new_node` initialized it. It is 8-aligned:
    // the allocation is, and the tower is a multiple of 16 bytes. The arena
    // outlives `'a`, and the slot is only ever accessed atomically.
    unsafe {
        &*node
            .cast::<u8>()
            .sub(level * LINK)
            .cast::<AtomicPtr<Node>>()
    }
}

/// The prefix bound of `node`'s level-`level` link.
///
/// # Safety
/// As for [`next`], and `level >= 1`.
#[inline]
pub(super) unsafe fn prefix_bound<'a>(node: *mut Node, level: usize) -> &'a AtomicU64 {
    debug_assert!(level >= 1);
    // SAFETY: the link of `level >= 1` starts `level * LINK` bytes below the
    // node, inside the allocation, initialized and 8-aligned (see `next`);
    // `prefix` follows `next` in the repr(C) `Link` and is only accessed
    // atomically.
    unsafe { &(*node.cast::<u8>().sub(level * LINK).cast::<Link>()).prefix }
}

/// The version-jump slot of `node` (see "Version jumps").
///
/// # Safety
/// `node` was built by [`new_node`] and its arena outlives `'a`.
#[inline]
pub(super) unsafe fn oldest<'a>(node: *mut Node) -> &'a AtomicPtr<Node> {
    // SAFETY: `node` points at a `Node` header written by `new_node` (which
    // initialized `oldest`), inside an arena that outlives `'a`; the field is
    // only ever accessed atomically.
    unsafe { &(*node).oldest }
}

/// The internal key stored in `node`.
///
/// # Safety
/// `node` is a fully written node visible to this thread (reached through an
/// Acquire load or built by it), and its arena outlives `'a`.
#[inline]
pub(super) unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: by the contract `node` points at a header `new_node` wrote,
    // followed by `key_len` initialized key bytes in the same allocation;
    // they were written before the node was published (or by this thread)
    // and are never modified again, so reading them races with nothing. The
    // arena outlives `'a`.
    unsafe {
        let len = ptr::addr_of!((*node).key_len).read() as usize;
        std::slice::from_raw_parts(node.cast::<u8>().add(NODE_HEADER), len)
    }
}

/// The value stored in `node`. Same contract as [`key`].
#[inline]
pub(super) unsafe fn value<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: as in `key`: `new_node` wrote the header, then `key_len` key
    // bytes and `value_len` value bytes right after them in one allocation,
    // all before publication and never modified again.
    unsafe {
        let klen = ptr::addr_of!((*node).key_len).read() as usize;
        let vlen = ptr::addr_of!((*node).value_len).read() as usize;
        std::slice::from_raw_parts(node.cast::<u8>().add(NODE_HEADER + klen), vlen)
    }
}

/// Allocates and fully writes a node of `height` (1..=MAX_HEIGHT) with null
/// links; the key is `user_key ++ trailer` (no trailer for the head).
///
/// # Panics
/// If the key or the value is 4 GiB or larger.
pub(super) fn new_node(
    arena: &Arena,
    height: usize,
    user_key: &[u8],
    trailer: Option<u64>,
    value: &[u8],
) -> NonNull<Node> {
    assert!((1..=MAX_HEIGHT).contains(&height));
    let trailer_len = if trailer.is_some() { TRAILER } else { 0 };
    let key_len = user_key.len().saturating_add(trailer_len);
    let (Ok(klen), Ok(vlen)) = (u32::try_from(key_len), u32::try_from(value.len())) else {
        panic!("memtable keys and values must be smaller than 4 GiB");
    };
    let tower = (height - 1) * LINK;
    // Cannot overflow on a 64-bit target: every term is below 4 GiB.
    let size = tower + NODE_HEADER + key_len + value.len();
    let base = arena.alloc(size).as_ptr();
    // SAFETY: `base` is a fresh, 8-aligned, exclusive allocation of `size`
    // bytes: exactly the tower, the header, the key and the value written
    // below, every offset inside it. The `Link`s and the `Node` (align 8)
    // start at multiples of 16 from `base`, so they are aligned. Nothing else
    // can see the memory yet, and the source slices are caller memory, so
    // the copies do not overlap. `node` is an in-bounds offset of a non-null
    // pointer, hence non-null.
    unsafe {
        let links = base.cast::<Link>();
        for i in 0..height - 1 {
            links.add(i).write(Link {
                next: AtomicPtr::new(ptr::null_mut()),
                prefix: AtomicU64::new(u64::MAX),
            });
        }
        let node = base.add(tower).cast::<Node>();
        node.write(Node {
            next0: AtomicPtr::new(ptr::null_mut()),
            oldest: AtomicPtr::new(ptr::null_mut()),
            key_len: klen,
            value_len: vlen,
        });
        let kp = node.cast::<u8>().add(NODE_HEADER);
        ptr::copy_nonoverlapping(user_key.as_ptr(), kp, user_key.len());
        if let Some(t) = trailer {
            let t = t.to_le_bytes();
            ptr::copy_nonoverlapping(t.as_ptr(), kp.add(user_key.len()), TRAILER);
        }
        ptr::copy_nonoverlapping(value.as_ptr(), kp.add(key_len), value.len());
        NonNull::new_unchecked(node)
    }
}

/// Splits an internal key into user key and trailer, like
/// [`crate::types::user_key`] / [`crate::types::trailer`] (short keys: trailer 0).
#[inline]
pub(super) fn split_key(ikey: &[u8]) -> (&[u8], u64) {
    match ikey.split_last_chunk::<TRAILER>() {
        Some((uk, t)) => (uk, u64::from_le_bytes(*t)),
        None => (ikey, 0),
    }
}

/// The first 8 bytes of a user key as a big-endian integer, zero-padded.
/// Monotone: `a <= b` (bytewise) implies `key_prefix(a) <= key_prefix(b)`.
#[inline]
pub(super) fn key_prefix(user_key: &[u8]) -> u64 {
    match user_key.first_chunk::<8>() {
        Some(c) => u64::from_be_bytes(*c),
        None => {
            let mut b = [0u8; 8];
            for (d, s) in b.iter_mut().zip(user_key) {
                *d = *s;
            }
            u64::from_be_bytes(b)
        }
    }
}

/// Orders a stored key against `(user_key, trailer)` exactly like
/// [`crate::types::compare_internal_keys`]: user key ascending, trailer descending.
#[inline]
pub(super) fn compare_to(node_key: &[u8], user_key: &[u8], trailer: u64) -> Ordering {
    // Stored keys always carry a trailer; the `None` arm mirrors `split_key`.
    let Some((nuk, ntr)) = node_key.split_last_chunk::<TRAILER>() else {
        return node_key.cmp(user_key).then(trailer.cmp(&0));
    };
    // Fast path: the first 8 bytes as big-endian integers order like the
    // bytes and usually decide, without a call to memcmp. The trailer is read
    // only on a user-key tie: it often sits on the node's next cache line.
    if let (Some(a), Some(b)) = (nuk.first_chunk::<8>(), user_key.first_chunk::<8>()) {
        let (a, b) = (u64::from_be_bytes(*a), u64::from_be_bytes(*b));
        if a != b {
            return a.cmp(&b);
        }
    }
    match nuk.cmp(user_key) {
        Ordering::Equal => trailer.cmp(&u64::from_le_bytes(*ntr)),
        o => o,
    }
}

/// Hints the CPU to start loading the cache line at `p` (which may be null).
#[inline(always)]
pub(super) fn prefetch(p: *const Node) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only needs SSE, which every x86_64 CPU has; a
    // prefetch is a hint that never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A height in `1..=MAX_HEIGHT`, `P(height > h) = 2^-h`.
pub(super) fn random_height() -> usize {
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            // RandomState keys differ per thread and per call.
            RandomState::new().hash_one(std::thread::current().id()) | 1
        });
    }
    let r = STATE.with(|s| {
        // xorshift64*; the high bits of the product are well mixed.
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    });
    let extra = (r.leading_zeros() / BRANCHING_BITS) as usize;
    1 + extra.min(MAX_HEIGHT - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{compare_internal_keys, make_internal_key, ValueKind};

    #[test]
    fn heights_follow_branching_two() {
        // Miri is ~1000x slower; 4000 draws still put the bounds 5 sigma out.
        let (n, band) = if cfg!(miri) {
            (4_000, 0.45..0.55)
        } else {
            (200_000, 0.48..0.52)
        };
        let mut at_least_2 = 0usize;
        for _ in 0..n {
            let h = random_height();
            assert!((1..=MAX_HEIGHT).contains(&h));
            at_least_2 += usize::from(h >= 2);
        }
        let frac = at_least_2 as f64 / n as f64;
        assert!(band.contains(&frac), "P(h>=2) = {frac}");
    }

    #[test]
    fn prefix_is_monotone_and_compare_matches_types() {
        let keys: [&[u8]; 9] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"abcdefgi",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for a in keys {
            for b in keys {
                if a <= b {
                    assert!(key_prefix(a) <= key_prefix(b), "{a:?} {b:?}");
                }
                for (sa, sb) in [(1, 1), (1, 2), (2, 1)] {
                    let ia = make_internal_key(a, sa, ValueKind::Put);
                    let ib = make_internal_key(b, sb, ValueKind::Delete);
                    let (uk, tr) = split_key(&ib);
                    assert_eq!(compare_to(&ia, uk, tr), compare_internal_keys(&ia, &ib));
                }
            }
        }
    }

    #[test]
    fn node_round_trips_key_value_and_links() {
        let arena = Arena::with_chunk_size(4096);
        for height in [1, 2, MAX_HEIGHT] {
            let trailer = crate::types::pack_trailer(1, ValueKind::Put);
            let n = new_node(&arena, height, b"user", Some(trailer), b"value").as_ptr();
            // SAFETY: `n` was just built with `height` levels in `arena`.
            unsafe {
                assert_eq!(key(n), make_internal_key(b"user", 1, ValueKind::Put));
                assert_eq!(value(n), b"value");
                for l in 0..height {
                    assert!(next(n, l)
                        .load(std::sync::atomic::Ordering::Relaxed)
                        .is_null());
                    if l > 0 {
                        let p = prefix_bound(n, l).load(std::sync::atomic::Ordering::Relaxed);
                        assert_eq!(p, u64::MAX);
                    }
                }
            }
        }
    }
}
