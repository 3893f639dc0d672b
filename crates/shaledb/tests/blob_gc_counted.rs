//! Garbage collection driven by compaction's dead-byte count
//! (docs/format-blob.md, sections 3 and 4): the count and its `BLOBDEAD`
//! sidecar, the background pass, snapshots and iterators opened before it,
//! and a model test with background GC, compaction and reopen.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use proptest::prelude::*;
use shaledb::env::mem::MemFs;
use shaledb::env::FileSystem;
use shaledb::{Db, DbIterator, Error, Options, ReadOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod blob_common;
use blob_common::{big, key, prop, small_blob_opts};

fn opts(fs: &Arc<MemFs>) -> Options {
    small_blob_opts(fs)
}

/// `opts` with a background GC pass every 10 ms at live ratio 0.5, unpaced.
fn bg_opts(fs: &Arc<MemFs>) -> Options {
    Options {
        blob_gc_live_ratio: 0.5,
        blob_gc_interval_ms: 10,
        blob_gc_bytes_per_sec: 0,
        ..opts(fs)
    }
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

/// Record bytes of the value of `big(i, gen)` under `key(i)`.
fn rec(i: u64, gen: u64) -> u64 {
    16 + key(i).len() as u64 + big(i, gen).len() as u64
}

/// Polls `cond` for up to 10 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn compaction_counts_dead_bytes_and_the_count_survives_reopen() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs)).unwrap();
    for i in 0..60 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(prop(&db, "shale.blob-dead-bytes"), 0);
    // Overwrite the even keys, delete every third: dead only once a merge
    // drops the old versions.
    for i in (0..60).step_by(2) {
        db.put(&key(i), &big(i, 1)).unwrap();
    }
    for i in (0..60).step_by(3) {
        db.delete(&key(i)).unwrap();
    }
    assert_eq!(prop(&db, "shale.blob-dead-bytes"), 0);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // Dropped: generation 0 of every key overwritten or deleted, and
    // generation 1 of the even keys deleted afterwards (multiples of 6).
    let want: u64 = (0..60)
        .filter(|i| i % 2 == 0 || i % 3 == 0)
        .map(|i| rec(i, 0))
        .chain((0..60).filter(|i| i % 6 == 0).map(|i| rec(i, 1)))
        .sum();
    assert_eq!(prop(&db, "shale.blob-dead-bytes"), want);
    let amp: f64 = db
        .property("shale.blob-space-amp")
        .unwrap()
        .parse()
        .unwrap();
    assert!(amp > 1.2, "{amp}");
    let files = db.property("shale.blob-files").unwrap();
    assert!(files.lines().count() >= 2, "{files}");
    assert!(db
        .property("shale.stats")
        .unwrap()
        .contains("space amplification"));
    db.close().unwrap();
    assert!(fs.exists(Path::new("/db/BLOBDEAD")));
    let db = Db::open("/db", opts(&fs)).unwrap();
    assert_eq!(prop(&db, "shale.blob-dead-bytes"), want);
    // An explicit pass measures and collects; the count follows.
    let st = db.collect_blob_garbage(0.9).unwrap();
    assert!(st.files_rewritten > 0, "{st:?}");
    assert!(prop(&db, "shale.blob-dead-bytes") < want);
}

#[test]
fn damaged_sidecar_recounts_and_other_version_is_refused() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs)).unwrap();
    for gen in 0..3 {
        for i in 0..40 {
            db.put(&key(i), &big(i, gen)).unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.close().unwrap();
    let path = Path::new("/db/BLOBDEAD");
    let good = shaledb::env::read_to_vec(fs.as_ref(), path).unwrap();
    // Damage: every file is counted dead, then a GC pass measures them.
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    shaledb::env::write_file_atomic(fs.as_ref(), Path::new("/db"), "BLOBDEAD", &bad).unwrap();
    let db = Db::open("/db", opts(&fs)).unwrap();
    // Every record byte counted dead: only headers and footers are "live".
    let amp: f64 = db
        .property("shale.blob-space-amp")
        .unwrap()
        .parse()
        .unwrap();
    assert!(amp > 100.0, "{amp}");
    db.collect_blob_garbage(0.5).unwrap();
    for i in 0..40 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(big(i, 2)));
    }
    let amp: f64 = db
        .property("shale.blob-space-amp")
        .unwrap()
        .parse()
        .unwrap();
    assert!(amp < 10.0, "{amp}");
    db.close().unwrap();
    // Another version, checksum valid: a typed error naming the file.
    let mut v2 = good[..good.len() - 4].to_vec();
    v2[8] = 2;
    let crc = crc32c_masked(&v2);
    v2.extend_from_slice(&crc.to_le_bytes());
    shaledb::env::write_file_atomic(fs.as_ref(), Path::new("/db"), "BLOBDEAD", &v2).unwrap();
    match Db::open("/db", opts(&fs)) {
        Err(Error::UnsupportedVersion { file, version: 2 }) => {
            assert!(file.ends_with("BLOBDEAD"))
        }
        other => panic!("{:?}", other.err()),
    }
}

/// The masked CRC32C of the WAL and the value files (docs/format-blob.md).
fn crc32c_masked(data: &[u8]) -> u32 {
    let c = crc32c::crc32c(data);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Same pairs, compared by count and first difference (values are large).
fn same(got: &[(Vec<u8>, Vec<u8>)], want: &[(Vec<u8>, Vec<u8>)]) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(a, b)| a == b)
}

#[test]
fn background_gc_rewrites_counted_files_and_spares_earlier_readers() {
    let fs = Arc::new(MemFs::new());
    // The first pass runs 1 s after open, after the snapshot below.
    let db = Db::open(
        "/db",
        Options {
            blob_gc_interval_ms: 1000,
            ..bg_opts(&fs)
        },
    )
    .unwrap();
    for i in 0..80 {
        db.put(&key(i), &big(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let expect_old: Vec<_> = (0..80).map(|i| (key(i), big(i, 0))).collect();
    let expect_new: Vec<_> = (0..80)
        .map(|i| (key(i), big(i, if i % 4 == 0 { 0 } else { 1 })))
        .collect();
    // An iterator (no registered snapshot) opened before the overwrites.
    let it_old = db.iter(&ReadOptions::default()).unwrap();
    for i in (0..80).filter(|i| i % 4 != 0) {
        db.put(&key(i), &big(i, 1)).unwrap();
    }
    // The merges drop generation 0 of the overwritten keys: counted.
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(prop(&db, "shale.blob-dead-bytes") > 0);
    // A snapshot and an iterator at it, opened before the first pass: the
    // keys not overwritten still point into the files GC will rewrite.
    let snap = db.snapshot();
    let ro = ReadOptions {
        snapshot: Some(snap.clone()),
        ..ReadOptions::default()
    };
    let it_snap = db.iter(&ro).unwrap();
    let early = prop(&db, "shale.blob-gc-files-rewritten");
    wait_for("a background rewrite", || {
        prop(&db, "shale.blob-gc-files-rewritten") > 0
    });
    if early == 0 {
        // The re-point write is newer than the snapshot: kept for it.
        assert_eq!(prop(&db, "shale.blob-gc-files-deleted"), 0);
    } else {
        eprintln!("the machine was slow: GC ran before the snapshot");
    }
    assert!(same(&collect(it_snap), &expect_new));
    for i in (0..80).step_by(4) {
        assert_eq!(db.get_opt(&ro, 0, &key(i)).unwrap(), Some(big(i, 0)));
    }
    drop(ro);
    drop(snap);
    wait_for("the rewritten files to be released", || {
        prop(&db, "shale.blob-gc-files-deleted") > 0
    });
    // Released from the set, but the iterator still holds its files.
    assert!(same(&collect(it_old), &expect_old));
    assert!(same(
        &collect(db.iter(&ReadOptions::default()).unwrap()),
        &expect_new
    ));
    db.close().unwrap();
    let db = Db::open("/db", opts(&fs)).unwrap();
    assert!(same(
        &collect(db.iter(&ReadOptions::default()).unwrap()),
        &expect_new
    ));
    let amp: f64 = db
        .property("shale.blob-space-amp")
        .unwrap()
        .parse()
        .unwrap();
    assert!(amp < 1.6, "space amplification after GC {amp}");
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, bool, u8),
    Delete(u8),
    Compact,
    Flush,
    Snapshot,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..30, any::<bool>(), any::<u8>()).prop_map(|(k, l, g)| Op::Put(k, l, g)),
        2 => (0u8..30).prop_map(Op::Delete),
        1 => Just(Op::Compact),
        1 => Just(Op::Flush),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Background GC runs every 10 ms on the counts the merges leave,
    /// racing the operations; the database always reads as the model.
    #[test]
    fn model_with_background_gc_and_reopen(ops in proptest::collection::vec(op(), 1..100)) {
        let fs = Arc::new(MemFs::new());
        let mut db = Db::open("/db", bg_opts(&fs)).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut snap = None;
        let mut snap_model = BTreeMap::new();
        for op in &ops {
            match op {
                Op::Put(k, large, g) => {
                    let v = if *large { big(u64::from(*k), u64::from(*g)) } else { vec![*g; 10] };
                    db.put(&key(u64::from(*k)), &v).unwrap();
                    model.insert(key(u64::from(*k)), v);
                }
                Op::Delete(k) => {
                    db.delete(&key(u64::from(*k))).unwrap();
                    model.remove(&key(u64::from(*k)));
                }
                Op::Compact => db.compact_range(None, None).unwrap(),
                Op::Flush => db.flush().unwrap(),
                Op::Snapshot => {
                    snap = Some(db.snapshot());
                    snap_model = model.clone();
                }
                Op::Reopen => {
                    snap = None;
                    db.close().unwrap();
                    db = Db::open("/db", bg_opts(&fs)).unwrap();
                }
            }
        }
        let want: Vec<_> = model.clone().into_iter().collect();
        prop_assert_eq!(&collect(db.iter(&ReadOptions::default()).unwrap()), &want);
        if let Some(s) = snap {
            let ro = ReadOptions { snapshot: Some(s), ..ReadOptions::default() };
            let want: Vec<_> = snap_model.into_iter().collect();
            prop_assert_eq!(&collect(db.iter(&ro).unwrap()), &want);
        }
        db.compact_range(None, None).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        db.close().unwrap();
        let db = Db::open("/db", opts(&fs)).unwrap();
        prop_assert_eq!(&collect(db.iter(&ReadOptions::default()).unwrap()), &want);
        for (k, v) in &model {
            prop_assert_eq!(db.get(k).unwrap(), Some(v.clone()));
        }
    }
}
