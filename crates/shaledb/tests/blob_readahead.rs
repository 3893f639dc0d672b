//! Scan readahead of value records (`Options::blob_readahead`,
//! docs/format-blob.md section 5): records ahead of a forward scan are read
//! into the value cache before the scan gets there, scans return the same
//! entries as without it (snapshots, bounds, GC, overwrites), and a damaged
//! record is still the scan's `Corruption`.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{Db, DbIterator, Error, Options, ReadOptions};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod blob_common;
use blob_common::{big, blob_file_in, key, prop, small_blob_opts};

const WINDOW: usize = 16;

fn opts(fs: &Arc<MemFs>, readahead: usize) -> Options {
    Options {
        blob_cache_size: 8 << 20,
        blob_readahead: readahead,
        blob_readahead_threads: 2,
        ..small_blob_opts(fs)
    }
}

fn rest(it: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

fn scan(db: &Db, ro: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ro).unwrap();
    it.seek_to_first().unwrap();
    rest(&mut it)
}

/// Waits (at most 10 s) until the reader threads have read `n` records.
fn wait_for_reads(db: &Db, n: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reads = prop(db, "shale.blob-readahead-reads");
        if reads >= n || Instant::now() > deadline {
            return reads;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_scan_finds_the_records_ahead_of_it_in_the_cache() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, WINDOW)).unwrap();
    for i in 0..200 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    it.next().unwrap(); // the second value resolved: readahead starts
    assert_eq!(it.key(), key(1));
    // The shadow queued the WINDOW records after k00001; the readers read
    // them while this scan stands still.
    assert_eq!(wait_for_reads(&db, WINDOW as u64), WINDOW as u64);
    let misses = prop(&db, "shale.blob-cache-misses");
    for i in 2..2 + WINDOW as u64 {
        it.next().unwrap();
        assert_eq!(
            (it.key(), it.value()),
            (key(i).as_slice(), big(i, 0).as_slice())
        );
    }
    assert_eq!(
        prop(&db, "shale.blob-cache-misses"),
        misses,
        "every record of the window was found in the cache"
    );
    // The window moved along with the scan: the next WINDOW records are
    // read while it stands still again.
    let w = 2 * WINDOW as u64;
    assert_eq!(wait_for_reads(&db, w), w);
    assert_eq!(prop(&db, "shale.blob-readahead-dropped"), 0);
    let tail = rest(&mut it);
    assert_eq!(tail.len(), 200 - 1 - WINDOW);
    assert_eq!(tail.first().unwrap().0, key(1 + WINDOW as u64));
}

#[test]
fn no_readahead_when_it_is_off_or_for_a_lookup_by_iterator() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 0)).unwrap();
    for i in 0..100 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    assert_eq!(scan(&db, &ReadOptions::default()).len(), 100);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(prop(&db, "shale.blob-readahead-reads"), 0);
    db.close().unwrap();
    let db = Db::open("/db", opts(&fs, WINDOW)).unwrap();
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek(&key(50)).unwrap();
    assert_eq!(it.value(), big(50, 0));
    it.seek(&key(70)).unwrap(); // a seek starts counting again
    assert_eq!(it.value(), big(70, 0));
    drop(it);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(prop(&db, "shale.blob-readahead-reads"), 0);
}

#[test]
fn scans_with_readahead_match_a_model_across_snapshots_bounds_and_gc() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, WINDOW)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..300 {
        db.put(&key(i), &big(i, 0)).unwrap();
        model.insert(key(i), big(i, 0));
    }
    let snap = db.snapshot();
    let at_snap = model.clone();
    for i in (0..300).step_by(3) {
        db.put(&key(i), &big(i, 1)).unwrap();
        model.insert(key(i), big(i, 1));
    }
    for i in (1..300).step_by(7) {
        db.delete(&key(i)).unwrap();
        model.remove(&key(i));
    }
    // Small values stay inline: a scan mixes both kinds.
    for i in (2..300).step_by(11) {
        db.put(&key(i), b"small").unwrap();
        model.insert(key(i), b"small".to_vec());
    }
    db.flush().unwrap();
    let st = db.collect_blob_garbage(0.9).unwrap();
    assert!(st.files_rewritten > 0, "{st:?}");
    let all: Vec<_> = model.clone().into_iter().collect();
    assert_eq!(scan(&db, &ReadOptions::default()), all);
    let old: Vec<_> = at_snap.into_iter().collect();
    let ro = ReadOptions {
        snapshot: Some(snap),
        ..ReadOptions::default()
    };
    assert_eq!(scan(&db, &ro), old, "the snapshot's values after GC");
    let bounded = ReadOptions {
        lower_bound: Some(key(40)),
        upper_bound: Some(key(90)),
        ..ReadOptions::default()
    };
    let want: Vec<_> = model
        .range(key(40)..key(90))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(scan(&db, &bounded), want);
    // Turning around drops the shadow; going forward again starts anew.
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek(&key(100)).unwrap();
    for _ in 0..30 {
        it.next().unwrap();
    }
    let here = it.key().to_vec();
    it.prev().unwrap();
    let before = model.range(..here.clone()).next_back().unwrap().0.clone();
    assert_eq!(it.key(), before);
    it.next().unwrap();
    assert_eq!(it.key(), here);
    let want: Vec<_> = model
        .range(here..)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(rest(&mut it), want);
    assert!(prop(&db, "shale.blob-readahead-reads") > 0);
}

#[test]
fn a_damaged_record_ahead_is_still_the_scans_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = Options {
        min_blob_size: 100,
        blob_cache_size: 1 << 20,
        blob_readahead: WINDOW,
        blob_readahead_threads: 2,
        ..Options::default()
    };
    let db = Db::open(&dir, o.clone()).unwrap();
    for i in 0..10 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    db.close().unwrap();
    let path = blob_file_in(&dir);
    let mut bytes = std::fs::read(&path).unwrap();
    // The sixth value (k00005): after the 16-byte header and five values,
    // packed (none is a multiple of 4 KiB; docs/format-blob.md section 7).
    let sixth: usize = 16 + (0..5).map(|i| big(i, 0).len()).sum::<usize>();
    bytes[sixth + 10] ^= 0x01; // a value byte of k00005
    std::fs::write(&path, &bytes).unwrap();
    let db = Db::open(&dir, o).unwrap();
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    for i in 1..5 {
        it.next().unwrap();
        assert_eq!(it.value(), big(i, 0));
    }
    // The readers met the damage first (and dropped it); the scan meets it.
    wait_for_reads(&db, 4);
    match it.next() {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (path, sixth as u64));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

/// Reader threads of this process (`shale-blobra*`), from /proc.
#[cfg(target_os = "linux")]
fn reader_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("shale-blobra"))
        .count()
}

/// The reader threads end with their database: opening and closing one
/// many times leaves none behind.
#[cfg(target_os = "linux")]
#[test]
fn reader_threads_end_when_the_database_closes() {
    let fs = Arc::new(MemFs::new());
    for round in 0..20u64 {
        let db = Db::open("/db", opts(&fs, WINDOW)).unwrap();
        assert!(reader_threads() >= 2);
        db.put(&key(round), &big(round, 0)).unwrap();
        assert_eq!(scan(&db, &ReadOptions::default()).len() as u64, round + 1);
        db.close().unwrap();
    }
    // Other tests of this binary may run meanwhile, each with at most two
    // readers per open database: wait for ours to go.
    let deadline = Instant::now() + Duration::from_secs(10);
    while reader_threads() > 8 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        reader_threads() <= 8,
        "{} reader threads left",
        reader_threads()
    );
}
