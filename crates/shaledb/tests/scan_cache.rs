//! Bulk scans read with `CachePriority::Low` do not push out of the block
//! cache what other reads cached before them; with the default priority the
//! same scan does (which is what makes this test able to fail). A smaller
//! low-priority scan still gets into the cache on its second pass.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{CachePriority, Db, Options, ReadOptions};
use std::path::Path;

const KEYS: u32 = 20_000;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:08}").into_bytes()
}

/// A database of ~4 MB of 4 KiB blocks behind a 512 KiB block cache (one
/// shard), everything in extents. The extents' index and filter blocks (a
/// few KiB each, cached at high priority) take a small part of the cache, as
/// they do at real sizes.
fn open_filled() -> Db {
    let fs = MemFs::new();
    let opts = Options {
        fs: fs.arc(),
        write_buffer_size: 256 << 10,
        extent_size: 256 << 10,
        block_size: 4096,
        block_cache_size: 512 << 10,
        max_key_size: 1024,
        max_value_size: 16 << 10,
        extents_per_file: 64,
        background_threads: false,
        ..Options::default()
    };
    let db = Db::open(Path::new("/db"), opts).unwrap();
    let value = "0123456789".repeat(20);
    for i in 0..KEYS {
        db.put(&key(i), value.as_bytes()).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db
}

fn counter(db: &Db, name: &str) -> u64 {
    db.property(name).unwrap().parse().unwrap()
}

/// Walks `[lo, hi)` and returns the block cache misses it caused.
fn scan(db: &Db, lo: u32, hi: u32, priority: CachePriority) -> u64 {
    let before = counter(db, "shale.cache-misses");
    let ro = ReadOptions {
        lower_bound: Some(key(lo)),
        upper_bound: Some(key(hi)),
        cache_priority: priority,
        ..ReadOptions::default()
    };
    let mut it = db.iter(&ro).unwrap();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, hi - lo, "the scan sees every key whatever its priority");
    counter(db, "shale.cache-misses") - before
}

/// Caches the first 500 keys' blocks (~100 KiB), runs two full scans of the
/// ~4 MB at `priority`, and returns the misses of re-reading those 500 keys.
fn misses_after_full_scans(priority: CachePriority) -> u64 {
    let db = open_filled();
    let warm = scan(&db, 0, 500, CachePriority::High);
    assert!(warm > 0, "the first read of the warm range misses");
    assert_eq!(scan(&db, 0, 500, CachePriority::High), 0, "now cached");
    for _ in 0..2 {
        let misses = scan(&db, 0, KEYS, priority);
        assert!(misses > 0, "the table is larger than the cache");
    }
    scan(&db, 0, 500, CachePriority::High)
}

#[test]
fn low_priority_scans_keep_what_was_cached() {
    // At most one block of the warm range is displaced (the shard's least
    // recently used block when the cache filled up).
    let low = misses_after_full_scans(CachePriority::Low);
    assert!(low <= 1, "low-priority scans displaced {low} warm blocks");
    let high = misses_after_full_scans(CachePriority::High);
    assert!(
        high > 10,
        "a normal scan larger than the cache flushes it ({high})"
    );
}

#[test]
fn a_low_priority_scan_fills_free_room_and_hits_there_next_time() {
    let db = open_filled();
    // A range that fits the cache: the first scan misses, the second hits.
    assert!(scan(&db, 1000, 1400, CachePriority::Low) > 0);
    assert_eq!(scan(&db, 1000, 1400, CachePriority::Low), 0);
}

#[test]
fn a_small_scan_after_a_large_one_is_cached_on_its_second_pass() {
    let db = open_filled();
    for _ in 0..2 {
        scan(&db, 0, KEYS, CachePriority::Low);
    }
    // Its blocks wait in the old segment after pass 1 (not evicted by
    // each other, as they would be if a cold insert went to the very end).
    assert!(scan(&db, 10_000, 10_300, CachePriority::Low) > 0);
    assert_eq!(scan(&db, 10_000, 10_300, CachePriority::Low), 0);
    // Hits promoted them: another full scan leaves them cached.
    scan(&db, 0, KEYS, CachePriority::Low);
    assert_eq!(scan(&db, 10_000, 10_300, CachePriority::Low), 0);
}

#[test]
fn compaction_reads_its_inputs_without_caching_them() {
    // open_filled's full compaction read every ~4 MB of input; only index
    // and filter blocks (a few KiB per extent) may be left in the cache.
    let db = open_filled();
    let usage = counter(&db, "shale.cache-usage");
    assert!(
        usage < 128 << 10,
        "compaction filled the cache: {usage} bytes"
    );
}
