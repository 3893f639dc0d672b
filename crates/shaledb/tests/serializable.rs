//! Serializable (`Isolation::Serializable`): the anomalies SI allows and
//! Serializable must not, as readable scripts, plus the 2PC read-only case
//! and a concurrent stress with an invariant only serializability keeps.
//! Companion of tests/isolation.rs (which runs the shared anomalies at
//! every level); see docs/isolation.md.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::txn::{Isolation, TxnOptions};
use shaledb::{Db, Error, Options};
use std::sync::Arc;
use std::time::Duration;

const SER: Isolation = Isolation::Serializable;

fn open() -> Db {
    let opts = Options {
        fs: Arc::new(MemFs::new()),
        ..Options::default()
    };
    Db::open("/db", opts).unwrap()
}

fn opts(isolation: Isolation) -> TxnOptions {
    TxnOptions {
        isolation,
        lock_wait_timeout: Duration::from_millis(10),
        ..TxnOptions::default()
    }
}

fn v(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}

fn num(v: Option<Vec<u8>>) -> i64 {
    String::from_utf8(v.unwrap()).unwrap().parse().unwrap()
}

fn is_serialization_failure(r: shaledb::Result<()>) -> bool {
    matches!(r, Err(Error::SerializationFailure { .. }))
}

/// G2-item (write skew): both read x and y, each writes the other row. At SI
/// both commit (x + y goes negative); at Serializable the second committer
/// fails because x changed after its snapshot.
#[test]
fn g2_item_write_skew_is_prevented() {
    let db = open();
    db.put(b"x", b"50").unwrap();
    db.put(b"y", b"50").unwrap();
    let mut t1 = db.begin(opts(SER));
    let mut t2 = db.begin(opts(SER));
    assert_eq!(num(t1.get(b"x").unwrap()) + num(t1.get(b"y").unwrap()), 100);
    assert_eq!(num(t2.get(b"x").unwrap()) + num(t2.get(b"y").unwrap()), 100);
    t1.put(b"x", b"-40").unwrap(); // T1: x = -40 (x + y still >= 0 as T1 saw it)
    t2.put(b"y", b"-40").unwrap(); // T2: y = -40 (same reasoning)
    t1.commit().unwrap();
    assert!(is_serialization_failure(t2.commit())); // x changed after T2's snapshot
    assert_eq!(num(db.get(b"x").unwrap()) + num(db.get(b"y").unwrap()), 10);
}

/// G2 with a predicate (hermitage's "anti-dependency cycles"): both count
/// the rows of a range, each inserts a new row into it. At SI both commit
/// (a phantom for each); at Serializable the second fails.
#[test]
fn g2_predicate_phantom_cycle_is_prevented() {
    let db = open();
    db.put(b"task/1", b"on-call").unwrap();
    let mut t1 = db.begin(opts(SER));
    let mut t2 = db.begin(opts(SER));
    assert_eq!(
        t1.scan(Some(b"task/".as_slice()), Some(b"task0".as_slice()), 100)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        t2.scan(Some(b"task/".as_slice()), Some(b"task0".as_slice()), 100)
            .unwrap()
            .len(),
        1
    );
    t1.put(b"task/2", b"on-call").unwrap();
    t2.put(b"task/3", b"on-call").unwrap();
    t1.commit().unwrap();
    assert!(is_serialization_failure(t2.commit()));
    let rows = db
        .begin(opts(SER))
        .scan(Some(b"task/".as_slice()), Some(b"task0".as_slice()), 100)
        .unwrap();
    assert_eq!(rows.len(), 2);
}

/// A write outside the ranges read is not a conflict: validation is exact
/// about what was observed.
#[test]
fn writes_outside_the_read_set_do_not_conflict() {
    let db = open();
    db.put(b"a", b"1").unwrap();
    db.put(b"m", b"1").unwrap();
    let mut t1 = db.begin(opts(SER));
    assert_eq!(t1.get(b"a").unwrap(), v("1"));
    assert_eq!(
        t1.scan(Some(b"b".as_slice()), Some(b"c".as_slice()), 10)
            .unwrap()
            .len(),
        0
    );
    db.put(b"m", b"2").unwrap(); // outside what T1 read
    db.put(b"c", b"2").unwrap(); // just past the scanned range [b, c)
    t1.put(b"z", b"1").unwrap();
    t1.commit().unwrap();
    // And a plain write inside the scanned range is one.
    let mut t2 = db.begin(opts(SER));
    assert_eq!(
        t2.scan(Some(b"b".as_slice()), Some(b"d".as_slice()), 10)
            .unwrap()
            .len(),
        1
    );
    db.put(b"b5", b"x").unwrap();
    t2.put(b"z", b"2").unwrap();
    assert!(is_serialization_failure(t2.commit()));
    // A delete counts as a change too.
    let mut t3 = db.begin(opts(SER));
    assert_eq!(t3.get(b"a").unwrap(), v("1"));
    db.delete(b"a").unwrap();
    t3.put(b"z", b"3").unwrap();
    assert!(is_serialization_failure(t3.commit()));
}

/// PMP (predicate-many-preceders): T1 counts a range, T2 inserts into it and
/// commits, T1 counts again: same count (one snapshot), and T1 — which then
/// writes — fails at commit because its predicate read was invalidated.
#[test]
fn pmp_predicate_read_is_stable_and_validated() {
    let db = open();
    db.put(b"p/1", b"1").unwrap();
    let mut t1 = db.begin(opts(SER));
    assert_eq!(
        t1.scan(Some(b"p/".as_slice()), Some(b"p0".as_slice()), 10)
            .unwrap()
            .len(),
        1
    );
    let mut t2 = db.begin(opts(SER));
    t2.put(b"p/2", b"1").unwrap();
    t2.commit().unwrap();
    assert_eq!(
        t1.scan(Some(b"p/".as_slice()), Some(b"p0".as_slice()), 10)
            .unwrap()
            .len(),
        1
    );
    t1.put(b"count", b"1").unwrap();
    assert!(is_serialization_failure(t1.commit()));
}

/// Read-only transactions commit without validation: they saw a snapshot,
/// which is a prefix of the commit order.
#[test]
fn read_only_transactions_always_commit() {
    let db = open();
    db.put(b"x", b"1").unwrap();
    let t = db.begin(opts(SER));
    assert_eq!(t.get(b"x").unwrap(), v("1"));
    db.put(b"x", b"2").unwrap();
    assert_eq!(t.get(b"x").unwrap(), v("1"));
    t.commit().unwrap();
}

/// 2PC: T1 read x and wrote y and is prepared (serialized at its prepare).
/// T2 read y *before* T1's commit (so it missed T1's write) and wrote x:
/// T2 must fail, or T1 -> T2 -> T1 would be a cycle.
#[test]
fn a_prepared_write_set_invalidates_later_readers() {
    let db = open();
    db.put(b"x", b"0").unwrap();
    db.put(b"y", b"0").unwrap();
    let mut t1 = db.begin(opts(SER));
    let mut t2 = db.begin(opts(SER));
    assert_eq!(t1.get(b"x").unwrap(), v("0"));
    t1.put(b"y", b"1").unwrap();
    t1.prepare(b"t1").unwrap();
    assert_eq!(t2.get(b"y").unwrap(), v("0")); // T1 not committed yet
    t2.put(b"x", b"1").unwrap(); // x is not locked: T1 only read it
    assert!(is_serialization_failure(t2.commit()));
    db.commit_prepared(b"t1").unwrap();
    assert_eq!(db.get(b"y").unwrap(), v("1"));
}

/// 2PC, read-only: R's snapshot is taken while T1 is prepared; T3 then
/// commits after T1's prepare. R sees T3 but not T1, though T1 is serialized
/// before T3: R's commit fails if it read T1's keys.
#[test]
fn read_only_transaction_fails_if_it_missed_a_prepared_write() {
    let db = open();
    db.put(b"y", b"0").unwrap();
    let mut t1 = db.begin(opts(SER));
    t1.put(b"y", b"1").unwrap();
    t1.prepare(b"t1").unwrap();
    let r = db.begin(opts(SER));
    db.commit_prepared(b"t1").unwrap();
    assert_eq!(r.get(b"y").unwrap(), v("0")); // missed T1's write
    assert!(is_serialization_failure(r.commit()));
    // A reader that does not touch T1's keys commits.
    let mut t1 = db.begin(opts(SER));
    t1.put(b"y", b"2").unwrap();
    t1.prepare(b"t1").unwrap();
    let r = db.begin(opts(SER));
    db.put(b"other", b"1").unwrap();
    assert_eq!(r.get(b"other").unwrap(), None);
    r.commit().unwrap();
    db.rollback_prepared(b"t1").unwrap();
}

/// Doctors on call, concurrently: each transaction reads the whole roster
/// and takes a doctor off call only if at least two are on call. SI lets
/// two transactions do that at once (write skew); Serializable must keep at
/// least one doctor on call in every run.
#[test]
fn doctors_on_call_stress_keeps_the_invariant() {
    let db = open();
    let rounds = 40;
    let mut failures = 0;
    for round in 0..rounds {
        let prefix = format!("r{round:03}/");
        for d in 0..4 {
            db.put(format!("{prefix}{d}").as_bytes(), b"on").unwrap();
        }
        let lo = prefix.clone().into_bytes();
        let mut hi = lo.clone();
        *hi.last_mut().unwrap() += 1;
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            for d in 0..4 {
                let (db, lo, hi, prefix) = (&db, lo.clone(), hi.clone(), prefix.clone());
                handles.push(s.spawn(move || {
                    let mut t = db.begin(opts(SER));
                    let rows = t
                        .scan(Some(lo.as_slice()), Some(hi.as_slice()), 10)
                        .unwrap();
                    let on = rows.iter().filter(|(_, v)| v == b"on").count();
                    if on >= 2 {
                        t.put(format!("{prefix}{d}").as_bytes(), b"off").unwrap();
                    }
                    u32::from(t.commit().is_err())
                }));
            }
            for h in handles {
                failures += h.join().unwrap();
            }
        });
        let t = db.begin(opts(SER));
        let on = t
            .scan(Some(lo.as_slice()), Some(hi.as_slice()), 10)
            .unwrap()
            .iter()
            .filter(|(_, v)| v == b"on")
            .count();
        assert!(on >= 1, "round {round}: nobody on call");
    }
    println!("{failures} serialization failures in {rounds} rounds");
}
