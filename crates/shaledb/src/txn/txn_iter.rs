//! Iterators inside a transaction: [`TxnIterator`] merges the database at the
//! transaction's read view with the transaction's own uncommitted writes, and
//! records the key range it observed in the transaction's [`ReadSet`].
//!
//! # Merge
//!
//! Two sorted children: the *base*, a [`DbIterator`] at the read view (SI: the
//! transaction's snapshot; RC: a snapshot taken when the iterator is created,
//! so one iterator is one statement), and the *delta*, the buffered writes of
//! this column family within the bounds (a sorted `Vec` of borrowed entries,
//! built once: the iterator borrows the `Txn`, so the buffer cannot change
//! while it lives). At the same key the delta wins: an own put shadows the
//! base value, an own delete hides the key.
//!
//! Worked example: base `a=1 b=2 d=4`, buffer `b=20 c=30 d=<delete>` yields
//! `a=1 b=20 c=30` forward and `c=30 b=20 a=1` backward.
//!
//! Positioning invariant (as in RocksDB's BaseDeltaIterator): moving forward,
//! both children rest on their first entry `>=` the current key; moving
//! backward, on their last entry `<=` it. The current entry is the smaller
//! (larger) of the two; `Src` says which, and `Both` means the delta entry
//! shadows a base entry of the same key (both advance together). Changing
//! direction re-seeks both children around the current key.
//!
//! # Read coverage
//!
//! The iterator keeps one *segment* `[lo, hi)`: the contiguous stretch it has
//! observed since the last seek. Each seek starts a new segment (the old one
//! goes to the read set, which merges overlaps); `next`/`prev` only widen it.
//! With `succ(k) = k ++ 0x00` (the smallest key after `k`):
//!
//! | operation (bounds `[L, U)`) | lands on `p`         | exhausted     |
//! |-----------------------------|----------------------|---------------|
//! | `seek(k)`                   | `[max(k, L), succ(p))` | `[max(k, L), U)` |
//! | `seek_to_first()`           | `[L, succ(p))`       | `[L, U)`      |
//! | `seek_for_prev(k)`          | `[p, min(succ(k), U))` | `[L, min(succ(k), U))` |
//! | `seek_to_last()`            | `[p, U)`             | `[L, U)`      |
//! | `next()` to `q`             | `hi = max(hi, succ(q))` | `hi = U`   |
//! | `prev()` to `q`             | `lo = min(lo, q)`    | `lo = L`      |
//!
//! A missing `L` is the empty key; a missing `U` is unbounded. The segment is
//! flushed on the next seek and when the iterator is dropped, so the read set
//! is complete whenever no iterator of the transaction is alive (in particular
//! whenever the transaction is borrowed mutably, e.g. at commit).
//!
//! Concurrency: the read set is a `RefCell` in the `Txn`; every borrow of it
//! (here and in `Txn::get_cf`) is taken and released inside one call, never
//! held across user code, so the borrows cannot overlap.

use super::read_set::ReadSet;
use crate::db::{CfId, DbIterator};
use crate::error::{Error, Result};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// One buffered write as the iterator sees it: key and `Some(value)` (put) or
/// `None` (delete).
type DeltaEntry<'t> = (&'t [u8], Option<&'t [u8]>);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    Forward,
    Reverse,
}

/// Where the current entry comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Src {
    Base,
    Delta,
    /// The delta entry shadows a base entry of the same key.
    Both,
}

/// An iterator over one column family inside a transaction (see the module
/// docs). Created by [`Txn::iter_cf`](super::Txn::iter_cf).
pub struct TxnIterator<'t> {
    base: DbIterator,
    /// Buffered writes of `cf` within the bounds, sorted by key.
    delta: Vec<DeltaEntry<'t>>,
    /// Delta cursor: forward, the candidate is `delta[d]`; backward, `delta[d - 1]`.
    d: usize,
    dir: Dir,
    /// `None` when not positioned on an entry.
    cur: Option<Src>,
    cf: CfId,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    status: Option<Error>,
    reads: Option<&'t RefCell<ReadSet>>,
    /// The observed segment `[lo, hi)` since the last seek (`hi: None` = unbounded).
    seg: Option<(Vec<u8>, Option<Vec<u8>>)>,
}

/// `k ++ 0x00`: the smallest key greater than `k`.
fn succ(k: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(k.len() + 1);
    v.extend_from_slice(k);
    v.push(0);
    v
}

/// The smaller of two exclusive upper ends (`None` = +infinity).
fn min_hi(a: Option<Vec<u8>>, b: Option<Vec<u8>>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl<'t> TxnIterator<'t> {
    /// Merges `base` (already bounded by `lower`/`upper`) with the writes of
    /// `cf` in `buffer` that lie within the bounds.
    pub(super) fn new(
        base: DbIterator,
        cf: CfId,
        buffer: &'t BTreeMap<(CfId, Vec<u8>), Option<Vec<u8>>>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        reads: Option<&'t RefCell<ReadSet>>,
    ) -> Self {
        let start = (cf, lower.map(<[u8]>::to_vec).unwrap_or_default());
        let delta = buffer
            .range(start..)
            .take_while(|((c, k), _)| *c == cf && upper.is_none_or(|u| k.as_slice() < u))
            .map(|((_, k), v)| (k.as_slice(), v.as_deref()))
            .collect();
        TxnIterator {
            base,
            delta,
            d: 0,
            dir: Dir::Forward,
            cur: None,
            cf,
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
            status: None,
            reads,
            seg: None,
        }
    }

    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        self.cur.is_some()
    }

    /// The current key; empty when not valid.
    pub fn key(&self) -> &[u8] {
        match self.cur {
            Some(Src::Base) => self.base.key(),
            Some(Src::Delta | Src::Both) => self.delta_cur().map_or(&[], |(k, _)| k),
            None => &[],
        }
    }

    /// The current value; empty when not valid.
    pub fn value(&self) -> &[u8] {
        match self.cur {
            Some(Src::Base) => self.base.value(),
            Some(Src::Delta | Src::Both) => self.delta_cur().and_then(|(_, v)| v).unwrap_or(&[]),
            None => &[],
        }
    }

    /// The first error met, if any (movement also returns it).
    pub fn status(&self) -> Option<&Error> {
        self.status.as_ref()
    }

    /// Positions on the first key (`>=` the lower bound).
    pub fn seek_to_first(&mut self) -> Result<()> {
        let r = self.base.seek_to_first();
        self.guard(r)?;
        self.d = 0;
        self.dir = Dir::Forward;
        self.settle()?;
        let lo = self.lower.clone().unwrap_or_default();
        self.start_forward_segment(lo);
        Ok(())
    }

    /// Positions on the last key (`<` the upper bound).
    pub fn seek_to_last(&mut self) -> Result<()> {
        let r = self.base.seek_to_last();
        self.guard(r)?;
        self.d = self.delta.len();
        self.dir = Dir::Reverse;
        self.settle()?;
        let hi = self.upper.clone();
        self.start_reverse_segment(hi);
        Ok(())
    }

    /// Positions on the first key `>= target` (and `>=` the lower bound).
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.base.seek(target);
        self.guard(r)?;
        self.d = self.delta.partition_point(|(k, _)| *k < target);
        self.dir = Dir::Forward;
        self.settle()?;
        let lo = match &self.lower {
            Some(l) if l.as_slice() > target => l.clone(),
            _ => target.to_vec(),
        };
        self.start_forward_segment(lo);
        Ok(())
    }

    /// Positions on the last key `<= target` (and `<` the upper bound).
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = self.base.seek_for_prev(target);
        self.guard(r)?;
        self.d = self.delta.partition_point(|(k, _)| *k <= target);
        self.dir = Dir::Reverse;
        self.settle()?;
        let hi = min_hi(Some(succ(target)), self.upper.clone());
        self.start_reverse_segment(hi);
        Ok(())
    }

    /// Moves to the next key; a no-op when not valid.
    #[allow(clippy::should_implement_trait)] // a fallible cursor, not an `Iterator`
    pub fn next(&mut self) -> Result<()> {
        let Some(src) = self.cur else { return Ok(()) };
        if self.dir == Dir::Reverse {
            let current = self.key().to_vec();
            // Base: first key > current.
            let r = self.base.seek(&current);
            self.guard(r)?;
            if self.base.valid() && self.base.key() == current.as_slice() {
                let r = self.base.next();
                self.guard(r)?;
            }
            self.d = self
                .delta
                .partition_point(|(k, _)| *k <= current.as_slice());
            self.dir = Dir::Forward;
        } else {
            self.step(src)?;
        }
        self.settle()?;
        // Widen the segment's upper end past the new key (or to the bound).
        let new_hi = match (self.cur, &self.seg) {
            (None, _) => Some(self.upper.clone()),
            (Some(_), Some((_, Some(h)))) if self.key() >= h.as_slice() => {
                Some(Some(succ(self.key())))
            }
            _ => None,
        };
        if let (Some(new_hi), Some((_, hi))) = (new_hi, &mut self.seg) {
            *hi = new_hi;
        }
        Ok(())
    }

    /// Moves to the previous key; a no-op when not valid.
    pub fn prev(&mut self) -> Result<()> {
        let Some(src) = self.cur else { return Ok(()) };
        if self.dir == Dir::Forward {
            let current = self.key().to_vec();
            // Base: last key < current.
            let r = self.base.seek_for_prev(&current);
            self.guard(r)?;
            if self.base.valid() && self.base.key() == current.as_slice() {
                let r = self.base.prev();
                self.guard(r)?;
            }
            self.d = self.delta.partition_point(|(k, _)| *k < current.as_slice());
            self.dir = Dir::Reverse;
        } else {
            self.step(src)?;
        }
        self.settle()?;
        // Widen the segment's lower end down to the new key (or the bound).
        let new_lo = match (self.cur, &self.seg) {
            (None, _) => Some(self.lower.clone().unwrap_or_default()),
            (Some(_), Some((lo, _))) if self.key() < lo.as_slice() => Some(self.key().to_vec()),
            _ => None,
        };
        if let (Some(new_lo), Some((lo, _))) = (new_lo, &mut self.seg) {
            *lo = new_lo;
        }
        Ok(())
    }

    /// The delta entry under the cursor in the current direction.
    fn delta_cur(&self) -> Option<DeltaEntry<'t>> {
        match self.dir {
            Dir::Forward => self.delta.get(self.d).copied(),
            Dir::Reverse => self
                .d
                .checked_sub(1)
                .and_then(|i| self.delta.get(i))
                .copied(),
        }
    }

    fn step_delta(&mut self) {
        match self.dir {
            Dir::Forward => self.d = self.d.saturating_add(1).min(self.delta.len()),
            Dir::Reverse => self.d = self.d.saturating_sub(1),
        }
    }

    fn step_base(&mut self) -> Result<()> {
        let r = match self.dir {
            Dir::Forward => self.base.next(),
            Dir::Reverse => self.base.prev(),
        };
        self.guard(r)
    }

    /// Moves past the current entry in the current direction.
    fn step(&mut self, src: Src) -> Result<()> {
        match src {
            Src::Base => self.step_base(),
            Src::Delta => {
                self.step_delta();
                Ok(())
            }
            Src::Both => {
                self.step_delta();
                self.step_base()
            }
        }
    }

    /// Picks the current entry from the two children, skipping keys hidden
    /// by own deletes.
    fn settle(&mut self) -> Result<()> {
        loop {
            let Some((dkey, dval)) = self.delta_cur() else {
                self.cur = self.base.valid().then_some(Src::Base);
                return Ok(());
            };
            let ord = self.base.valid().then(|| dkey.cmp(self.base.key()));
            // The delta entry comes first in the direction of travel (or ties).
            let delta_first = matches!(
                (ord, self.dir),
                (None | Some(Ordering::Equal), _)
                    | (Some(Ordering::Less), Dir::Forward)
                    | (Some(Ordering::Greater), Dir::Reverse)
            );
            if !delta_first {
                self.cur = Some(Src::Base);
                return Ok(());
            }
            let same = ord == Some(Ordering::Equal);
            if dval.is_none() {
                // Own delete: hide the key (and the base entry it shadows).
                self.step(if same { Src::Both } else { Src::Delta })?;
                continue;
            }
            self.cur = Some(if same { Src::Both } else { Src::Delta });
            return Ok(());
        }
    }

    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            self.cur = None;
            self.status = Some(e.clone());
        }
        r
    }

    /// After a forward seek from `lo`: `[lo, succ(p))`, or `[lo, U)` if exhausted.
    /// Without a read set (below Serializable) no segment is kept, so
    /// `next`/`prev` widen nothing and allocate nothing per step.
    fn start_forward_segment(&mut self, lo: Vec<u8>) {
        if self.reads.is_none() {
            return;
        }
        let hi = match self.cur {
            Some(_) => Some(succ(self.key())),
            None => self.upper.clone(),
        };
        self.flush();
        self.seg = Some((lo, hi));
    }

    /// After a backward seek up to `hi`: `[p, hi)`, or `[L, hi)` if exhausted.
    fn start_reverse_segment(&mut self, hi: Option<Vec<u8>>) {
        if self.reads.is_none() {
            return;
        }
        let lo = match self.cur {
            Some(_) => self.key().to_vec(),
            None => self.lower.clone().unwrap_or_default(),
        };
        self.flush();
        self.seg = Some((lo, hi));
    }

    /// Moves the current segment into the transaction's read set.
    fn flush(&mut self) {
        if let (Some((lo, hi)), Some(reads)) = (self.seg.take(), self.reads) {
            // No other borrow of `reads` outlives a call (module docs).
            reads.borrow_mut().add_range(self.cf, &lo, hi.as_deref());
        }
    }
}

impl Drop for TxnIterator<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

impl std::fmt::Debug for TxnIterator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnIterator")
            .field("cf", &self.cf)
            .field("valid", &self.valid())
            .field("own_writes", &self.delta.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is the failure report
mod tests;
