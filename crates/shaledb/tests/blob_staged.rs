//! Staged direct writes of the active value file (`blob_direct_io`,
//! docs/format-blob.md section 6), on the real file system: values read
//! back while they are only in the stage file, while the writer thread
//! writes them to the value file (and the leader reuses ring slots), and
//! after; the stage file is gone after close.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::{Db, Options};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(2000 + (i as usize * 37) % 4000, b'a' + (i % 26) as u8);
    v
}

fn stage_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let p = e.as_ref().unwrap().path();
            p.extension().is_some_and(|x| x == "stage")
        })
        .count()
}

#[test]
fn staged_values_read_back_while_the_writer_thread_writes_them() {
    read_back_while_staged(64 << 20, 0);
}

/// The same through a 2 MiB ring in 4 MiB value files: reads race with
/// the leader reusing ring slots, the ring wraps twice per file and is
/// handed from each sealed file to the next (docs/format-blob.md 6.1).
#[test]
fn staged_values_read_back_while_a_small_ring_wraps() {
    read_back_while_staged(4 << 20, 2 << 20);
}

fn read_back_while_staged(file_size: u64, ring: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = Options {
        min_blob_size: 1024,
        blob_file_size: file_size,
        blob_stage_ring_size: ring,
        blob_direct_io: true,
        blob_direct_reads: true,
        ..Options::default()
    };
    let db = Db::open(&dir, o.clone()).unwrap();
    // ~12 MiB of values: 12 pieces written.
    const N: u64 = 3000;
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (db, acked, done) = (db.clone(), Arc::clone(&acked), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut reads = 0u64;
            let mut x = 12345u64;
            while !done.load(Ordering::Acquire) {
                let n = acked.load(Ordering::Acquire);
                if n == 0 {
                    continue;
                }
                // One of the newest 256 writes half the time (still staged,
                // or straddling the written length while the writer thread
                // punches the stage below it), else any.
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let i = if x & 1 == 0 {
                    n - 1 - ((x >> 40) % 256).min(n - 1)
                } else {
                    (x >> 33) % n
                };
                assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
                reads += 1;
            }
            reads
        })
    };
    for i in 0..N {
        db.put(&key(i), &value(i)).unwrap();
        acked.store(i + 1, Ordering::Release);
    }
    assert_eq!(stage_files(&dir), 1, "the active file is staged");
    for i in 0..N {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    done.store(true, Ordering::Release);
    let reads = reader.join().unwrap();
    assert!(reads > 0);
    db.close().unwrap();
    assert_eq!(stage_files(&dir), 0, "close completes the staged file");
    let db = Db::open(&dir, o).unwrap();
    for i in 0..N {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}

/// A failed `O_DIRECT` write of the writer thread is sticky: the next write
/// group fails, and so does every later one, even once the device works
/// again; nothing acknowledged is lost (the stage keeps the bytes, and
/// recovery merges them into the value file).
#[test]
fn a_failed_write_of_the_writer_thread_is_sticky_and_loses_nothing() {
    use shaledb::env::fault::{FaultFs, INJECTED_MESSAGE};
    use shaledb::env::mem::MemFs;
    let mem = MemFs::new();
    let faults = FaultFs::new(mem.arc());
    let o = |fs| Options {
        fs,
        min_blob_size: 1024,
        blob_file_size: 64 << 20,
        blob_direct_io: true,
        background_threads: false,
        ..Options::default()
    };
    let db = Db::open("/db", o(faults.arc())).unwrap();
    // Values up to the edge of a 1 MiB piece: the next put fills it and
    // queues it for the writer thread.
    // Format version 2 (docs/format-blob.md section 7): the value file
    // holds the values alone, a multiple of 4 KiB starting on a page.
    let end_after = |bytes: usize, len: usize| {
        let at = if len.is_multiple_of(4096) {
            bytes.div_ceil(4096) * 4096
        } else {
            bytes
        };
        at + len
    };
    let mut n = 0u64;
    let mut bytes = 16; // the file header
    while end_after(bytes, value(n).len()) < 1 << 20 {
        bytes = end_after(bytes, value(n).len());
        db.put(&key(n), &value(n)).unwrap();
        n += 1;
    }
    // The next operation on a value file fails: the writer thread's write
    // of that piece (the leader writes only the stage and the WAL).
    faults.fail_paths_ending(Some(".blob"));
    faults.fail_after(1);
    // The put that queues the piece is acknowledged unless the writer
    // thread fails before the put's own sticky-error check (a race a busy
    // machine wins often): either way nothing acknowledged may be lost.
    match db.put(&key(n), &value(n)) {
        Ok(()) => n += 1,
        Err(e) => assert!(e.to_string().contains(INJECTED_MESSAGE), "{e}"),
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while faults.injected() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(faults.injected(), 1, "the writer thread's write failed");
    faults.heal();
    for attempt in 0..3 {
        let err = db.put(&key(n), &value(n)).unwrap_err();
        assert!(
            err.to_string().contains(INJECTED_MESSAGE),
            "attempt {attempt}: {err}"
        );
    }
    for i in 0..n {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    drop(db);
    let db = Db::open("/db", o(mem.arc())).unwrap();
    for i in 0..n {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    assert_eq!(db.get(&key(n)).unwrap(), None);
}
