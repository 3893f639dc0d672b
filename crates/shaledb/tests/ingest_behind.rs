//! Ingest behind (docs/architecture.md, "Ingest behind"): sorted runs bulk
//! loaded into the last level at sequence 0, under the contract that each
//! ingested value is the key's value at the snapshot passed to `commit`.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;
use shaledb::env::mem::MemFs;
use shaledb::env::FileSystem;
use shaledb::{Db, Error, Options, ReadOptions, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;

fn opts(fs: &MemFs) -> Options {
    common::small_mem_opts(fs)
}

fn key(i: u32) -> Vec<u8> {
    format!("ix{i:07}").into_bytes()
}

fn scan(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next().unwrap();
    }
    out
}

fn level_extents(db: &Db, level: usize) -> u64 {
    db.property(&format!("shale.num-extents-at-level{level}"))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_new_range_moves_in_without_a_rewrite_and_survives_power_loss() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, opts(&fs)).unwrap();
    let synced = WriteOptions {
        sync: true,
        ..Default::default()
    };
    db.put_opt(&synced, b"other", b"x").unwrap();
    let snap = db.snapshot();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..30_000)
        .map(|i| (key(i), format!("v{i}").into_bytes()))
        .collect();
    let ing = db.ingest_behind(0).unwrap();
    ing.add_run(entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
        .unwrap();
    let stats = ing.commit(&snap).unwrap();
    assert_eq!(stats.entries, 30_000);
    assert_eq!(stats.runs, 1);
    assert!(stats.bytes_written > 0);
    assert_eq!(stats.bytes_rewritten, 0, "a new range must move in as is");
    assert!(level_extents(&db, 2) > 1);
    assert_eq!(db.get(&key(4_321)).unwrap(), Some(b"v4321".to_vec()));
    // Durable at commit, without a WAL record: a power loss keeps it.
    fs.crash();
    drop(db);
    let db = Db::open(dir, opts(&fs)).unwrap();
    let all = scan(&db);
    assert_eq!(all.len(), 30_001);
    for (k, v) in &entries {
        assert_eq!(all.get(k), Some(v));
    }
    assert!(db.verify_checksums().unwrap() > 1);
}

/// Writes after the snapshot win over the ingested values, including
/// deletes whose tombstones were compacted into the last level before the
/// commit: the commit then merges with them instead of moving in.
#[test]
fn newer_writes_and_deletes_win_over_the_ingested_values() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    // State at the snapshot: keys 0..3000 with value "old{i}".
    for i in 0..3_000 {
        db.put(&key(i), format!("old{i}").as_bytes()).unwrap();
    }
    let snap = db.snapshot();
    // After it: every 3rd key deleted, every 5th overwritten, new keys.
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = (0..3_000)
        .map(|i| (key(i), format!("old{i}").into_bytes()))
        .collect();
    for i in 0..3_000 {
        if i % 3 == 0 {
            db.delete(&key(i)).unwrap();
            model.remove(&key(i));
        } else if i % 5 == 0 {
            db.put(&key(i), b"new").unwrap();
            model.insert(key(i), b"new".to_vec());
        }
    }
    for i in 3_000..3_500 {
        db.put(&key(i), b"late").unwrap();
        model.insert(key(i), b"late".to_vec());
    }
    // Push everything, tombstones included, into the last level.
    db.compact_range(None, None).unwrap();
    assert!(level_extents(&db, 2) > 0);
    // Ingest the snapshot's state in two interleaving runs.
    let at_snap: Vec<(Vec<u8>, Vec<u8>)> = (0..3_000)
        .map(|i| (key(i), format!("old{i}").into_bytes()))
        .collect();
    let ing = db.ingest_behind(0).unwrap();
    ing.add_run(
        at_snap
            .iter()
            .step_by(2)
            .map(|(k, v)| (k.as_slice(), v.as_slice())),
    )
    .unwrap();
    ing.add_run(
        at_snap
            .iter()
            .skip(1)
            .step_by(2)
            .map(|(k, v)| (k.as_slice(), v.as_slice())),
    )
    .unwrap();
    let stats = ing.commit(&snap).unwrap();
    assert_eq!((stats.entries, stats.runs), (3_000, 2));
    assert!(stats.bytes_rewritten > 0, "overlapping runs are merged");
    assert_eq!(scan(&db), model);
    // Still right once the snapshot is gone and everything is compacted.
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(scan(&db), model);
    db.put_opt(
        &WriteOptions {
            sync: true,
            ..Default::default()
        },
        b"zz",
        b"1",
    )
    .unwrap();
    model.insert(b"zz".to_vec(), b"1".to_vec());
    db.close().unwrap();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    assert_eq!(scan(&db), model);
}

#[test]
fn a_key_in_two_runs_fails_the_commit_and_leaves_nothing() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    let snap = db.snapshot();
    let ing = db.ingest_behind(0).unwrap();
    ing.add_run([(&b"a"[..], &b"1"[..]), (b"c", b"3")]).unwrap();
    ing.add_run([(&b"b"[..], &b"2"[..]), (b"c", b"4")]).unwrap();
    let err = ing.commit(&snap).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(scan(&db).is_empty());
    // The database goes on: writes, flushes and a later ingest work.
    db.put(b"x", b"y").unwrap();
    db.flush().unwrap();
    let ing = db.ingest_behind(0).unwrap();
    ing.add_run([(&b"a"[..], &b"1"[..])]).unwrap();
    ing.commit(&snap).unwrap();
    assert_eq!(scan(&db).len(), 2);
}

#[test]
fn an_uncommitted_ingest_frees_its_slots() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..20_000).map(|i| (key(i), vec![7u8; 40])).collect();
    for _ in 0..5 {
        let ing = db.ingest_behind(0).unwrap();
        ing.add_run(entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
            .unwrap();
        drop(ing);
    }
    // 5 x ~1 MB written and dropped: had the slots leaked, the data files
    // would hold them all; freed, each round reuses the same slots.
    let files = fs.list_dir(Path::new("/db")).unwrap();
    let data_files = files.iter().filter(|n| n.ends_with(".sdt")).count();
    let one_round_extents = (20_000 * 52) / (64 << 10) + 2;
    assert!(
        data_files * 4 <= one_round_extents + 4,
        "{data_files} data files of 4 extents for one round of ~{one_round_extents} extents"
    );
    assert!(scan(&db).is_empty());
}

/// A range tombstone at or below the snapshot over the ingested range
/// would hide the entries at sequence 0 forever: the commit refuses it. A
/// newer one is a later delete and wins.
#[test]
fn an_older_range_tombstone_is_refused_and_a_newer_one_wins() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    db.delete_range(b"ix0000100", b"ix0000200").unwrap();
    let snap = db.snapshot();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (150..160).map(|i| (key(i), b"v".to_vec())).collect();
    let run = || entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice()));
    let ing = db.ingest_behind(0).unwrap();
    ing.add_run(run()).unwrap();
    let err = ing.commit(&snap).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    // Also once the tombstone is in an extent.
    db.flush().unwrap();
    let ing = db.ingest_behind(0).unwrap();
    ing.add_run(run()).unwrap();
    assert!(matches!(ing.commit(&snap), Err(Error::InvalidArgument(_))));
    assert!(scan(&db).is_empty());

    // Beside the old tombstone, and under a newer one: accepted.
    let snap = db.snapshot();
    db.delete_range(b"ix0000300", b"ix0000305").unwrap();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (300..310).map(|i| (key(i), b"w".to_vec())).collect();
    let ing = db.ingest_behind(0).unwrap();
    ing.add_run(entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
        .unwrap();
    ing.commit(&snap).unwrap();
    let keys: Vec<Vec<u8>> = scan(&db).into_keys().collect();
    assert_eq!(keys, (305..310).map(key).collect::<Vec<_>>());
}

/// Key-disjoint runs written from two threads move in as one run, without
/// a rewrite; overlapping ones are merged (see above).
#[test]
fn disjoint_runs_from_two_threads_move_in_without_a_rewrite() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    let snap = db.snapshot();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..40_000).map(|i| (key(i), b"v".to_vec())).collect();
    let ing = db.ingest_behind(0).unwrap();
    let (lo, hi) = entries.split_at(23_456);
    std::thread::scope(|s| {
        for half in [hi, lo] {
            let ing = &ing;
            s.spawn(move || {
                ing.add_run(half.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
                    .unwrap()
            });
        }
    });
    let stats = ing.commit(&snap).unwrap();
    assert_eq!((stats.entries, stats.runs), (40_000, 2));
    assert_eq!(stats.bytes_rewritten, 0);
    let all = scan(&db);
    assert_eq!(all.len(), 40_000);
    assert!(all.keys().eq(entries.iter().map(|(k, _)| k)));
}
