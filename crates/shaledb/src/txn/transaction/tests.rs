//! Unit tests of [`Txn`]: buffering, savepoints, lock release, the
//! first-committer-wins hook (`latest_seq_of`) across memtable, extents and
//! range deletes. The anomaly scripts live in tests/isolation.rs.

use super::*;
use crate::env::mem::MemFs;
use crate::Options;
use std::sync::Arc;

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

#[test]
fn own_writes_visible_and_commit_atomic_across_cfs() {
    let db = open();
    let cf = db.create_cf("other").unwrap();
    db.put(b"d", b"old").unwrap();
    let mut t = db.begin(si());
    t.put(b"a", b"1").unwrap();
    t.put_cf(cf, b"a", b"2").unwrap();
    t.delete(b"d").unwrap();
    assert_eq!(t.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(t.get_cf(cf, b"a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(t.get(b"d").unwrap(), None);
    assert_eq!(db.get(b"d").unwrap(), Some(b"old".to_vec()));
    assert_eq!(t.num_writes(), 3);
    let before = db.latest_sequence();
    t.commit().unwrap();
    assert_eq!(
        db.latest_sequence(),
        before + 3,
        "one batch, consecutive seqs"
    );
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get_cf(cf, b"a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"d").unwrap(), None);
    assert_eq!(db.lock_manager().num_locks(), 0);
}

#[test]
fn rollback_and_drop_release_locks_and_discard_writes() {
    let db = open();
    let mut t = db.begin(si());
    t.put(b"k", b"v").unwrap();
    assert_eq!(db.lock_manager().num_locks(), 1);
    t.rollback();
    assert_eq!(db.lock_manager().num_locks(), 0);
    assert_eq!(db.get(b"k").unwrap(), None);
    {
        let mut t = db.begin(si());
        t.get_for_update(b"k").unwrap();
        let mut u = db.begin(si());
        assert!(matches!(u.put(b"k", b"x"), Err(Error::LockTimeout { .. })));
    }
    assert_eq!(db.lock_manager().num_locks(), 0);
    let mut t = db.begin(si());
    t.put(b"k", b"x").unwrap();
    t.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"x".to_vec()));
}

/// Random writes, savepoints and rollbacks against a model that keeps a
/// full copy of the buffer per savepoint (what the undo log replaced).
#[test]
fn savepoint_undo_log_matches_buffer_copies() {
    use rand::{Rng, SeedableRng};
    let db = open();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for round in 0..20 {
        let mut t = db.begin(si());
        let mut model: BTreeMap<u8, Option<u8>> = BTreeMap::new();
        let mut saved: Vec<BTreeMap<u8, Option<u8>>> = Vec::new();
        for _ in 0..300 {
            let k = rng.gen_range(0..12u8);
            match rng.gen_range(0..10) {
                0..=4 => {
                    let v = rng.gen::<u8>();
                    t.put(&[k], &[v]).unwrap();
                    model.insert(k, Some(v));
                }
                5 | 6 => {
                    t.delete(&[k]).unwrap();
                    model.insert(k, None);
                }
                7 => {
                    t.set_savepoint();
                    saved.push(model.clone());
                }
                _ => match saved.pop() {
                    Some(m) => {
                        t.rollback_to_savepoint().unwrap();
                        model = m;
                    }
                    None => assert!(t.rollback_to_savepoint().is_err()),
                },
            }
            for key in 0..12u8 {
                let want = model.get(&key).copied().flatten().map(|v| vec![v]);
                assert_eq!(t.get(&[key]).unwrap(), want, "round {round} key {key}");
            }
        }
        assert_eq!(t.num_writes(), model.len());
        t.rollback();
    }
}

#[test]
fn savepoints_undo_writes_but_keep_locks() {
    let db = open();
    let mut t = db.begin(si());
    assert!(matches!(
        t.rollback_to_savepoint(),
        Err(Error::InvalidArgument(_))
    ));
    t.put(b"a", b"1").unwrap();
    t.set_savepoint();
    t.put(b"a", b"2").unwrap();
    t.put(b"b", b"2").unwrap();
    t.set_savepoint();
    t.delete(b"a").unwrap();
    t.rollback_to_savepoint().unwrap();
    assert_eq!(t.get(b"a").unwrap(), Some(b"2".to_vec()));
    t.rollback_to_savepoint().unwrap();
    assert_eq!(t.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(t.get(b"b").unwrap(), None);
    assert_eq!(
        db.lock_manager().is_locked_by(t.id(), 0, b"b"),
        Some(LockMode::Exclusive)
    );
    t.commit().unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), None);
}

#[test]
fn latest_seq_of_sees_puts_deletes_range_deletes_in_memtable_and_extents() {
    let db = open();
    assert_eq!(db.latest_seq_of(0, b"k").unwrap(), None);
    db.put(b"k", b"v").unwrap();
    let s1 = db.latest_sequence();
    assert_eq!(db.latest_seq_of(0, b"k").unwrap(), Some(s1));
    let snap = db.snapshot();
    db.delete(b"k").unwrap();
    let s2 = db.latest_sequence();
    assert_eq!(db.latest_seq_of(0, b"k").unwrap(), Some(s2));
    db.flush().unwrap();
    db.run_background_work().unwrap();
    assert_eq!(db.latest_seq_of(0, b"k").unwrap(), Some(s2));
    db.delete_range(b"a", b"z").unwrap();
    let s3 = db.latest_sequence();
    assert_eq!(db.latest_seq_of(0, b"k").unwrap(), Some(s3));
    assert_eq!(db.latest_seq_of(0, b"zz").unwrap(), None);
    db.flush().unwrap();
    db.run_background_work().unwrap();
    assert_eq!(db.latest_seq_of(0, b"k").unwrap(), Some(s3));
    drop(snap);
    assert!(matches!(
        db.latest_seq_of(99, b"k"),
        Err(Error::ColumnFamilyNotFound(_))
    ));
}

#[test]
fn si_write_conflict_after_concurrent_commit_including_plain_writes_and_range_deletes() {
    let db = open();
    db.put(b"k", b"0").unwrap();
    let mut t = db.begin(si());
    // Read without a lock: the snapshot stays (transaction/advance.rs).
    assert_eq!(t.get(b"k").unwrap(), Some(b"0".to_vec()));
    db.put(b"k", b"1").unwrap(); // non-transactional write after the snapshot
    assert!(matches!(t.put(b"k", b"2"), Err(Error::WriteConflict { key }) if key == b"k"));
    assert!(matches!(
        t.get_for_update(b"k"),
        Err(Error::WriteConflict { .. })
    ));
    t.rollback();

    let mut t = db.begin(si());
    assert_eq!(t.get(b"zz").unwrap(), None);
    db.delete_range(b"a", b"z").unwrap();
    assert!(matches!(t.delete(b"k"), Err(Error::WriteConflict { .. })));
    // A key never written and not covered: no conflict.
    t.put(b"zz", b"1").unwrap();
    drop(t);

    // RC never reports a conflict and reads the latest committed state.
    let mut t = db.begin(rc());
    assert_eq!(t.snapshot_sequence(), None);
    db.put(b"k", b"3").unwrap();
    assert_eq!(t.get(b"k").unwrap(), Some(b"3".to_vec()));
    assert_eq!(t.get_for_update(b"k").unwrap(), Some(b"3".to_vec()));
    t.put(b"k", b"4").unwrap();
    t.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"4".to_vec()));
}

#[test]
fn own_commit_is_not_a_conflict_for_a_later_txn() {
    let db = open();
    let mut t = db.begin(si());
    t.put(b"k", b"1").unwrap();
    t.commit().unwrap();
    let mut u = db.begin(si());
    assert_eq!(u.get_for_update(b"k").unwrap(), Some(b"1".to_vec()));
    u.put(b"k", b"2").unwrap();
    u.put(b"k", b"3").unwrap(); // re-entrant lock, repeated check passes
    u.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"3".to_vec()));
    assert_eq!(Isolation::REPEATABLE_READ, Isolation::SnapshotIsolation);
}

#[test]
fn empty_commit_writes_nothing() {
    let db = open();
    let before = db.latest_sequence();
    let t = db.begin(si());
    assert_eq!(t.get(b"x").unwrap(), None);
    t.commit().unwrap();
    assert_eq!(db.latest_sequence(), before);
}

/// The check under a freshly granted lock reads the key once and hands its
/// value to `get_for_update`; later writes of the locked key look nothing
/// up (the lock keeps every other writer out).
#[test]
fn a_locked_key_is_looked_up_once() {
    let db = open();
    db.put(b"k", b"0").unwrap();
    db.put(b"gone", b"x").unwrap();
    db.delete(b"gone").unwrap();
    let gets = || db.inner().stats.gets.get();
    let mut t = db.begin(si());
    let before = gets();
    assert_eq!(t.get_for_update(b"k").unwrap(), Some(b"0".to_vec()));
    t.put(b"k", b"1").unwrap();
    t.put(b"k", b"2").unwrap();
    t.delete(b"k").unwrap();
    assert_eq!(
        gets() - before,
        1,
        "one lookup for the lock's check and the read"
    );
    assert_eq!(t.get_for_update(b"gone").unwrap(), None);
    assert_eq!(t.get_for_update(b"never").unwrap(), None);
    assert_eq!(gets() - before, 3);
    t.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
}

/// A version committed after the snapshot fails the write under the lock,
/// and every later write of that key fails the same way (the key stays
/// locked but unverified), never succeeding over the newer version. (The
/// transaction read without a lock first, so its snapshot cannot move.)
#[test]
fn a_conflict_found_under_the_lock_fails_later_writes_too() {
    let db = open();
    db.put(b"k", b"a").unwrap();
    let mut t = db.begin(si());
    assert_eq!(t.get(b"other").unwrap(), None);
    db.put(b"k", b"b").unwrap(); // committed after t's snapshot
    assert!(matches!(
        t.get_for_update(b"k"),
        Err(Error::WriteConflict { .. })
    ));
    assert!(matches!(
        t.put(b"k", b"x"),
        Err(Error::WriteConflict { .. })
    ));
    assert!(matches!(t.delete(b"k"), Err(Error::WriteConflict { .. })));
    t.rollback();
    assert_eq!(db.get(b"k").unwrap(), Some(b"b".to_vec()));
}

/// A value kept in a value file comes back from the lock's check as the
/// plain read would return it.
#[test]
fn get_for_update_reads_a_separated_value() {
    let opts = Options {
        fs: Arc::new(MemFs::new()),
        background_threads: false,
        min_blob_size: 16,
        ..Options::default()
    };
    let db = Db::open("/db", opts).unwrap();
    let big = vec![7u8; 1000];
    db.put(b"big", &big).unwrap();
    let mut t = db.begin(si());
    assert_eq!(t.get_for_update(b"big").unwrap(), Some(big.clone()));
    t.commit().unwrap();
    let mut t = db.begin(rc());
    assert_eq!(t.get_for_update(b"big").unwrap(), Some(big));
    t.rollback();
}

/// A covered write is buffered, read back and committed like any other,
/// but takes no row lock and looks nothing up.
#[test]
fn covered_writes_take_no_lock() {
    let db = open();
    db.put(b"e1", b"old").unwrap();
    let gets = || db.inner().stats.gets.get();
    let mut t = db.begin(si());
    let before = gets();
    t.put_cf_covered(DEFAULT_CF_ID, b"e2", b"v").unwrap();
    t.delete_cf_covered(DEFAULT_CF_ID, b"e1").unwrap();
    assert_eq!(gets(), before);
    let locks = db.lock_manager();
    assert_eq!(locks.is_locked_by(t.id(), DEFAULT_CF_ID, b"e2"), None);
    assert_eq!(locks.is_locked_by(t.id(), DEFAULT_CF_ID, b"e1"), None);
    assert_eq!(t.get(b"e2").unwrap(), Some(b"v".to_vec()));
    assert_eq!(t.get(b"e1").unwrap(), None);
    t.commit().unwrap();
    assert_eq!(db.get(b"e2").unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.get(b"e1").unwrap(), None);
}

#[test]
fn try_lock_fresh_takes_a_free_lock_without_waiting_and_skips_the_put_check() {
    let db = open();
    let mut a = db.begin(si());
    let mut b = db.begin(si());
    assert!(a.try_lock_fresh_cf(DEFAULT_CF_ID, b"k").unwrap());
    assert_eq!(db.lock_manager().num_locks(), 1);
    // Held by another transaction: no wait, no change.
    assert!(!b.try_lock_fresh_cf(DEFAULT_CF_ID, b"k").unwrap());
    // Held by this one already: false too (the caller then reads as usual).
    assert!(!a.try_lock_fresh_cf(DEFAULT_CF_ID, b"k").unwrap());
    a.put(b"k", b"a").unwrap();
    assert_eq!(db.lock_manager().num_locks(), 1, "the put reused the lock");
    a.commit().unwrap();
    assert_eq!(db.lock_manager().num_locks(), 0);
    // Free again: b takes it, and its put of a key committed after its
    // snapshot is not checked (the caller vouched the key was fresh).
    assert!(b.try_lock_fresh_cf(DEFAULT_CF_ID, b"k").unwrap());
    b.put(b"k", b"b").unwrap();
    b.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"b".to_vec()));
}
