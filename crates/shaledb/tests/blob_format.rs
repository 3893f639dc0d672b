//! Value-file format version 2 (docs/format-blob.md section 7): page-aligned
//! values, and databases written in version 1 that keep working.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::env::FileSystem;
use shaledb::{Db, Options, ReadOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

mod blob_common;
use blob_common::{big, key, prop, small_blob_opts};

fn scan_all(db: &Db, cf: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter_cf(&ReadOptions::default(), cf).unwrap();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

/// (value files, key logs) in `/db`.
fn files(fs: &Arc<MemFs>) -> (Vec<String>, Vec<String>) {
    let names = fs.list_dir(Path::new("/db")).unwrap();
    let pick = |ext: &str| {
        let mut v: Vec<String> = names
            .iter()
            .filter_map(|n| n.strip_suffix(ext).map(str::to_owned))
            .collect();
        v.sort();
        v
    };
    (pick(".blob"), pick(".bkey"))
}

/// A database written in format version 1 (as the code before version 2
/// wrote it) opens, reads, scans and verifies under version 2; new writes
/// go to version-2 files; GC rewrites the version-1 files as version 2.
#[test]
fn a_version_1_database_keeps_working_and_gc_rewrites_it_in_version_2() {
    let fs = Arc::new(MemFs::new());
    let v1 = Options {
        blob_write_format_v1: true,
        ..small_blob_opts(&fs)
    };
    let db = Db::open("/db", v1).unwrap();
    let other = db.create_cf("other").unwrap();
    let mut model = BTreeMap::new();
    let mut model_other = BTreeMap::new();
    for i in 0..150u64 {
        let v = if i % 5 == 0 {
            vec![b's'; 20]
        } else {
            big(i, 0)
        };
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
        db.put_cf(other, &key(i), &big(i, 7)).unwrap();
        model_other.insert(key(i), big(i, 7));
    }
    db.close().unwrap();
    let (blobs, keylogs) = files(&fs);
    assert!(blobs.len() >= 3, "{blobs:?}");
    assert!(keylogs.is_empty(), "version 1 has no key logs: {keylogs:?}");

    let db = Db::open("/db", small_blob_opts(&fs)).unwrap();
    let other = db.cf_id("other").unwrap();
    let check = |db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, m2: &BTreeMap<Vec<u8>, Vec<u8>>| {
        for (k, v) in model {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
        }
        let want: Vec<_> = model.clone().into_iter().collect();
        assert_eq!(scan_all(db, 0), want);
        let want: Vec<_> = m2.clone().into_iter().collect();
        assert_eq!(scan_all(db, other), want);
        db.verify_checksums().unwrap();
    };
    check(&db, &model, &model_other);
    // New writes: version 2 (a key log per new value file).
    for i in (0..150u64).step_by(2) {
        db.put(&key(i), &big(i, 1)).unwrap();
        model.insert(key(i), big(i, 1));
    }
    assert!(!files(&fs).1.is_empty());
    check(&db, &model, &model_other);
    // GC at 1.0 rewrites every sealed file but the newest: the version-1
    // ones become version 2.
    let st = db.collect_blob_garbage(1.0).unwrap();
    assert!(st.files_rewritten >= blobs.len() as u64, "{st:?}");
    check(&db, &model, &model_other);
    db.close().unwrap();
    let (blobs_after, keylogs_after) = files(&fs);
    assert_eq!(blobs_after, keylogs_after, "every value file is version 2");
    assert!(blobs.iter().all(|b| !blobs_after.contains(b)));
    let db = Db::open("/db", small_blob_opts(&fs)).unwrap();
    check(&db, &model, &model_other);
    // The reported bytes count the key logs too.
    let on_disk: u64 = blobs_after
        .iter()
        .flat_map(|n| [format!("/db/{n}.blob"), format!("/db/{n}.bkey")])
        .map(|p| fs.file_size(Path::new(&p)).unwrap())
        .sum();
    assert_eq!(prop(&db, "shale.blob-bytes"), on_disk);
}

/// A value whose length is a multiple of 4 KiB starts on a 4 KiB page of
/// the value file; other values are packed after the one before.
#[test]
fn page_sized_values_start_on_pages_and_others_are_packed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = Options {
        min_blob_size: 100,
        ..Options::default()
    };
    let db = Db::open(&dir, o.clone()).unwrap();
    let vals: Vec<(Vec<u8>, u64)> = vec![
        (vec![1u8; 4096], 4096),  // after the 16-byte header: the next page
        (vec![2u8; 1000], 8192),  // packed
        (vec![3u8; 4096], 12288), // 9,192 rounded up to a page
        (vec![4u8; 8192], 16384),
        (vec![5u8; 4096], 24576),
    ];
    for (i, (v, _)) in vals.iter().enumerate() {
        db.put(&key(i as u64), v).unwrap();
    }
    db.close().unwrap();
    let blob = blob_common::blob_file_in(&dir);
    let bytes = std::fs::read(&blob).unwrap();
    assert_eq!(bytes.len(), 24576 + 4096);
    for (v, at) in &vals {
        let at = *at as usize;
        assert_eq!(&bytes[at..at + v.len()], v.as_slice(), "value at {at}");
    }
    let db = Db::open(&dir, o).unwrap();
    for (i, (v, _)) in vals.iter().enumerate() {
        assert_eq!(db.get(&key(i as u64)).unwrap().as_ref(), Some(v));
    }
}
