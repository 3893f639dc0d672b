//! The `shale` binary as a user drives it: prompt acknowledgements with
//! stdin kept open, opening rules, bad input lines, the transaction shell.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn shale(db: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shale"));
    c.arg("--db").arg(db).args(args);
    c
}

fn run(mut c: Command, stdin: &str) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Feed stdin from another thread: the child's acknowledgements can fill
    // the stdout pipe before it has read all its input.
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_owned();
    let feeder = std::thread::spawn(move || {
        let _ = pipe.write_all(input.as_bytes()); // the child may exit early on a bad line
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One line written, stdin left open: its acknowledgement must arrive
/// without more input (it used to wait for 1,024 lines or EOF).
#[test]
fn load_acknowledges_each_line_while_stdin_stays_open() {
    for sync in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--create", "load"];
        if sync {
            args.push("--sync");
        }
        let mut child = shale(dir.path(), &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        for i in 0..3 {
            writeln!(stdin, "key{i}\tvalue{i}").unwrap();
            stdin.flush().unwrap();
            let ack = rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no acknowledgement of line {i} (sync={sync})"));
            assert_eq!(ack, format!("key{i}"));
        }
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

/// The WAL is written through a memory map of preallocated 4 MiB windows
/// by default and with write(2) under `--buffered-wal`: while `load` runs,
/// the live segment's length tells which (whole windows, or the records'
/// bytes), and either way the acknowledged line is read back.
#[test]
fn wal_is_mapped_by_default_and_buffered_on_request() {
    for buffered in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--create", "load"];
        if buffered {
            args.insert(0, "--buffered-wal");
        }
        let mut child = shale(dir.path(), &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "key\tvalue").unwrap();
        stdin.flush().unwrap();
        let mut ack = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ack)
            .unwrap();
        assert_eq!(ack, "key\n");
        let logs: Vec<u64> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .map(|e| e.metadata().unwrap().len())
            .collect();
        assert_eq!(logs.len(), 1, "one live WAL segment: {logs:?}");
        if buffered {
            assert!(
                logs[0] > 0 && logs[0] < 4096,
                "buffered WAL length {}",
                logs[0]
            );
        } else {
            assert_eq!(logs[0], 4 << 20, "mapped WAL length");
        }
        drop(stdin);
        assert!(child.wait().unwrap().success());
        let out = run(shale(dir.path(), &["get", "key"]), "");
        assert_eq!(text(&out.stdout), "value\n");
    }
}

#[test]
fn bulk_load_acknowledges_every_line_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let input: String = (0..20_000).map(|i| format!("k{i:06}\tv{i}\n")).collect();
    let out = run(shale(dir.path(), &["--create", "load"]), &input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let acks: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
    assert_eq!(acks.len(), 20_000);
    assert!(acks
        .iter()
        .enumerate()
        .all(|(i, k)| *k == format!("k{i:06}")));
    let out = run(shale(dir.path(), &["get", "k019999"]), "");
    assert_eq!(text(&out.stdout), "v19999\n");
}

#[test]
fn only_init_or_create_makes_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    let out = run(shale(&typo, &["get", "a"]), "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no database at"),
        "{}",
        text(&out.stderr)
    );
    assert!(!typo.exists(), "a typo must not create a directory");

    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let out = run(shale(&file, &["get", "a"]), "");
    assert!(
        text(&out.stderr).contains("is a file"),
        "{}",
        text(&out.stderr)
    );
    let out = run(shale(&file, &["init"]), "");
    assert!(
        text(&out.stderr).contains("is a file"),
        "{}",
        text(&out.stderr)
    );

    let orphan = dir.path().join("no/such/parent/db");
    for args in [
        &["init"][..],
        &["--create", "put", "a", "b"][..],
        &["get", "a"][..],
    ] {
        let out = run(shale(&orphan, args), "");
        assert!(
            text(&out.stderr).contains("no such directory"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(!dir.path().join("no").exists());

    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let out = run(shale(&other, &["get", "a"]), "");
    assert!(
        text(&out.stderr).contains("not a ShaleDB database"),
        "{}",
        text(&out.stderr)
    );
    let out = run(shale(&other, &["init"]), "");
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );

    let db = dir.path().join("db");
    let out = run(shale(&db, &["init"]), "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(shale(&db, &["init"]), "");
    assert!(
        text(&out.stderr).contains("already exists"),
        "{}",
        text(&out.stderr)
    );
    let out = run(shale(&db, &["put", "a", "1"]), "");
    assert!(out.status.success());
    let out = run(shale(&db, &["get", "a"]), "");
    assert_eq!(text(&out.stdout), "1\n");
}

#[test]
fn bad_lines_name_their_line_number() {
    let dir = tempfile::tempdir().unwrap();
    shale(dir.path(), &["init"]).output().unwrap();
    let cases = [
        (
            "a\t1\nb\t2\nno tab here\nc\t3\n",
            "line 3: expected key<TAB>value",
        ),
        ("a\t1\n0xzz\t2\n", "line 2: bad hex"),
        ("a\t1\nb\t0x123\n", "line 2: odd number of hex digits"),
        ("\t1\n", "line 1: empty key"),
    ];
    for (input, want) in cases {
        let out = run(shale(dir.path(), &["load"]), input);
        assert_eq!(out.status.code(), Some(2), "{input:?}");
        assert!(
            text(&out.stderr).contains(want),
            "{input:?}: {}",
            text(&out.stderr)
        );
        // The good lines before the bad one were written and acknowledged.
        assert!(text(&out.stdout).starts_with("a\n") || input.starts_with('\t'));
    }
    let out = run(
        shale(dir.path(), &["load", "--skip-bad-lines"]),
        "x\t1\nbroken\ny\t0xq\nz\t3\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "x\nz\n");
    let err = text(&out.stderr);
    assert!(err.contains("line 2:") && err.contains("line 3:"), "{err}");
    assert!(err.contains("2 lines skipped"), "{err}");
}

#[test]
fn txn_shell_isolation_snapshots_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    shale(dir.path(), &["init"]).output().unwrap();
    let script = "\
put k old
snapshot
begin si
put k new
get k
scan
commit
get k
snapshot-get k
get-for-update k
begin bogus
begin rc
rollback
frobnicate
";
    let out = run(shale(dir.path(), &["txn"]), script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines[0], "ok");
    assert!(lines[1].starts_with("ok (snapshot "), "{lines:?}");
    assert!(lines[2].starts_with("ok (txn "), "{lines:?}");
    assert_eq!(lines[3], "ok");
    assert_eq!(lines[4], "new", "own write visible inside");
    assert_eq!(lines[5], "k\tnew");
    assert_eq!(lines[6], "ok (committed)");
    assert_eq!(lines[7], "new");
    assert_eq!(lines[8], "old", "the snapshot still sees the old value");
    assert!(
        lines[9].starts_with("error: no open transaction"),
        "{lines:?}"
    );
    assert!(
        lines[10].starts_with("error: unknown isolation level"),
        "{lines:?}"
    );
    assert!(lines[11].starts_with("ok (txn "), "{lines:?}");
    assert_eq!(lines[12], "ok (rolled back)");
    assert!(lines[13].starts_with("error: unknown command"), "{lines:?}");
}

/// Prepare in one process, which then exits; the next process finds the
/// transaction in doubt, its row still locked, and commits it.
#[test]
fn two_phase_commit_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    shale(dir.path(), &["init"]).output().unwrap();
    let out = run(
        shale(dir.path(), &["txn"]),
        "begin\nput acct 100\nprepare xid-7\nquit\n",
    );
    assert!(
        text(&out.stdout).contains("ok (prepared"),
        "{}",
        text(&out.stdout)
    );
    let out = run(
        shale(dir.path(), &["txn"]),
        "prepared\nget acct\nbegin\nput acct 5\nrollback\ncommit-prepared xid-7\nget acct\nprepared\n",
    );
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines[0], "xid-7");
    assert_eq!(lines[1], "(not found)", "not visible before commit");
    assert!(
        lines[3].starts_with("error: lock wait timeout"),
        "the prepared row stays locked: {lines:?}"
    );
    assert_eq!(lines[5], "ok (committed)");
    assert_eq!(lines[6], "100");
    assert_eq!(lines[7], "(no prepared transactions)");
}

/// `compact` in one process, `stats` in the next: the write amplification
/// is the database's, not zero for a process that wrote nothing.
#[test]
fn stats_report_the_database_life() {
    let dir = tempfile::tempdir().unwrap();
    let input: String = (0..30_000)
        .map(|i| format!("k{:05}\tvalue-{i}\n", i % 7_000))
        .collect();
    let out = run(
        shale(dir.path(), &["--create", "--write-buffer-mb", "1", "load"]),
        &input,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(shale(dir.path(), &["compact"]), "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(shale(dir.path(), &["stats"]), "");
    let stats = text(&out.stdout);
    let wa: f64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("write amplification: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(wa > 0.1, "{stats}");
    assert!(stats.contains("writes: 30000 ops"), "{stats}");
}

/// After kill -9 the writes replayed from the WAL are counted once: the
/// lifetime write count covers every acknowledged line.
#[test]
fn stats_count_writes_recovered_after_kill9() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = shale(dir.path(), &["--create", "--write-buffer-mb", "1", "load"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for i in 0..2_000_000u32 {
            if writeln!(stdin, "k{i:08}\tv{i}").is_err() {
                return; // killed
            }
        }
    });
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = 0u64;
    while acked < 50_000 {
        acks.next().unwrap().unwrap();
        acked += 1;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Lines acknowledged before the kill but not yet read by us count too.
    acked += acks.map_while(Result::ok).count() as u64;
    feeder.join().unwrap();
    let out = run(shale(dir.path(), &["stats"]), "");
    let stats = text(&out.stdout);
    let ops: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("writes: "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        ops >= acked,
        "{ops} counted < {acked} acknowledged\n{stats}"
    );
    // Not counted twice: a second open replays nothing new.
    let again = text(&run(shale(dir.path(), &["stats"]), "").stdout);
    let line = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("writes: "))
            .unwrap()
            .to_owned()
    };
    assert_eq!(line(&again), line(&stats));
}

/// `--min-blob-size` puts large values in value files; `get` and `scan`
/// read them, and `stats` (opened without the flag) reports the value files
/// and their live ratio, which drops after half the keys are overwritten
/// with small values.
#[test]
fn value_files_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(500);
    let input: String = (0..200).map(|i| format!("k{i:03}\t{big}{i}\n")).collect();
    let out = run(
        shale(dir.path(), &["--create", "--min-blob-size", "100", "load"]),
        &input,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(shale(dir.path(), &["get", "k007"]), "");
    assert_eq!(text(&out.stdout).trim_end(), format!("{big}7"));
    let stats = text(&run(shale(dir.path(), &["stats"]), "").stdout);
    assert!(stats.contains("value files: 1 files"), "{stats}");
    let ratio = |stats: &str| -> f64 {
        stats
            .lines()
            .find_map(|l| l.split("live ratio ").nth(1))
            .unwrap()
            .trim_end_matches(')')
            .parse()
            .unwrap()
    };
    let before = ratio(&stats);
    assert!(before > 0.9, "{stats}");
    let small: String = (0..100).map(|i| format!("k{i:03}\tsmall\n")).collect();
    let out = run(shale(dir.path(), &["load"]), &small);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stats = text(&run(shale(dir.path(), &["stats"]), "").stdout);
    let after = ratio(&stats);
    assert!((0.4..0.6).contains(&after), "{before} -> {after}\n{stats}");
    let out = run(
        shale(dir.path(), &["scan", "--limit", "2", "--from", "k150"]),
        "",
    );
    assert_eq!(
        text(&out.stdout),
        format!("k150\t{big}150\nk151\t{big}151\n")
    );
}

/// `--block-restart-interval` reaches the engine: with a restart point at
/// every entry (no prefix compression) the same keys take more space than
/// with one every 64 entries, both read back, and 0 is refused by name.
#[test]
fn block_restart_interval_option() {
    let input: String = (0..20_000).map(|i| format!("key{i:08}\tv\n")).collect();
    let mut sizes = Vec::new();
    for interval in ["1", "64"] {
        let dir = tempfile::tempdir().unwrap();
        let args = ["--create", "--block-restart-interval", interval, "load"];
        let out = run(shale(dir.path(), &args), &input);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let out = run(
            shale(
                dir.path(),
                &["--block-restart-interval", interval, "compact"],
            ),
            "",
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let out = run(shale(dir.path(), &["get", "key00012345"]), "");
        assert_eq!(text(&out.stdout).trim(), "v", "{}", text(&out.stderr));
        let bytes: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum();
        sizes.push(bytes);
    }
    // 20,000 entries, each with a 4-byte restart and its whole key
    // (measured: ~95 KB more, after block compression).
    assert!(sizes[0] > sizes[1] + 50_000, "{sizes:?}");
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        shale(
            dir.path(),
            &["--create", "--block-restart-interval", "0", "load"],
        ),
        "",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("block_restart_interval"),
        "{}",
        text(&out.stderr)
    );
}
