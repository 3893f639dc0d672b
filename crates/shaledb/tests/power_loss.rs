//! Power loss through the in-memory file system: everything fsynced survives
//! and the database reopens to a consistent prefix of the writes.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;
use shaledb::env::mem::MemFs;
use shaledb::{Db, Options, ReadOptions, WriteOptions};
use std::path::Path;

fn opts(fs: &MemFs) -> Options {
    common::small_mem_opts(fs)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

/// Reopens after the crash and returns how many leading writes survived,
/// asserting that exactly a prefix survived.
fn surviving_prefix(fs: &MemFs, dir: &Path, written: u32) -> u32 {
    let db = Db::open(dir, opts(fs)).unwrap();
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        assert_eq!(
            it.key(),
            key(n).as_slice(),
            "a gap: write {n} missing but later ones present"
        );
        assert_eq!(it.value(), format!("value-{n}").as_bytes());
        n += 1;
        it.next().unwrap();
    }
    assert!(n <= written);
    db.close().unwrap();
    n
}

#[test]
fn synced_writes_survive_power_loss_at_any_point() {
    let mut lost_some = false;
    for round in 0..12u32 {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let mut next = 0u32;
        let mut synced_upto = 0u32;
        for epoch in 0..3 {
            // Reopen-after-crash cycles: each writes more on top of what survived.
            next = if epoch == 0 {
                0
            } else {
                surviving_prefix(&fs, dir, next)
            };
            assert!(
                next >= synced_upto,
                "round {round}: lost synced writes: {next} < {synced_upto}"
            );
            let db = Db::open(dir, opts(&fs)).unwrap();
            let count = 500 + round * 97;
            for _ in 0..count {
                let sync = next.is_multiple_of(7 + round);
                let v = format!("value-{next}");
                db.put_opt(
                    &WriteOptions {
                        sync,
                        disable_wal: false,
                    },
                    &key(next),
                    v.as_bytes(),
                )
                .unwrap();
                next += 1;
                if sync {
                    synced_upto = next;
                }
                if next.is_multiple_of(311) {
                    db.flush().unwrap();
                }
                if next.is_multiple_of(977) {
                    db.compact_range(None, None).unwrap();
                }
            }
            drop(db);
            if round % 2 == 0 {
                fs.crash();
            } else {
                fs.crash_keep_unsynced_prefix(u64::from(round * 31 + epoch));
            }
        }
        let n = surviving_prefix(&fs, dir, next);
        eprintln!("round {round}: wrote {next}, synced {synced_upto}, survived {n}");
        lost_some |= n < next;
        assert!(
            n >= synced_upto,
            "round {round}: lost synced writes: {n} < {synced_upto}"
        );
    }
    // The simulation must really drop unsynced writes, or this test proves nothing.
    assert!(lost_some, "no round lost any unsynced write");
}

#[test]
fn flushed_data_survives_power_loss_without_sync() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, opts(&fs)).unwrap();
    for i in 0..3000 {
        db.put(&key(i), format!("value-{i}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    fs.crash();
    assert_eq!(surviving_prefix(&fs, dir, 3000), 3000);
}
