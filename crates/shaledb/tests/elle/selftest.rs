//! The checker must be able to fail: hand-made histories with one anomaly
//! each are detected and classified, clean ones report nothing, and serial
//! executions generated at random (which are serializable by construction)
//! never produce a report.

use super::history::FINAL_PROCESS;
use super::*;
use proptest::prelude::*;

fn r(key: Key, value: &[Elem]) -> Mop {
    Mop::Read {
        key,
        value: value.to_vec(),
    }
}

fn a(key: Key, elem: Elem) -> Mop {
    Mop::Append { key, elem }
}

fn ok(h: &mut History, ops: Vec<Mop>) -> usize {
    h.push(0, ops, Outcome::Committed)
}

fn aborted(h: &mut History, ops: Vec<Mop>) -> usize {
    h.push(1, ops, Outcome::Aborted("WriteConflict".into()))
}

fn finals(h: &mut History, f: &[(Key, &[Elem])]) {
    for (k, v) in f {
        h.final_reads.insert(*k, v.to_vec());
    }
}

fn counts(h: &History) -> Vec<(Kind, usize)> {
    let report = check(h);
    for a in &report.anomalies {
        eprintln!("{}: {}", a.kind, a.text);
    }
    report.counts().into_iter().collect()
}

#[test]
fn clean_history_reports_nothing() {
    let mut h = History::default();
    ok(&mut h, vec![r(1, &[]), a(1, 1)]);
    ok(&mut h, vec![r(1, &[1]), a(1, 2), r(2, &[]), r(1, &[1, 2])]);
    aborted(&mut h, vec![r(1, &[1, 2]), a(1, 3)]);
    ok(&mut h, vec![r(2, &[]), a(2, 4), r(1, &[1, 2])]);
    finals(&mut h, &[(1, &[1, 2]), (2, &[4])]);
    let report = check(&h);
    assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    assert_eq!((report.stats.committed, report.stats.aborted), (3, 1));
    // ww 0->1 (key 1); wr 0->1, 1->3, 1->final, 3->final; rw 1->3 (key 2).
    assert_eq!(
        (report.stats.ww, report.stats.wr, report.stats.rw),
        (1, 4, 1)
    );
}

#[test]
fn g0_write_cycle() {
    // Blind appends: x is ordered T0, T1 but y is ordered T1, T0.
    let mut h = History::default();
    ok(&mut h, vec![a(1, 1), a(2, 2)]);
    ok(&mut h, vec![a(1, 3), a(2, 4)]);
    finals(&mut h, &[(1, &[1, 3]), (2, &[4, 2])]);
    assert_eq!(counts(&h), vec![(Kind::G0, 1)]);
    let report = check(&h);
    let text = &report.anomalies.first().unwrap().text;
    assert!(text.contains("G0 cycle") && text.contains("-ww(key 1") && text.contains("T1 (p0"));
}

#[test]
fn g1a_aborted_read() {
    let mut h = History::default();
    aborted(&mut h, vec![r(1, &[]), a(1, 1)]);
    let reader = ok(&mut h, vec![r(1, &[1])]);
    finals(&mut h, &[(1, &[])]);
    assert_eq!(counts(&h), vec![(Kind::G1a, 1)]);
    assert_eq!(check(&h).anomalies.first().unwrap().txns, vec![0, reader]);
}

#[test]
fn g1b_intermediate_read() {
    // T0 appends 1 then 2 to the same key; T1 sees only the 1. (The read also
    // closes a G-single cycle: T1 saw T0's first append but not its second.)
    let mut h = History::default();
    ok(&mut h, vec![r(1, &[]), a(1, 1), a(1, 2)]);
    ok(&mut h, vec![r(1, &[1])]);
    finals(&mut h, &[(1, &[1, 2])]);
    assert_eq!(counts(&h), vec![(Kind::G1b, 1), (Kind::GSingle, 1)]);
}

#[test]
fn g1c_circular_information_flow() {
    // Each read the other's append: wr both ways.
    let mut h = History::default();
    ok(&mut h, vec![r(1, &[]), a(1, 1), r(2, &[2])]);
    ok(&mut h, vec![r(2, &[]), a(2, 2), r(1, &[1])]);
    finals(&mut h, &[(1, &[1]), (2, &[2])]);
    assert_eq!(counts(&h), vec![(Kind::G1c, 1)]);
    let text = check(&h).anomalies.first().unwrap().text.clone();
    assert!(
        text.contains("-wr(key 1") && text.contains("-wr(key 2"),
        "{text}"
    );
}

#[test]
fn g_single_read_skew() {
    // T1 misses T0's append to 1 but sees its append to 2.
    let mut h = History::default();
    ok(&mut h, vec![r(1, &[]), a(1, 1), r(2, &[]), a(2, 2)]);
    ok(&mut h, vec![r(1, &[]), r(2, &[2])]);
    finals(&mut h, &[(1, &[1]), (2, &[2])]);
    assert_eq!(counts(&h), vec![(Kind::GSingle, 1)]);
    let text = check(&h).anomalies.first().unwrap().text.clone();
    assert!(
        text.contains("-rw(key 1") && text.contains("-wr(key 2"),
        "{text}"
    );
}

#[test]
fn g2_write_skew() {
    let mut h = History::default();
    ok(&mut h, vec![r(2, &[]), r(1, &[]), a(1, 1)]);
    ok(&mut h, vec![r(1, &[]), r(2, &[]), a(2, 2)]);
    finals(&mut h, &[(1, &[1]), (2, &[2])]);
    assert_eq!(counts(&h), vec![(Kind::G2, 1)]);
}

#[test]
fn g2_three_transactions_next_to_a_g_single() {
    // A ring of three write skews T0 -rw-> T1 -rw-> T2 -rw-> T0 (G2), and T3
    // forming a G-single with T0 in the same component: both are reported.
    let mut h = History::default();
    ok(
        &mut h,
        vec![r(2, &[]), r(1, &[]), a(1, 1), r(4, &[]), a(4, 4)],
    );
    ok(&mut h, vec![r(3, &[]), r(2, &[]), a(2, 2)]);
    ok(&mut h, vec![r(1, &[]), r(3, &[]), a(3, 3)]);
    ok(&mut h, vec![r(1, &[1]), r(4, &[])]);
    finals(&mut h, &[(1, &[1]), (2, &[2]), (3, &[3]), (4, &[4])]);
    assert_eq!(counts(&h), vec![(Kind::GSingle, 1), (Kind::G2, 1)]);
    let report = check(&h);
    let g2 = report.of_kinds(&[Kind::G2]);
    assert_eq!(g2.first().unwrap().txns, vec![0, 1, 2]);
}

#[test]
fn lost_update() {
    // Both read [] and appended; T1's write replaced T0's.
    let mut h = History::default();
    ok(&mut h, vec![r(1, &[]), a(1, 1)]);
    ok(&mut h, vec![r(1, &[]), a(1, 2)]);
    finals(&mut h, &[(1, &[2])]);
    assert_eq!(
        counts(&h),
        vec![(Kind::LostUpdate, 1), (Kind::IncompatibleOrder, 1)]
    );
    let report = check(&h);
    assert_eq!(
        report.of_kinds(&[Kind::LostUpdate]).first().unwrap().txns,
        vec![0]
    );
}

#[test]
fn cycles_are_still_found_through_a_key_with_lost_updates() {
    // Key 1 forks: T0 wrote [1], T1 (lost) wrote [2] on the same empty list,
    // T3 wrote [1 4]. T2 read [1] (so it precedes T3's append, rw) and read
    // key 3 with T3's element (wr): a G-single through the forked key.
    let mut h = History::default();
    ok(&mut h, vec![r(1, &[]), a(1, 1)]);
    ok(&mut h, vec![r(1, &[]), a(1, 2)]);
    ok(&mut h, vec![r(1, &[1]), r(3, &[5])]);
    ok(&mut h, vec![r(1, &[1]), a(1, 4), r(3, &[]), a(3, 5)]);
    finals(&mut h, &[(1, &[1, 4]), (3, &[5])]);
    assert_eq!(
        counts(&h),
        vec![
            (Kind::GSingle, 1),
            (Kind::LostUpdate, 1),
            (Kind::IncompatibleOrder, 1)
        ]
    );
    let report = check(&h);
    assert_eq!(
        report.of_kinds(&[Kind::GSingle]).first().unwrap().txns,
        vec![2, 3]
    );
    // Siblings T0 and T1 get no edge between them (their order is unknown).
    assert_eq!(report.stats.rw, 1);
}

#[test]
fn incompatible_reads_without_final_read() {
    let mut h = History::default();
    ok(&mut h, vec![r(1, &[]), a(1, 1)]);
    ok(&mut h, vec![r(1, &[]), a(1, 2)]);
    ok(&mut h, vec![r(1, &[1])]);
    ok(&mut h, vec![r(1, &[2])]);
    assert_eq!(counts(&h), vec![(Kind::IncompatibleOrder, 1)]);
}

#[test]
fn garbage_and_internal() {
    let mut h = History::default();
    ok(&mut h, vec![r(1, &[]), a(1, 1), r(1, &[])]); // misses its own append
    ok(&mut h, vec![r(1, &[1, 99])]); // 99 was never appended
    ok(&mut h, vec![r(2, &[1])]); // 1 belongs to key 1
    ok(&mut h, vec![r(1, &[1, 1])]); // duplicate
                                     // [1 99] and [1 1] also make key 1's order incompatible, and put element
                                     // 1 after two different predecessors (a fourth garbage report).
    assert_eq!(
        counts(&h),
        vec![
            (Kind::IncompatibleOrder, 1),
            (Kind::Garbage, 4),
            (Kind::Internal, 1)
        ]
    );
}

#[test]
fn unknown_outcome_counts_as_committed_only_if_observed() {
    let mut h = History::default();
    h.push(0, vec![r(1, &[]), a(1, 1)], Outcome::Unknown("Io".into()));
    h.push(0, vec![r(2, &[]), a(2, 2)], Outcome::Unknown("Io".into()));
    ok(&mut h, vec![r(1, &[1])]);
    finals(&mut h, &[(1, &[1]), (2, &[])]);
    assert!(check(&h).anomalies.is_empty());
}

#[test]
fn final_read_is_rendered() {
    let t = Txn {
        id: 5,
        process: FINAL_PROCESS,
        ops: vec![r(1, &[1, 2])],
        outcome: Outcome::Committed,
    };
    assert_eq!(t.to_string(), "T5 (final read): r(1)=[1 2]");
    let long: Vec<Elem> = (1..=10).collect();
    assert_eq!(r(3, &long).to_string(), "r(3)=[(6 more) 7 8 9 10]");
    assert_eq!(r(3, &long[..6]).to_string(), "r(3)=[1 2 3 4 5 6]");
}

/// One step of a random serial execution.
#[derive(Clone, Debug)]
struct Step {
    ops: Vec<(bool, Key)>, // (is append, key)
    abort: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        proptest::collection::vec((any::<bool>(), 0u64..4), 1..5),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(ops, abort)| Step { ops, abort })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A serial execution (one transaction at a time, aborted ones leave no
    /// trace) has no anomaly of any kind.
    #[test]
    fn serial_histories_are_clean(steps in proptest::collection::vec(step(), 1..40)) {
        let mut db: BTreeMap<Key, Vec<Elem>> = BTreeMap::new();
        let mut h = History::default();
        let mut next = 1;
        for (p, s) in steps.iter().enumerate() {
            let mut local = db.clone();
            let mut ops = Vec::new();
            for &(append, key) in &s.ops {
                let list = local.entry(key).or_default();
                ops.push(r(key, list));
                if append {
                    ops.push(a(key, next));
                    list.push(next);
                    next += 1;
                }
            }
            let outcome = if s.abort {
                Outcome::Aborted("voluntary".into())
            } else {
                db = local;
                Outcome::Committed
            };
            h.push(p % 3, ops, outcome);
        }
        for k in 0..4 {
            h.final_reads.insert(k, db.get(&k).cloned().unwrap_or_default());
        }
        let report = check(&h);
        prop_assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    }
}
