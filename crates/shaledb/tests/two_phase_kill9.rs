//! kill -9 around two-phase commit, with a real process and the real file
//! system. The test re-runs its own binary as a child (the ignored test
//! `child_prepares_and_resolves`) that prepares transaction after
//! transaction, commits a third, rolls back a third and leaves a third in
//! doubt, printing each step after it returned. The parent SIGKILLs it at a
//! random moment, reopens the database and checks against what was printed:
//!
//! * a transaction reported prepared and not resolved comes back prepared,
//!   holding its locks, or (if it was being resolved at the kill) resolved;
//! * a reported commit is visible, a reported rollback is not;
//! * nothing is half-applied: both rows of a transaction or neither.
//!
//! Between cycles the parent also starts children that only open the
//! database (`child_recovers`) and SIGKILLs them after a few milliseconds,
//! mostly while they are still replaying the WAL with its 2PC records: the
//! checks above must hold after those kills too.
//!
//! Then the parent commits every in-doubt transaction and checks both rows
//! appear. `SHALE_2PC_KILL9_CYCLES` sets the number of kill cycles (default 4).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::txn::TxnOptions;
use shaledb::{Db, Error, Options};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "SHALE_2PC_CHILD_DIR";
const START_ENV: &str = "SHALE_2PC_CHILD_START";

fn opts() -> Options {
    Options {
        write_buffer_size: 256 << 10,
        ..Options::default()
    }
}

fn key(i: u64, part: &str) -> Vec<u8> {
    format!("t{i:07}-{part}").into_bytes()
}

/// The child: runs until killed.
#[test]
#[ignore = "run by two_phase_kill9 as a child process"]
fn child_prepares_and_resolves() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let start: u64 = std::env::var(START_ENV).unwrap().parse().unwrap();
    let db = Db::open(&dir, opts()).unwrap();
    let out = std::io::stdout();
    let value = vec![b'v'; 300];
    for i in start.. {
        let mut t = db.begin(TxnOptions::default());
        t.put(&key(i, "a"), &value).unwrap();
        t.put(&key(i, "b"), &value).unwrap();
        let xid = format!("xid-{}", i % 50);
        match t.prepare(xid.as_bytes()) {
            Ok(()) => {}
            // The XID is still in doubt from an earlier transaction.
            Err(Error::XidInUse(_)) => continue,
            Err(e) => panic!("{e}"),
        }
        writeln!(out.lock(), "P {i} {xid}").unwrap();
        match i % 3 {
            0 => {
                db.commit_prepared(xid.as_bytes()).unwrap();
                writeln!(out.lock(), "C {i}").unwrap();
            }
            1 => {
                db.rollback_prepared(xid.as_bytes()).unwrap();
                writeln!(out.lock(), "R {i}").unwrap();
            }
            _ => {}
        }
        // Plain writes in between move the WAL along (switches, flushes).
        db.put(&key(i, "plain"), &value).unwrap();
    }
}

/// A child that only opens the database (recovery runs), then says so.
#[test]
#[ignore = "run by two_phase_kill9 as a child process"]
fn child_recovers() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, opts()).unwrap();
    println!("OPEN {}", db.prepared().len());
    drop(db);
}

/// Starts `child_recovers` and SIGKILLs it after `delay`; true if it was
/// killed before it finished opening.
fn kill_recovery(dir: &std::path::Path, delay: Duration) -> bool {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_recovers", "--ignored", "--nocapture"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    child.kill().unwrap(); // SIGKILL (a no-op if it already exited)
    let out = child.wait_with_output().unwrap();
    !String::from_utf8_lossy(&out.stdout).contains("OPEN")
}

#[derive(Default)]
struct Oracle {
    /// i -> xid, for every transaction reported prepared.
    prepared: BTreeMap<u64, String>,
    committed: BTreeSet<u64>,
    rolled_back: BTreeSet<u64>,
}

/// Runs the child from transaction `start` for `run_for`, kills it, and
/// returns what it reported.
fn run_child(dir: &std::path::Path, start: u64, run_for: Duration, oracle: &mut Oracle) -> u64 {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_prepares_and_resolves",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .env(START_ENV, start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + run_for;
    let mut last = start;
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(5)) {
            Ok(l) => lines.push(l),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => break,
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    for l in lines {
        let parts: Vec<&str> = l.split_whitespace().collect();
        let Some(i) = parts.get(1).and_then(|s| s.parse::<u64>().ok()) else {
            continue;
        };
        last = last.max(i + 1);
        match parts[0] {
            "P" => {
                oracle.prepared.insert(i, parts[2].to_owned());
            }
            "C" => {
                oracle.committed.insert(i);
            }
            "R" => {
                oracle.rolled_back.insert(i);
            }
            _ => {}
        }
    }
    last
}

#[test]
fn kill9_between_prepare_and_commit() {
    let cycles: u64 = std::env::var("SHALE_2PC_KILL9_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut start = 0;
    let mut checked_in_doubt = 0;
    let mut killed_in_recovery = 0u32;
    for cycle in 0..cycles {
        let mut oracle = Oracle::default();
        let run_for = Duration::from_millis(300 + (cycle * 7919) % 500);
        start = run_child(&dir, start, run_for, &mut oracle);
        assert!(!oracle.prepared.is_empty(), "the child made progress");
        for k in 0..3u64 {
            let delay = Duration::from_millis((cycle * 5 + k * 3) % 10);
            killed_in_recovery += u32::from(kill_recovery(&dir, delay));
        }
        let db = Db::open(&dir, opts()).unwrap();
        let in_doubt: BTreeMap<Vec<u8>, _> = db
            .prepared()
            .into_iter()
            .map(|p| (p.xid.clone(), p))
            .collect();
        for (&i, xid) in &oracle.prepared {
            let a = db.get(&key(i, "a")).unwrap();
            let b = db.get(&key(i, "b")).unwrap();
            assert_eq!(a.is_some(), b.is_some(), "txn {i} half-applied");
            if oracle.committed.contains(&i) {
                assert!(a.is_some(), "reported commit of {i} lost");
            } else if oracle.rolled_back.contains(&i) {
                assert!(a.is_none(), "reported rollback of {i} undone");
            } else if i % 3 == 2 {
                // Never resolved: must be in doubt, invisible.
                assert!(a.is_none(), "unresolved {i} visible");
                assert!(in_doubt.contains_key(xid.as_bytes()), "prepared {i} lost");
                checked_in_doubt += 1;
            } else {
                // Killed while resolving: prepared, or resolved either way.
                assert!(a.is_none() || !in_doubt.contains_key(xid.as_bytes()));
            }
        }
        // The in-doubt rows are locked.
        if let Some((&i, _)) = oracle
            .prepared
            .iter()
            .find(|(i, x)| *i % 3 == 2 && in_doubt.contains_key(x.as_bytes()))
        {
            let mut t = db.begin(TxnOptions {
                lock_wait_timeout: Duration::from_millis(10),
                ..TxnOptions::default()
            });
            assert!(matches!(
                t.put(&key(i, "a"), b"x"),
                Err(Error::LockTimeout { .. })
            ));
        }
        // Resolve half of them now; the rest stay in doubt into the next cycle.
        for (n, xid) in in_doubt.keys().enumerate() {
            if n % 2 == 0 {
                db.commit_prepared(xid).unwrap();
            }
        }
        drop(db);
    }
    // Finally commit everything still in doubt: every transaction then has
    // both rows or neither.
    let db = Db::open(&dir, opts()).unwrap();
    for p in db.prepared() {
        db.commit_prepared(&p.xid).unwrap();
    }
    assert!(db.prepared().is_empty());
    for i in 0..start {
        let a = db.get(&key(i, "a")).unwrap();
        let b = db.get(&key(i, "b")).unwrap();
        assert_eq!(a.is_some(), b.is_some(), "txn {i} half-applied");
    }
    println!(
        "{cycles} kill cycles, {start} transactions, {checked_in_doubt} in-doubt checked, \
         {killed_in_recovery} of {} reopening processes killed before open returned",
        cycles * 3
    );
    assert!(checked_in_doubt > 0);
    assert!(killed_in_recovery > 0, "no kill landed during a reopen");
}
