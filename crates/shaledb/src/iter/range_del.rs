//! Range tombstone fragmentation: turns overlapping range deletions into
//! sorted, non-overlapping fragments so a read can ask "which tombstone
//! covers this key?" with one binary search.
//!
//! A range tombstone `[begin, end) @ seq` deletes every version of a user
//! key in `[begin, end)` with sequence `< seq` (the caller compares). Input
//! tombstones may overlap and arrive in any order; empty ranges
//! (`begin >= end`) are ignored.
//!
//! Worked example: `[a, e)@5` and `[c, g)@9` become
//!
//! ```text
//! [a, c) {5}    [c, e) {9, 5}    [e, g) {9}
//! ```
//!
//! so `max_covering_seq(b) = 5`, `max_covering_seq(d) = 9`,
//! `covering_seq_at(d, 7) = 5` (the newest tombstone visible at snapshot 7),
//! and `max_covering_seq(g) = 0` (ends are exclusive).
//!
//! Every fragment keeps the full set of distinct sequences covering it
//! (descending), so one structure serves both reads at a snapshot
//! ([`RangeTombstones::new`] drops tombstones newer than the snapshot first)
//! and compaction, which must keep the tombstones visible to every live
//! snapshot ([`RangeTombstones::new_unfiltered`],
//! [`RangeTombstones::fragments_between_all_seqs`]). Adjacent fragments with
//! the same set of sequences are merged.
//!
//! Invariants: fragments are sorted by begin, `begin < end`, and
//! `end <= next.begin`; each has at least one sequence.

use crate::types::SequenceNumber;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// A fragment: `(begin user key, exclusive end user key, max sequence)`.
pub type Fragment = (Vec<u8>, Vec<u8>, SequenceNumber);

/// Non-overlapping range tombstone fragments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeTombstones {
    fragments: Vec<Fragment>,
    /// All distinct sequences of every fragment, descending, concatenated.
    seqs: Vec<SequenceNumber>,
    /// Fragment `i` owns `seqs[seq_starts[i]..seq_starts[i + 1]]`;
    /// `seq_starts.len() == fragments.len() + 1` (or 0 when empty).
    seq_starts: Vec<usize>,
}

impl RangeTombstones {
    /// Fragments the tombstones with `seq <= snapshot`.
    pub fn new(list: Vec<(Vec<u8>, Vec<u8>, SequenceNumber)>, snapshot: SequenceNumber) -> Self {
        if list.is_empty() {
            // The common case (an iterator over a tree without range
            // deletes): no sweep, no allocation.
            return Self::default();
        }
        Self::build(list.into_iter().filter(|t| t.2 <= snapshot).collect())
    }

    /// Fragments all tombstones, keeping every distinct sequence per fragment.
    pub fn new_unfiltered(list: Vec<(Vec<u8>, Vec<u8>, SequenceNumber)>) -> Self {
        Self::build(list)
    }

    /// Sweep over the sorted boundary points: between two consecutive
    /// points the set of covering tombstones is constant.
    fn build(mut list: Vec<(Vec<u8>, Vec<u8>, SequenceNumber)>) -> Self {
        list.retain(|(b, e, _)| b < e);
        list.sort_unstable_by(|x, y| x.0.cmp(&y.0));
        let mut points: Vec<&[u8]> = list
            .iter()
            .flat_map(|(b, e, _)| [b.as_slice(), e.as_slice()])
            .collect();
        points.sort_unstable();
        points.dedup();

        let mut out = RangeTombstones::default();
        // Active tombstones: seq -> how many; plus their ends, soonest first.
        let mut active: BTreeMap<SequenceNumber, usize> = BTreeMap::new();
        let mut ends: BinaryHeap<Reverse<(&[u8], SequenceNumber)>> = BinaryHeap::new();
        let mut next_start = list.iter().peekable();
        let mut current: Vec<SequenceNumber> = Vec::new();
        for (p, q) in points.iter().zip(points.iter().skip(1)) {
            while let Some(Reverse((end, seq))) = ends.peek().copied() {
                if end > *p {
                    break;
                }
                ends.pop();
                if let Some(n) = active.get_mut(&seq) {
                    *n -= 1;
                    if *n == 0 {
                        active.remove(&seq);
                    }
                }
            }
            while let Some((b, e, seq)) = next_start.next_if(|t| t.0.as_slice() <= *p) {
                debug_assert!(b.as_slice() == *p);
                *active.entry(*seq).or_insert(0) += 1;
                ends.push(Reverse((e.as_slice(), *seq)));
            }
            if active.is_empty() {
                continue;
            }
            current.clear();
            current.extend(active.keys().rev());
            out.push(p, q, &current);
        }
        out
    }

    /// Appends `[begin, end)` covered by `seqs` (descending, non-empty),
    /// merging it into the previous fragment when contiguous and equal.
    fn push(&mut self, begin: &[u8], end: &[u8], seqs: &[SequenceNumber]) {
        let Some(&max) = seqs.first() else {
            return;
        };
        let mergeable = match self.fragments.len().checked_sub(1) {
            Some(last) => {
                self.fragments.get(last).is_some_and(|f| f.1 == begin)
                    && self.fragment_seqs(last) == seqs
            }
            None => false,
        };
        if mergeable {
            if let Some(last) = self.fragments.last_mut() {
                last.1 = end.to_vec();
            }
            return;
        }
        if self.seq_starts.is_empty() {
            self.seq_starts.push(0);
        }
        self.fragments.push((begin.to_vec(), end.to_vec(), max));
        self.seqs.extend_from_slice(seqs);
        self.seq_starts.push(self.seqs.len());
    }

    /// True if no key is covered.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// The fragments, sorted and non-overlapping, with their max sequence.
    #[cfg(test)]
    pub fn fragments(&self) -> &[Fragment] {
        &self.fragments
    }

    /// All distinct sequences covering fragment `i`, descending (empty if
    /// `i` is out of range).
    pub fn fragment_seqs(&self, i: usize) -> &[SequenceNumber] {
        match (self.seq_starts.get(i), self.seq_starts.get(i + 1)) {
            (Some(&s), Some(&e)) => self.seqs.get(s..e).unwrap_or_default(),
            _ => &[],
        }
    }

    /// Index of the fragment containing `user_key`.
    fn find(&self, user_key: &[u8]) -> Option<usize> {
        let i = self
            .fragments
            .partition_point(|f| f.0.as_slice() <= user_key)
            .checked_sub(1)?;
        let f = self.fragments.get(i)?;
        (user_key < f.1.as_slice()).then_some(i)
    }

    /// The largest sequence of a tombstone covering `user_key`; 0 if none
    /// (reads use the hinted [`RangeTombstones::max_covering_seq_from`];
    /// this is its reference).
    #[cfg(test)]
    pub fn max_covering_seq(&self, user_key: &[u8]) -> SequenceNumber {
        self.find(user_key)
            .and_then(|i| self.fragments.get(i))
            .map_or(0, |f| f.2)
    }

    /// As [`RangeTombstones::max_covering_seq`], starting from `*hint`
    /// (what the previous call left there) instead of a binary search: a
    /// forward scan asks about ascending keys, so the fragment for the next
    /// key is the hinted one or a step after it. `*hint` is trusted only if
    /// every fragment before it ends at or before `user_key`; otherwise (a
    /// seek, a backward step, a fresh hint) or after a few steps the binary
    /// search runs, so any hint gives the right answer. Leaves in `*hint` the
    /// first fragment ending after `user_key`.
    pub fn max_covering_seq_from(&self, user_key: &[u8], hint: &mut usize) -> SequenceNumber {
        /// Steps forward before falling back to a binary search.
        const MAX_STEPS: usize = 4;
        let ends_before = |f: &Fragment| f.1.as_slice() <= user_key;
        let trusted = match hint.checked_sub(1) {
            None => true,
            Some(p) => self.fragments.get(p).is_some_and(ends_before),
        };
        let mut i = *hint;
        let mut steps = 0;
        if trusted {
            while self.fragments.get(i).is_some_and(ends_before) {
                i += 1;
                steps += 1;
                if steps == MAX_STEPS {
                    break;
                }
            }
        }
        if !trusted || steps == MAX_STEPS {
            i = self.fragments.partition_point(ends_before);
        }
        *hint = i;
        match self.fragments.get(i) {
            Some(f) if f.0.as_slice() <= user_key => f.2,
            _ => 0,
        }
    }

    /// The largest sequence `<= snapshot` of a tombstone covering
    /// `user_key`; 0 if none.
    pub fn covering_seq_at(&self, user_key: &[u8], snapshot: SequenceNumber) -> SequenceNumber {
        let Some(i) = self.find(user_key) else {
            return 0;
        };
        let seqs = self.fragment_seqs(i);
        let first_visible = seqs.partition_point(|&s| s > snapshot);
        seqs.get(first_visible).copied().unwrap_or(0)
    }

    /// Indices and clipped bounds of the fragments overlapping `[lo, hi)`
    /// (`hi = None`: unbounded).
    fn clipped<'s>(
        &'s self,
        lo: &'s [u8],
        hi: Option<&'s [u8]>,
    ) -> impl Iterator<Item = (usize, &'s [u8], &'s [u8])> + 's {
        let first = self.fragments.partition_point(|f| f.1.as_slice() <= lo);
        self.fragments
            .iter()
            .enumerate()
            .skip(first)
            .take_while(move |(_, f)| hi.is_none_or(|h| f.0.as_slice() < h))
            .filter_map(move |(i, f)| {
                let b = f.0.as_slice().max(lo);
                let e = match hi {
                    Some(h) => f.1.as_slice().min(h),
                    None => f.1.as_slice(),
                };
                (b < e).then_some((i, b, e))
            })
    }

    /// The fragments clipped to `[lo, hi)`, with their max sequence
    /// (compaction splits tombstones among output extents this way).
    #[cfg(test)]
    pub fn fragments_between(&self, lo: &[u8], hi: Option<&[u8]>) -> Vec<Fragment> {
        self.clipped(lo, hi)
            .filter_map(|(i, b, e)| {
                let f = self.fragments.get(i)?;
                Some((b.to_vec(), e.to_vec(), f.2))
            })
            .collect()
    }

    /// Like [`RangeTombstones::fragments_between`], but one entry per
    /// (fragment, sequence), ordered by begin then sequence descending —
    /// the internal-key order in which compaction writes them.
    pub fn fragments_between_all_seqs(&self, lo: &[u8], hi: Option<&[u8]>) -> Vec<Fragment> {
        let mut out = Vec::new();
        for (i, b, e) in self.clipped(lo, hi) {
            for &s in self.fragment_seqs(i) {
                out.push((b.to_vec(), e.to_vec(), s));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
