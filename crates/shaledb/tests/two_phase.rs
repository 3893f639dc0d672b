//! Two-phase commit through the public API: prepare / commit_prepared /
//! rollback_prepared by XID, in-doubt transactions surviving restarts (with
//! their row locks), XID reuse, WAL segments kept for a prepare, and serial
//! and parallel recovery agreeing on the prepared set.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::env::FileSystem;
use shaledb::txn::{Isolation, TxnOptions};
use shaledb::{Db, Error, Options, WriteBatch, WriteOptions};
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/db";

fn opts(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        fs,
        write_buffer_size: 64 << 10,
        max_write_buffer_number: 4,
        extent_size: 256 << 10,
        block_size: 4096,
        block_cache_size: 1 << 20,
        max_key_size: 1024,
        max_value_size: 16 << 10,
        background_threads: false,
        ..Options::default()
    }
}

fn txn_opts() -> TxnOptions {
    TxnOptions {
        isolation: Isolation::SnapshotIsolation,
        lock_wait_timeout: Duration::from_millis(20),
        write_options: WriteOptions::default(),
    }
}

fn xids(db: &Db) -> Vec<Vec<u8>> {
    db.prepared().into_iter().map(|p| p.xid).collect()
}

/// Prepares `xid` writing `pairs`.
fn prepare(db: &Db, xid: &[u8], pairs: &[(&[u8], &[u8])]) {
    let mut t = db.begin(txn_opts());
    for (k, v) in pairs {
        t.put(k, v).unwrap();
    }
    t.prepare(xid).unwrap();
}

#[test]
fn prepare_then_commit_or_rollback() {
    let fs = MemFs::new();
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    prepare(&db, b"x1", &[(b"a", b"1"), (b"b", b"2")]);
    prepare(&db, b"x2", &[(b"c", b"3")]);
    // Prepared writes are invisible and their rows stay locked.
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(xids(&db), vec![b"x1".to_vec(), b"x2".to_vec()]);
    assert_eq!(db.prepared()[0].num_writes, 2);
    let mut t = db.begin(txn_opts());
    assert!(matches!(
        t.put(b"a", b"other"),
        Err(Error::LockTimeout { .. })
    ));
    t.put(b"z", b"free").unwrap(); // unrelated rows are not locked
    t.commit().unwrap();

    db.commit_prepared(b"x1").unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    db.rollback_prepared(b"x2").unwrap();
    assert_eq!(db.get(b"c").unwrap(), None);
    assert!(db.prepared().is_empty());
    // Locks released: both rows can be written again.
    let mut t = db.begin(txn_opts());
    t.put(b"a", b"after").unwrap();
    t.put(b"c", b"after").unwrap();
    t.commit().unwrap();
    // Resolving twice, or an XID never prepared: typed errors.
    assert!(matches!(db.commit_prepared(b"x1"), Err(Error::UnknownXid(x)) if x == b"x1"));
    assert!(matches!(
        db.rollback_prepared(b"nope"),
        Err(Error::UnknownXid(_))
    ));
}

#[test]
fn xid_in_use_and_bad_xids_are_refused() {
    let fs = MemFs::new();
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    prepare(&db, b"x", &[(b"a", b"1")]);
    let mut t = db.begin(txn_opts());
    t.put(b"b", b"2").unwrap();
    assert!(matches!(t.prepare(b"x"), Err(Error::XidInUse(_))));
    // The transaction is still active: another XID works.
    assert!(matches!(t.prepare(b""), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        t.prepare(&[0u8; 256]),
        Err(Error::InvalidArgument(_))
    ));
    t.prepare(b"y").unwrap();
    assert_eq!(t.prepared_xid(), Some(b"y".as_slice()));
    // A prepared transaction is ended only by XID.
    assert!(matches!(t.put(b"c", b"3"), Err(Error::InvalidArgument(_))));
    assert!(matches!(t.commit(), Err(Error::InvalidArgument(_))));
    assert_eq!(xids(&db), vec![b"x".to_vec(), b"y".to_vec()]);
    // A user batch cannot smuggle in a 2PC marker.
    let mut data = vec![0u8; 12];
    data.extend_from_slice(&[0x11, 1, b'x', 1, 0, 0, 0, 0, 0, 0, 0]);
    let forged = WriteBatch::from_data(data).unwrap();
    assert!(forged.txn_marker().is_some());
    assert!(matches!(
        db.write(&WriteOptions::default(), forged),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(xids(&db).len(), 2);
}

#[test]
fn prepared_transactions_survive_kill_and_keep_their_locks() {
    let fs = MemFs::new();
    {
        let db = Db::open(DIR, opts(fs.arc())).unwrap();
        db.put(b"a", b"old").unwrap();
        prepare(&db, b"commit-me", &[(b"a", b"new"), (b"b", b"1")]);
        prepare(&db, b"roll-me", &[(b"c", b"1")]);
        prepare(&db, b"done", &[(b"d", b"1")]);
        db.commit_prepared(b"done").unwrap();
        fs.crash_process();
    }
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    assert_eq!(xids(&db), vec![b"commit-me".to_vec(), b"roll-me".to_vec()]);
    assert_eq!(db.get(b"a").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get(b"d").unwrap(), Some(b"1".to_vec()));
    let mut t = db.begin(txn_opts());
    assert!(matches!(t.put(b"a", b"x"), Err(Error::LockTimeout { .. })));
    assert!(matches!(t.delete(b"c"), Err(Error::LockTimeout { .. })));
    t.rollback();
    db.commit_prepared(b"commit-me").unwrap();
    db.rollback_prepared(b"roll-me").unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.get(b"c").unwrap(), None);
    fs.crash_process();
    drop(db);
    // The resolutions are durable too.
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    assert!(db.prepared().is_empty());
    assert_eq!(db.get(b"a").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"c").unwrap(), None);
}

#[test]
fn synced_prepare_survives_power_loss() {
    let fs = MemFs::new();
    {
        let db = Db::open(DIR, opts(fs.arc())).unwrap();
        let mut t = db.begin(TxnOptions {
            write_options: WriteOptions {
                sync: true,
                ..Default::default()
            },
            ..txn_opts()
        });
        t.put(b"k", b"v").unwrap();
        t.prepare(b"p").unwrap();
        fs.crash();
    }
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    assert_eq!(xids(&db), vec![b"p".to_vec()]);
    db.commit_prepared(b"p").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn xid_reuse_resolves_only_the_newest_prepare() {
    let fs = MemFs::new();
    {
        let db = Db::open(DIR, opts(fs.arc())).unwrap();
        prepare(&db, b"x", &[(b"k", b"first")]);
        db.commit_prepared(b"x").unwrap();
        prepare(&db, b"x", &[(b"k", b"second")]);
        db.rollback_prepared(b"x").unwrap();
        prepare(&db, b"x", &[(b"k", b"third")]);
        fs.crash_process();
    }
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    let p = db.prepared();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].xid, b"x".to_vec());
    assert_eq!(db.get(b"k").unwrap(), Some(b"first".to_vec()));
    db.commit_prepared(b"x").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"third".to_vec()));
}

/// Number of WAL segments in the directory.
fn wal_segments(fs: &MemFs) -> usize {
    fs.list_dir(std::path::Path::new(DIR))
        .unwrap()
        .iter()
        .filter(|n| n.ends_with(".log"))
        .count()
}

#[test]
fn a_prepare_pins_its_wal_segment_across_flushes_and_restarts() {
    let fs = MemFs::new();
    let value = vec![b'v'; 1000];
    {
        let db = Db::open(DIR, opts(fs.arc())).unwrap();
        prepare(&db, b"old", &[(b"pinned", b"yes")]);
        // Many memtable switches and flushes after the prepare.
        for i in 0..2000u32 {
            db.put(format!("k{i:05}").as_bytes(), &value).unwrap();
        }
        db.flush().unwrap();
        assert!(wal_segments(&fs) > 3, "segments kept for the prepare");
        fs.crash_process();
    }
    {
        let db = Db::open(DIR, opts(fs.arc())).unwrap();
        assert_eq!(xids(&db), vec![b"old".to_vec()]);
        assert_eq!(db.get(b"k01999").unwrap(), Some(value.clone()));
        assert_eq!(db.get(b"pinned").unwrap(), None);
        // Reopen once more without resolving: still there.
        drop(db);
        let db = Db::open(DIR, opts(fs.arc())).unwrap();
        assert_eq!(xids(&db), vec![b"old".to_vec()]);
        db.commit_prepared(b"old").unwrap();
        db.flush().unwrap();
        // Resolved and flushed: the old segments can go.
        assert!(
            wal_segments(&fs) <= 2,
            "{} segments left",
            wal_segments(&fs)
        );
        fs.crash_process();
    }
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    assert!(db.prepared().is_empty());
    assert_eq!(db.get(b"pinned").unwrap(), Some(b"yes".to_vec()));
    assert_eq!(db.get(b"k00000").unwrap(), Some(value));
}

#[test]
fn committing_into_a_dropped_column_family_drops_those_writes() {
    let fs = MemFs::new();
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    let cf = db.create_cf("gone").unwrap();
    let mut t = db.begin(txn_opts());
    t.put_cf(cf, b"a", b"1").unwrap();
    t.put(b"b", b"2").unwrap();
    t.prepare(b"x").unwrap();
    db.drop_cf("gone").unwrap();
    db.commit_prepared(b"x").unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
}

/// Writes a workload mixing plain writes, committed, rolled back and
/// unresolved prepares, with XIDs reused, then kills the process.
fn two_phase_workload(fs: &MemFs) {
    let db = Db::open(
        DIR,
        Options {
            write_buffer_size: 1 << 20,
            ..opts(fs.arc())
        },
    )
    .unwrap();
    for i in 0..3000u32 {
        let xid = format!("x{}", i % 17);
        let key = format!("k{:04}", i % 400);
        match i % 7 {
            0 | 1 => {
                let mut t = db.begin(txn_opts());
                if t.put(key.as_bytes(), format!("2pc{i}").as_bytes()).is_err()
                    || t.prepare(xid.as_bytes()).is_err()
                {
                    continue;
                }
            }
            2 => {
                let _ = db.commit_prepared(xid.as_bytes());
            }
            3 => {
                let _ = db.rollback_prepared(xid.as_bytes());
            }
            _ => {
                let mut t = db.begin(txn_opts());
                if t.put(
                    key.as_bytes(),
                    format!("v{i}-{}", "p".repeat(200)).as_bytes(),
                )
                .is_ok()
                {
                    t.commit().unwrap();
                }
            }
        }
    }
    fs.crash_process();
    drop(db);
}

#[test]
fn serial_and_parallel_recovery_agree_on_the_prepared_set() {
    let mut results = Vec::new();
    for threads in [1, 3] {
        let fs = MemFs::new();
        two_phase_workload(&fs);
        let db = Db::open(
            DIR,
            Options {
                recovery_threads: threads,
                write_buffer_size: 64 << 10,
                max_write_buffer_number: 64,
                ..opts(fs.arc())
            },
        )
        .unwrap();
        let prepared = db.prepared();
        assert!(!prepared.is_empty());
        let mut rows = Vec::new();
        for i in 0..400u32 {
            rows.push(db.get(format!("k{i:04}").as_bytes()).unwrap());
        }
        results.push((prepared, rows, db.latest_sequence()));
    }
    assert_eq!(results[0], results[1]);
}

/// A transaction far larger than the write buffer (64 KiB here) works, both
/// committed directly and through prepare/commit, and survives a restart.
/// The limit is memory: the buffered writes and the one memtable that takes
/// them; a single batch is never split.
#[test]
fn a_transaction_larger_than_the_memtable_commits_and_recovers() {
    let fs = MemFs::new();
    let value = vec![b'x'; 4000];
    {
        let db = Db::open(DIR, opts(fs.arc())).unwrap();
        let mut t = db.begin(txn_opts());
        for i in 0..200u32 {
            t.put(format!("big{i:04}").as_bytes(), &value).unwrap(); // 800 KB
        }
        t.commit().unwrap();
        let mut t = db.begin(txn_opts());
        for i in 0..200u32 {
            t.put(format!("prep{i:04}").as_bytes(), &value).unwrap();
        }
        t.prepare(b"big").unwrap();
        fs.crash_process();
    }
    let db = Db::open(DIR, opts(fs.arc())).unwrap();
    assert_eq!(db.get(b"big0199").unwrap(), Some(value.clone()));
    assert_eq!(db.prepared()[0].num_writes, 200);
    db.commit_prepared(b"big").unwrap();
    assert_eq!(db.get(b"prep0000").unwrap(), Some(value));
}
