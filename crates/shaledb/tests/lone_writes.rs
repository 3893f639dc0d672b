//! Lone writes (docs/architecture.md, "Lone writes"): unsynced writes that
//! log and insert by themselves, beside synced writes that go through
//! group commit, while memtables switch and flush, value files seal and
//! GC rewrites them. Every acknowledged write must be readable at once by
//! its writer, a snapshot's reads must never change, and the final state
//! must survive a reopen.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{Db, Options, ReadOptions, WriteOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const THREADS: u64 = 8;
const WRITES: u64 = 2_500;
/// Keys per thread: each is written about `WRITES / KEYS` times.
const KEYS: u64 = 400;

fn key(t: u64, k: u64) -> Vec<u8> {
    format!("t{t:02}-{k:05}").into_bytes()
}

/// Every third value is long enough for the value files.
fn value(t: u64, i: u64) -> Vec<u8> {
    let pad = if i.is_multiple_of(3) { 300 } else { 20 };
    format!("v{t}-{i}-{:pad$}", "").into_bytes()
}

fn options(fs: &MemFs) -> Options {
    Options {
        fs: fs.arc(),
        write_buffer_size: 64 << 10,
        min_blob_size: 100,
        blob_file_size: 64 << 10,
        ..Options::default()
    }
}

/// Rounds of the test below: a lost race shows in some rounds only (with
/// the switch's wait for lone writes removed, about one round in five).
const ROUNDS: usize = 12;

#[test]
fn lone_and_grouped_writes_are_read_back_under_switches_and_gc() {
    let mut deleted = 0;
    for _ in 0..ROUNDS {
        deleted += round();
    }
    assert!(deleted > 0, "GC rewrote and deleted value files");
}

/// One fresh database; returns the value files GC deleted.
fn round() -> u64 {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut last = vec![None; KEYS as usize];
                for i in 0..WRITES {
                    let k = (i * 7 + t) % KEYS;
                    let wo = WriteOptions {
                        // Every 16th write is synced: group commit, between lone ones.
                        sync: i % 16 == 15,
                        disable_wal: false,
                    };
                    if i % 50 == 49 {
                        db.delete_opt(&wo, &key(t, k)).unwrap();
                        last[k as usize] = None;
                    } else {
                        let v = value(t, i);
                        db.put_opt(&wo, &key(t, k), &v).unwrap();
                        last[k as usize] = Some(v);
                    }
                    // Visible to its writer as soon as it is acknowledged.
                    assert_eq!(db.get(&key(t, k)).unwrap(), last[k as usize], "t{t} i{i}");
                }
                last
            })
        })
        .collect();
    let checker = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let ro = ReadOptions {
                    snapshot: Some(db.snapshot()),
                    ..ReadOptions::default()
                };
                let read = |db: &Db| -> Vec<Option<Vec<u8>>> {
                    (0..THREADS)
                        .flat_map(|t| (0..KEYS).step_by(37).map(move |k| key(t, k)))
                        .map(|k| db.get_opt(&ro, 0, &k).unwrap())
                        .collect()
                };
                let first = read(&db);
                std::thread::yield_now();
                assert_eq!(read(&db), first, "a snapshot read changed");
                rounds += 1;
            }
            rounds
        })
    };
    let gc = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut deleted = 0;
            while !stop.load(Ordering::Relaxed) {
                deleted += db.collect_blob_garbage(0.9).unwrap().files_deleted;
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            deleted
        })
    };
    let lasts: Vec<Vec<Option<Vec<u8>>>> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    assert!(checker.join().unwrap() > 0, "the snapshot checker ran");
    let deleted = gc.join().unwrap();
    let check = |db: &Db| {
        for (t, last) in lasts.iter().enumerate() {
            for (k, want) in last.iter().enumerate() {
                let got = db.get(&key(t as u64, k as u64)).unwrap();
                assert_eq!(&got, want, "t{t} k{k}");
            }
        }
    };
    check(&db);
    let on_disk: u64 = (0..3)
        .map(|l| {
            db.property(&format!("shale.bytes-at-level{l}"))
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    db.close().unwrap();
    let db = Db::open("/db", options(&fs)).unwrap();
    check(&db);
    // The run did what it is meant to exercise.
    assert!(on_disk > 0, "memtables were switched and flushed");
    deleted
}
