//! The value cache (`Options::blob_cache_size`, docs/format-blob.md
//! section 5): hits for repeated reads and concurrent scans, correct values
//! across overwrites, GC and reopen, and no cache by default.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{Db, Options, ReadOptions};
use std::sync::Arc;

mod blob_common;
use blob_common::{big, key, prop, small_blob_opts};

/// Without scan readahead: these tests count the scan's own hits and
/// misses (blob_readahead.rs tests readahead).
fn opts(fs: &Arc<MemFs>, cache: usize) -> Options {
    Options {
        blob_cache_size: cache,
        blob_readahead: 0,
        ..small_blob_opts(fs)
    }
}

fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

#[test]
fn off_by_default() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 0)).unwrap();
    db.put(b"a", &big(1, 0)).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(big(1, 0)));
    assert_eq!(db.get(b"a").unwrap(), Some(big(1, 0)));
    assert_eq!(prop(&db, "shale.blob-cache-hits"), 0);
    assert_eq!(prop(&db, "shale.blob-cache-misses"), 0);
}

#[test]
fn repeated_and_concurrent_scans_hit_and_values_stay_right() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 4 << 20)).unwrap();
    for i in 0..100 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    let want: Vec<_> = (0..100).map(|i| (key(i), big(i, 0))).collect();
    assert_eq!(scan(&db), want);
    assert_eq!(prop(&db, "shale.blob-cache-misses"), 100);
    assert_eq!(prop(&db, "shale.blob-cache-hits"), 0);
    assert!(prop(&db, "shale.blob-cache-usage") > 100 * 1000);
    // Four threads scanning at once: every value is already cached.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || scan(&db))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), want);
    }
    assert_eq!(prop(&db, "shale.blob-cache-hits"), 400);
    // Overwrites point at new records: new keys in the cache, new values.
    for i in (0..100).step_by(2) {
        db.put(&key(i), &big(i, 1)).unwrap();
    }
    let want: Vec<_> = (0..100)
        .map(|i| (key(i), big(i, if i % 2 == 0 { 1 } else { 0 })))
        .collect();
    assert_eq!(scan(&db), want);
    // GC moves the live values to new files (new cache keys).
    db.flush().unwrap();
    let st = db.collect_blob_garbage(0.9).unwrap();
    assert!(st.files_rewritten > 0, "{st:?}");
    assert_eq!(scan(&db), want);
    for (k, v) in &want {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    db.close().unwrap();
    let db = Db::open("/db", opts(&fs, 4 << 20)).unwrap();
    assert_eq!(scan(&db), want);
    assert_eq!(
        prop(&db, "shale.blob-cache-hits"),
        0,
        "a new cache per open"
    );
}

/// `get_into` reuses the caller's buffer (the value is copied from the
/// cache entry, or read straight into it without a cache): one buffer read
/// into for values longer and shorter than what it held, an inline value
/// and a missing key, twice (the second pass hits the cache), holds exactly
/// each value every time.
#[test]
fn get_into_one_buffer_holds_each_value_with_and_without_the_cache() {
    for cache in [0, 4 << 20] {
        let fs = Arc::new(MemFs::new());
        let db = Db::open("/db", opts(&fs, cache)).unwrap();
        let mut want: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            (0..40).map(|i| (key(i), Some(big(i, 0)))).collect();
        want.push((b"page".to_vec(), Some(vec![7u8; 4096])));
        want.push((b"pages".to_vec(), Some(vec![9u8; 8192])));
        want.push((b"inline".to_vec(), Some(b"short".to_vec())));
        for (k, v) in &want {
            db.put(k, v.as_ref().unwrap()).unwrap();
        }
        want.push((b"missing".to_vec(), None));
        // Long and short values alternate.
        want.sort_by_key(|(k, _)| k.len() % 3);
        let mut buf = b"stale bytes of an earlier read".to_vec();
        for pass in 0..2 {
            for (k, v) in &want {
                let found = db
                    .get_into(&ReadOptions::default(), 0, k, &mut buf)
                    .unwrap();
                match v {
                    Some(v) => assert!(found && &buf == v, "pass {pass}, key {k:?}"),
                    None => assert!(!found && buf.is_empty(), "pass {pass}, key {k:?}"),
                }
            }
        }
        let hits = prop(&db, "shale.blob-cache-hits");
        assert_eq!(hits > 0, cache > 0, "cache {cache}: {hits} hits");
    }
}
