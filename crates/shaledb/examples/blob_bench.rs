//! Write throughput of 4 KiB values with and without key-value separation.
//!
//! `cargo run --release -p shaledb --example blob_bench -- DIR GIB THREADS MIN_BLOB_SIZE [direct] [directread] [read] [dropcache] [gc]`
//!
//! Writes `GIB` GiB of 8-byte keys with 4 KiB values (sync off) from
//! `THREADS` threads into a fresh database in `DIR`, prints MB/s of value
//! bytes (and the time to close, which flushes nothing: close does not
//! wait for compaction). `MIN_BLOB_SIZE` 0 keeps values inline. `direct`
//! writes value files with `O_DIRECT` (`Options::blob_direct_io`);
//! `directread` reads values with it (`Options::blob_direct_reads`). With
//! `read`, it then reopens (after dropping the page cache with `dropcache`,
//! which needs root) and reads n keys back
//! (pseudo-random order, checking each value) and reports MB/s. With `gc`,
//! before closing it overwrites every second key with a new 4 KiB value and
//! reports the value-file bytes, live bytes and space amplification before
//! and after `collect_blob_garbage(0.75)`. With `bggc` instead, the
//! database runs background GC (`blob_gc_live_ratio` 0.75, a pass every
//! 200 ms, paced to `SHALE_GC_RATE` bytes/s, default 64 MiB/s): after the
//! overwrites it flushes and compacts (the merges count the dead values),
//! then waits until two passes in a row rewrite nothing, and reports the
//! counted and exact space amplification before and after, and the time.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a bench: a panic is a failure

use shaledb::{Db, Options};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const VALUE: usize = 4096;

fn value(i: u64) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; VALUE];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

fn opts(min_blob_size: usize, blob_direct_io: bool) -> Options {
    Options {
        min_blob_size,
        blob_direct_io,
        blob_direct_reads: std::env::args().skip(5).any(|a| a == "directread"),
        max_value_size: 1 << 20,
        blob_gc_live_ratio: if bggc() { 0.75 } else { 0.0 },
        blob_gc_interval_ms: 200,
        blob_gc_bytes_per_sec: std::env::var("SHALE_GC_RATE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64 << 20),
        ..Options::default()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: blob_bench DIR GIB THREADS MIN_BLOB_SIZE [direct] [directread] [read] [dropcache] [gc]");
        std::process::exit(2);
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let gib: f64 = args[2].parse().unwrap();
    let threads: u64 = args[3].parse().unwrap();
    let min: usize = args[4].parse().unwrap();
    let read = args.iter().skip(5).any(|a| a == "read");
    // `gc`: overwrite every second key, then collect value-file garbage.
    let direct = args.iter().skip(5).any(|a| a == "direct");
    let _ = std::fs::remove_dir_all(&dir);
    let n = (gib * (1u64 << 30) as f64) as u64 / VALUE as u64;
    let db = Db::open(&dir, opts(min, direct)).unwrap();
    let next = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let db = db.clone();
            let next = next.clone();
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                db.put(&i.to_be_bytes(), &value(i)).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    let mb = (n * VALUE as u64) as f64 / 1e6;
    println!(
        "write: {n} x {VALUE} B, {threads} threads, min_blob_size {min}, direct {direct}: {secs:.2} s, {:.0} MB/s",
        mb / secs
    );
    println!(
        "value files: {} ({} bytes); write-amplification {}",
        db.property("shale.blob-file-count").unwrap_or_default(),
        db.property("shale.blob-bytes").unwrap_or_default(),
        db.property("shale.write-amplification").unwrap_or_default()
    );
    if args.iter().skip(5).any(|a| a == "gc") || bggc() {
        gc_phase(&db, n, threads);
    }
    let t1 = Instant::now();
    db.close().unwrap();
    println!("close: {:.2} s", t1.elapsed().as_secs_f64());
    if read {
        if args.iter().skip(5).any(|a| a == "dropcache") {
            // Needs root; a failure is reported, not fatal.
            let r = std::fs::write("/proc/sys/vm/drop_caches", "3");
            println!("drop caches: {r:?}");
        }
        let db = Db::open(&dir, opts(min, direct)).unwrap();
        let next = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let db = db.clone();
                let next = next.clone();
                std::thread::spawn(move || loop {
                    let j = next.fetch_add(1, Ordering::Relaxed);
                    if j >= n {
                        break;
                    }
                    // Pseudo-random order over 0..n (some keys twice, some not at all).
                    let i = (j.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1)) % n;
                    let v = db.get(&i.to_be_bytes()).unwrap().unwrap();
                    assert_eq!(v[..8], i.to_le_bytes());
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "read: {n} gets, {threads} threads: {secs:.2} s, {:.0} MB/s",
            mb / secs
        );
    }
}

fn space(db: &Db) -> (f64, f64) {
    let p = |n: &str| -> f64 { db.property(n).unwrap().parse().unwrap() };
    (
        p("shale.blob-bytes") / 1e6,
        p("shale.blob-live-bytes") / 1e6,
    )
}

fn gc_phase(db: &Db, n: u64, threads: u64) {
    let next = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let db = db.clone();
            let next = next.clone();
            std::thread::spawn(move || loop {
                let i = next.fetch_add(2, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                db.put(&i.to_be_bytes(), &value(i + 1)).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    println!("overwrite half: {:.2} s", t0.elapsed().as_secs_f64());
    let (bytes, live) = space(db);
    println!(
        "before gc: value files {bytes:.0} MB, live {live:.0} MB, space amplification {:.2}",
        bytes / live
    );
    if bggc() {
        return background_gc(db);
    }
    let t0 = Instant::now();
    let st = db.collect_blob_garbage(0.75).unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let (bytes, live) = space(db);
    println!(
        "gc: {secs:.2} s, {} files scanned, {} rewritten, {} MB copied, {} files deleted",
        st.files_scanned,
        st.files_rewritten,
        st.bytes_rewritten / 1_000_000,
        st.files_deleted
    );
    println!(
        "after gc: value files {bytes:.0} MB, live {live:.0} MB, space amplification {:.2}",
        bytes / live
    );
}

fn bggc() -> bool {
    std::env::args().skip(5).any(|a| a == "bggc")
}

/// Counted (cheap) space amplification and dead MB.
fn counted(db: &Db) -> (String, f64) {
    let amp = db.property("shale.blob-space-amp").unwrap();
    let dead: f64 = db
        .property("shale.blob-dead-bytes")
        .unwrap()
        .parse()
        .unwrap();
    (amp, dead / 1e6)
}

fn background_gc(db: &Db) {
    let p = |n: &str| -> u64 { db.property(n).unwrap().parse().unwrap() };
    let t0 = Instant::now();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    println!("flush + compact: {:.2} s", t0.elapsed().as_secs_f64());
    let (amp, dead) = counted(db);
    println!("counted by compaction: {dead:.0} MB dead, space amplification {amp}");
    let t0 = Instant::now();
    let (mut last_rewritten, mut last_change, mut runs_at_change) =
        (0, t0.elapsed(), p("shale.blob-gc-runs"));
    loop {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (rewritten, runs) = (p("shale.blob-gc-files-rewritten"), p("shale.blob-gc-runs"));
        if rewritten != last_rewritten {
            (last_rewritten, last_change, runs_at_change) = (rewritten, t0.elapsed(), runs);
        } else if runs >= runs_at_change + 3 && p("shale.blob-gc-files-deleted") >= rewritten {
            break;
        }
    }
    let (bytes, live) = space(db);
    let (amp, dead) = counted(db);
    println!(
        "background gc: last rewrite done by {:.2} s, {} files rewritten, {} MB copied, {} files deleted",
        last_change.as_secs_f64(),
        last_rewritten,
        p("shale.blob-gc-bytes-rewritten") / 1_000_000,
        p("shale.blob-gc-files-deleted")
    );
    println!(
        "after background gc: value files {bytes:.0} MB, live {live:.0} MB, space amplification {:.2} (counted: {amp}, {dead:.0} MB dead)",
        bytes / live
    );
}
