//! Value-file GC under concurrency: writers overwrite keys, readers take
//! snapshots and iterators and read through them twice, while a GC thread
//! rewrites and deletes value files. No read may fail (a deleted file still
//! referenced) or change under a snapshot.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{Db, Options, ReadOptions};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u64 = 64;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn value(i: u64, gen: u64) -> Vec<u8> {
    let mut v = format!("{i}:{gen}:").into_bytes();
    v.resize(300 + (gen as usize % 7) * 100, b'v');
    v
}

/// The (key, generation) a value names.
fn parse(v: &[u8]) -> (u64, u64) {
    let s = std::str::from_utf8(&v[..v.iter().position(|&b| b == b'v').unwrap()]).unwrap();
    let mut it = s.split(':');
    (
        it.next().unwrap().parse().unwrap(),
        it.next().unwrap().parse().unwrap(),
    )
}

#[test]
fn snapshots_iterators_and_gets_survive_concurrent_gc() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open(
        "/db",
        Options {
            fs: fs.clone(),
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            write_buffer_size: 256 << 10,
            ..Options::default()
        },
    )
    .unwrap();
    for i in 0..KEYS {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let gen = Arc::new(AtomicU64::new(1));
    let mut threads = Vec::new();
    for w in 0..2u64 {
        let (db, stop, gen) = (db.clone(), stop.clone(), gen.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = w;
            while !stop.load(Ordering::Relaxed) {
                let g = gen.fetch_add(1, Ordering::Relaxed);
                db.put(&key(n % KEYS), &value(n % KEYS, g)).unwrap();
                if n % 50 == 0 {
                    db.delete(&key((n / 50) % KEYS)).unwrap();
                }
                n += 2;
            }
        }));
    }
    let gc_runs = Arc::new(AtomicU64::new(0));
    {
        let (db, stop, gc_runs) = (db.clone(), stop.clone(), gc_runs.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let st = db.collect_blob_garbage(0.8).unwrap();
                gc_runs.fetch_add(st.files_deleted, Ordering::Relaxed);
            }
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (db, stop) = (db.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let ro = ReadOptions {
                    snapshot: Some(db.snapshot()),
                    ..ReadOptions::default()
                };
                let mut it = db.iter(&ro).unwrap();
                let first: Vec<Option<Vec<u8>>> = (0..KEYS)
                    .map(|i| db.get_opt(&ro, 0, &key(i)).unwrap())
                    .collect();
                for (i, v) in first.iter().enumerate() {
                    if let Some(v) = v {
                        assert_eq!(parse(v).0, i as u64, "value of another key");
                    }
                }
                std::thread::sleep(Duration::from_millis(2)); // let GC run meanwhile
                it.seek_to_first().unwrap();
                let mut from_iter = vec![None; KEYS as usize];
                while it.valid() {
                    let i: usize = std::str::from_utf8(&it.key()[1..])
                        .unwrap()
                        .parse()
                        .unwrap();
                    from_iter[i] = Some(it.value().to_vec());
                    it.next().unwrap();
                }
                assert_eq!(from_iter, first, "iterator and gets at one snapshot differ");
                let again: Vec<Option<Vec<u8>>> = (0..KEYS)
                    .map(|i| db.get_opt(&ro, 0, &key(i)).unwrap())
                    .collect();
                assert_eq!(again, first, "a snapshot read changed");
                // Plain gets: never an error, always the right key.
                for i in 0..KEYS {
                    if let Some(v) = db.get(&key(i)).unwrap() {
                        assert_eq!(parse(&v).0, i);
                    }
                }
                rounds += 1;
            }
            rounds
        }));
    }
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let rounds: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    for t in threads {
        t.join().unwrap();
    }
    assert!(rounds > 10, "readers made progress: {rounds}");
    assert!(gc_runs.load(Ordering::Relaxed) > 0, "GC deleted files");
    // Final state equals the last write of each key, after reopen too.
    let want: Vec<Option<Vec<u8>>> = (0..KEYS).map(|i| db.get(&key(i)).unwrap()).collect();
    db.collect_blob_garbage(1.0).unwrap();
    db.close().unwrap();
    let db = Db::open(
        "/db",
        Options {
            fs: fs.clone(),
            min_blob_size: 100,
            ..Options::default()
        },
    )
    .unwrap();
    let got: Vec<Option<Vec<u8>>> = (0..KEYS).map(|i| db.get(&key(i)).unwrap()).collect();
    assert_eq!(got, want);
}

#[test]
fn background_gc_reclaims_overwritten_values() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open(
        "/db",
        Options {
            fs: fs.clone(),
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            blob_gc_live_ratio: 0.5,
            blob_gc_interval_ms: 20,
            ..Options::default()
        },
    )
    .unwrap();
    let snap = db.snapshot();
    for g in 0..10 {
        for i in 0..KEYS {
            db.put(&key(i), &value(i, g)).unwrap();
        }
    }
    // Background GC takes the files compaction counted dead bytes in: the
    // flush drops the nine overwritten versions of each key.
    db.flush().unwrap();
    let prop = |n: &str| -> u64 { db.property(n).unwrap().parse().unwrap() };
    let until = Instant::now() + Duration::from_secs(5);
    while prop("shale.blob-gc-files-rewritten") == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        prop("shale.blob-gc-files-rewritten") > 0,
        "background GC ran"
    );
    // The snapshot holds the rewritten files; once it is gone a later
    // pass deletes them.
    let ro = ReadOptions {
        snapshot: Some(snap),
        ..ReadOptions::default()
    };
    assert_eq!(db.get_opt(&ro, 0, &key(3)).unwrap(), None);
    assert_eq!(prop("shale.blob-gc-files-deleted"), 0);
    drop(ro);
    while prop("shale.blob-gc-files-deleted") == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        prop("shale.blob-gc-files-deleted") > 0,
        "released after the snapshot"
    );
    for i in 0..KEYS {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 9)));
    }
    db.close().unwrap();
}
