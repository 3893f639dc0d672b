//! kill -9 against an expected-state oracle.
//!
//! A child `shale load` is fed `key<TAB>value` lines and echoes each key once
//! its write is acknowledged. The test kills it with SIGKILL at a random
//! moment, reopens the database and checks every key: its value must be the
//! last acknowledged one or one sent after it, and never a value not sent.
//! `SHALE_KILL9_CYCLES` sets the number of cycles (default 12).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use rand::{Rng, SeedableRng};
use shaledb::{Db, Options, ReadOptions};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const KEYS: u32 = 3000;

/// Every value sent per key, in order, and how many of them were acknowledged.
#[derive(Default)]
struct Oracle {
    sent: HashMap<Vec<u8>, Vec<Vec<u8>>>,
    acked: HashMap<Vec<u8>, usize>, // number of acknowledged values per key (a prefix of `sent`)
}

fn check(dir: &std::path::Path, oracle: &Oracle) -> (usize, usize) {
    let opts = Options {
        write_buffer_size: 1 << 20,
        ..Options::default()
    };
    let db = Db::open(dir, opts).unwrap();
    let mut lost = 0;
    let mut present = 0;
    for (key, values) in &oracle.sent {
        let acked = oracle.acked.get(key).copied().unwrap_or(0);
        match db.get(key).unwrap() {
            Some(v) => {
                present += 1;
                let pos = values.iter().rposition(|x| *x == v);
                let pos =
                    pos.unwrap_or_else(|| panic!("key {key:?} holds a value never sent: {v:?}"));
                if acked > 0 && pos + 1 < acked {
                    lost += 1;
                    eprintln!(
                        "key {key:?}: value #{pos} but #{} was acknowledged",
                        acked - 1
                    );
                }
            }
            None => {
                if acked > 0 {
                    lost += 1;
                    eprintln!("key {key:?}: acknowledged value lost");
                }
            }
        }
    }
    // Nothing outside the oracle's key space.
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    while it.valid() {
        assert!(
            oracle.sent.contains_key(it.key()),
            "unknown key {:?}",
            it.key()
        );
        it.next().unwrap();
    }
    db.close().unwrap();
    (lost, present)
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let cycles: usize = std::env::var("SHALE_KILL9_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5a1e);
    let mut oracle = Oracle::default();
    let mut total_acked = 0usize;
    for cycle in 0..cycles {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
            .args([
                "--db",
                dir.path().to_str().unwrap(),
                "--create",
                "--write-buffer-mb",
                "1",
                "load",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        // Lines are generated up front so the oracle knows what was sent.
        let lines: Vec<(Vec<u8>, Vec<u8>)> = (0..200_000)
            .map(|i| {
                let k = format!("key{:05}", rng.gen_range(0..KEYS)).into_bytes();
                let v = format!("c{cycle}-i{i}-{}", "p".repeat(rng.gen_range(0..200))).into_bytes();
                (k, v)
            })
            .collect();
        let sent_count = Arc::new(AtomicUsize::new(0));
        let writer = {
            let lines = lines.clone();
            let sent_count = sent_count.clone();
            std::thread::spawn(move || {
                for (k, v) in &lines {
                    let mut line = k.clone();
                    line.push(b'\t');
                    line.extend_from_slice(v);
                    line.push(b'\n');
                    // Count before writing: a line may be read by the child as
                    // soon as its first byte is in the pipe.
                    sent_count.fetch_add(1, Ordering::SeqCst);
                    if stdin.write_all(&line).is_err() {
                        return;
                    }
                }
            })
        };
        let acked = Arc::new(Mutex::new(0usize));
        let reader = {
            let acked = acked.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    if line.is_err() {
                        break;
                    }
                    *acked.lock().unwrap() += 1;
                }
            })
        };
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..600)));
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        assert_eq!(rc, 0);
        child.wait().unwrap();
        reader.join().unwrap();
        writer.join().unwrap();
        let acked = *acked.lock().unwrap();
        let sent = sent_count.load(Ordering::SeqCst).min(lines.len());
        assert!(acked <= sent);
        for (i, (k, v)) in lines.into_iter().take(sent).enumerate() {
            let values = oracle.sent.entry(k.clone()).or_default();
            values.push(v);
            if i < acked {
                oracle.acked.insert(k, values.len());
            }
        }
        total_acked += acked;
        let (lost, present) = check(dir.path(), &oracle);
        eprintln!(
            "cycle {cycle}: sent {sent}, acknowledged {acked}, keys present {present}, lost {lost}"
        );
        assert_eq!(lost, 0, "acknowledged writes lost in cycle {cycle}");
    }
    eprintln!("kill -9 cycles: {cycles}, acknowledged writes: {total_acked}, lost: 0");
    assert!(total_acked > 0, "the child never acknowledged anything");
}
