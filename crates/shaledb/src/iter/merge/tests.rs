// Tests: an out-of-range index is a test failure, which is what we want.
#![allow(clippy::indexing_slicing)]

use super::*;
use crate::error::Error;
use crate::iter::vec_iter::VecIterator;
use crate::types::{compare_internal_keys, make_internal_key, ValueKind, KIND_FOR_SEEK};
use proptest::prelude::*;
use std::time::Instant;

type Entry = (Vec<u8>, Vec<u8>);

fn ik(k: &str, s: u64) -> Vec<u8> {
    make_internal_key(k.as_bytes(), s, ValueKind::Put)
}

fn entry(k: &str, s: u64) -> Entry {
    (ik(k, s), format!("{k}{s}").into_bytes())
}

fn merged(children: Vec<Vec<Entry>>) -> MergingIterator<'static> {
    MergingIterator::new(
        children
            .into_iter()
            .map(|c| Box::new(VecIterator::new(c)) as BoxedIterator<'static>)
            .collect(),
    )
}

fn values_forward(it: &mut dyn InternalIterator) -> Vec<String> {
    let mut out = Vec::new();
    it.seek_to_first().expect("seek");
    while it.valid() {
        out.push(String::from_utf8_lossy(it.value()).into_owned());
        it.next().expect("next");
    }
    out
}

fn values_backward(it: &mut dyn InternalIterator) -> Vec<String> {
    let mut out = Vec::new();
    it.seek_to_last().expect("seek");
    while it.valid() {
        out.push(String::from_utf8_lossy(it.value()).into_owned());
        it.prev().expect("prev");
    }
    out
}

#[test]
fn merges_three_children_both_ways() {
    let mut it = merged(vec![
        vec![entry("a", 1), entry("c", 5)],
        vec![entry("a", 9), entry("d", 2)],
        vec![entry("b", 4), entry("c", 7), entry("e", 1)],
    ]);
    let fwd = values_forward(&mut it);
    assert_eq!(fwd, ["a9", "a1", "b4", "c7", "c5", "d2", "e1"]);
    let mut back = values_backward(&mut it);
    back.reverse();
    assert_eq!(back, fwd);
}

#[test]
fn direction_switch_example_from_module_docs() {
    let mut it = merged(vec![
        vec![entry("a1", 1), entry("a3", 1)],
        vec![entry("a2", 1), entry("a4", 1)],
    ]);
    it.seek_to_first().expect("seek");
    it.next().expect("next");
    assert_eq!(it.value(), b"a21");
    it.prev().expect("prev");
    assert_eq!(it.value(), b"a11");
    it.next().expect("next");
    assert_eq!(it.value(), b"a21");
    it.next().expect("next");
    assert_eq!(it.value(), b"a31");
    it.prev().expect("prev");
    it.prev().expect("prev");
    it.prev().expect("prev");
    assert!(!it.valid());
}

#[test]
fn no_children_or_empty_children() {
    let mut it = merged(Vec::new());
    assert_eq!(it.num_children(), 0);
    assert!(values_forward(&mut it).is_empty());
    let mut it = merged(vec![Vec::new(), vec![entry("x", 1)], Vec::new()]);
    assert_eq!(values_forward(&mut it), ["x1"]);
    assert_eq!(values_backward(&mut it), ["x1"]);
    it.seek(&ik("y", 5)).expect("seek");
    assert!(!it.valid());
    assert_eq!(it.key(), b"");
}

#[test]
fn seeks_land_on_the_right_version() {
    let mut it = merged(vec![
        vec![entry("k", 10), entry("k", 4)],
        vec![entry("k", 7), entry("m", 1)],
    ]);
    it.seek(&make_internal_key(b"k", 8, KIND_FOR_SEEK))
        .expect("seek");
    assert_eq!(it.value(), b"k7");
    it.seek_for_prev(&make_internal_key(b"k", 5, KIND_FOR_SEEK))
        .expect("seek");
    assert_eq!(it.value(), b"k7");
    it.next().expect("next");
    assert_eq!(it.value(), b"k4");
    it.next().expect("next");
    assert_eq!(it.value(), b"m1");
}

#[test]
fn identical_keys_are_not_repeated_on_direction_switch() {
    // Not expected in practice, but the switch must still make progress.
    let mut it = merged(vec![vec![entry("a", 1)], vec![entry("a", 1)]]);
    it.seek_to_first().expect("seek");
    it.next().expect("next");
    it.prev().expect("prev");
    assert!(!it.valid(), "only entries before the current key remain");
}

/// A child that fails the `fail_on`-th movement (1-based), then works again.
struct Failing {
    inner: VecIterator,
    moves: u32,
    fail_on: u32,
}

impl Failing {
    fn step(&mut self) -> crate::Result<()> {
        self.moves += 1;
        if self.moves == self.fail_on {
            return Err(Error::corruption("child", 7, "bad block"));
        }
        Ok(())
    }
}

impl InternalIterator for Failing {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> crate::Result<()> {
        self.step()?;
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) -> crate::Result<()> {
        self.step()?;
        self.inner.seek_to_last()
    }
    fn seek(&mut self, t: &[u8]) -> crate::Result<()> {
        self.step()?;
        self.inner.seek(t)
    }
    fn seek_for_prev(&mut self, t: &[u8]) -> crate::Result<()> {
        self.step()?;
        self.inner.seek_for_prev(t)
    }
    fn next(&mut self) -> crate::Result<()> {
        self.step()?;
        self.inner.next()
    }
    fn prev(&mut self) -> crate::Result<()> {
        self.step()?;
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

fn with_failing(fail_on: u32) -> MergingIterator<'static> {
    MergingIterator::new(vec![
        Box::new(VecIterator::new(vec![entry("a", 1), entry("c", 1)])),
        Box::new(Failing {
            inner: VecIterator::new(vec![entry("b", 1), entry("d", 1)]),
            moves: 0,
            fail_on,
        }),
    ])
}

#[test]
fn child_errors_propagate_and_invalidate() {
    // Move 1: seek_to_first; move 2: next from b; move 3: seek in the switch.
    for fail_on in 1..=3 {
        let mut it = with_failing(fail_on);
        let r = it
            .seek_to_first()
            .and_then(|()| it.next()) // a -> b (no child move on failing)
            .and_then(|()| it.next()) // b -> c: failing child moves (2)
            .and_then(|()| it.prev()); // switch: failing child seeks (3)
        let err = r.expect_err("the injected error surfaces");
        assert!(err.is_corruption(), "{err}");
        assert!(!it.valid(), "fail_on={fail_on}");
        // The child works again: a fresh seek recovers.
        it.seek_to_first().expect("seek");
        assert_eq!(it.value(), b"a1");
    }
}

#[derive(Debug, Clone)]
enum Op {
    First,
    Last,
    Seek(Vec<u8>),
    SeekForPrev(Vec<u8>),
    Next,
    Prev,
}

fn arb_ikey() -> impl Strategy<Value = Vec<u8>> {
    ("[a-f]{1,2}", 0u64..20, 0u8..3).prop_map(|(k, s, t)| {
        let kind = ValueKind::from_u8(t).unwrap_or(ValueKind::Put);
        make_internal_key(k.as_bytes(), s, kind)
    })
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::First),
        1 => Just(Op::Last),
        2 => arb_ikey().prop_map(Op::Seek),
        2 => arb_ikey().prop_map(Op::SeekForPrev),
        5 => Just(Op::Next),
        5 => Just(Op::Prev),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The merge of 3-5 children behaves exactly like one sorted vector
    /// under any sequence of seeks and steps, including direction switches.
    #[test]
    fn matches_a_sorted_vector_model(
        keys in proptest::collection::btree_map(("[a-f]{1,2}", 0u64..20), (0usize..5, 0u8..2), 0..60),
        n_children in 3usize..=5,
        ops in proptest::collection::vec(arb_op(), 1..60),
    ) {
        let mut children: Vec<Vec<Entry>> = vec![Vec::new(); n_children];
        let mut model: Vec<Entry> = Vec::new();
        for ((k, s), (child, kind)) in keys {
            let kind = if kind == 0 { ValueKind::Delete } else { ValueKind::Put };
            let e = (make_internal_key(k.as_bytes(), s, kind), format!("{k}@{s}").into_bytes());
            children[child % n_children].push(e.clone());
            model.push(e);
        }
        model.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        let mut it = merged(children);
        let mut pos: Option<usize> = None;
        for op in ops {
            match op {
                Op::First => {
                    it.seek_to_first().expect("seek");
                    pos = (!model.is_empty()).then_some(0);
                }
                Op::Last => {
                    it.seek_to_last().expect("seek");
                    pos = model.len().checked_sub(1);
                }
                Op::Seek(t) => {
                    it.seek(&t).expect("seek");
                    let p = model.partition_point(|(k, _)| compare_internal_keys(k, &t) == Ordering::Less);
                    pos = (p < model.len()).then_some(p);
                }
                Op::SeekForPrev(t) => {
                    it.seek_for_prev(&t).expect("seek");
                    let p = model.partition_point(|(k, _)| compare_internal_keys(k, &t) != Ordering::Greater);
                    pos = p.checked_sub(1);
                }
                Op::Next => {
                    let Some(p) = pos else { continue };
                    it.next().expect("next");
                    pos = (p + 1 < model.len()).then_some(p + 1);
                }
                Op::Prev => {
                    let Some(p) = pos else { continue };
                    it.prev().expect("prev");
                    pos = p.checked_sub(1);
                }
            }
            prop_assert_eq!(it.valid(), pos.is_some());
            if let Some(p) = pos {
                prop_assert_eq!(it.key(), model[p].0.as_slice());
                prop_assert_eq!(it.value(), model[p].1.as_slice());
            }
        }
    }
}

/// Forward-only linear-scan merge, kept as the reference the heap was
/// measured against (`bench_merge_strategies`).
struct LinearMerge {
    children: Vec<BoxedIterator<'static>>,
    current: Option<usize>,
}

impl LinearMerge {
    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for i in 0..self.children.len() {
            if !self.children[i].valid() {
                continue;
            }
            match best {
                Some(b)
                    if compare_internal_keys(self.children[i].key(), self.children[b].key())
                        != Ordering::Less => {}
                _ => best = Some(i),
            }
        }
        self.current = best;
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first().expect("seek");
        }
        self.find_smallest();
    }

    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        self.children[self.current.expect("valid")].key()
    }

    fn next(&mut self) {
        let cur = self.current.expect("valid");
        self.children[cur].next().expect("next");
        self.find_smallest();
    }
}

/// `run` consecutive keys go to the same child (1 = fully interleaved).
fn bench_children(n: usize, total: usize, run: usize) -> Vec<BoxedIterator<'static>> {
    let mut children: Vec<Vec<Entry>> = vec![Vec::new(); n];
    for i in 0..total {
        children[(i / run) % n].push((ik(&format!("key{i:08}"), 1), Vec::new()));
    }
    children
        .into_iter()
        .map(|c| Box::new(VecIterator::new(c)) as BoxedIterator<'static>)
        .collect()
}

/// Best of three timings of `f`, in ns per entry.
fn best_of_three(total: usize, mut f: impl FnMut() -> usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        std::hint::black_box(f());
        best = best.min(start.elapsed().as_nanos() as f64 / total as f64);
    }
    best
}

/// `cargo test --release -p shaledb --lib bench_merge -- --ignored --nocapture`
#[test]
#[ignore = "benchmark; prints ns per next()"]
fn bench_merge_strategies() {
    const TOTAL: usize = 200_000;
    for run in [1, 64] {
        for n in [2, 3, 4, 6, 8, 12, 16] {
            let mut heap = MergingIterator::new(bench_children(n, TOTAL, run));
            let heap_ns = best_of_three(TOTAL, || {
                let mut count = 0usize;
                heap.seek_to_first().expect("seek");
                while heap.valid() {
                    count += heap.key().len();
                    heap.next().expect("next");
                }
                count
            });
            let mut lin = LinearMerge {
                children: bench_children(n, TOTAL, run),
                current: None,
            };
            let lin_ns = best_of_three(TOTAL, || {
                let mut count = 0usize;
                lin.seek_to_first();
                while lin.valid() {
                    count += lin.key().len();
                    lin.next();
                }
                count
            });
            println!("run={run:2} children={n:2}  heap {heap_ns:6.1} ns/next  linear {lin_ns:6.1} ns/next");
        }
    }
}
