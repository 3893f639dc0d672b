//! `Options::memtable_filter`: a get of a key a memtable does not hold is
//! answered by the memtable's bloom filter without a skiplist walk
//! (docs/architecture.md, "The memtable filter"). What must hold: gets
//! answer exactly as without the filter, through overwrites, deletes,
//! flushes and reopening, and a get never misses a write that was
//! acknowledged before it started.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{Db, Options};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn opts(fs: &MemFs, filter: bool) -> Options {
    Options {
        fs: fs.arc(),
        // Small buffers: the keys spread over several memtables and extents.
        write_buffer_size: 64 << 10,
        extent_size: 64 << 10,
        l1_target_size: 256 << 10,
        max_compaction_bytes: 256 << 10,
        extents_per_file: 64,
        max_key_size: 1024,
        max_value_size: 16 << 10,
        memtable_filter: filter,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// splitmix64, for a fixed sequence of operations.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Every key of `0..range`, present or not, reads as the model says.
fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, range: u64, when: &str) {
    for i in 0..range {
        let k = key(i);
        assert_eq!(
            db.get(&k).unwrap(),
            model.get(&k).cloned(),
            "{when}: key {i}"
        );
    }
}

fn run_model(filter: bool) {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let mut model = BTreeMap::new();
    let mut rng = 7;
    const RANGE: u64 = 3_000;
    {
        let db = Db::open(dir, opts(&fs, filter)).unwrap();
        for round in 0..4 {
            for _ in 0..2_000 {
                let i = next(&mut rng) % RANGE;
                if next(&mut rng).is_multiple_of(4) {
                    db.delete(&key(i)).unwrap();
                    model.remove(&key(i));
                } else {
                    let v = format!("v{round}-{}", next(&mut rng))
                        .repeat(4)
                        .into_bytes();
                    db.put(&key(i), &v).unwrap();
                    model.insert(key(i), v);
                }
            }
            check(&db, &model, RANGE + 100, &format!("round {round}"));
        }
        db.flush().unwrap();
        check(&db, &model, RANGE + 100, "after flush");
        for i in 0..200 {
            db.put(&key(i), b"last").unwrap();
            model.insert(key(i), b"last".to_vec());
        }
    }
    // The memtable (and its filter) is rebuilt from the WAL.
    let db = Db::open(dir, opts(&fs, filter)).unwrap();
    check(&db, &model, RANGE + 100, "after reopen");
}

#[test]
fn gets_answer_as_the_model_with_the_filter() {
    run_model(true);
}

#[test]
fn gets_answer_as_the_model_without_the_filter() {
    run_model(false);
}

/// A writer publishes how many keys it has written (each `put` returned);
/// readers get keys below that count, which must all be found.
#[test]
fn a_get_finds_every_write_acknowledged_before_it() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open(Path::new("/db"), opts(&fs, true)).unwrap());
    let written = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    const N: u64 = 20_000;
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (db, written, done) = (db.clone(), written.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = r + 1;
                let mut gets = 0u64;
                while !done.load(Ordering::Acquire) {
                    let n = written.load(Ordering::Acquire);
                    if n == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    // Mostly the newest keys: the ones still in the active memtable.
                    let back = next(&mut rng) % n.min(64);
                    let i = n - 1 - back;
                    assert!(db.get(&key(i)).unwrap().is_some(), "key {i} of {n} missed");
                    gets += 1;
                }
                gets
            })
        })
        .collect();
    for i in 0..N {
        db.put(&key(i), b"value").unwrap();
        written.store(i + 1, Ordering::Release);
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}
