//! Tests of [`TxnIterator`]: the merge with own writes (both directions,
//! bounds, direction changes, read views), a proptest against a `BTreeMap`
//! model, and the exact ranges recorded in the read set.

use super::*;
use crate::db::Db;
use crate::env::mem::MemFs;
use crate::txn::{Isolation, Txn, TxnOptions};
use crate::Options;
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

fn open() -> Db {
    let opts = Options {
        fs: Arc::new(MemFs::new()),
        background_threads: false,
        ..Options::default()
    };
    Db::open("/db", opts).unwrap()
}

fn si() -> TxnOptions {
    TxnOptions {
        lock_wait_timeout: Duration::from_millis(5),
        ..TxnOptions::default()
    }
}

fn rc() -> TxnOptions {
    TxnOptions {
        isolation: Isolation::ReadCommitted,
        ..si()
    }
}

/// Serializable: the level that records its reads.
fn ser() -> TxnOptions {
    TxnOptions {
        isolation: Isolation::Serializable,
        ..si()
    }
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn pairs(list: &[(&str, &str)]) -> Pairs {
    list.iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

fn forward(it: &mut TxnIterator<'_>) -> Pairs {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

fn backward(it: &mut TxnIterator<'_>) -> Pairs {
    let mut out = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    out
}

/// Base `a=1 b=2` in an extent, `d=4 e=5` in the memtable; the transaction
/// writes `b=20 c=30 f=60` and deletes `d` (and `zz`, absent everywhere).
fn fixture(db: &Db) -> Txn {
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"2").unwrap();
    db.flush().unwrap();
    db.put(b"d", b"4").unwrap();
    db.put(b"e", b"5").unwrap();
    let mut t = db.begin(ser());
    t.put(b"b", b"20").unwrap();
    t.put(b"c", b"30").unwrap();
    t.delete(b"d").unwrap();
    t.put(b"f", b"60").unwrap();
    t.delete(b"zz").unwrap();
    t
}

#[test]
fn own_puts_and_deletes_visible_both_directions() {
    let db = open();
    let t = fixture(&db);
    let want = pairs(&[
        ("a", "1"),
        ("b", "20"),
        ("c", "30"),
        ("e", "5"),
        ("f", "60"),
    ]);
    let mut it = t.iter(None, None).unwrap();
    assert!(!it.valid() && it.key().is_empty() && it.value().is_empty());
    assert_eq!(forward(&mut it), want);
    let mut rev = want.clone();
    rev.reverse();
    assert_eq!(backward(&mut it), rev);
    assert!(it.status().is_none());
    // next/prev on an exhausted iterator stay invalid.
    it.next().unwrap();
    it.prev().unwrap();
    assert!(!it.valid());
    drop(it);
    assert_eq!(t.scan(None, None, usize::MAX).unwrap(), want);
    assert_eq!(t.scan(None, None, 2).unwrap(), want[..2].to_vec());
    assert!(t.scan(None, None, 0).unwrap().is_empty());
}

#[test]
fn only_deletes_and_empty_database() {
    let db = open();
    db.put(b"a", b"1").unwrap();
    let mut t = db.begin(si());
    t.delete(b"a").unwrap();
    t.delete(b"b").unwrap();
    let mut it = t.iter(None, None).unwrap();
    assert!(forward(&mut it).is_empty());
    assert!(backward(&mut it).is_empty());
    drop(it);
    // A fresh database: only own writes.
    let db = open();
    let mut t = db.begin(si());
    t.put(b"x", b"1").unwrap();
    let mut it = t.iter(None, None).unwrap();
    assert_eq!(forward(&mut it), pairs(&[("x", "1")]));
    assert_eq!(backward(&mut it), pairs(&[("x", "1")]));
}

#[test]
fn bounds_apply_to_both_sources() {
    let db = open();
    let t = fixture(&db);
    let mut it = t.iter(Some(b"b"), Some(b"f")).unwrap();
    let want = pairs(&[("b", "20"), ("c", "30"), ("e", "5")]);
    assert_eq!(forward(&mut it), want);
    assert_eq!(
        backward(&mut it),
        want.iter().rev().cloned().collect::<Pairs>()
    );
    it.seek(b"a").unwrap(); // below the lower bound: clamps
    assert_eq!(it.key(), b"b");
    it.seek_for_prev(b"z").unwrap(); // above the upper bound: clamps
    assert_eq!(it.key(), b"e");
    it.seek(b"f").unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"a").unwrap();
    assert!(!it.valid());
    drop(it);
    // Empty bounds.
    let mut it = t.iter(Some(b"c"), Some(b"c")).unwrap();
    assert!(forward(&mut it).is_empty() && backward(&mut it).is_empty());
}

#[test]
fn interleaved_seeks_and_direction_changes() {
    let db = open();
    let t = fixture(&db);
    let mut it = t.iter(None, None).unwrap();
    let at = |it: &TxnIterator<'_>| String::from_utf8(it.key().to_vec()).unwrap();
    it.seek(b"bb").unwrap();
    assert_eq!(at(&it), "c"); // own insert
    it.prev().unwrap();
    assert_eq!((at(&it), it.value()), ("b".into(), &b"20"[..])); // shadowed base
    it.prev().unwrap();
    assert_eq!(at(&it), "a");
    it.next().unwrap();
    assert_eq!(at(&it), "b");
    it.next().unwrap();
    it.next().unwrap();
    assert_eq!(at(&it), "e"); // d hidden by own delete
    it.prev().unwrap();
    assert_eq!(at(&it), "c"); // d hidden backwards too
    it.seek_for_prev(b"d").unwrap();
    assert_eq!(at(&it), "c");
    it.next().unwrap();
    assert_eq!(at(&it), "e");
    it.seek_for_prev(b"e").unwrap();
    assert_eq!(at(&it), "e");
    it.next().unwrap();
    assert_eq!((at(&it), it.value()), ("f".into(), &b"60"[..]));
    it.next().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert_eq!(at(&it), "f");
    it.prev().unwrap();
    it.next().unwrap();
    assert_eq!(at(&it), "f");
    it.seek_to_first().unwrap();
    assert_eq!(at(&it), "a");
    it.prev().unwrap();
    assert!(!it.valid());
}

#[test]
fn other_column_families_are_separate() {
    let db = open();
    let cf = db.create_cf("other").unwrap();
    db.put_cf(cf, b"b", b"base").unwrap();
    let mut t = db.begin(si());
    t.put(b"a", b"default").unwrap();
    t.put_cf(cf, b"c", b"own").unwrap();
    assert_eq!(
        t.scan_cf(cf, None, None, 10).unwrap(),
        pairs(&[("b", "base"), ("c", "own")])
    );
    assert_eq!(t.scan(None, None, 10).unwrap(), pairs(&[("a", "default")]));
    assert!(matches!(
        t.iter_cf(99, None, None),
        Err(Error::ColumnFamilyNotFound(_))
    ));
}

#[test]
fn read_view_si_snapshot_rc_per_iterator() {
    let db = open();
    db.put(b"a", b"1").unwrap();
    let s = db.begin(si());
    let r = db.begin(rc());
    let mut r_old = r.iter(None, None).unwrap(); // statement before the commit
    db.put(b"b", b"2").unwrap();
    assert_eq!(s.scan(None, None, 10).unwrap(), pairs(&[("a", "1")]));
    assert_eq!(
        r.scan(None, None, 10).unwrap(),
        pairs(&[("a", "1"), ("b", "2")])
    );
    assert_eq!(forward(&mut r_old), pairs(&[("a", "1")]));
}

// ---- read-set recording ----

type Range = (CfId, Vec<u8>, Option<Vec<u8>>);

fn ranges(t: &mut Txn) -> Vec<Range> {
    t.read_set()
        .ranges()
        .map(|(c, l, h)| (c, l.to_vec(), h.map(<[u8]>::to_vec)))
        .collect()
}

fn rg(lo: &str, hi: Option<&str>) -> Range {
    (0, lo.as_bytes().to_vec(), hi.map(|h| h.as_bytes().to_vec()))
}

#[test]
fn exhausted_scans_cover_their_bounds() {
    let db = open();
    let mut t = fixture(&db);
    t.scan(Some(b"b"), Some(b"d"), 100).unwrap();
    assert_eq!(ranges(&mut t), vec![rg("b", Some("d"))]);
    drop(t);
    let mut t = fixture(&db);
    t.scan(None, None, 100).unwrap();
    assert_eq!(ranges(&mut t), vec![rg("", None)]);
    // Backward to exhaustion: the same.
    drop(t);
    let mut t = fixture(&db);
    backward(&mut t.iter(Some(b"b"), Some(b"d")).unwrap());
    assert_eq!(ranges(&mut t), vec![rg("b", Some("d"))]);
    // A seek that finds nothing covers from the target to the bound.
    drop(t);
    let mut t = fixture(&db);
    t.iter(None, Some(b"y")).unwrap().seek(b"g").unwrap();
    assert_eq!(ranges(&mut t), vec![rg("g", Some("y"))]);
    // Nothing in range at all, and an empty range records nothing.
    drop(t);
    let mut t = fixture(&db);
    let mut it = t.iter(Some(b"m"), Some(b"m")).unwrap();
    it.seek_to_first().unwrap();
    it.seek(b"z").unwrap();
    drop(it);
    assert!(t.read_set().is_empty());
}

#[test]
fn stopped_scans_cover_up_to_the_last_key() {
    let db = open();
    let mut t = fixture(&db);
    assert_eq!(t.scan(None, None, 2).unwrap().len(), 2); // a, b
    assert_eq!(ranges(&mut t), vec![rg("", Some("b\0"))]);
    drop(t);
    let mut t = fixture(&db);
    let mut it = t.iter(None, None).unwrap();
    it.seek(b"bb").unwrap(); // lands on c
    it.next().unwrap(); // e (d deleted by us: inside the range)
    drop(it);
    assert_eq!(ranges(&mut t), vec![rg("bb", Some("e\0"))]);
    // Unpositioned iterators record nothing.
    drop(t);
    let mut t = fixture(&db);
    drop(t.iter(None, None).unwrap());
    assert!(t.read_set().is_empty());
}

#[test]
fn backward_iteration_covers_from_the_landing_key() {
    let db = open();
    let mut t = fixture(&db);
    let mut it = t.iter(None, Some(b"f")).unwrap();
    it.seek_to_last().unwrap(); // e
    it.prev().unwrap(); // c
    drop(it);
    assert_eq!(ranges(&mut t), vec![rg("c", Some("f"))]);
    drop(t);
    let mut t = fixture(&db);
    let mut it = t.iter(None, None).unwrap();
    it.seek_for_prev(b"d").unwrap(); // c
    assert_eq!(it.key(), b"c");
    it.prev().unwrap(); // b
    drop(it);
    assert_eq!(ranges(&mut t), vec![rg("b", Some("d\0"))]);
    // seek_for_prev past the upper bound is capped by the bound.
    drop(t);
    let mut t = fixture(&db);
    t.iter(None, Some(b"c"))
        .unwrap()
        .seek_for_prev(b"x")
        .unwrap();
    assert_eq!(ranges(&mut t), vec![rg("b", Some("c"))]);
}

#[test]
fn direction_changes_widen_one_segment() {
    let db = open();
    let mut t = fixture(&db);
    let mut it = t.iter(None, None).unwrap();
    it.seek(b"c").unwrap(); // c
    it.prev().unwrap(); // b
    it.next().unwrap(); // c
    it.next().unwrap(); // e
    it.prev().unwrap(); // c: inside already
    drop(it);
    assert_eq!(ranges(&mut t), vec![rg("b", Some("e\0"))]);
}

#[test]
fn seeks_jumping_around_record_separate_then_merged_ranges() {
    let db = open();
    let mut t = fixture(&db);
    let mut it = t.iter(None, None).unwrap();
    it.seek(b"a").unwrap(); // a: [a, a\0)
    it.seek(b"e").unwrap(); // e: [e, e\0)
    it.seek_for_prev(b"bb").unwrap(); // b: [b, bb\0)
    drop(it);
    assert_eq!(
        ranges(&mut t),
        vec![
            rg("a", Some("a\0")),
            rg("b", Some("bb\0")),
            rg("e", Some("e\0"))
        ]
    );
    let mut it = t.iter(None, None).unwrap();
    it.seek(b"a").unwrap();
    it.next().unwrap(); // b: [a, b\0) overlaps [b, bb\0)
    drop(it);
    assert_eq!(
        ranges(&mut t),
        vec![rg("a", Some("bb\0")), rg("e", Some("e\0"))]
    );
    let mut it = t.iter(None, None).unwrap();
    it.seek(b"c").unwrap();
    it.next().unwrap(); // e: [c, e\0) joins everything
    drop(it);
    assert_eq!(
        ranges(&mut t),
        vec![rg("a", Some("bb\0")), rg("c", Some("e\0"))]
    );
    t.scan(Some(b"b"), Some(b"c"), 9).unwrap();
    assert_eq!(ranges(&mut t), vec![rg("a", Some("e\0"))]);
}

#[test]
fn point_reads_are_recorded_per_cf() {
    let db = open();
    let cf = db.create_cf("other").unwrap();
    let mut t = db.begin(ser());
    t.get(b"missing").unwrap();
    t.get_cf(cf, b"k").unwrap();
    t.get_for_update(b"u").unwrap();
    t.scan_cf(cf, Some(b"m"), Some(b"n"), 5).unwrap();
    let rs = t.read_set();
    let points: Vec<_> = rs.points().collect();
    assert_eq!(
        points,
        vec![(0, &b"missing"[..]), (0, &b"u"[..]), (cf, &b"k"[..])]
    );
    let rl: Vec<_> = rs.ranges().collect();
    assert_eq!(rl, vec![(cf, &b"m"[..], Some(&b"n"[..]))]);
    assert!(rs.covers(cf, b"m") && !rs.covers(0, b"m"));
}

// ---- proptest: the merge against a BTreeMap model ----

#[derive(Clone, Debug)]
enum Op {
    First,
    Last,
    Seek(Vec<u8>),
    SeekForPrev(Vec<u8>),
    Next,
    Prev,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(b'a'..b'g', 1..3)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::First),
        Just(Op::Last),
        key().prop_map(Op::Seek),
        key().prop_map(Op::SeekForPrev),
        Just(Op::Next),
        Just(Op::Next),
        Just(Op::Prev),
        Just(Op::Prev),
    ]
}

/// Where the model cursor lands, as an index into the sorted model entries.
fn model_step(m: &[(Vec<u8>, Vec<u8>)], pos: Option<usize>, op: &Op) -> Option<usize> {
    match op {
        Op::First => (!m.is_empty()).then_some(0),
        Op::Last => m.len().checked_sub(1),
        Op::Seek(k) => {
            let i = m.partition_point(|(x, _)| x < k);
            (i < m.len()).then_some(i)
        }
        Op::SeekForPrev(k) => m.partition_point(|(x, _)| x <= k).checked_sub(1),
        Op::Next => pos.and_then(|i| (i + 1 < m.len()).then_some(i + 1)),
        Op::Prev => pos.and_then(|i| i.checked_sub(1)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Committed base (part flushed) + buffered puts/deletes, random bounds:
    /// a random walk of seeks and steps, then full forward and backward
    /// iteration, match the model; the walk records exactly the model ranges.
    #[test]
    fn matches_btreemap_model(
        base in proptest::collection::vec((key(), proptest::option::of(0u8..9)), 0..16),
        flush_at in 0usize..16,
        own in proptest::collection::vec((key(), proptest::option::of(10u8..19)), 0..10),
        lower in proptest::option::of(key()),
        upper in proptest::option::of(key()),
        ops in proptest::collection::vec(op(), 0..24),
    ) {
        let db = open();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (i, (k, v)) in base.iter().enumerate() {
            if i == flush_at {
                db.flush().unwrap();
            }
            match v {
                Some(v) => {
                    db.put(k, &[*v]).unwrap();
                    model.insert(k.clone(), vec![*v]);
                }
                None => {
                    db.delete(k).unwrap();
                    model.remove(k);
                }
            }
        }
        let mut t = db.begin(ser());
        for (k, v) in &own {
            match v {
                Some(v) => {
                    t.put(k, &[*v]).unwrap();
                    model.insert(k.clone(), vec![*v]);
                }
                None => {
                    t.delete(k).unwrap();
                    model.remove(k);
                }
            }
        }
        let m: Pairs = model
            .into_iter()
            .filter(|(k, _)| lower.as_ref().is_none_or(|l| k >= l))
            .filter(|(k, _)| upper.as_ref().is_none_or(|u| k < u))
            .collect();
        let (lo, hi) = (lower.as_deref(), upper.as_deref());
        // A random walk first, so the read set holds only what it covered;
        // the model coverage follows the table in the module docs.
        let mut it = t.iter(lo, hi).unwrap();
        let mut pos = None;
        let mut want_rs = ReadSet::new();
        let mut seg: Option<(Vec<u8>, Option<Vec<u8>>)> = None;
        let lower0 = lower.clone().unwrap_or_default();
        for op in &ops {
            match op {
                Op::First => it.seek_to_first().unwrap(),
                Op::Last => it.seek_to_last().unwrap(),
                Op::Seek(k) => it.seek(k).unwrap(),
                Op::SeekForPrev(k) => it.seek_for_prev(k).unwrap(),
                Op::Next => it.next().unwrap(),
                Op::Prev => it.prev().unwrap(),
            }
            let was_valid = pos.is_some();
            pos = model_step(&m, pos, op);
            let cur = pos.map(|i| m[i].0.clone());
            let after = cur.as_deref().map(succ);
            match op {
                Op::First | Op::Last | Op::Seek(_) | Op::SeekForPrev(_) => {
                    if let Some((l, h)) = seg.take() {
                        want_rs.add_range(0, &l, h.as_deref());
                    }
                    seg = Some(match op {
                        Op::First => (lower0.clone(), after.or(upper.clone())),
                        Op::Seek(k) => (k.clone().max(lower0.clone()), after.or(upper.clone())),
                        Op::Last => (cur.unwrap_or(lower0.clone()), upper.clone()),
                        _ => {
                            let k = match op { Op::SeekForPrev(k) => k, _ => unreachable!() };
                            (cur.unwrap_or(lower0.clone()), min_hi(Some(succ(k)), upper.clone()))
                        }
                    });
                }
                Op::Next if was_valid => {
                    if let Some((_, h)) = &mut seg {
                        *h = match after {
                            None => upper.clone(),
                            Some(a) => h.clone().map(|h| h.max(a)),
                        };
                    }
                }
                Op::Prev if was_valid => {
                    if let Some((l, _)) = &mut seg {
                        *l = cur.map_or(lower0.clone(), |c| c.min(l.clone()));
                    }
                }
                _ => {}
            }
            match pos {
                Some(i) => {
                    prop_assert!(it.valid(), "{:?}: want {:?}", op, m[i]);
                    prop_assert_eq!((it.key(), it.value()), (&m[i].0[..], &m[i].1[..]));
                }
                None => prop_assert!(!it.valid(), "{:?}: got {:?}", op, it.key()),
            }
        }
        drop(it);
        if let Some((l, h)) = seg.take() {
            want_rs.add_range(0, &l, h.as_deref());
        }
        let got: Vec<_> = t.read_set().ranges().collect();
        let want: Vec<_> = want_rs.ranges().collect();
        prop_assert_eq!(got, want);
        let mut it = t.iter(lo, hi).unwrap();
        prop_assert_eq!(&forward(&mut it), &m);
        let rev: Pairs = m.iter().rev().cloned().collect();
        prop_assert_eq!(&backward(&mut it), &rev);
    }
}

/// A damaged extent under the base makes the merged iterator fail with
/// `Corruption` (returned by the move and kept in `status`), never yield
/// wrong data; own writes do not mask it.
#[test]
fn corruption_in_the_base_surfaces_as_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let value = |i: u32| format!("value-{i}-{}", "x".repeat((i % 40) as usize)).into_bytes();
    let key = |i: u32| format!("key{i:05}").into_bytes();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..3000 {
            db.put(&key(i), &value(i)).unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    let data = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".sdt"))
        .unwrap();
    let mut bytes = std::fs::read(&data).unwrap();
    let mid = bytes.len() / 3;
    bytes[mid] ^= 0x5a;
    std::fs::write(&data, bytes).unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let mut t = db.begin(si());
    t.put(b"key00000", b"own").unwrap();
    let mut it = t.iter(None, None).unwrap();
    let mut r = it.seek_to_first();
    let mut i = 0u32;
    while r.is_ok() && it.valid() {
        let want = if i == 0 { b"own".to_vec() } else { value(i) };
        assert_eq!((it.key(), it.value()), (&key(i)[..], &want[..]));
        i += 1;
        r = it.next();
    }
    let err = r.expect_err("the flipped byte was read");
    assert!(err.is_corruption(), "{err}");
    assert!(!it.valid());
    assert!(it.status().is_some_and(Error::is_corruption));
    assert!(i < 3000);
}

#[test]
fn only_serializable_records_its_reads() {
    let db = open();
    db.put(b"a", b"1").unwrap();
    for opts in [rc(), si()] {
        let mut t = db.begin(opts);
        assert_eq!(t.get(b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(t.scan(None, None, 10).unwrap().len(), 1);
        assert!(t.read_set().is_empty());
    }
    let mut t = db.begin(ser());
    assert_eq!(t.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(t.scan(None, None, 10).unwrap().len(), 1);
    assert_eq!(t.read_set().points().count(), 1);
    assert_eq!(t.read_set().ranges().count(), 1);
}
