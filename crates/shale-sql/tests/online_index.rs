//! Online CREATE INDEX (docs/tables.md, "CREATE INDEX"): row statements
//! go on during the build; the built index equals the rows (CHECK TABLE
//! compares every index with entries computed from the rows); a duplicate
//! fails a unique build cleanly; a transaction whose snapshot predates the
//! index does not read through it; kill -9 during a build leaves the index
//! finished or absent (a real child process).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;

use common::{count, open};
use shale_sql::{Database, Datum, Output, Session};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn check_table_ok(s: &mut Session, table: &str) {
    check_table_ok_in(s, table, "");
}

fn check_table_ok_in(s: &mut Session, table: &str, context: &str) {
    match s.execute(&format!("CHECK TABLE {table}")).unwrap() {
        Output::Rows { rows, .. } => {
            let last = rows.last().unwrap();
            let text = |d: &Datum| d.to_text().unwrap_or_default();
            assert_eq!(
                text(&last[3]),
                "OK",
                "{context}: CHECK TABLE: {:?}",
                rows.iter()
                    .map(|r| r.iter().map(text).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            );
        }
        other => panic!("{other:?}"),
    }
}

fn has_index(s: &mut Session, table: &str, index: &str) -> bool {
    count(
        s,
        &format!(
            "SELECT COUNT(*) FROM information_schema.STATISTICS \
             WHERE TABLE_NAME = '{table}' AND INDEX_NAME = '{index}'"
        ),
    ) > 0
}

/// `rows` rows `(id, k = id % 1000, u = id, pad)` in database `o`.
fn load(s: &mut Session, rows: u64) {
    s.execute("CREATE DATABASE o").unwrap();
    s.execute("USE o").unwrap();
    s.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, k INT NOT NULL, u BIGINT, pad VARCHAR(60))")
        .unwrap();
    for start in (0..rows).step_by(1000) {
        let values: Vec<String> = (start..(start + 1000).min(rows))
            .map(|i| format!("({i}, {}, {i}, 'pad-{i:040}')", i % 1000))
            .collect();
        s.execute(&format!("INSERT INTO t VALUES {}", values.join(",")))
            .unwrap();
    }
}

/// Runs `ddl` while two writer threads update, insert and delete rows;
/// returns how many writes completed while the DDL statement ran.
fn ddl_during_writes(
    sql: &Database,
    s: &mut Session,
    ddl: &str,
    round: u64,
) -> (u64, Result<(), String>) {
    let stop = Arc::new(AtomicBool::new(false));
    let building = Arc::new(AtomicBool::new(false));
    let during = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (sql, stop, building, during) =
            (sql.clone(), stop.clone(), building.clone(), during.clone());
        writers.push(std::thread::spawn(move || {
            let mut s = sql.session();
            s.execute("USE o").unwrap();
            let mut next_id = 1_000_000 * (w + 1) + 100_000 * round;
            // Bounded: the DDL ends long before this many writes.
            for i in 0..200_000u64 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let victim = (i * 7919 + w * 104_729) % 30_000;
                let stmt = match i % 4 {
                    0 => format!("UPDATE t SET k = k + 1, u = u + 5000000 WHERE id = {victim}"),
                    1 => {
                        next_id += 1;
                        format!(
                            "INSERT INTO t VALUES ({next_id}, {}, {next_id}, 'new')",
                            i % 1000
                        )
                    }
                    2 => format!("DELETE FROM t WHERE id = {}", victim + 1),
                    _ => format!("UPDATE t SET pad = 'changed' WHERE id = {victim}"),
                };
                match s.execute(&stmt) {
                    Ok(_) => {
                        if building.load(Ordering::Relaxed) {
                            during.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // A write may lose a lock race with the build's chunk.
                    Err(e) => assert!(
                        matches!(e.mysql_code(), 1213 | 1205),
                        "{stmt}: {e} ({})",
                        e.mysql_code()
                    ),
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(50));
    building.store(true, Ordering::Relaxed);
    let r = s.execute(ddl).map(|_| ()).map_err(|e| e.to_string());
    building.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    (during.load(Ordering::Relaxed), r)
}

#[test]
fn writes_go_on_while_an_index_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    load(&mut s, 30_000);
    let (during, r) = ddl_during_writes(&sql, &mut s, "CREATE INDEX ik ON t (k)", 0);
    r.unwrap();
    assert!(during > 0, "no write completed during the build");
    let (during_u, r) = ddl_during_writes(&sql, &mut s, "ALTER TABLE t ADD UNIQUE KEY iu (u)", 1);
    r.unwrap();
    assert!(during_u > 0, "no write completed during the unique build");
    check_table_ok(&mut s, "t");
    // Reads through the new index agree with full scans.
    for k in [0, 1, 7, 500, 999, 1000] {
        assert_eq!(
            count(&mut s, &format!("SELECT COUNT(*) FROM t WHERE k = {k}")),
            count(&mut s, &format!("SELECT COUNT(*) FROM t WHERE k + 0 = {k}")),
            "k = {k}"
        );
    }
    match s.execute("EXPLAIN SELECT id FROM t WHERE k = 5").unwrap() {
        Output::Rows { rows, .. } => {
            assert_eq!(rows[0][5], Datum::text("ik"), "{rows:?}")
        }
        other => panic!("{other:?}"),
    }
    // The same after a reopen.
    drop(s);
    drop(sql);
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("USE o").unwrap();
    check_table_ok(&mut s, "t");
    assert!(has_index(&mut s, "t", "ik") && has_index(&mut s, "t", "iu"));
}

#[test]
fn a_build_over_spilled_runs_moves_in_without_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    load(&mut s, 30_000);
    // The whole index fits the default buffer: nothing is spilled.
    s.execute("CREATE INDEX ik0 ON t (k)").unwrap();
    let one = sql.last_index_build().unwrap();
    assert_eq!((one.runs_spilled, one.bytes_rewritten), (0, 0), "{one:?}");
    assert_eq!(one.entries, 30_000);
    s.execute("DROP INDEX ik0 ON t").unwrap();
    // k = id % 1000 does not follow the primary key, so runs cut by
    // arrival overlap in key range; 64 KiB runs make about ten of them.
    sql.set_index_build_buffer(64 << 10);
    let (during, r) = ddl_during_writes(&sql, &mut s, "CREATE INDEX ik ON t (k, pad)", 0);
    r.unwrap();
    assert!(during > 0, "no write completed during the build");
    let st = sql.last_index_build().unwrap();
    assert!(st.runs_spilled >= 4, "{st:?}");
    assert!(st.partitions >= 1 && st.bytes_written > 0, "{st:?}");
    // Every partition moved into the last level as written: no entry was
    // written twice.
    assert_eq!(st.bytes_rewritten, 0, "{st:?}");
    check_table_ok(&mut s, "t");
    for k in [0, 1, 7, 500, 999] {
        assert_eq!(
            count(&mut s, &format!("SELECT COUNT(*) FROM t WHERE k = {k}")),
            count(&mut s, &format!("SELECT COUNT(*) FROM t WHERE k + 0 = {k}")),
            "k = {k}"
        );
    }
    let leftover = std::fs::read_dir(sql.tmpdir())
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(leftover, 0, "run files left in tmp/");
    // With a fan-in of 3, runs are merged into one file as they pile up;
    // the result is the same index.
    sql.set_index_build_fan_in(3);
    s.execute("CREATE INDEX ik3 ON t (k, pad)").unwrap();
    let st3 = sql.last_index_build().unwrap();
    assert!(st3.runs_spilled >= 4 && st3.early_merges >= 2, "{st3:?}");
    assert_eq!(st3.bytes_rewritten, 0, "{st3:?}");
    check_table_ok(&mut s, "t");
    let leftover = std::fs::read_dir(sql.tmpdir())
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(leftover, 0, "run files left in tmp/");
}

#[test]
fn a_duplicate_fails_a_unique_build_and_leaves_no_index() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    load(&mut s, 5_000);
    let e = s.execute("CREATE UNIQUE INDEX bad ON t (k)").unwrap_err();
    assert_eq!(e.mysql_code(), 1062, "{e}");
    assert!(!has_index(&mut s, "t", "bad"));
    // Writers no longer maintain it; the table is consistent.
    s.execute("INSERT INTO t VALUES (99999, 1, 99999, 'x')")
        .unwrap();
    check_table_ok(&mut s, "t");
    // Its name is free again.
    s.execute("CREATE INDEX bad ON t (k)").unwrap();
    check_table_ok(&mut s, "t");
}

#[test]
fn an_older_snapshot_does_not_read_through_a_newer_index() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    load(&mut s, 2_000);
    let mut reader = sql.session();
    reader.execute("USE o").unwrap();
    reader.execute("BEGIN").unwrap();
    assert_eq!(count(&mut reader, "SELECT COUNT(*) FROM t"), 2_000);
    s.execute("CREATE INDEX ik ON t (k)").unwrap();
    // The index's entries were written after the reader's snapshot: read
    // through them, it would find nothing.
    assert_eq!(count(&mut reader, "SELECT COUNT(*) FROM t WHERE k = 5"), 2);
    reader.execute("COMMIT").unwrap();
    assert_eq!(count(&mut reader, "SELECT COUNT(*) FROM t WHERE k = 5"), 2);
    reader.execute("BEGIN").unwrap();
    assert_eq!(count(&mut reader, "SELECT COUNT(*) FROM t WHERE k = 5"), 2);
    reader.execute("COMMIT").unwrap();
}

/// The child process of `kill9_during_an_index_build`: writes acknowledged
/// rows on one thread while the main thread builds an index.
#[test]
#[ignore = "run by kill9_during_an_index_build as a child process"]
fn index_build_child() {
    let Ok(dir) = std::env::var("SHALE_SQL_BUILD_CHILD") else {
        return;
    };
    let sql = open(std::path::Path::new(&dir));
    let writer = {
        let sql = sql.clone();
        std::thread::spawn(move || {
            let mut s = sql.session();
            s.execute("USE o").unwrap();
            let base = count(&mut s, "SELECT COALESCE(MAX(id), 0) FROM t") + 1;
            for id in base..base + 1_000_000 {
                if s.execute(&format!(
                    "INSERT INTO t VALUES ({id}, {}, {id}, 'w')",
                    id % 1000
                ))
                .is_ok()
                {
                    println!("ack {id}");
                }
            }
        })
    };
    // A plain build spills many small sorted runs, so kills land in the
    // spill and the merge too.
    sql.set_index_build_buffer(64 << 10);
    let mut s = sql.session();
    s.execute("USE o").unwrap();
    let ddl = match std::env::var("SHALE_SQL_BUILD_KIND").as_deref() {
        Ok("plain") => "CREATE INDEX ik ON t (k)", // the bulk path (ingest behind)
        _ => "CREATE UNIQUE INDEX iu ON t (u)",    // the transactional path
    };
    println!("building");
    std::io::stdout().flush().unwrap();
    s.execute(ddl).unwrap();
    println!("built");
    std::io::stdout().flush().unwrap();
    writer.join().unwrap();
}

#[test]
fn kill9_during_an_index_build() {
    let dir = tempfile::tempdir().unwrap();
    {
        let sql = open(dir.path());
        let mut s = sql.session();
        load(&mut s, 40_000);
    }
    let mut mid_build = [0; 2];
    for cycle in 0..8u64 {
        // Even cycles build a unique index (transactional backfill), odd
        // ones a plain index (bulk ingest behind).
        let (kind, name, create) = if cycle % 2 == 0 {
            ("unique", "iu", "CREATE UNIQUE INDEX iu ON t (u)")
        } else {
            ("plain", "ik", "CREATE INDEX ik ON t (k)")
        };
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "index_build_child", "--nocapture"])
            .env("SHALE_SQL_BUILD_CHILD", dir.path())
            .env("SHALE_SQL_BUILD_KIND", kind)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while let Some(Ok(l)) = lines.next() {
            if l == "building" {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(2 + (cycle / 2) * 25));
        child.kill().unwrap();
        child.wait().unwrap();
        let (mut acked, mut built) = (Vec::new(), false);
        for l in lines.map_while(Result::ok) {
            if let Some(id) = l.strip_prefix("ack ") {
                acked.push(id.parse::<i64>().unwrap());
            }
            built |= l == "built";
        }
        let sql = open(dir.path());
        let leftover = std::fs::read_dir(sql.tmpdir())
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(leftover, 0, "cycle {cycle}: run files left in tmp/");
        let mut s = sql.session();
        s.execute("USE o").unwrap();
        let ctx = format!(
            "cycle {cycle} ({kind}, built {built}, {} acked)",
            acked.len()
        );
        check_table_ok_in(&mut s, "t", &format!("{ctx}, after restart"));
        for id in &acked {
            assert_eq!(
                count(&mut s, &format!("SELECT COUNT(*) FROM t WHERE id = {id}")),
                1,
                "cycle {cycle}: acknowledged row {id} lost"
            );
        }
        let present = has_index(&mut s, "t", name);
        assert!(present || !built, "cycle {cycle}: built but absent");
        if present {
            s.execute(&format!("DROP INDEX {name} ON t")).unwrap();
        } else {
            mid_build[(cycle % 2) as usize] += 1;
            // The abandoned build left nothing a new build trips over.
            s.execute(create).unwrap();
            check_table_ok_in(&mut s, "t", &format!("{ctx}, after a new build"));
            s.execute(&format!("DROP INDEX {name} ON t")).unwrap();
        }
    }
    eprintln!("kills during a build (unique, plain): {mid_build:?}");
    assert!(mid_build[0] > 0, "no kill landed during a unique build");
    assert!(mid_build[1] > 0, "no kill landed during a bulk build");
}
