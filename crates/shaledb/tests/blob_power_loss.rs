//! Power loss with value files (key-value separation), through the
//! in-memory file system: synced writes survive, and the database reopens to
//! a prefix of the writes with every value intact, also when the crash kept
//! unsynced WAL bytes whose values were lost (recovery cuts the WAL there).
//! Both with buffered value files and with staged direct ones
//! (`blob_direct_io`: the stage file and the writer thread of
//! docs/format-blob.md section 6; the in-memory file system has no
//! `O_DIRECT`, the staging logic is the same).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{Db, Options, ReadOptions, WriteOptions};
use std::path::Path;

fn opts(fs: &MemFs, direct: bool) -> Options {
    Options {
        fs: fs.arc(),
        blob_direct_io: direct,
        min_blob_size: 64,
        blob_file_size: 64 << 10,
        write_buffer_size: 64 << 10,
        background_threads: false,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    // Two in three values go to value files.
    let len = if i.is_multiple_of(3) {
        20
    } else {
        100 + (i as usize * 53) % 900
    };
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// Reopens and returns how many leading writes survived, asserting that
/// exactly a prefix survived with intact values.
fn surviving_prefix(fs: &MemFs, dir: &Path, written: u32, direct: bool) -> u32 {
    let db = Db::open(dir, opts(fs, direct)).unwrap();
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.key(), key(n).as_slice(), "a gap: write {n} missing");
        assert_eq!(it.value(), value(n).as_slice(), "value of write {n}");
        n += 1;
        it.next().unwrap();
    }
    assert!(n <= written);
    db.close().unwrap();
    n
}

#[test]
fn synced_blob_writes_survive_power_loss_and_a_prefix_remains() {
    power_loss_rounds(false);
}

#[test]
fn synced_staged_blob_writes_survive_power_loss_and_a_prefix_remains() {
    power_loss_rounds(true);
}

fn power_loss_rounds(direct: bool) {
    let mut lost_some = false;
    for round in 0..10u32 {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let mut next = 0u32;
        let mut synced_upto = 0u32;
        for epoch in 0..3 {
            next = if epoch == 0 {
                0
            } else {
                surviving_prefix(&fs, dir, next, direct)
            };
            assert!(
                next >= synced_upto,
                "round {round} epoch {epoch}: lost synced writes: {next} < {synced_upto}"
            );
            let db = Db::open(dir, opts(&fs, direct)).unwrap();
            for _ in 0..400 + round * 97 {
                let sync = next.is_multiple_of(7 + round);
                let wo = WriteOptions {
                    sync,
                    disable_wal: false,
                };
                db.put_opt(&wo, &key(next), &value(next)).unwrap();
                next += 1;
                if sync {
                    synced_upto = next;
                }
                if next.is_multiple_of(211) {
                    db.flush().unwrap();
                }
            }
            // Power fails with the database open (nothing sealed at close).
            if round % 2 == 0 {
                fs.crash();
            } else {
                fs.crash_keep_unsynced_prefix(u64::from(round * 31 + epoch));
            }
            drop(db);
        }
        let n = surviving_prefix(&fs, dir, next, direct);
        eprintln!("round {round}: wrote {next}, synced {synced_upto}, survived {n}");
        lost_some |= n < next;
        assert!(
            n >= synced_upto,
            "round {round}: lost synced writes: {n} < {synced_upto}"
        );
    }
    assert!(lost_some, "the crashes lost unsynced writes at least once");
}
