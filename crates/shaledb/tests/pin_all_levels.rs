//! `Options::pin_index_and_filter_all_levels`: with it, extents of the last
//! level (L2) keep their index and filter beside the block cache, so a point
//! read there costs at most one block-cache lookup (its data block); without
//! it, their index and filter go through the cache and a small cache misses
//! on them too.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{Db, Options};
use std::path::Path;

const KEYS: u32 = 20_000;

fn opts(fs: &MemFs, pin_all: bool) -> Options {
    Options {
        fs: fs.arc(),
        write_buffer_size: 256 << 10,
        extent_size: 64 << 10,
        block_size: 1024,
        max_key_size: 1024,
        max_value_size: 16 << 10,
        l1_target_size: 256 << 10,
        max_compaction_bytes: 256 << 10,
        extents_per_file: 64,
        // Four 1 KiB blocks: far less than the data, the indexes or the filters.
        block_cache_size: 4 << 10,
        pin_index_and_filter_all_levels: pin_all,
        background_threads: false,
        ..Options::default()
    }
}

fn prop(db: &Db, name: &str) -> u64 {
    db.property(name).unwrap().parse().unwrap()
}

/// Cache lookups that missed over one get per 50th key, on a freshly opened
/// database whose data is all in L2.
fn misses_of_gets(pin_all: bool) -> (u64, u64) {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let value = "0123456789".repeat(10);
    {
        let db = Db::open(dir, opts(&fs, pin_all)).unwrap();
        for i in 0..KEYS {
            // Spread keys so every extent covers a slice of the key space.
            let k = i.wrapping_mul(2_654_435_761);
            db.put(format!("k{k:010}").as_bytes(), value.as_bytes())
                .unwrap();
        }
        db.compact_range(None, None).unwrap();
        assert!(prop(&db, "shale.num-extents-at-level2") > 3);
        assert_eq!(prop(&db, "shale.num-extents-at-level1"), 0);
    }
    let db = Db::open(dir, opts(&fs, pin_all)).unwrap();
    let before = prop(&db, "shale.cache-misses");
    let mut gets = 0;
    for i in (0..KEYS).step_by(50) {
        let k = i.wrapping_mul(2_654_435_761);
        let got = db.get(format!("k{k:010}").as_bytes()).unwrap();
        assert_eq!(got.as_deref(), Some(value.as_bytes()));
        gets += 1;
    }
    (prop(&db, "shale.cache-misses") - before, gets)
}

#[test]
fn pinned_last_level_misses_only_on_data_blocks() {
    let (misses, gets) = misses_of_gets(true);
    assert!(misses <= gets, "{misses} misses for {gets} gets");
}

/// The contrast that shows the test above can fail: the same reads without
/// the option also miss on L2's index and filter blocks.
#[test]
fn unpinned_last_level_misses_on_index_and_filter_too() {
    let (misses, gets) = misses_of_gets(false);
    assert!(misses > gets, "{misses} misses for {gets} gets");
}
