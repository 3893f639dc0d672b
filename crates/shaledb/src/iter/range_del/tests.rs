// Tests: an out-of-range index is a test failure, which is what we want.
#![allow(clippy::indexing_slicing)]

use super::*;
use proptest::prelude::*;
use std::collections::BTreeSet;

type Tomb = (Vec<u8>, Vec<u8>, SequenceNumber);

fn t(b: &str, e: &str, s: SequenceNumber) -> Tomb {
    (b.as_bytes().to_vec(), e.as_bytes().to_vec(), s)
}

fn frag(b: &str, e: &str, s: SequenceNumber) -> Fragment {
    t(b, e, s)
}

#[test]
fn worked_example_from_module_docs() {
    let r = RangeTombstones::new_unfiltered(vec![t("c", "g", 9), t("a", "e", 5)]);
    assert_eq!(
        r.fragments(),
        &[frag("a", "c", 5), frag("c", "e", 9), frag("e", "g", 9)]
    );
    assert_eq!(r.fragment_seqs(0), &[5]);
    assert_eq!(r.fragment_seqs(1), &[9, 5]);
    assert_eq!(r.fragment_seqs(2), &[9]);
    assert_eq!(r.fragment_seqs(3), &[] as &[SequenceNumber]);
    assert_eq!(r.max_covering_seq(b"b"), 5);
    assert_eq!(r.max_covering_seq(b"d"), 9);
    assert_eq!(r.covering_seq_at(b"d", 7), 5);
    assert_eq!(r.covering_seq_at(b"d", 4), 0);
    assert_eq!(r.covering_seq_at(b"f", 100), 9);
    assert_eq!(r.max_covering_seq(b"g"), 0, "end is exclusive");
    assert_eq!(r.max_covering_seq(b"a"), 5, "begin is inclusive");
    assert_eq!(r.max_covering_seq(b""), 0);
}

#[test]
fn snapshot_filters_newer_tombstones() {
    let r = RangeTombstones::new(vec![t("c", "g", 9), t("a", "e", 5)], 7);
    assert_eq!(r.fragments(), &[frag("a", "e", 5)]);
    assert_eq!(r.max_covering_seq(b"f"), 0);
    assert!(RangeTombstones::new(vec![t("a", "b", 3)], 2).is_empty());
}

#[test]
fn empty_ranges_are_ignored_and_equal_neighbours_merge() {
    let r = RangeTombstones::new_unfiltered(vec![
        t("b", "b", 4),
        t("d", "a", 4),
        t("a", "c", 3),
        t("c", "e", 3),
        t("b", "d", 3),
    ]);
    assert_eq!(r.fragments(), &[frag("a", "e", 3)]);
    assert_eq!(r.fragment_seqs(0), &[3]);
    assert!(RangeTombstones::new_unfiltered(vec![t("x", "x", 1)]).is_empty());
}

#[test]
fn gaps_between_tombstones_are_uncovered() {
    let r = RangeTombstones::new(vec![t("a", "b", 1), t("c", "d", 2)], 10);
    assert_eq!(r.fragments(), &[frag("a", "b", 1), frag("c", "d", 2)]);
    assert_eq!(r.max_covering_seq(b"bz"), 0);
    assert_eq!(r.max_covering_seq(b"c"), 2);
}

#[test]
fn clipping_to_a_key_range() {
    let r = RangeTombstones::new_unfiltered(vec![t("c", "g", 9), t("a", "e", 5)]);
    assert_eq!(
        r.fragments_between(b"b", Some(b"d")),
        vec![frag("b", "c", 5), frag("c", "d", 9)]
    );
    assert_eq!(r.fragments_between(b"f", None), vec![frag("f", "g", 9)]);
    assert!(r.fragments_between(b"g", None).is_empty());
    assert!(r.fragments_between(b"d", Some(b"d")).is_empty());
    assert!(r.fragments_between(b"e", Some(b"b")).is_empty());
    assert_eq!(
        r.fragments_between_all_seqs(b"", Some(b"e")),
        vec![frag("a", "c", 5), frag("c", "e", 9), frag("c", "e", 5)]
    );
}

fn arb_key() -> impl Strategy<Value = Vec<u8>> {
    "[a-c]{0,2}".prop_map(String::into_bytes)
}

/// Every key over [a-c] up to length 3: all boundaries and keys between them.
fn probes() -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut frontier = vec![Vec::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for k in &frontier {
            for c in [b'a', b'b', b'c'] {
                let mut k2: Vec<u8> = k.clone();
                k2.push(c);
                next.push(k2);
            }
        }
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out
}

fn covering(list: &[Tomb], k: &[u8]) -> BTreeSet<SequenceNumber> {
    list.iter()
        .filter(|(b, e, _)| b.as_slice() <= k && k < e.as_slice())
        .map(|t| t.2)
        .collect()
}

fn check_invariants(r: &RangeTombstones) -> Result<(), TestCaseError> {
    for (i, f) in r.fragments().iter().enumerate() {
        prop_assert!(f.0 < f.1, "non-empty fragment");
        let seqs = r.fragment_seqs(i);
        prop_assert!(!seqs.is_empty());
        prop_assert_eq!(seqs[0], f.2);
        prop_assert!(seqs.windows(2).all(|w| w[0] > w[1]), "strictly descending");
    }
    for w in r.fragments().windows(2) {
        prop_assert!(w[0].1 <= w[1].0, "non-overlapping and sorted");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn fragments_match_brute_force(
        list in proptest::collection::vec((arb_key(), arb_key(), 1u64..12), 0..12),
        snapshot in 0u64..14,
        lo in arb_key(),
        hi in proptest::option::of(arb_key()),
    ) {
        let filtered = RangeTombstones::new(list.clone(), snapshot);
        let all = RangeTombstones::new_unfiltered(list.clone());
        check_invariants(&filtered)?;
        check_invariants(&all)?;
        let visible: Vec<Tomb> = list.iter().filter(|t| t.2 <= snapshot).cloned().collect();
        let clipped = all.fragments_between(&lo, hi.as_deref());
        let clipped_all = all.fragments_between_all_seqs(&lo, hi.as_deref());
        for k in probes() {
            let want_all = covering(&list, &k);
            let want_vis = covering(&visible, &k);
            prop_assert_eq!(filtered.max_covering_seq(&k), want_vis.last().copied().unwrap_or(0));
            prop_assert_eq!(all.max_covering_seq(&k), want_all.last().copied().unwrap_or(0));
            prop_assert_eq!(all.covering_seq_at(&k, snapshot), want_vis.last().copied().unwrap_or(0));
            prop_assert_eq!(filtered.covering_seq_at(&k, snapshot), want_vis.last().copied().unwrap_or(0));

            let in_range = k.as_slice() >= lo.as_slice()
                && hi.as_ref().is_none_or(|h| k.as_slice() < h.as_slice());
            let got_max = clipped.iter()
                .filter(|(b, e, _)| b.as_slice() <= k.as_slice() && k.as_slice() < e.as_slice())
                .map(|f| f.2)
                .max()
                .unwrap_or(0);
            let got_set: BTreeSet<SequenceNumber> = clipped_all.iter()
                .filter(|(b, e, _)| b.as_slice() <= k.as_slice() && k.as_slice() < e.as_slice())
                .map(|f| f.2)
                .collect();
            if in_range {
                prop_assert_eq!(got_max, want_all.last().copied().unwrap_or(0));
                prop_assert_eq!(got_set, want_all);
            } else {
                prop_assert_eq!(got_max, 0);
                prop_assert!(got_set.is_empty());
            }
        }
        // Clipped output stays sorted: begin ascending, then seq descending.
        for w in clipped_all.windows(2) {
            prop_assert!(w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].2 > w[1].2));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The hinted lookup equals the binary search for every hint: one
    /// carried along ascending keys (a forward scan), one carried along
    /// keys in no order (seeks, backward steps), and arbitrary ones.
    #[test]
    fn hinted_lookup_matches_binary_search(
        list in proptest::collection::vec((arb_key(), arb_key(), 1u64..12), 0..12),
        start in 0usize..40,
    ) {
        let r = RangeTombstones::new_unfiltered(list);
        let mut sorted = probes();
        sorted.sort();
        let mut hint = start;
        for k in &sorted {
            prop_assert_eq!(r.max_covering_seq_from(k, &mut hint), r.max_covering_seq(k));
        }
        let mut hint = start;
        for k in probes().iter().rev() {
            prop_assert_eq!(r.max_covering_seq_from(k, &mut hint), r.max_covering_seq(k));
        }
        for (i, k) in probes().iter().enumerate() {
            let mut hint = (start + i) % 30;
            prop_assert_eq!(r.max_covering_seq_from(k, &mut hint), r.max_covering_seq(k));
        }
    }
}
