//! Tests of [`Txn::get_for_share`]: shared row locks held to the end of the
//! transaction, coexisting sharers, writers waiting, S -> X upgrades, and the
//! Snapshot Isolation first-committer-wins check.

use super::lock_manager::LockMode;
use super::{Isolation, TxnOptions};
use crate::env::mem::MemFs;
use crate::{Db, Error, Options};
use std::sync::Arc;
use std::time::Duration;

fn open() -> Db {
    let opts = Options {
        fs: Arc::new(MemFs::new()),
        background_threads: false,
        ..Options::default()
    };
    let db = Db::open("/db", opts).unwrap();
    db.put(b"k", b"v0").unwrap();
    db
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

fn v(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}

#[test]
fn sharers_coexist_and_writers_wait_for_all_of_them() {
    for o in [si(), rc()] {
        let db = open();
        let mut t1 = db.begin(o.clone());
        let mut t2 = db.begin(o.clone());
        let mut w = db.begin(o.clone());
        assert_eq!(t1.get_for_share(b"k").unwrap(), v("v0"));
        assert_eq!(t2.get_for_share(b"k").unwrap(), v("v0"));
        assert_eq!(t1.get_for_share(b"k").unwrap(), v("v0")); // re-entrant
        assert_eq!(db.lock_manager().num_locks(), 2);
        assert!(matches!(w.put(b"k", b"w"), Err(Error::LockTimeout { .. })));
        assert!(matches!(
            w.get_for_update(b"k"),
            Err(Error::LockTimeout { .. })
        ));
        t1.commit().unwrap(); // the lock was held to here
        assert!(matches!(w.put(b"k", b"w"), Err(Error::LockTimeout { .. })));
        t2.rollback();
        w.put(b"k", b"w").unwrap();
        // A sharer now waits for the writer.
        let mut t3 = db.begin(o.clone());
        assert!(matches!(
            t3.get_for_share(b"k"),
            Err(Error::LockTimeout { .. })
        ));
        w.commit().unwrap();
        drop(t3);
        assert_eq!(db.get(b"k").unwrap(), v("w"));
        assert_eq!(db.lock_manager().num_locks(), 0);
    }
}

#[test]
fn upgrade_to_exclusive_by_the_only_sharer() {
    let db = open();
    let mut t = db.begin(si());
    t.get_for_share(b"k").unwrap();
    assert_eq!(
        db.lock_manager().is_locked_by(t.id(), 0, b"k"),
        Some(LockMode::Shared)
    );
    t.put(b"k", b"mine").unwrap();
    assert_eq!(
        db.lock_manager().is_locked_by(t.id(), 0, b"k"),
        Some(LockMode::Exclusive)
    );
    // Reading for share again keeps X and sees the own write.
    assert_eq!(t.get_for_share(b"k").unwrap(), v("mine"));
    assert_eq!(db.lock_manager().num_locks(), 1);
    t.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), v("mine"));
    assert_eq!(db.lock_manager().num_locks(), 0);
}

#[test]
fn upgrade_waits_for_the_other_sharer() {
    let db = open();
    let mut t1 = db.begin(si());
    let mut t2 = db.begin(si());
    t1.get_for_share(b"k").unwrap();
    t2.get_for_share(b"k").unwrap();
    assert!(matches!(t1.put(b"k", b"1"), Err(Error::LockTimeout { .. })));
    // The failed upgrade left t1's shared lock in place.
    assert_eq!(
        db.lock_manager().is_locked_by(t1.id(), 0, b"k"),
        Some(LockMode::Shared)
    );
    drop(t2);
    t1.put(b"k", b"1").unwrap();
    t1.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), v("1"));
    assert_eq!(db.lock_manager().num_locks(), 0);
}

#[test]
fn changed_after_snapshot_is_a_write_conflict_at_si_latest_value_at_rc() {
    let db = open();
    let mut s = db.begin(si());
    let mut r = db.begin(rc());
    // A read without a lock: s's snapshot can no longer move
    // (transaction/advance.rs), so what follows is a conflict.
    assert_eq!(s.get(b"other").unwrap(), None);
    db.put(b"k", b"v1").unwrap(); // committed after both began
    assert!(matches!(
        s.get_for_share(b"k"),
        Err(Error::WriteConflict { ref key }) if key == b"k"
    ));
    // The lock stays held until the transaction ends.
    assert_eq!(
        db.lock_manager().is_locked_by(s.id(), 0, b"k"),
        Some(LockMode::Shared)
    );
    assert_eq!(r.get_for_share(b"k").unwrap(), v("v1"));
    drop(s);
    drop(r);
    assert_eq!(db.lock_manager().num_locks(), 0);
    // Unchanged since the snapshot: fine, and (at Serializable, the level
    // that records reads) recorded as a point read.
    let mut s = db.begin(TxnOptions {
        isolation: Isolation::Serializable,
        ..si()
    });
    assert_eq!(s.get_for_share(b"k").unwrap(), v("v1"));
    assert_eq!(s.get_for_share(b"absent").unwrap(), None);
    let points: Vec<_> = s.read_set().points().map(|(_, k)| k.to_vec()).collect();
    assert_eq!(points, vec![b"absent".to_vec(), b"k".to_vec()]);
}
