//! A concurrent skiplist of internal keys, in the style of RocksDB's
//! `InlineSkipList`: readers never block, writers insert concurrently with one
//! compare-and-swap per level, and nothing is ever removed. Node layout,
//! unsafe accessors and key comparisons live in the private `node` module;
//! keys are compared in place, without allocating.
//!
//! # Search
//!
//! Standard descent from the head's top level. Two cache-miss savers: upper
//! links carry a *prefix bound* of their successor's key (see `node`), so a
//! level is usually dropped without loading the successor; and while the
//! successor is loaded, the next level's candidate is prefetched. A node
//! already found greater at the level above is not compared again.
//!
//! # Insertion
//!
//! Worked example, inserting `k` at height 2 into `head -> a -> c` (level 0)
//! and `head -> c` (level 1) where `a < k < c`: the search records the splice
//! `prev = [a, head]`, `next = [c, c]` with exact comparisons (levels above
//! the new height may use prefix bounds: only the descent matters there).
//! The node is written in full, then linked bottom-up: `k.next[0] = c`, CAS
//! `a.next[0]: c -> k`; then `k.link[1] = (c, prefix(c))`, CAS
//! `head.next[1]: c -> k`, then `fetch_min(prefix(k))` on `head`'s bound. If
//! a CAS fails because another writer linked a node after `prev[i]`, the
//! splice for that level is searched again from `prev[i]` (which still
//! precedes `k`: nodes are never removed).
//!
//! # Memory ordering
//!
//! - A node's bytes and its link for level `i` are written before the
//!   *Release* CAS that makes it reachable at level `i`; every reader and
//!   writer loads links with *Acquire*, so a reachable node is fully visible.
//! - After a successful CAS nobody but a later successful CAS (by a writer
//!   that found the node reachable, hence synchronized with it) changes that
//!   link, and key/value bytes are never written again.
//! - Prefix bounds and `max_height` are hints (Relaxed): a stale bound is
//!   only ever too large, which makes a search drop a level early (safe where
//!   bounds are used); the head's tower is fully initialized at construction,
//!   so a reader that sees a larger height just walks empty head levels.
//! - A search answers with the successor it loaded while deciding, never
//!   with a second load of the same link: in between, a concurrent insert
//!   may have linked a node that is still before the target.
//!
//! Duplicate internal keys are rejected: an exactly equal key found by the
//! search (or after a lost race at level 0) makes `insert` return false.

use std::cmp::Ordering;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering as Atomic};
use std::sync::Arc;

use super::arena::Arena;
pub use super::node::MAX_HEIGHT;
use super::node::{
    self, compare_to, key_prefix, new_node, prefetch, random_height, split_key, Node,
};

/// `key_prefix` of `n`'s user key, `u64::MAX` for null.
///
/// # Safety
/// `n` is null or a published node whose arena outlives the call.
unsafe fn prefix_of(n: *mut Node) -> u64 {
    if n.is_null() {
        return u64::MAX;
    }
    // SAFETY: `n` is not null, so by this function's contract it is a
    // published node (fully written before the Release CAS that linked it,
    // which the caller's Acquire load of the link synchronized with) in an
    // arena that outlives this call; `node::key` needs exactly that.
    key_prefix(split_key(unsafe { node::key(n) }).0)
}

/// The `oldest` hint of a new node of `user_key` whose level-0 successor
/// will be `succ`: `succ`'s own hint, or `succ` itself, when `succ` is an
/// older version of the same user key; null otherwise.
///
/// # Safety
/// `succ` is null or a published node whose arena outlives the call.
unsafe fn version_jump(user_key: &[u8], succ: *mut Node) -> *mut Node {
    if succ.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `succ` is non-null, so by the contract a published node (its
    // bytes and `oldest` were written before the Release CAS the caller's
    // Acquire load synchronized with) in an arena that outlives this call.
    let (succ_key, jump) = unsafe { (node::key(succ), node::oldest(succ).load(Atomic::Relaxed)) };
    if split_key(succ_key).0 != user_key {
        ptr::null_mut()
    } else if jump.is_null() {
        succ
    } else {
        jump
    }
}

/// The concurrent skiplist; see the module docs.
pub struct SkipList {
    arena: Arena,
    /// Sentinel with `MAX_HEIGHT` links and an empty key; never compared.
    head: NonNull<Node>,
    /// Height of the tallest tower so far (a hint, see module docs).
    max_height: AtomicUsize,
}

// SAFETY: all nodes live in the owned arena; shared mutation is limited to
// atomic links and bounds (as described in the module docs) and node bytes
// are immutable once published, so the list may be shared and sent across
// threads.
unsafe impl Send for SkipList {}
// SAFETY: see `Send` above.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list in a fresh 1 MiB-chunk arena.
    pub fn new() -> Self {
        Self::with_arena(Arena::new())
    }

    /// An empty list allocating from `arena`.
    pub fn with_arena(arena: Arena) -> Self {
        let head = new_node(&arena, MAX_HEIGHT, &[], None, &[]);
        SkipList {
            arena,
            head,
            max_height: AtomicUsize::new(1),
        }
    }

    /// Bytes held by the arena.
    pub fn memory_usage(&self) -> usize {
        self.arena.memory_usage()
    }

    /// Inserts `user_key ++ trailer -> value`. Safe to call from many threads
    /// at once. Returns false (and changes nothing visible) if an entry with
    /// the same internal key already exists.
    ///
    /// # Panics
    /// If the key or the value is 4 GiB or larger.
    #[allow(clippy::indexing_slicing)] // levels are < height <= MAX_HEIGHT, the arrays' length
    pub fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) -> bool {
        let height = random_height();
        let top = self
            .max_height
            .fetch_max(height, Atomic::Relaxed)
            .max(height);
        let kp = key_prefix(user_key);

        // Levels above the new node: only the descent matters.
        let (mut x, _) = self.descend(top, height, kp, |k| {
            compare_to(k, user_key, trailer) == Ordering::Less
        });
        // The splice: prev[i] < key < next[i] at every level i < height.
        let mut prev = [x; MAX_HEIGHT];
        let mut next = [ptr::null_mut(); MAX_HEIGHT];
        let mut known_greater = ptr::null_mut();
        for level in (0..height).rev() {
            let Some((p, n)) = self.find_splice(user_key, trailer, x, level, known_greater) else {
                return false;
            };
            prev[level] = p;
            next[level] = n;
            x = p;
            known_greater = n;
        }

        let node = new_node(&self.arena, height, user_key, Some(trailer), value).as_ptr();
        for level in 0..height {
            loop {
                // SAFETY: `node` was built by `new_node` in `self.arena` with
                // `height > level` links (`level >= 1` for the bound), and the
                // arena lives as long as `self`. It is not yet reachable at
                // this level, so this thread is the only writer of the link
                // (Relaxed: the Release CAS below publishes it). `next[level]`
                // is null or a node this thread loaded with Acquire, as
                // `prefix_of` requires.
                unsafe {
                    node::next(node, level).store(next[level], Atomic::Relaxed);
                    if level == 0 {
                        let jump = version_jump(user_key, next[0]);
                        node::oldest(node).store(jump, Atomic::Relaxed);
                    }
                    if level > 0 {
                        node::prefix_bound(node, level)
                            .store(prefix_of(next[level]), Atomic::Relaxed);
                    }
                }
                // SAFETY: prev[level] is the head (MAX_HEIGHT links) or a node
                // reached through a level-`level` link, and a node is linked
                // at a level only if its height exceeds it; nodes are never
                // freed while `self` lives.
                let slot = unsafe { node::next(prev[level], level) };
                if slot
                    .compare_exchange(next[level], node, Atomic::Release, Atomic::Relaxed)
                    .is_ok()
                {
                    if level > 0 {
                        // The successor is now `node`: tighten the bound.
                        // SAFETY: prev[level] has a link at `level` (see `slot`)
                        // and `level >= 1`, so the link has a prefix bound.
                        unsafe { node::prefix_bound(prev[level], level) }
                            .fetch_min(kp, Atomic::Relaxed);
                    }
                    break;
                }
                // Lost a race at this level; prev[level] still precedes the key.
                match self.find_splice(user_key, trailer, prev[level], level, ptr::null_mut()) {
                    Some((p, n)) => {
                        prev[level] = p;
                        next[level] = n;
                    }
                    None => {
                        // At level 0 a concurrent insert of the same key won.
                        // Above level 0 our node is already in the list (and an
                        // equal key cannot be), so just stop raising it.
                        debug_assert_eq!(level, 0, "duplicate key above level 0");
                        return level > 0;
                    }
                }
            }
        }
        true
    }

    /// Walks right at `level` from `start` (which precedes the key) with
    /// exact comparisons and returns `(prev, next)` with `prev < key < next`
    /// (`next` null at the end), or `None` if a node with exactly this key is
    /// linked at `level`. `known_greater` is a node known to follow the key.
    #[inline]
    fn find_splice(
        &self,
        user_key: &[u8],
        trailer: u64,
        start: *mut Node,
        level: usize,
        known_greater: *mut Node,
    ) -> Option<(*mut Node, *mut Node)> {
        let mut x = start;
        loop {
            // SAFETY: `x` is `start` (the head or a node linked at `level`,
            // per the callers) or a node reached through a level-`level`
            // link; either way its height exceeds `level`, and the arena
            // lives as long as `self`.
            let n = unsafe { node::next(x, level) }.load(Atomic::Acquire);
            if level > 0 {
                // If `n` stops us, the next level continues at x.next[level-1]:
                // load it in parallel with `n` instead of after it.
                // SAFETY: `x` has a link at `level` (above), hence also at
                // `level - 1`: a tower covers every level below its top.
                prefetch(unsafe { node::next(x, level - 1) }.load(Atomic::Relaxed));
            }
            if n.is_null() || n == known_greater {
                return Some((x, n));
            }
            // SAFETY: `n` is non-null, loaded with Acquire from a link that
            // only a Release CAS sets after the node was fully written, so
            // its key is initialized and visible; it is never freed or
            // changed while `self` lives.
            match compare_to(unsafe { node::key(n) }, user_key, trailer) {
                Ordering::Less => x = n,
                Ordering::Equal => return None,
                Ordering::Greater => return Some((x, n)),
            }
        }
    }

    /// Descends from level `top - 1` down to level `bottom` (inclusive),
    /// moving right while the successor's key satisfies `before`, and returns
    /// the last node reached (the head if none). `before` must hold for a
    /// prefix of the list; `stop_prefix` must satisfy: a key whose
    /// `key_prefix` exceeds it fails `before` (`u64::MAX` disables bounds).
    ///
    /// Bounds are used above level 0 only, so with `bottom == 0` the result
    /// is exact: `(x, n)` with `x` the last node satisfying `before` and `n`
    /// the successor loaded from it that does not (null at the end). Callers
    /// must use this `n` rather than reload `x.next[0]`: a concurrent insert
    /// may have put a node that still satisfies `before` in between.
    /// With `bottom > 0` only `x` is meaningful.
    #[inline]
    fn descend(
        &self,
        top: usize,
        bottom: usize,
        stop_prefix: u64,
        before: impl Fn(&[u8]) -> bool,
    ) -> (*mut Node, *mut Node) {
        let mut x = self.head.as_ptr();
        // A node found not `before` one level up: no need to compare it again.
        let mut last_bigger = ptr::null_mut();
        let mut level = top.min(MAX_HEIGHT);
        while level > bottom {
            level -= 1;
            loop {
                if level > 0 {
                    // SAFETY: `x` is the head (MAX_HEIGHT links, `level` <
                    // MAX_HEIGHT) or was reached through a link at `level` or
                    // above, so its height exceeds `level`, which is >= 1.
                    let bound = unsafe { node::prefix_bound(x, level) }.load(Atomic::Relaxed);
                    if bound > stop_prefix {
                        break; // the successor is certainly not `before`
                    }
                }
                // SAFETY: as for the bound: the height of `x` exceeds `level`.
                let n = unsafe { node::next(x, level) }.load(Atomic::Acquire);
                if level > 0 {
                    // See `find_splice`.
                    // SAFETY: the height of `x` exceeds `level > level - 1`.
                    prefetch(unsafe { node::next(x, level - 1) }.load(Atomic::Relaxed));
                }
                // SAFETY: evaluated only for a non-null `n`, loaded with
                // Acquire from a link set by a Release CAS after the node was
                // fully written; the arena lives as long as `self`.
                if !n.is_null() && n != last_bigger && before(unsafe { node::key(n) }) {
                    x = n;
                } else {
                    last_bigger = n;
                    break;
                }
            }
        }
        (x, last_bigger)
    }

    /// The last node satisfying `before` (the head if none) and its
    /// successor at that moment; see `descend`.
    #[inline]
    fn find_last(
        &self,
        stop_prefix: u64,
        before: impl Fn(&[u8]) -> bool,
    ) -> (*mut Node, *mut Node) {
        let top = self.max_height.load(Atomic::Relaxed);
        self.descend(top, 0, stop_prefix, before)
    }

    /// The level-0 successor of `x` (null at the end).
    #[inline]
    fn next_of(&self, x: *mut Node) -> *mut Node {
        // SAFETY: callers pass the head or a node of this list (a cursor's
        // current node); every node, and the head, has a level-0 link, and
        // the arena lives as long as `self`.
        unsafe { node::next(x, 0) }.load(Atomic::Acquire)
    }

    /// The first entry `>= (user_key, trailer)` in internal-key order.
    pub fn get_ge(&self, user_key: &[u8], trailer: u64) -> Option<(&[u8], &[u8])> {
        let (_, n) = self.find_last(key_prefix(user_key), |k| {
            compare_to(k, user_key, trailer) == Ordering::Less
        });
        if n.is_null() {
            return None;
        }
        // SAFETY: `n` is non-null, the successor `descend` loaded with
        // Acquire, so a fully written node; its bytes are never changed or
        // freed before the arena drops with `self`, which the returned
        // slices borrow.
        Some(unsafe { (node::key(n), node::value(n)) })
    }

    /// A cursor that keeps the list alive; starts invalid.
    pub fn cursor(self: &Arc<Self>) -> Cursor {
        Cursor {
            list: Arc::clone(self),
            node: ptr::null_mut(),
        }
    }
}

#[cfg(test)]
impl SkipList {
    /// Checks the structure while no insert runs: every level is strictly
    /// sorted, every node of a level is also on the level below, and every
    /// prefix bound is exact (all `fetch_min`s landed). Returns the number of
    /// nodes per level.
    pub(crate) fn check_invariants(&self) -> Vec<usize> {
        use std::collections::HashSet;
        let mut counts = Vec::new();
        let mut below: Option<HashSet<usize>> = None;
        for level in 0..MAX_HEIGHT {
            let mut seen = HashSet::new();
            let mut x = self.head.as_ptr();
            let mut last: Option<&[u8]> = None;
            loop {
                // SAFETY: `x` is the head (MAX_HEIGHT links) or was reached
                // through a link at `level`, so its height exceeds `level`.
                let n = unsafe { node::next(x, level) }.load(Atomic::Acquire);
                if level > 0 {
                    // SAFETY: as above, and `level >= 1`.
                    let bound = unsafe { node::prefix_bound(x, level) }.load(Atomic::Relaxed);
                    // SAFETY: `n` is null or a node published before our
                    // Acquire load of its link, in this list's arena.
                    let exact = unsafe { prefix_of(n) };
                    assert_eq!(bound, exact, "inexact bound at {level}");
                }
                if n.is_null() {
                    break;
                }
                // SAFETY: `n` is non-null, loaded with Acquire from a link of
                // this list, so a fully written node that lives with `self`.
                let k = unsafe { node::key(n) };
                if let Some(l) = last {
                    let o = crate::types::compare_internal_keys(l, k);
                    assert_eq!(o, Ordering::Less, "level {level} out of order");
                }
                if let Some(b) = &below {
                    assert!(b.contains(&(n as usize)), "node missing below {level}");
                }
                seen.insert(n as usize);
                last = Some(k);
                x = n;
            }
            if level == 0 {
                self.check_version_jumps();
            }
            counts.push(seen.len());
            below = Some(seen);
        }
        counts
    }
}

#[cfg(test)]
impl SkipList {
    /// Every `oldest` hint names a node of the same user key further along
    /// level 0 (see `node`, "Version jumps").
    fn check_version_jumps(&self) {
        use std::collections::HashMap;
        let mut order = Vec::new();
        let mut x = self.next_of(self.head.as_ptr());
        while !x.is_null() {
            order.push(x);
            x = self.next_of(x);
        }
        let at: HashMap<usize, usize> = order
            .iter()
            .enumerate()
            .map(|(i, n)| (*n as usize, i))
            .collect();
        for (i, &n) in order.iter().enumerate() {
            // SAFETY: `n` and its hint are nodes of this list, published
            // before the Acquire loads that reached them; no insert runs.
            let (jump, key) = unsafe { (node::oldest(n).load(Atomic::Relaxed), node::key(n)) };
            if jump.is_null() {
                continue;
            }
            let j = at.get(&(jump as usize)).copied();
            assert!(j.is_some_and(|j| j > i), "hint of node {i} not after it");
            // SAFETY: as above.
            let jump_key = unsafe { node::key(jump) };
            assert_eq!(
                split_key(jump_key).0,
                split_key(key).0,
                "hint of node {i}: other key"
            );
        }
    }
}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

/// A bidirectional position in a [`SkipList`]. Holds an `Arc` to the list so
/// the node it points at stays allocated. `prev` and the seeks are
/// `O(log n)` searches from the head; `next` follows one link.
pub struct Cursor {
    list: Arc<SkipList>,
    /// Current node; null when invalid. Never the head.
    node: *mut Node,
}

// SAFETY: `node` is null or a published node in the arena of `list`, which the
// cursor keeps alive; node bytes are immutable and links are atomics, so the
// cursor can move between and be read from threads.
unsafe impl Send for Cursor {}
// SAFETY: see `Send` above; `&Cursor` methods only read.
unsafe impl Sync for Cursor {}

impl Cursor {
    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        !self.node.is_null()
    }

    /// The current internal key (empty when invalid).
    pub fn key(&self) -> &[u8] {
        if self.node.is_null() {
            return &[];
        }
        // SAFETY: a non-null `node` was loaded with Acquire from a link of
        // `list` (every seek and step does that; the head is mapped to
        // null), so it is a fully written node, and `self.list` keeps its
        // arena alive for the returned borrow.
        unsafe { node::key(self.node) }
    }

    /// The current value (empty when invalid).
    pub fn value(&self) -> &[u8] {
        if self.node.is_null() {
            return &[];
        }
        // SAFETY: as in `key`: a non-null `node` is a fully written node of
        // `list` (Acquire-loaded), whose arena `self.list` keeps alive.
        unsafe { node::value(self.node) }
    }

    /// Maps the head (meaning "before the first entry") to invalid.
    fn set(&mut self, x: *mut Node) {
        self.node = if x == self.list.head.as_ptr() {
            ptr::null_mut()
        } else {
            x
        };
    }

    /// Positions on the first entry.
    pub fn seek_to_first(&mut self) {
        self.node = self.list.next_of(self.list.head.as_ptr());
    }

    /// Positions on the last entry.
    pub fn seek_to_last(&mut self) {
        let (x, _) = self.list.find_last(u64::MAX, |_| true);
        self.set(x);
    }

    /// Positions on the first entry `>= target` (an internal key).
    pub fn seek(&mut self, target: &[u8]) {
        let (uk, tr) = split_key(target);
        let (_, n) = self
            .list
            .find_last(key_prefix(uk), |k| compare_to(k, uk, tr) == Ordering::Less);
        self.land(n);
    }

    /// Makes `n` (null, or a node loaded with Acquire from a link of the
    /// list) current and starts loading the two nodes a forward scan visits
    /// next: the level-0 successor (`next`) and the oldest version of the
    /// key (`seek_forward`'s jump). A scan over a memtable full of hot rows
    /// otherwise waits for one cache miss per node it lands on, right after
    /// it lands (~11% of the server's samples under sysbench
    /// `oltp_read_write`, docs/benchmarks.md "Prefetching the scan's next
    /// nodes"); this way the loads overlap the caller's work on the current
    /// row.
    fn land(&mut self, n: *mut Node) {
        self.node = n;
        if n.is_null() {
            return;
        }
        // SAFETY: `n` is a published node of `list` (see above), whose arena
        // `self.list` keeps alive; the links are atomics, read Relaxed here
        // because the pointers are only handed to `prefetch`, a hint that
        // never dereferences them.
        let (next, jump) = unsafe {
            (
                node::next(n, 0).load(Atomic::Relaxed),
                node::oldest(n).load(Atomic::Relaxed),
            )
        };
        prefetch(next);
        prefetch(jump);
    }

    /// Positions on the first entry `>= target`, like [`Cursor::seek`], but
    /// starting from the current entry when that is before `target`: it
    /// jumps over the current key's older versions (`oldest`, see `node`)
    /// and walks a few level-0 links before it falls back to a seek from
    /// the head. A scan leaving a row with many versions pays two node
    /// loads instead of one per version or a full descent.
    pub fn seek_forward(&mut self, target: &[u8]) {
        /// Level-0 steps tried before a seek from the head (~20 loads).
        const WALK: usize = 4;
        let (uk, tr) = split_key(target);
        let mut x = self.node;
        // A node that is the cursor's current one, or was loaded with
        // Acquire from a link of `list`, or is a published node's `oldest`
        // (written before that node was published, so visible with it), is
        // fully written, and `self.list` keeps its arena alive: that is
        // what `node::key` and `node::oldest` need below.
        // SAFETY: `x` is the cursor's current node (see above), if not null.
        if x.is_null() || compare_to(unsafe { node::key(x) }, uk, tr) != Ordering::Less {
            return self.seek(target);
        }
        // SAFETY: `x` is the current node, non-null (see above).
        let jump = unsafe { node::oldest(x) }.load(Atomic::Relaxed);
        // SAFETY: `jump` is a published node's `oldest` (see above), if not null.
        if !jump.is_null() && compare_to(unsafe { node::key(jump) }, uk, tr) == Ordering::Less {
            x = jump;
        }
        for _ in 0..WALK {
            let n = self.list.next_of(x);
            // SAFETY: `n` was loaded with Acquire by `next_of` (see above).
            if n.is_null() || compare_to(unsafe { node::key(n) }, uk, tr) != Ordering::Less {
                self.land(n);
                return;
            }
            x = n;
        }
        self.seek(target);
    }

    /// Positions on the last entry `<= target` (an internal key).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        let (uk, tr) = split_key(target);
        let (x, _) = self.list.find_last(key_prefix(uk), |k| {
            compare_to(k, uk, tr) != Ordering::Greater
        });
        self.set(x);
    }

    /// Advances; becomes invalid past the last entry. No-op when invalid.
    pub fn next(&mut self) {
        if !self.node.is_null() {
            self.land(self.list.next_of(self.node));
        }
    }

    /// Steps back; becomes invalid before the first entry. No-op when invalid.
    pub fn prev(&mut self) {
        if self.node.is_null() {
            return;
        }
        // SAFETY: as in `key` (a fully written node of `list`, kept alive by
        // `self.list`); the slice is only used during the search.
        let (uk, tr) = split_key(unsafe { node::key(self.node) });
        let (x, _) = self
            .list
            .find_last(key_prefix(uk), |k| compare_to(k, uk, tr) == Ordering::Less);
        self.set(x);
    }
}

#[cfg(test)]
#[path = "skiplist_tests.rs"]
mod tests;
