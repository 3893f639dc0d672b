//! The read set of a transaction: every key and key range it read, kept for
//! Serializable validation at commit.
//!
//! A Serializable transaction must fail at commit if another transaction
//! committed, after this one's read view, a write to anything it read. "What it
//! read" is two kinds of things:
//!
//! * **points** — `(cf, key)` looked up with `get` (found or not);
//! * **ranges** — `[lo, hi)` of a column family that an iterator walked over
//!   (`hi == None` means unbounded). A range is exactly the stretch of keys the
//!   iterator *observed*: an insert anywhere in it (a phantom) would have
//!   changed what the transaction saw, an insert outside it would not.
//!
//! Ranges of a column family are kept merged: sorted, pairwise disjoint and not
//! touching (`a.hi < b.lo`), so validation walks each stretch once.
//!
//! Worked example: a scan that visits `b`, `c` and stops at the bound `e`
//! records `[b, e)`; a later `seek_for_prev(h)` landing on `f` records
//! `[f, h\0)` (`h\0` is the smallest key after `h`). A third scan over
//! `[d, g)` overlaps both, so the set becomes the single range `[b, h\0)`.
//!
//! ```
//! use shaledb::test_hooks::ReadSet; // internal: `test-hooks` only
//! let mut rs = ReadSet::default();
//! rs.add_range(0, b"b", Some(b"e"));
//! rs.add_range(0, b"f", Some(b"h\0"));
//! rs.add_range(0, b"d", Some(b"g"));
//! let r: Vec<_> = rs.ranges().collect();
//! assert_eq!(r, vec![(0, &b"b"[..], Some(&b"h\0"[..]))]);
//! assert!(rs.covers(0, b"gz") && !rs.covers(0, b"a"));
//! ```
//!
//! The set is owned by one transaction (one thread); it has no internal locking.

use crate::db::CfId;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// The keys and key ranges a transaction read (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadSet {
    /// Point reads.
    points: BTreeSet<(CfId, Vec<u8>)>,
    /// Per column family: `lo -> hi` (`lo` inclusive, `hi` exclusive, `None`
    /// unbounded). Invariant: for consecutive entries `a`, `b`: `a.hi < b.lo`,
    /// and every entry has `lo < hi`.
    ranges: BTreeMap<CfId, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
}

/// `hi >= key` where `None` is +infinity.
fn hi_reaches(hi: &Option<Vec<u8>>, key: &[u8]) -> bool {
    hi.as_deref().is_none_or(|h| h >= key)
}

/// The larger of two exclusive upper ends (`None` = +infinity).
fn max_hi(a: Option<Vec<u8>>, b: Option<Vec<u8>>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    }
}

impl ReadSet {
    /// An empty read set.
    #[cfg(test)]
    pub fn new() -> Self {
        ReadSet::default()
    }

    /// True when nothing was read.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    /// Forgets everything.
    #[cfg(test)]
    pub fn clear(&mut self) {
        self.points.clear();
        self.ranges.clear();
    }

    /// Records a point read of `(cf, key)`.
    pub fn add_point(&mut self, cf: CfId, key: &[u8]) {
        self.points.insert((cf, key.to_vec()));
    }

    /// Records that `[lo, hi)` of `cf` was read (`hi == None`: to the end).
    /// Empty ranges (`hi <= lo`) are ignored; overlapping or touching ranges
    /// are merged.
    pub fn add_range(&mut self, cf: CfId, lo: &[u8], hi: Option<&[u8]>) {
        if hi.is_some_and(|h| h <= lo) {
            return;
        }
        let map = self.ranges.entry(cf).or_default();
        let mut lo = lo.to_vec();
        let mut hi = hi.map(<[u8]>::to_vec);
        // A range starting at or before `lo` that reaches `lo` absorbs it.
        let before = map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(lo.as_slice())))
            .next_back()
            .filter(|(_, h)| hi_reaches(h, &lo))
            .map(|(l, _)| l.clone());
        if let Some(l) = before {
            if let Some(h) = map.remove(&l) {
                hi = max_hi(hi, h);
            }
            lo = l;
        }
        // Ranges starting inside `[lo, hi]` (inclusive: touching merges too).
        loop {
            let next = map
                .range::<[u8], _>((Bound::Included(lo.as_slice()), Bound::Unbounded))
                .next()
                .filter(|(l, _)| hi_reaches(&hi, l))
                .map(|(l, _)| l.clone());
            let Some(l) = next else { break };
            if let Some(h) = map.remove(&l) {
                hi = max_hi(hi, h);
            }
        }
        map.insert(lo, hi);
    }

    /// The point reads, sorted by `(cf, key)`.
    pub fn points(&self) -> impl Iterator<Item = (CfId, &[u8])> + '_ {
        self.points.iter().map(|(cf, k)| (*cf, k.as_slice()))
    }

    /// The merged ranges as `(cf, lo inclusive, hi exclusive or None =
    /// unbounded)`, sorted by `(cf, lo)`.
    pub fn ranges(&self) -> impl Iterator<Item = (CfId, &[u8], Option<&[u8]>)> + '_ {
        self.ranges
            .iter()
            .flat_map(|(cf, m)| m.iter().map(|(l, h)| (*cf, l.as_slice(), h.as_deref())))
    }

    /// Number of point reads plus number of merged ranges.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.points.len() + self.ranges.values().map(BTreeMap::len).sum::<usize>()
    }

    /// True if `(cf, key)` was read, as a point or inside a range.
    pub fn covers(&self, cf: CfId, key: &[u8]) -> bool {
        self.points.contains(&(cf, key.to_vec())) || self.range_covers(cf, key)
    }

    /// True if `key` lies inside one of the ranges of `cf`.
    pub fn range_covers(&self, cf: CfId, key: &[u8]) -> bool {
        self.ranges.get(&cf).is_some_and(|m| {
            m.range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
                .next_back()
                .is_some_and(|(_, h)| h.as_deref().is_none_or(|h| key < h))
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ranges(rs: &ReadSet) -> Vec<(CfId, Vec<u8>, Option<Vec<u8>>)> {
        rs.ranges()
            .map(|(c, l, h)| (c, l.to_vec(), h.map(<[u8]>::to_vec)))
            .collect()
    }

    fn r(cf: CfId, lo: &str, hi: Option<&str>) -> (CfId, Vec<u8>, Option<Vec<u8>>) {
        (
            cf,
            lo.as_bytes().to_vec(),
            hi.map(|h| h.as_bytes().to_vec()),
        )
    }

    #[test]
    fn merges_overlapping_and_touching_keeps_gaps() {
        let mut rs = ReadSet::new();
        rs.add_range(0, b"m", Some(b"p"));
        rs.add_range(0, b"a", Some(b"c"));
        rs.add_range(0, b"c", Some(b"d")); // touches [a, c)
        rs.add_range(0, b"e", Some(b"f")); // gap d..e stays
        assert_eq!(
            ranges(&rs),
            vec![
                r(0, "a", Some("d")),
                r(0, "e", Some("f")),
                r(0, "m", Some("p"))
            ]
        );
        rs.add_range(0, b"b", Some(b"n")); // swallows e..f, joins a..d and m..p
        assert_eq!(ranges(&rs), vec![r(0, "a", Some("p"))]);
        rs.add_range(0, b"o", None);
        assert_eq!(ranges(&rs), vec![r(0, "a", None)]);
        rs.add_range(0, b"", Some(b"a"));
        assert_eq!(ranges(&rs), vec![r(0, "", None)]);
        assert_eq!(rs.len(), 1);
    }

    #[test]
    fn empty_ranges_ignored_cfs_separate_points_dedup() {
        let mut rs = ReadSet::new();
        rs.add_range(0, b"b", Some(b"b"));
        rs.add_range(0, b"c", Some(b"a"));
        assert!(rs.is_empty());
        rs.add_range(1, b"a", Some(b"b"));
        rs.add_range(2, b"a", Some(b"b"));
        rs.add_point(1, b"x");
        rs.add_point(1, b"x");
        assert_eq!(rs.len(), 3);
        assert!(rs.covers(1, b"a") && rs.covers(1, b"x") && !rs.covers(0, b"a"));
        assert!(!rs.covers(1, b"b"), "hi is exclusive");
        assert!(!rs.range_covers(1, b"x"));
        assert_eq!(rs.points().collect::<Vec<_>>(), vec![(1, &b"x"[..])]);
        rs.clear();
        assert!(rs.is_empty());
    }

    #[test]
    fn inside_an_existing_range_changes_nothing() {
        let mut rs = ReadSet::new();
        rs.add_range(0, b"a", None);
        let before = rs.clone();
        rs.add_range(0, b"k", Some(b"z"));
        rs.add_range(0, b"a", Some(b"b"));
        assert_eq!(rs, before);
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(0u8..4, 0..3)
    }

    proptest! {
        /// The merged set covers exactly the union of what was added, and its
        /// ranges stay sorted, non-empty, disjoint and non-touching.
        #[test]
        fn merged_ranges_equal_the_union(
            adds in proptest::collection::vec((0u32..2, key(), proptest::option::of(key())), 0..12),
            probes in proptest::collection::vec(key(), 0..40),
        ) {
            let mut rs = ReadSet::new();
            for (cf, lo, hi) in &adds {
                rs.add_range(*cf, lo, hi.as_deref());
            }
            for cf in 0..2u32 {
                let list: Vec<_> = rs.ranges().filter(|(c, _, _)| *c == cf).collect();
                for (_, lo, hi) in &list {
                    prop_assert!(hi.is_none_or(|h| *lo < h));
                }
                for w in list.windows(2) {
                    prop_assert!(w[0].2.is_some_and(|h| h < w[1].1), "touching or overlapping: {:?}", w);
                }
                for p in &probes {
                    let want = adds.iter().any(|(c, lo, hi)| {
                        *c == cf && lo.as_slice() <= p.as_slice()
                            && hi.as_deref().is_none_or(|h| p.as_slice() < h)
                    });
                    prop_assert_eq!(rs.range_covers(cf, p), want, "probe {:?}", p);
                }
            }
        }
    }
}
