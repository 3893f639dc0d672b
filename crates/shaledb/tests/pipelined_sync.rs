//! The pipelined group commit (docs/architecture.md, "Pipelined group
//! commit"): fsyncs run outside the WAL writer while later groups are
//! appended. The in-memory file system holds each fsync in flight for a
//! while and makes durable only what was flushed when it began, so a write
//! acknowledged on an fsync that did not cover it would be lost here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;
use shaledb::env::fault::FaultFs;
use shaledb::env::mem::MemFs;
use shaledb::{Db, Options, WriteBatch, WriteOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const SYNCED: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};
const UNSYNCED: WriteOptions = WriteOptions {
    sync: false,
    disable_wal: false,
};

fn key(t: u64, i: u64) -> Vec<u8> {
    format!("t{t:02}-{i:06}").into_bytes()
}

/// 200 bytes and more: a few hundred writes fill a 64 KiB memtable, so the
/// power-loss test switches WAL segments while fsyncs are in flight.
fn value(t: u64, i: u64) -> Vec<u8> {
    format!("value-{t}-{i}-{:200}", "").into_bytes()
}

/// Many concurrent writers: with `sync: true`, with an unsynced put and
/// `Db::sync_wal`, or with `Db::write_unsynced` and `Db::sync_to`; power loss (tearing unsynced tails) while
/// they run, with memtable switches (new WAL segments) along the way. Every
/// acknowledged write must be there after reopening, and each writer's
/// surviving writes must be a prefix of what it wrote.
#[test]
fn acknowledged_synced_writes_survive_power_loss_under_concurrency() {
    const THREADS: u64 = 8;
    for round in 0..8u64 {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let db = Db::open(dir, common::small_mem_opts(&fs)).unwrap();
        fs.set_sync_latency(Duration::from_micros(200 + 100 * round));
        let acked: Arc<Vec<AtomicU64>> =
            Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
        let total = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let db = db.clone();
                let acked = Arc::clone(&acked);
                let total = Arc::clone(&total);
                std::thread::spawn(move || {
                    // Bounded: power is cut long before this many.
                    for i in 0..5_000u64 {
                        let r = match t % 3 {
                            0 => db.put_opt(&SYNCED, &key(t, i), &value(t, i)),
                            1 => db
                                .put_opt(&UNSYNCED, &key(t, i), &value(t, i))
                                .and_then(|()| db.sync_wal()),
                            _ => {
                                let mut b = WriteBatch::new();
                                b.put(&key(t, i), &value(t, i));
                                db.write_unsynced(b).and_then(|mark| db.sync_to(mark))
                            }
                        };
                        if r.is_err() {
                            return;
                        }
                        acked[t as usize].store(i + 1, Ordering::SeqCst);
                        total.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        // Cut the power once enough writes are acknowledged that memtables
        // switched (64 KiB each), or after a bounded wait.
        let start = Instant::now();
        while total.load(Ordering::SeqCst) < 600 + 150 * round
            && start.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        fs.crash_keep_unsynced_prefix(round);
        // Snapshot of the acknowledgements at the crash: a write whose
        // acknowledgement raced with the cut may or may not be counted, and
        // either way it was acknowledged only after its fsync succeeded.
        for h in handles {
            h.join().unwrap();
        }
        let acked: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        assert!(
            acked.iter().sum::<u64>() > 0,
            "round {round}: nothing was written"
        );
        drop(db);
        let db = Db::open(dir, common::small_mem_opts(&fs)).unwrap();
        for t in 0..THREADS {
            let mut i = 0;
            while let Some(v) = db.get(&key(t, i)).unwrap() {
                assert_eq!(v, value(t, i));
                i += 1;
            }
            assert!(
                i >= acked[t as usize],
                "round {round}: writer {t} lost acknowledged writes: {i} < {}",
                acked[t as usize]
            );
            assert!(
                db.get(&key(t, i + 1)).unwrap().is_none(),
                "round {round}: writer {t} has a gap at {i}"
            );
        }
        db.close().unwrap();
    }
}

fn fault_db(sync_latency: Duration) -> (MemFs, FaultFs, Db) {
    let mem = MemFs::new();
    let fs = FaultFs::new(mem.arc());
    let opts = Options {
        fs: fs.arc(),
        ..common::small_mem_opts(&mem)
    };
    let db = Db::open(Path::new("/db"), opts).unwrap();
    mem.set_sync_latency(sync_latency);
    (mem, fs, db)
}

/// A failed fsync fails every writer waiting on it and every later write,
/// and is not retried.
#[test]
fn failed_fsync_fails_its_waiters_and_every_later_write() {
    const THREADS: usize = 12;
    let (_mem, fs, db) = fault_db(Duration::from_millis(20));
    db.put_opt(&SYNCED, b"before", b"ok").unwrap();
    fs.fail_syncs_only(true);
    fs.fail_after(1);
    let syncs_before = fs.syncs();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                db.put_opt(&SYNCED, format!("k{t}").as_bytes(), b"v")
            })
        })
        .collect();
    for h in handles {
        assert!(
            h.join().unwrap().is_err(),
            "a write acknowledged without its fsync"
        );
    }
    assert_eq!(fs.syncs(), syncs_before + 1, "a failed fsync was retried");
    assert!(db.put_opt(&SYNCED, b"later", b"v").is_err());
    assert!(db.put_opt(&UNSYNCED, b"later", b"v").is_err());
    assert!(db.sync_wal().is_err());
    assert_eq!(fs.syncs(), syncs_before + 1, "an fsync after the failure");
    assert_eq!(db.get(b"before").unwrap().as_deref(), Some(&b"ok"[..]));
}

/// Writer i starts only once writer i-1's write is visible (as a same-key
/// read-modify-write chain does): the writes are appended one after the
/// other while the first one's fsync is in flight, and share the next
/// fsync. Without pipelining each write would become visible only after
/// its own fsync, and the chain would need one fsync per writer.
#[test]
fn writers_overlapping_one_fsync_share_the_next() {
    const WRITERS: u64 = 12;
    let (_mem, fs, db) = fault_db(Duration::from_millis(300));
    let syncs_before = fs.syncs();
    let gave_up = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..WRITERS)
        .map(|i| {
            let db = db.clone();
            let gave_up = Arc::clone(&gave_up);
            std::thread::spawn(move || {
                let start = Instant::now();
                while i > 0 && db.get(&key(0, i - 1)).unwrap().is_none() {
                    if start.elapsed() > Duration::from_secs(30) {
                        gave_up.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                db.put_opt(&SYNCED, &key(0, i), &value(0, i)).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(
        !gave_up.load(Ordering::SeqCst),
        "a predecessor never became visible"
    );
    let syncs = fs.syncs() - syncs_before;
    assert!(
        (1..=4).contains(&syncs),
        "{WRITERS} chained writers took {syncs} fsyncs"
    );
}
