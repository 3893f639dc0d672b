//! [`MergingIterator`]: merges sorted children into one sorted stream, in
//! both directions, like LevelDB's `MergingIterator`.
//!
//! Design: the valid children sit in a binary heap of child indices,
//! ordered by their current keys — a min-heap moving forward, a max-heap
//! moving backward — so the current entry is the heap's top. `next()` steps
//! the top child and sifts it down: about two comparisons when one child
//! supplies a run of keys, `O(log n)` at worst. A linear scan over the
//! children (`n - 1` comparisons per step) was measured against it with the
//! ignored `bench_merge_strategies` test (release build, best of three, on a
//! loaded 2-core machine; `run` = consecutive keys taken from one child):
//!
//! ```text
//! children            2     3     4     6     8    12    16
//! run=1   scan ns    12    19    45    59    74   123   172
//!         heap ns    14    20    25    42    55    63    70
//! run=64  scan ns    12    22    30    60    74   108   151
//!         heap ns    14    21    24    21    26    23    24
//! ```
//!
//! The scan wins by ~2 ns at 2 children, ties at 3, and loses from 4 on
//! (by 2-6x when children supply runs, the common case after compaction),
//! so the heap is kept.
//!
//! Runner-up: while one child supplies a run of keys only the top moves, so
//! the best of the other children (`runner_up`, the better of heap slots 1
//! and 2) stays the same. A step compares the top's new key with it alone
//! (one comparison instead of sift-down's two) and sifts only when the top
//! no longer comes first; the runner-up is recomputed after any heap change.
//! With a single child (a table after a full compaction) a step compares
//! nothing.
//!
//! Direction switch: moving forward, every child other than the current one
//! is positioned *after* the current key; moving backward, *before* it. So
//! `prev()` after `next()` first repositions those children with
//! `seek_for_prev(current key)` (and `next()` after `prev()` with
//! `seek(current key)`), then rebuilds the heap in the new order. Example
//! with children `A = [a1, a3]`, `B = [a2, a4]` positioned forward on `a2`
//! (A sits on `a3`): `prev()` moves A to `a1` via `seek_for_prev(a2)`, steps
//! B back (B becomes invalid), and the largest, `a1`, is current.
//!
//! Keys from different children are never identical (each entry has its own
//! sequence number); should they be, the switch still skips an equal key so
//! that no entry is yielded twice in a row.
//!
//! Errors: a child error is returned from the failing call and leaves the
//! merging iterator invalid; reposition it with a seek to continue.

use super::{BoxedIterator, InternalIterator};
use crate::error::Result;
use crate::extent::block::cmp_internal;
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

impl Direction {
    /// The ordering of a child key that puts it nearer the heap's top.
    fn first(self) -> Ordering {
        match self {
            Direction::Forward => Ordering::Less,
            Direction::Reverse => Ordering::Greater,
        }
    }
}

/// Merges children sorted by [`crate::types::compare_internal_keys`].
pub struct MergingIterator<'a> {
    children: Vec<BoxedIterator<'a>>,
    /// Indices of the valid children, a heap ordered by `direction`
    /// (top = current entry). Empty = the merging iterator is invalid.
    heap: Vec<usize>,
    direction: Direction,
    /// Copy of the current key during a direction switch.
    scratch: Vec<u8>,
    /// The child of heap slot 1 or 2 that comes first (`None`: not known,
    /// or fewer than two valid children). Valid until the heap changes.
    runner_up: Option<usize>,
}

/// True if child `a` belongs above child `b` in a heap of `dir`. Compared
/// in line ([`cmp_internal`]): one or two compares per step of a scan,
/// where a `memcmp` call for short keys cost more than the comparison.
#[inline]
fn above(children: &[BoxedIterator<'_>], dir: Direction, a: usize, b: usize) -> bool {
    match (children.get(a), children.get(b)) {
        (Some(x), Some(y)) => cmp_internal(x.key(), y.key()) == dir.first(),
        _ => false,
    }
}

/// Restores the heap property below position `i`.
fn sift_down(children: &[BoxedIterator<'_>], dir: Direction, heap: &mut [usize], mut i: usize) {
    loop {
        let l = 2 * i + 1;
        let Some(&left) = heap.get(l) else {
            return;
        };
        let (mut m, mut child) = (l, left);
        if let Some(&right) = heap.get(l + 1) {
            if above(children, dir, right, left) {
                (m, child) = (l + 1, right);
            }
        }
        let Some(&parent) = heap.get(i) else {
            return;
        };
        if !above(children, dir, child, parent) {
            return;
        }
        // Both positions were read just above, so they are in range.
        heap.swap(i, m);
        i = m;
    }
}

impl<'a> MergingIterator<'a> {
    /// Merges `children`; the result is unpositioned.
    pub fn new(children: Vec<BoxedIterator<'a>>) -> Self {
        let n = children.len();
        MergingIterator {
            children,
            heap: Vec::with_capacity(n),
            direction: Direction::Forward,
            scratch: Vec::new(),
            runner_up: None,
        }
    }

    /// Number of children.
    #[cfg(test)]
    pub fn num_children(&self) -> usize {
        self.children.len()
    }

    /// Runs `op`; on error leaves the iterator invalid.
    fn guard(&mut self, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = op(self);
        if r.is_err() {
            self.heap.clear();
            self.runner_up = None;
        }
        r
    }

    /// Rebuilds the heap from all valid children, ordered for `dir`.
    fn rebuild(&mut self, dir: Direction) {
        self.direction = dir;
        self.runner_up = None;
        self.heap.clear();
        let children = &self.children;
        self.heap
            .extend((0..children.len()).filter(|&i| children.get(i).is_some_and(|c| c.valid())));
        for i in (0..self.heap.len() / 2).rev() {
            sift_down(&self.children, dir, &mut self.heap, i);
        }
    }

    /// Repositions every non-current child after (forward) or before
    /// (reverse) the current key, then rebuilds the heap for `to`.
    fn switch_direction(&mut self, to: Direction) -> Result<()> {
        let Some(&cur) = self.heap.first() else {
            return Ok(());
        };
        self.scratch.clear();
        if let Some(c) = self.children.get(cur) {
            self.scratch.extend_from_slice(c.key());
        }
        let key = self.scratch.as_slice();
        for (i, c) in self.children.iter_mut().enumerate() {
            if i == cur {
                continue;
            }
            match to {
                Direction::Forward => {
                    c.seek(key)?;
                    if c.valid() && cmp_internal(c.key(), key) == Ordering::Equal {
                        c.next()?;
                    }
                }
                Direction::Reverse => {
                    c.seek_for_prev(key)?;
                    if c.valid() && cmp_internal(c.key(), key) == Ordering::Equal {
                        c.prev()?;
                    }
                }
            }
        }
        self.rebuild(to);
        Ok(())
    }

    fn seek_all(
        &mut self,
        dir: Direction,
        mut op: impl FnMut(&mut BoxedIterator<'a>) -> Result<()>,
    ) -> Result<()> {
        self.guard(|s| {
            for c in s.children.iter_mut() {
                op(c)?;
            }
            s.rebuild(dir);
            Ok(())
        })
    }

    /// Steps the top child in `dir` and restores the heap.
    fn step(&mut self, dir: Direction) -> Result<()> {
        self.guard(|s| {
            if s.direction != dir {
                s.switch_direction(dir)?;
            }
            let Some(&top) = s.heap.first() else {
                return Ok(());
            };
            let Some(c) = s.children.get_mut(top) else {
                return Ok(());
            };
            match dir {
                Direction::Forward => c.next()?,
                Direction::Reverse => c.prev()?,
            }
            if c.valid() {
                // Still ahead of every other child: the heap is unchanged.
                match s.runner_up_of(dir) {
                    None => return Ok(()),
                    Some(r) if above(&s.children, dir, top, r) => return Ok(()),
                    Some(_) => {}
                }
            } else {
                s.heap.swap_remove(0);
            }
            s.runner_up = None;
            sift_down(&s.children, dir, &mut s.heap, 0);
            Ok(())
        })
    }

    /// The child that comes first after the top (computed once per heap
    /// change); `None` with fewer than two valid children.
    fn runner_up_of(&mut self, dir: Direction) -> Option<usize> {
        if self.runner_up.is_none() {
            self.runner_up = match (self.heap.get(1), self.heap.get(2)) {
                (Some(&a), Some(&b)) if above(&self.children, dir, b, a) => Some(b),
                (Some(&a), _) => Some(a),
                _ => None,
            };
        }
        self.runner_up
    }

    fn current(&self) -> Option<&BoxedIterator<'a>> {
        self.heap.first().and_then(|&i| self.children.get(i))
    }
}

impl InternalIterator for MergingIterator<'_> {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_all(Direction::Forward, |c| c.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.seek_all(Direction::Reverse, |c| c.seek_to_last())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.seek_all(Direction::Forward, |c| c.seek(target))
    }

    /// Moves forward to the first entry `>= target`, where `target` is after
    /// the current key (the caller's promise): only the children still
    /// before `target` seek, the others already rest on or after it. A scan
    /// that leaves a user key with many versions in one child (a hot row's
    /// updates in the memtable, `db_iter.rs`) reseeks that child alone
    /// instead of every child; on an unpositioned or reverse iterator this
    /// is a plain [`InternalIterator::seek`].
    fn seek_forward(&mut self, target: &[u8]) -> Result<()> {
        if self.direction != Direction::Forward || self.heap.is_empty() {
            return self.seek(target);
        }
        self.guard(|s| {
            // A child outside the heap is exhausted moving forward: it has
            // nothing at or after its last key, so nothing `>= target`.
            for &i in &s.heap {
                if let Some(c) = s.children.get_mut(i) {
                    if cmp_internal(c.key(), target) == Ordering::Less {
                        c.seek_forward(target)?;
                    }
                }
            }
            s.rebuild(Direction::Forward);
            Ok(())
        })
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek_all(Direction::Reverse, |c| c.seek_for_prev(target))
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.step(Direction::Forward)
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.step(Direction::Reverse)
    }

    fn key(&self) -> &[u8] {
        self.current().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current().map_or(&[], |c| c.value())
    }

    fn location(&self) -> Option<(&std::path::Path, u64)> {
        self.current().and_then(|c| c.location())
    }
}

#[cfg(test)]
mod tests;
