//! Key-value separation (docs/format-blob.md): large values in value files,
//! reads, iterators, snapshots, transactions, column families, garbage
//! collection, damage and reopen.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use proptest::prelude::*;
use shaledb::env::mem::MemFs;
use shaledb::env::FileSystem;
use shaledb::txn::TxnOptions;
use shaledb::{Db, DbIterator, Error, Options, ReadOptions};
use std::collections::BTreeMap;
use std::sync::Arc;

mod blob_common;
use blob_common::{big, blob_file_in, key, prop, small_blob_opts};

const MIN: usize = 100;

fn opts(fs: &Arc<MemFs>) -> Options {
    small_blob_opts(fs)
}

fn collect(mut it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

fn collect_rev(mut it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.seek_to_last().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    out.reverse();
    out
}

#[test]
fn large_values_go_to_value_files_and_read_back() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..200u64 {
        let v = if i % 3 == 0 {
            b"small".to_vec()
        } else {
            big(i, 0)
        };
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    assert!(
        prop(&db, "shale.blob-file-count") >= 2,
        "files rotate at 64 KiB"
    );
    let stored = prop(&db, "shale.blob-bytes");
    let large: usize = model
        .values()
        .filter(|v| v.len() >= MIN)
        .map(Vec::len)
        .sum();
    assert!(stored >= large as u64, "{stored} < {large}");
    assert_eq!(prop(&db, "shale.blob-live-bytes"), large as u64);
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    let want: Vec<_> = model.clone().into_iter().collect();
    assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()), want);
    assert_eq!(collect_rev(db.iter(&ReadOptions::default()).unwrap()), want);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    db.close().unwrap();
    let db = Db::open("/db", opts(&fs)).unwrap();
    assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()), want);
    assert!(db.property("shale.stats").unwrap().contains("value files:"));
    let files = prop(&db, "shale.blob-file-count");
    let checked = db.verify_checksums().unwrap();
    assert!(checked >= files, "{checked} < {files} value files");
}

#[test]
fn values_larger_than_an_extent_with_separation() {
    let fs = Arc::new(MemFs::new());
    let o = Options {
        max_value_size: 16 << 20,
        ..opts(&fs)
    };
    let refused = Options {
        min_blob_size: 0,
        ..o.clone()
    };
    assert!(matches!(
        Db::open("/other", refused),
        Err(Error::InvalidOption { .. })
    ));
    let db = Db::open("/db", o.clone()).unwrap();
    let huge: Vec<u8> = (0..10 << 20).map(|i: u32| (i % 253) as u8).collect();
    db.put(b"huge", &huge).unwrap();
    db.put(b"small", b"s").unwrap();
    assert_eq!(db.get(b"huge").unwrap().as_deref(), Some(huge.as_slice()));
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open("/db", o).unwrap();
    assert_eq!(db.get(b"huge").unwrap().as_deref(), Some(huge.as_slice()));
    assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()).len(), 2);
}

#[test]
fn default_options_keep_values_inline() {
    let fs = Arc::new(MemFs::new());
    let o = Options {
        fs: fs.clone(),
        ..Options::default()
    };
    assert_eq!(o.min_blob_size, 0);
    let db = Db::open("/db", o).unwrap();
    db.put(b"k", &vec![7u8; 10_000]).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(vec![7u8; 10_000]));
    assert_eq!(prop(&db, "shale.blob-file-count"), 0);
    assert!(!fs
        .list_dir(std::path::Path::new("/db"))
        .unwrap()
        .iter()
        .any(|n| n.ends_with(".blob")));
}

#[test]
fn snapshots_and_iterators_opened_before_gc_still_read_their_values() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs)).unwrap();
    for i in 0..100 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    let snap = db.snapshot();
    let old_iter = db.iter(&ReadOptions::default()).unwrap();
    // Overwrite half the keys, delete a quarter: the first files become mostly dead.
    for i in 0..100 {
        match i % 4 {
            0 | 1 => db.put(&key(i), &big(i, 1)).unwrap(),
            2 => db.delete(&key(i)).unwrap(),
            _ => {}
        }
    }
    let files_before = prop(&db, "shale.blob-file-count");
    let st = db.collect_blob_garbage(0.9).unwrap();
    assert!(st.files_rewritten > 0, "{st:?}");
    assert!(st.records_rewritten > 0, "{st:?}");
    assert_eq!(st.files_deleted, 0, "a snapshot still reads them: {st:?}");
    assert!(st.files_waiting > 0, "{st:?}");
    // The snapshot and the iterator from before the GC read the old values.
    let ro = ReadOptions {
        snapshot: Some(snap),
        ..ReadOptions::default()
    };
    for i in 0..100 {
        assert_eq!(db.get_opt(&ro, 0, &key(i)).unwrap(), Some(big(i, 0)));
    }
    let got = collect(old_iter);
    assert_eq!(got.len(), 100);
    for (i, (k, v)) in got.into_iter().enumerate() {
        assert_eq!((k, v), (key(i as u64), big(i as u64, 0)));
    }
    // An iterator at the snapshot opened after the GC, too.
    assert_eq!(collect(db.iter(&ro).unwrap()).len(), 100);
    // The current state is unchanged by the GC.
    let check_current = |db: &Db| {
        for i in 0..100u64 {
            let want = match i % 4 {
                0 | 1 => Some(big(i, 1)),
                2 => None,
                _ => Some(big(i, 0)),
            };
            assert_eq!(db.get(&key(i)).unwrap(), want, "key {i}");
        }
    };
    check_current(&db);
    drop(ro);
    let st2 = db.collect_blob_garbage(0.9).unwrap();
    assert!(st2.files_deleted > 0, "{st2:?}");
    assert_eq!(st2.files_waiting, 0, "{st2:?}");
    check_current(&db);
    assert!(prop(&db, "shale.blob-file-count") < files_before + st.files_rewritten);
    let on_disk = || {
        fs.list_dir(std::path::Path::new("/db"))
            .unwrap()
            .iter()
            .filter(|n| n.ends_with(".blob"))
            .count() as u64
    };
    assert_eq!(on_disk(), prop(&db, "shale.blob-file-count"));
    assert!(prop(&db, "shale.blob-gc-files-deleted") > 0);
    db.close().unwrap();
    let db = Db::open("/db", opts(&fs)).unwrap();
    check_current(&db);
}

#[test]
fn gc_keeps_a_file_an_open_iterator_reads_until_it_is_dropped() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs)).unwrap();
    for i in 0..60 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    for i in 0..60 {
        db.put(&key(i), &big(i, 1)).unwrap();
    }
    // No snapshot: the old files leave the file set at once...
    let st = db.collect_blob_garbage(0.5).unwrap();
    assert!(st.files_deleted > 0, "{st:?}");
    // ...but the iterator holds them: it still reads every old value.
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.value(), big(n, 0).as_slice());
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, 60);
    let blobs_on_disk = || {
        fs.list_dir(std::path::Path::new("/db"))
            .unwrap()
            .iter()
            .filter(|n| n.ends_with(".blob"))
            .count() as u64
    };
    assert!(blobs_on_disk() > prop(&db, "shale.blob-file-count"));
    drop(it);
    assert_eq!(blobs_on_disk(), prop(&db, "shale.blob-file-count"));
    for i in 0..60 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(big(i, 1)));
    }
}

#[test]
fn gc_never_overwrites_a_concurrent_newer_write() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs)).unwrap();
    for i in 0..50 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for gen in 1..=20 {
                for i in 0..50 {
                    db.put(&key(i), &big(i, gen)).unwrap();
                }
            }
        })
    };
    let mut runs = 0;
    while !writer.is_finished() {
        db.collect_blob_garbage(0.99).unwrap();
        runs += 1;
    }
    writer.join().unwrap();
    db.collect_blob_garbage(0.99).unwrap();
    assert!(runs > 0);
    for i in 0..50 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(big(i, 20)), "key {i}");
    }
}

/// Format version 2 (docs/format-blob.md section 7): a flipped value byte
/// fails the BlobIndex's checksum; get, scan and verify name the value file
/// and the value's offset, GC leaves the file alone.
#[test]
fn damaged_value_file_gives_corruption_naming_file_and_offset() {
    // "a" and "b" are packed (not multiples of 4 KiB) after the 16-byte header.
    let second = 16 + big(1, 0).len();
    damaged_value_file(false, second, second + 100);
}

/// The same for a version-1 file (records of key and value), as the code
/// before format version 2 wrote it.
#[test]
fn damaged_version_1_value_file_gives_corruption_naming_file_and_offset() {
    // Second record: after the 16-byte header and the first record (16 + key + value).
    let second = 16 + 16 + 1 + big(1, 0).len();
    damaged_value_file(true, second, second + 16 + 1 + 100);
}

/// Writes "a" and "b" (in format version 1 if `v1`), flips byte `flip` of
/// the value file (a value byte of "b", whose record or value starts at
/// `second`) and checks every reader's report.
fn damaged_value_file(v1: bool, second: usize, flip: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = Options {
        min_blob_size: MIN,
        blob_write_format_v1: v1,
        ..Options::default()
    };
    let db = Db::open(&dir, o.clone()).unwrap();
    db.put(b"a", &big(1, 0)).unwrap();
    db.put(b"b", &big(2, 0)).unwrap();
    db.close().unwrap();
    let path = blob_file_in(&dir);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[flip] ^= 0x01; // a value byte of "b"
    std::fs::write(&path, &bytes).unwrap();
    let db = Db::open(&dir, o).unwrap();
    match db.verify_checksums() {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (path.clone(), second as u64));
        }
        other => panic!("verify_checksums: expected corruption, got {other:?}"),
    }
    assert_eq!(db.get(b"a").unwrap(), Some(big(1, 0)));
    match db.get(b"b") {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            assert_eq!(offset, second as u64);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // A reused buffer is not left holding the damaged value.
    let mut buf = b"an earlier value".to_vec();
    let err = db.get_into(&ReadOptions::default(), 0, b"b", &mut buf);
    assert!(err.unwrap_err().is_corruption());
    assert!(buf.is_empty(), "{} bytes left in the buffer", buf.len());
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    assert_eq!(it.key(), b"a");
    let err = it.next().unwrap_err();
    assert!(err.is_corruption(), "{err}");
    drop(it);
    // GC leaves a damaged file alone (rewriting it would lose the records
    // after the damage): "b" stays Corruption. Overwriting "a" (in a newer
    // file) puts the damaged file below the threshold, so the pass tries to
    // copy "b" (a version-2 measuring pass reads no value: only the copy
    // meets the damage).
    db.put(b"a", &big(1, 1)).unwrap();
    let st = db.collect_blob_garbage(0.9).unwrap();
    assert_eq!(st.files_damaged, 1, "{st:?}");
    assert_eq!(st.files_rewritten, 0, "{st:?}");
    assert!(path.exists());
    assert_eq!(db.get(b"a").unwrap(), Some(big(1, 1)));
    assert!(db.get(b"b").unwrap_err().is_corruption());
    assert!(db.verify_checksums().unwrap_err().is_corruption());
}

#[test]
fn direct_io_value_files_and_direct_reads_gc_and_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = Options {
        min_blob_size: MIN,
        blob_file_size: 64 << 10,
        blob_direct_io: true,
        blob_direct_reads: true,
        ..Options::default()
    };
    let db = Db::open(&dir, o.clone()).unwrap();
    for i in 0..100 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    for i in 0..50 {
        db.put(&key(i), &big(i, 1)).unwrap();
    }
    let check = |db: &Db| {
        for i in 0..100 {
            let want = big(i, u64::from(i < 50));
            assert_eq!(db.get(&key(i)).unwrap(), Some(want), "key {i}");
        }
    };
    check(&db);
    let st = db.collect_blob_garbage(0.8).unwrap();
    assert!(st.files_rewritten > 0, "{st:?}");
    check(&db);
    db.close().unwrap();
    // Sealed files are cut to their logical length: each key log ends in
    // its footer, which names the value file's length.
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "bkey") {
            let b = std::fs::read(&p).unwrap();
            assert_eq!(
                &b[b.len() - 12..b.len() - 4],
                b"SHALEBKF",
                "{}",
                p.display()
            );
            let end = u64::from_le_bytes(b[b.len() - 24..b.len() - 16].try_into().unwrap());
            let value_file = std::fs::metadata(p.with_extension("blob")).unwrap();
            assert_eq!(value_file.len(), end, "{}", p.display());
        }
    }
    let db = Db::open(&dir, o).unwrap();
    check(&db);
}

#[test]
fn transactions_and_column_families_with_blobs() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs)).unwrap();
    let cf = db.create_cf("other").unwrap();
    db.put_cf(cf, b"x", &big(1, 1)).unwrap();
    db.put(b"x", &big(1, 2)).unwrap();
    assert_eq!(db.get_cf(cf, b"x").unwrap(), Some(big(1, 1)));
    assert_eq!(db.get(b"x").unwrap(), Some(big(1, 2)));

    let mut t = db.begin(TxnOptions::default());
    t.put(b"t1", &big(3, 0)).unwrap();
    assert_eq!(t.get(b"x").unwrap(), Some(big(1, 2)));
    assert_eq!(t.get(b"t1").unwrap(), Some(big(3, 0)));
    {
        let mut it = t.iter(None, None).unwrap();
        it.seek_to_first().unwrap();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        assert_eq!(
            seen,
            vec![(b"t1".to_vec(), big(3, 0)), (b"x".to_vec(), big(1, 2))]
        );
    }
    t.commit().unwrap();
    assert_eq!(db.get(b"t1").unwrap(), Some(big(3, 0)));

    // Two-phase commit: the prepare keeps the value inline, the commit separates it.
    let mut t = db.begin(TxnOptions::default());
    t.put(b"p", &big(4, 0)).unwrap();
    t.prepare(b"xid1").unwrap();
    drop(t);
    db.commit_prepared(b"xid1").unwrap();
    assert_eq!(db.get(b"p").unwrap(), Some(big(4, 0)));

    // GC re-points keys of both column families.
    for i in 0..80 {
        db.put_cf(cf, &key(i), &big(i, 0)).unwrap();
        db.put(&key(i), &big(i, 1)).unwrap();
    }
    for i in 0..80 {
        db.delete_cf(cf, &key(i)).unwrap();
    }
    db.collect_blob_garbage(0.9).unwrap();
    db.close().unwrap();
    let db = Db::open("/db", opts(&fs)).unwrap();
    let cf = db.cf_id("other").unwrap();
    assert_eq!(db.get_cf(cf, b"x").unwrap(), Some(big(1, 1)));
    assert_eq!(db.get(b"p").unwrap(), Some(big(4, 0)));
    for i in 0..80 {
        assert_eq!(db.get_cf(cf, &key(i)).unwrap(), None);
        assert_eq!(db.get(&key(i)).unwrap(), Some(big(i, 1)));
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Key, size (0: inline, 1: 1,000-3,999 bytes, 2: 4 or 8 KiB), generation.
    Put(u8, u8, u8),
    Delete(u8),
    Gc(u8),
    Flush,
    /// Reopen; `true`: new value files in format version 1 until the next reopen.
    Reopen(bool),
}

/// A value of 4 or 8 KiB (page-aligned in format version 2) naming its key and generation.
fn page(i: u64, gen: u64) -> Vec<u8> {
    let mut v = format!("page-{i}-{gen}-").into_bytes();
    v.resize(4096 << (gen % 2), b'a' + (gen % 26) as u8);
    v
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..40, 0u8..3, any::<u8>()).prop_map(|(k, l, g)| Op::Put(k, l, g)),
        2 => (0u8..40).prop_map(Op::Delete),
        1 => (1u8..10).prop_map(Op::Gc),
        1 => Just(Op::Flush),
        1 => any::<bool>().prop_map(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn model_against_btreemap(ops in proptest::collection::vec(op(), 1..120)) {
        let fs = Arc::new(MemFs::new());
        let mut db = Db::open("/db", opts(&fs)).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut snap = None;
        let mut snap_model = BTreeMap::new();
        for (n, op) in ops.iter().enumerate() {
            match op {
                Op::Put(k, size, g) => {
                    let (k64, g64) = (u64::from(*k), u64::from(*g));
                    let v = match size {
                        0 => vec![*g; 10],
                        1 => big(k64, g64),
                        _ => page(k64, g64),
                    };
                    db.put(&key(u64::from(*k)), &v).unwrap();
                    model.insert(key(u64::from(*k)), v);
                }
                Op::Delete(k) => {
                    db.delete(&key(u64::from(*k))).unwrap();
                    model.remove(&key(u64::from(*k)));
                }
                Op::Gc(r) => {
                    if n % 2 == 0 {
                        snap = Some(db.snapshot());
                        snap_model = model.clone();
                    }
                    db.collect_blob_garbage(f64::from(*r) / 10.0).unwrap();
                }
                Op::Flush => db.flush().unwrap(),
                Op::Reopen(v1) => {
                    snap = None;
                    db.close().unwrap();
                    // Files of both format versions in one database.
                    let o = Options { blob_write_format_v1: *v1, ..opts(&fs) };
                    db = Db::open("/db", o).unwrap();
                }
            }
        }
        let want: Vec<_> = model.clone().into_iter().collect();
        prop_assert_eq!(&collect(db.iter(&ReadOptions::default()).unwrap()), &want);
        for (k, v) in &model {
            prop_assert_eq!(db.get(k).unwrap(), Some(v.clone()));
        }
        if let Some(s) = snap {
            let ro = ReadOptions { snapshot: Some(s), ..ReadOptions::default() };
            let want: Vec<_> = snap_model.into_iter().collect();
            prop_assert_eq!(&collect(db.iter(&ro).unwrap()), &want);
        }
        db.collect_blob_garbage(1.0).unwrap();
        db.close().unwrap();
        let db = Db::open("/db", opts(&fs)).unwrap();
        prop_assert_eq!(&collect(db.iter(&ReadOptions::default()).unwrap()), &want);
    }
}
