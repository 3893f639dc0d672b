//! kill -9 with value files (key-value separation), with a real child
//! process and the real file system (the pattern of two_phase_kill9.rs):
//! the child overwrites keys round-robin with mostly 4 KiB values while a
//! GC thread rewrites value files; the parent SIGKILLs it at a random moment,
//! reopens and checks that every acknowledged write survived with its exact
//! value. 10 cycles, alternating buffered and O_DIRECT value files; every
//! second O_DIRECT cycle stages through a 2 MiB ring in 5 MiB value files,
//! so the ring wraps twice per file and is reused from file to file
//! (docs/format-blob.md section 6.1).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::{Db, Options};
use std::collections::BTreeMap;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn prop(db: &Db, name: &str) -> u64 {
    db.property(name).unwrap().parse().unwrap()
}

const CHILD_ENV: &str = "SHALE_BLOB_CHILD_DIR";
const START_ENV: &str = "SHALE_BLOB_CHILD_START";
const DIRECT_ENV: &str = "SHALE_BLOB_CHILD_DIRECT";
const KEYS: u64 = 400;

/// `mode`: 0 buffered value files, 1 O_DIRECT (staged), 2 O_DIRECT with a
/// small ring that wraps.
fn kill9_opts(mode: u64) -> Options {
    Options {
        blob_direct_io: mode > 0,
        min_blob_size: 1024,
        blob_file_size: if mode == 2 { 5 << 20 } else { 1 << 20 },
        blob_stage_ring_size: if mode == 2 { 2 << 20 } else { 0 },
        write_buffer_size: 512 << 10,
        ..Options::default()
    }
}

/// Value of write `i`: large (4 KiB) for most, small for every fifth; its
/// first 20 bytes name `i`, so the parent can tell which write it sees.
fn kill9_value(i: u64) -> Vec<u8> {
    let mut v = format!("{i:020}").into_bytes();
    v.resize(if i.is_multiple_of(5) { 50 } else { 4096 }, (i % 251) as u8);
    v
}

/// The child: writes until killed (keys overwritten round-robin, so GC
/// has work), running value-file GC in a second thread.
#[test]
#[ignore = "run by kill9_every_acknowledged_write_survives as a child process"]
fn child_writes_blobs() {
    use std::io::Write;
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let start: u64 = std::env::var(START_ENV).unwrap().parse().unwrap();
    let mode: u64 = std::env::var(DIRECT_ENV).unwrap().parse().unwrap();
    let db = Db::open(&dir, kill9_opts(mode)).unwrap();
    let gc_db = db.clone();
    std::thread::spawn(move || loop {
        gc_db.collect_blob_garbage(0.6).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(15));
    });
    let out = std::io::stdout();
    for i in start.. {
        db.put(&key(i % KEYS), &kill9_value(i)).unwrap();
        writeln!(out.lock(), "A {i}").unwrap();
        // At most ~16 puts (~52 KiB of values) per millisecond: staged
        // O_DIRECT puts do not wait for the device, and unpaced they can
        // outrun the GC thread's passes (each pass measures every file),
        // which this test checks keep the value files small.
        if i.is_multiple_of(16) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

#[test]
fn kill9_every_acknowledged_write_survives() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    // key -> newest acknowledged write.
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut start = 0;
    let mut written_total = 0u64;
    let began = Instant::now();
    for cycle in 0..10u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_writes_blobs", "--ignored", "--nocapture"])
            .env(CHILD_ENV, &dir)
            .env(START_ENV, start.to_string())
            // Odd cycles write value files with O_DIRECT (zero-padded tails),
            // cycles 3 and 7 through a wrapping ring.
            .env(
                DIRECT_ENV,
                (cycle % 2 + u64::from(cycle % 4 == 3)).to_string(),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(i) = line.strip_prefix("A ").and_then(|s| s.parse::<u64>().ok()) {
                    last = Some(i);
                }
            }
            last
        });
        std::thread::sleep(Duration::from_millis(400 + (cycle * 7919) % 600));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let last = reader
            .join()
            .unwrap()
            .expect("the child acknowledged writes");
        for i in start..=last {
            acked.insert(i % KEYS, i);
        }
        written_total += last + 1 - start;
        start = last + 1_000_000; // later writes are distinguishable from lost ones
        let db = Db::open(&dir, kill9_opts(1 - cycle % 2)).unwrap();
        let mut seen_now = Vec::new();
        for (&k, &i) in &acked {
            let v = db
                .get(&key(k))
                .unwrap_or_else(|e| panic!("cycle {cycle}, key {k}: {e}"))
                .unwrap_or_else(|| panic!("cycle {cycle}: acknowledged write {i} of key {k} lost"));
            let seen: u64 = std::str::from_utf8(&v[..20]).unwrap().parse().unwrap();
            assert!(
                seen >= i,
                "cycle {cycle}, key {k}: write {i} acknowledged, {seen} read"
            );
            assert_eq!(
                v,
                kill9_value(seen),
                "cycle {cycle}, key {k}: damaged value"
            );
            seen_now.push((k, seen));
        }
        acked.extend(seen_now);
        assert!(prop(&db, "shale.blob-file-count") > 0);
        db.close().unwrap();
    }
    // The children's GC thread kept the value files in check: without it
    // every acknowledged 4 KiB value would still be on disk.
    let on_disk: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "blob"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let written = 4096 * written_total;
    eprintln!("value files {on_disk} bytes, {written} bytes of values acknowledged");
    assert!(on_disk < written / 2, "{on_disk} >= {written} / 2");
    assert!(began.elapsed() < Duration::from_secs(60));
}
