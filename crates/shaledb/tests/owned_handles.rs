//! Handles a server can own: `Db` clones, transactions that borrow nothing,
//! iterators and snapshots kept across requests, and what `close` does to
//! the handles that remain.
#![allow(clippy::unwrap_used)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::txn::{Isolation, Txn, TxnOptions};
use shaledb::{Db, DbIterator, Error, Options, ReadOptions, Snapshot};
use std::collections::HashMap;
use std::sync::Arc;

fn mem_opts() -> Options {
    Options {
        fs: Arc::new(MemFs::new()),
        ..Options::default()
    }
}

fn assert_owned<T: Send + 'static>() {}

#[test]
fn handles_are_send_and_static() {
    assert_owned::<Db>();
    assert_owned::<Txn>();
    assert_owned::<DbIterator>();
    assert_owned::<Snapshot>();
    fn assert_sync<T: Sync>() {}
    assert_sync::<Db>();
}

/// A session table as a server keeps it: transactions stored by session id,
/// each request taken by whichever worker thread is free.
#[test]
fn transactions_live_in_a_session_map_across_threads() {
    let db = Db::open("/db", mem_opts()).unwrap();
    let sessions: Arc<parking_lot::Mutex<HashMap<u32, Txn>>> = Default::default();
    // Request 1 on thread A: begin and write.
    std::thread::scope(|s| {
        for id in 0..4u32 {
            let db = db.clone();
            let sessions = sessions.clone();
            s.spawn(move || {
                let mut t = db.begin(TxnOptions {
                    isolation: Isolation::SnapshotIsolation,
                    ..Default::default()
                });
                t.put(format!("k{id}").as_bytes(), b"pending").unwrap();
                sessions.lock().insert(id, t);
            });
        }
    });
    // Nothing is visible before commit.
    assert_eq!(db.get(b"k0").unwrap(), None);
    // Request 2 on other threads: commit even ids, roll back odd ones.
    std::thread::scope(|s| {
        for id in 0..4u32 {
            let sessions = sessions.clone();
            s.spawn(move || {
                let t = sessions.lock().remove(&id).unwrap();
                assert_eq!(
                    t.get(format!("k{id}").as_bytes()).unwrap(),
                    Some(b"pending".to_vec())
                );
                if id % 2 == 0 {
                    t.commit().unwrap();
                } else {
                    t.rollback();
                }
            });
        }
    });
    for id in 0..4u32 {
        let want = (id % 2 == 0).then(|| b"pending".to_vec());
        assert_eq!(db.get(format!("k{id}").as_bytes()).unwrap(), want);
    }
}

/// A transaction outlives the handle that began it.
#[test]
fn a_transaction_outlives_the_handle_that_began_it() {
    let db = Db::open("/db", mem_opts()).unwrap();
    let other = db.clone();
    let mut t = other.begin(TxnOptions::default());
    drop(other);
    t.put(b"k", b"v").unwrap();
    t.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// A cursor kept across fetches: an iterator and its snapshot stored in a
/// struct, advanced by later requests while writes go on.
#[test]
fn a_cursor_keeps_its_snapshot_across_fetches() {
    struct Cursor {
        it: DbIterator,
    }
    let db = Db::open("/db", mem_opts()).unwrap();
    for i in 0..10u8 {
        db.put(&[b'a' + i], &[i]).unwrap();
    }
    let snap = db.snapshot();
    let mut cursor = Cursor {
        it: db
            .iter(&ReadOptions {
                snapshot: Some(snap),
                ..Default::default()
            })
            .unwrap(),
    };
    cursor.it.seek_to_first().unwrap();
    let mut seen = Vec::new();
    for _fetch in 0..5 {
        for _ in 0..2 {
            assert!(cursor.it.valid());
            seen.push(cursor.it.key().to_vec());
            cursor.it.next().unwrap();
        }
        // A write between fetches is not seen by the cursor.
        db.put(b"b0", b"new").unwrap();
    }
    assert!(!cursor.it.valid());
    assert_eq!(seen.len(), 10);
}

#[test]
fn close_on_one_handle_closes_every_handle() {
    let db = Db::open("/db", mem_opts()).unwrap();
    let other = db.clone();
    let mut t = other.begin(TxnOptions::default());
    t.put(b"k", b"v").unwrap();
    db.put(b"x", b"1").unwrap();
    db.close().unwrap();
    assert!(matches!(other.put(b"y", b"2"), Err(Error::Closed)));
    assert!(matches!(other.get(b"x"), Err(Error::Closed)));
    assert!(matches!(
        other.iter(&ReadOptions::default()).map(|_| ()),
        Err(Error::Closed)
    ));
    assert!(matches!(t.commit(), Err(Error::Closed)));
}

#[test]
fn the_directory_stays_locked_while_a_transaction_holds_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let t = db.begin(TxnOptions::default());
    drop(db);
    assert!(matches!(
        Db::open(dir.path(), Options::default()).map(|_| ()),
        Err(Error::Locked(_))
    ));
    drop(t);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}
