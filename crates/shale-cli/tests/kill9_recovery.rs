//! kill -9 *during WAL recovery*, against an expected-state oracle.
//!
//! 1. `shale load` (a write buffer larger than the load: nothing is flushed) is fed
//!    `key<TAB>value` lines and echoes each key once its write is
//!    acknowledged; once most lines are acknowledged it is SIGKILLed, leaving
//!    a large unflushed WAL.
//! 2. The directory is copied; the copy is recovered *serially*
//!    (`--recovery-threads 1`) and scanned: the reference contents.
//! 3. `shale stats` is started on the original with a 1 MiB write buffer (a
//!    4 MiB recovery memory limit, so recovery flushes as it goes) and 1, 2
//!    or 4 replay threads, and SIGKILLed after a random delay within one
//!    recovery time, several times. `stats` prints only after the open, so
//!    an empty stdout means the kill landed before recovery finished.
//! 4. A last `shale scan` (default threads) recovers to completion. Its
//!    output must equal the reference, and every acknowledged write must be
//!    in it: each key holds its last acknowledged value or one sent after it,
//!    never a value not sent, and no key outside the oracle.
//!
//! `SHALE_RECOVERY_KILLS` (default 5) sets the number of kill attempts and
//! `SHALE_RECOVERY_KILL_MIB` (default 64) the size of the load; e.g.
//! `SHALE_RECOVERY_KILLS=50 SHALE_RECOVERY_KILL_MIB=256` for a soak.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u32 = 20_000;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn shale(db: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shale"));
    c.arg("--db").arg(db).args(args);
    c
}

fn sigkill(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid (not yet reaped, so the pid
    // cannot have been reused); no memory is involved.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    assert_eq!(rc, 0);
}

/// Runs a command to completion; returns its stdout and how long it took.
fn run(mut cmd: Command) -> (String, Duration) {
    let t0 = Instant::now();
    let out = cmd.stderr(Stdio::inherit()).output().unwrap();
    assert!(out.status.success(), "{cmd:?} failed: {:?}", out.status);
    (String::from_utf8(out.stdout).unwrap(), t0.elapsed())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Every value sent per key, in order, and how many were acknowledged.
#[derive(Default)]
struct Oracle {
    sent: HashMap<String, Vec<String>>,
    acked: HashMap<String, usize>,
}

/// Step 1: loads about `mib` MiB and kills the loader; returns the oracle.
fn load_and_kill(db: &Path, mib: usize, rng: &mut rand::rngs::StdRng) -> Oracle {
    let mut lines = Vec::new();
    let mut bytes = 0;
    while bytes < mib << 20 {
        let k = format!("key{:06}", rng.gen_range(0..KEYS));
        let v = format!("i{}-{}", lines.len(), "p".repeat(rng.gen_range(100..900)));
        bytes += k.len() + v.len() + 2;
        lines.push((k, v));
    }
    // Memtables take more memory than the raw bytes: 2x + 64 MiB keeps
    // everything in one memtable, so the whole load is only in the WAL.
    let wbs = (2 * mib + 64).to_string();
    let mut child = shale(db, &["--create", "--write-buffer-mb", &wbs, "load"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let writer = {
        let lines = lines.clone();
        let sent = sent.clone();
        std::thread::spawn(move || {
            for (k, v) in &lines {
                // Counted before writing: the child may read a line as soon
                // as its first byte is in the pipe.
                sent.fetch_add(1, Ordering::SeqCst);
                if stdin.write_all(format!("{k}\t{v}\n").as_bytes()).is_err() {
                    return;
                }
            }
            // Keep the pipe open: the loader must be killed, not finish.
            std::thread::sleep(Duration::from_secs(3600));
        })
    };
    let acked = Arc::new(AtomicUsize::new(0));
    let reader = {
        let acked = acked.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if line.is_err() {
                    break;
                }
                acked.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // Kill once 80-97% of the lines are acknowledged.
    let target = lines.len() * rng.gen_range(80..98) / 100;
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked.load(Ordering::SeqCst) < target {
        assert!(Instant::now() < deadline, "the loader is too slow");
        std::thread::sleep(Duration::from_millis(2));
    }
    sigkill(&mut child);
    child.wait().unwrap();
    reader.join().unwrap();
    drop(writer); // blocked or sleeping; it ends with the test process
    let acked = acked.load(Ordering::SeqCst);
    let sent = sent.load(Ordering::SeqCst).min(lines.len());
    assert!(acked <= sent);
    eprintln!(
        "load: {} lines generated, {sent} sent, {acked} acknowledged",
        lines.len()
    );
    let mut oracle = Oracle::default();
    for (i, (k, v)) in lines.into_iter().take(sent).enumerate() {
        let values = oracle.sent.entry(k.clone()).or_default();
        values.push(v);
        if i < acked {
            oracle.acked.insert(k, values.len());
        }
    }
    oracle
}

/// Step 4's oracle check of a `scan` output; returns the keys present.
fn check(scan: &str, oracle: &Oracle) -> usize {
    let mut seen = HashMap::new();
    for line in scan.lines() {
        let (k, v) = line.split_once('\t').unwrap();
        let values = oracle
            .sent
            .get(k)
            .unwrap_or_else(|| panic!("unknown key {k}"));
        let pos = values
            .iter()
            .rposition(|x| x == v)
            .unwrap_or_else(|| panic!("key {k} holds a value never sent"));
        let acked = oracle.acked.get(k).copied().unwrap_or(0);
        assert!(
            pos + 1 >= acked,
            "key {k}: value #{pos} but #{} was acknowledged",
            acked - 1
        );
        seen.insert(k, ());
    }
    for (k, &acked) in &oracle.acked {
        assert!(
            acked == 0 || seen.contains_key(k.as_str()),
            "key {k}: acknowledged value lost"
        );
    }
    seen.len()
}

#[test]
fn kill_9_during_recovery_loses_no_acknowledged_write() {
    let attempts = env_or("SHALE_RECOVERY_KILLS", 5);
    let mib = env_or("SHALE_RECOVERY_KILL_MIB", 64);
    let tmp = tempfile::tempdir().unwrap();
    let (db, copy) = (tmp.path().join("db"), tmp.path().join("copy"));
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x0000_051e_c0de);
    let oracle = load_and_kill(&db, mib, &mut rng);
    let wal: u64 = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(wal as usize >= (mib << 20) * 3 / 4, "WAL of {wal} bytes");

    // Step 2: the reference, a serial recovery of a copy (also times it).
    copy_dir(&db, &copy);
    let (stats, recovery) = run(shale(
        &copy,
        &["--write-buffer-mb", "1", "--recovery-threads", "1", "stats"],
    ));
    let (reference, _) = run(shale(&copy, &["scan"]));
    let flushes = stats
        .lines()
        .find_map(|l| l.strip_prefix("flushes: "))
        .unwrap_or("?");
    eprintln!(
        "WAL {:.1} MiB, serial recovery {:.2} s, flushes {flushes}",
        wal as f64 / 1_048_576.0,
        recovery.as_secs_f64()
    );
    // The recovery memory limit (4 x 1 MiB) made recovery flush as it went.
    assert!(!flushes.starts_with("0 "), "no flush during recovery");

    // Step 3: kills during recovery.
    let mut during = 0;
    for attempt in 0..attempts {
        let threads = [1, 2, 4][rng.gen_range(0..3)];
        let delay = recovery.mul_f64(rng.gen_range(0.1..0.9));
        let mut child = shale(
            &db,
            &[
                "--write-buffer-mb",
                "1",
                "--recovery-threads",
                &threads.to_string(),
                "stats",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        std::thread::sleep(delay);
        let finished = child.try_wait().unwrap().is_some();
        if !finished {
            sigkill(&mut child);
        }
        child.wait().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let killed_in_recovery = !finished && out.is_empty();
        during += usize::from(killed_in_recovery);
        eprintln!(
            "attempt {attempt}: {threads} threads, killed after {:.3} s: {}",
            delay.as_secs_f64(),
            if killed_in_recovery {
                "during recovery"
            } else {
                "after recovery"
            }
        );
        if !killed_in_recovery {
            break; // recovered: later attempts would have nothing to replay
        }
    }

    // Step 4: recover to completion, compare, check the oracle.
    let (scan, _) = run(shale(&db, &["--write-buffer-mb", "1", "scan"]));
    assert!(
        scan == reference,
        "recovered contents differ from a serial recovery of the same WAL"
    );
    let present = check(&scan, &oracle);
    eprintln!("kills during recovery: {during} of {attempts}; keys present {present}, lost 0");
    assert!(present > 0);
    assert!(
        during * 2 >= attempts,
        "only {during} of {attempts} kills landed during recovery"
    );
}
