//! Compaction filters (docs/architecture.md, "Compaction filters"): a
//! column family's filter may replace the values merges copy, and
//! `Db::rewrite_range` makes it see every value of a key range.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;
use shaledb::env::mem::MemFs;
use shaledb::{CompactionFilter, CompactionFilterFactory, Db, Options, ReadOptions};
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

fn opts(fs: &MemFs) -> Options {
    common::small_mem_opts(fs)
}

/// Rewrites values starting with `v1:` to `v2:`; counts the filters alive.
#[derive(Default)]
struct Upgrade {
    alive: Arc<AtomicI64>,
    created: AtomicU64,
}

struct UpgradeJob {
    alive: Arc<AtomicI64>,
}

impl CompactionFilterFactory for Upgrade {
    fn create(&self) -> Box<dyn CompactionFilter> {
        self.created.fetch_add(1, Ordering::SeqCst);
        self.alive.fetch_add(1, Ordering::SeqCst);
        Box::new(UpgradeJob {
            alive: self.alive.clone(),
        })
    }
}

impl CompactionFilter for UpgradeJob {
    fn change_value(&mut self, _key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
        let rest = value.strip_prefix(b"v1:")?;
        Some([b"v2:".as_slice(), rest].concat())
    }
}

impl Drop for UpgradeJob {
    fn drop(&mut self) {
        self.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

/// About 100 bytes that compress poorly, so that 3,000 values span many
/// extents even in a compressed level.
fn value(i: u32) -> Vec<u8> {
    let mut x = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut s = format!("v1:{i:06}-");
    for _ in 0..6 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    s.into_bytes()
}

fn load(db: &Db, n: u32) {
    for i in 0..n {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.compact_range(None, None).unwrap();
}

#[test]
fn rewrite_range_shows_every_value_to_the_filter_and_drops_it_after_install() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, opts(&fs)).unwrap();
    load(&db, 3000);
    for i in (0..3000).step_by(7) {
        db.delete(&key(i)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let f = Arc::new(Upgrade::default());
    db.set_compaction_filter(shaledb::DEFAULT_CF_ID, Some(f.clone()))
        .unwrap();
    // Everything already sits in the last level: a full compaction moves
    // nothing, so nothing was upgraded yet.
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&key(1)).unwrap().unwrap(), value(1));

    let stats = db
        .rewrite_range(shaledb::DEFAULT_CF_ID, b"", b"\xff")
        .unwrap();
    let live = (0..3000u32).filter(|i| i % 7 != 0).count() as u64;
    assert_eq!(stats.values_changed, live);
    assert!(stats.extents_rewritten > 1, "{stats:?}");
    assert!(f.created.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        f.alive.load(Ordering::SeqCst),
        0,
        "a job's filter outlived it"
    );
    for i in 0..3000 {
        let got = db.get(&key(i)).unwrap();
        if i % 7 == 0 {
            assert_eq!(got, None, "deleted key {i} came back");
        } else {
            let want = [b"v2:".as_slice(), &value(i)[3..]].concat();
            assert_eq!(got.unwrap(), want, "key {i}");
        }
    }
    // The rewritten values are in the extents: a reopen without the
    // filter reads them.
    drop(db);
    let db = Db::open(dir, opts(&fs)).unwrap();
    assert!(db.get(&key(1)).unwrap().unwrap().starts_with(b"v2:"));
    let again = db
        .rewrite_range(shaledb::DEFAULT_CF_ID, b"", b"\xff")
        .unwrap();
    assert_eq!(again.values_changed, 0);
}

#[test]
fn rewrite_range_stops_at_the_range_and_filters_only_its_column_family() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    let other = db.create_cf("other").unwrap();
    for i in 0..3000 {
        db.put_cf(other, &key(i), &value(i)).unwrap();
    }
    load(&db, 3000);
    let f = Arc::new(Upgrade::default());
    db.set_compaction_filter(shaledb::DEFAULT_CF_ID, Some(f.clone()))
        .unwrap();
    let stats = db
        .rewrite_range(shaledb::DEFAULT_CF_ID, &key(1000), &key(1100))
        .unwrap();
    // Whole extents around the range are rewritten, but not the far ends.
    assert!(stats.values_changed >= 100, "{stats:?}");
    assert!(stats.values_changed < 3000, "{stats:?}");
    for i in 1000..1100 {
        assert!(db.get(&key(i)).unwrap().unwrap().starts_with(b"v2:"));
    }
    assert!(db.get(&key(0)).unwrap().unwrap().starts_with(b"v1:"));
    assert!(db.get(&key(2999)).unwrap().unwrap().starts_with(b"v1:"));
    db.rewrite_range(other, b"", b"\xff").unwrap();
    assert!(db
        .get_cf(other, &key(1050))
        .unwrap()
        .unwrap()
        .starts_with(b"v1:"));
}

#[test]
fn flushes_filter_new_values_and_snapshots_keep_their_versions() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    let f = Arc::new(Upgrade::default());
    db.set_compaction_filter(shaledb::DEFAULT_CF_ID, Some(f.clone()))
        .unwrap();
    db.put(b"a", b"v1:old").unwrap();
    let snap = db.snapshot();
    db.put(b"a", b"v1:new").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"a").unwrap().unwrap(), b"v2:new");
    let ro = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    // The version the snapshot reads was kept and filtered like any other.
    assert_eq!(
        db.get_opt(&ro, shaledb::DEFAULT_CF_ID, b"a")
            .unwrap()
            .unwrap(),
        b"v2:old"
    );
    assert!(db.oldest_snapshot_sequence().is_some());
    drop(ro);
    drop(snap);
    assert_eq!(db.oldest_snapshot_sequence(), None);
    db.set_compaction_filter(shaledb::DEFAULT_CF_ID, None)
        .unwrap();
    db.put(b"b", b"v1:kept").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"b").unwrap().unwrap(), b"v1:kept");
    assert_eq!(f.alive.load(Ordering::SeqCst), 0);
}

/// Drops every key whose number is odd.
struct DropOdd;

struct DropOddJob;

impl CompactionFilterFactory for DropOdd {
    fn create(&self) -> Box<dyn CompactionFilter> {
        Box::new(DropOddJob)
    }
}

impl CompactionFilter for DropOddJob {
    fn change_value(&mut self, _key: &[u8], _value: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn drop_entry(&mut self, key: &[u8], _seq: u64) -> bool {
        key.last().is_some_and(|b| b % 2 == 1)
    }
}

#[test]
fn drop_entry_removes_entries_in_rewrites_and_flushes() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, opts(&fs)).unwrap();
    load(&db, 3000);
    db.set_compaction_filter(shaledb::DEFAULT_CF_ID, Some(Arc::new(DropOdd)))
        .unwrap();
    let stats = db
        .rewrite_range(shaledb::DEFAULT_CF_ID, b"", b"\xff")
        .unwrap();
    assert_eq!(stats.entries_dropped, 1500, "{stats:?}");
    assert_eq!(stats.values_changed, 0);
    // A flush filters too: new odd keys never reach an extent.
    for i in 3000..3010 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    drop(db);
    let db = Db::open(dir, opts(&fs)).unwrap();
    for i in 0..3010 {
        let got = db.get(&key(i)).unwrap();
        if i % 2 == 1 {
            assert_eq!(got, None, "odd key {i} survived");
        } else {
            assert_eq!(got.unwrap(), value(i), "key {i}");
        }
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, 1505);
}

#[test]
fn oldest_snapshot_holds_the_oldest_reader_sequence() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    db.put(b"a", b"1").unwrap();
    let first = db.snapshot();
    db.put(b"a", b"2").unwrap();
    let oldest = db.oldest_snapshot();
    assert_eq!(oldest.sequence(), first.sequence());
    assert!(oldest.sequence() < db.latest_sequence());
    // Once the first reader is gone, the filter's own snapshot still
    // holds that sequence (compaction keeps what it reads).
    drop(first);
    assert_eq!(db.oldest_snapshot_sequence(), Some(oldest.sequence()));
    db.compact_range(None, None).unwrap();
    let ro = ReadOptions {
        snapshot: Some(oldest.clone()),
        ..Default::default()
    };
    assert_eq!(
        db.get_opt(&ro, shaledb::DEFAULT_CF_ID, b"a")
            .unwrap()
            .unwrap(),
        b"1"
    );
    drop((ro, oldest));
    assert_eq!(db.oldest_snapshot().sequence(), db.latest_sequence());
}
