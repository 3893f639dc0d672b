//! Retiring schema versions (docs/tables.md, "Retiring schema versions"):
//! compaction and OPTIMIZE TABLE re-encode old rows under the current
//! version, and a sweep drops the versions no row uses, but never one an
//! open transaction, a prepared XA transaction or an old snapshot may
//! still need.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;

use common::open;
use shale_sql::{Datum, Output, Session};
use std::time::{Duration, Instant};

fn rows(s: &mut Session, sql: &str) -> Vec<Vec<String>> {
    match s.execute(sql).unwrap() {
        Output::Rows { rows, .. } => rows
            .iter()
            .map(|r| r.iter().map(render).collect())
            .collect(),
        other => panic!("{sql}: {other:?}"),
    }
}

fn render(d: &Datum) -> String {
    match d {
        Datum::Bytes(b) => format!("'{}'", String::from_utf8_lossy(b)),
        other => format!("{other:?}"),
    }
}

/// OPTIMIZE TABLE's (Msg_type, Msg_text) pairs.
fn optimize(s: &mut Session, table: &str) -> Vec<(String, String)> {
    match s.execute(&format!("OPTIMIZE TABLE {table}")).unwrap() {
        Output::Rows { rows, .. } => rows
            .iter()
            .map(|r| match (&r[2], &r[3]) {
                (Datum::Bytes(k), Datum::Bytes(t)) => (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(t).into_owned(),
                ),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

fn note(msgs: &[(String, String)]) -> &str {
    &msgs.iter().find(|(k, _)| k == "note").unwrap().1
}

/// A table with rows of three schema versions: 1 [id, a, b], 2 adds c
/// (DEFAULT 7) in the middle, 3 drops a.
fn three_versions(s: &mut Session) {
    s.execute("CREATE DATABASE d").unwrap();
    s.execute("USE d").unwrap();
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(20))")
        .unwrap();
    for i in 0..300 {
        s.execute(&format!("INSERT INTO t VALUES ({i}, {i}, 'v1-{i}')"))
            .unwrap();
    }
    s.execute("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7 AFTER a")
        .unwrap();
    for i in 300..400 {
        s.execute(&format!("INSERT INTO t VALUES ({i}, {i}, 8, 'v2-{i}')"))
            .unwrap();
    }
    s.execute("ALTER TABLE t DROP COLUMN a").unwrap();
    for i in 400..450 {
        s.execute(&format!("INSERT INTO t VALUES ({i}, 9, 'v3-{i}')"))
            .unwrap();
    }
}

#[test]
fn optimize_table_upgrades_every_row_and_drops_the_old_versions() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    three_versions(&mut s);
    let before = rows(&mut s, "SELECT * FROM t ORDER BY id");
    assert_eq!(before.len(), 450);
    let msgs = optimize(&mut s, "t");
    assert!(msgs.contains(&("status".into(), "OK".into())), "{msgs:?}");
    assert!(
        note(&msgs).contains("rows upgraded: 400"),
        "the 400 rows of versions 1 and 2: {msgs:?}"
    );
    assert!(
        note(&msgs).contains("schema versions dropped: 1, 2"),
        "{msgs:?}"
    );
    assert_eq!(sql.schema_upgrade_counts().1, 2);
    assert_eq!(rows(&mut s, "SELECT * FROM t ORDER BY id"), before);
    // Nothing is left to do, and the rows survive a reopen without the
    // dropped versions.
    let again = optimize(&mut s, "t");
    assert!(note(&again).contains("rows upgraded: 0"), "{again:?}");
    drop(s);
    drop(sql);
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("USE d").unwrap();
    assert_eq!(rows(&mut s, "SELECT * FROM t ORDER BY id"), before);
    let check = rows(&mut s, "CHECK TABLE t");
    assert_eq!(check[0][3], "'OK'", "{check:?}");
    // Instant DDL still works on top.
    s.execute("ALTER TABLE t ADD COLUMN e INT DEFAULT 5")
        .unwrap();
    assert_eq!(rows(&mut s, "SELECT e FROM t WHERE id = 3")[0][0], "Int(5)");
}

#[test]
fn an_open_writer_a_prepared_xa_and_an_old_snapshot_each_keep_old_versions() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE d").unwrap();
    s.execute("USE d").unwrap();
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
        .unwrap();
    s.execute("INSERT INTO t VALUES (1, 1), (2, 2)").unwrap();

    // An open transaction that wrote rows under version 1.
    let mut w = sql.session();
    w.execute("USE d").unwrap();
    w.execute("BEGIN").unwrap();
    w.execute("INSERT INTO t VALUES (3, 3)").unwrap();
    s.execute("ALTER TABLE t ADD COLUMN b INT DEFAULT 0")
        .unwrap();
    let msgs = optimize(&mut s, "t");
    assert!(note(&msgs).contains("uncommitted rows"), "{msgs:?}");
    w.execute("COMMIT").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, a, b FROM t WHERE id = 3"),
        vec![vec!["Int(3)", "Int(3)", "Int(0)"]]
    );
    let msgs = optimize(&mut s, "t");
    assert!(note(&msgs).contains("dropped: 1"), "{msgs:?}");

    // A prepared XA transaction with rows of version 2.
    w.execute("XA START 'x1'").unwrap();
    w.execute("INSERT INTO t VALUES (4, 4, 4)").unwrap();
    w.execute("XA END 'x1'").unwrap();
    w.execute("XA PREPARE 'x1'").unwrap();
    s.execute("ALTER TABLE t ADD COLUMN c INT DEFAULT 1")
        .unwrap();
    let msgs = optimize(&mut s, "t");
    assert!(note(&msgs).contains("prepared"), "{msgs:?}");
    w.execute("XA COMMIT 'x1'").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, a, b, c FROM t WHERE id = 4"),
        vec![vec!["Int(4)", "Int(4)", "Int(4)", "Int(1)"]]
    );
    let msgs = optimize(&mut s, "t");
    assert!(note(&msgs).contains("dropped: 2"), "{msgs:?}");

    // A snapshot (REPEATABLE READ) taken before every row was rewritten
    // still reads rows of version 3.
    let mut r = sql.session();
    r.execute("USE d").unwrap();
    r.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .unwrap();
    r.execute("BEGIN").unwrap();
    let seen = rows(&mut r, "SELECT * FROM t ORDER BY id");
    s.execute("ALTER TABLE t DROP COLUMN b").unwrap();
    s.execute("UPDATE t SET a = a + 10").unwrap();
    let msgs = optimize(&mut s, "t");
    assert!(note(&msgs).contains("snapshot"), "{msgs:?}");
    // The reader sees today's columns (b is gone) over its snapshot's rows
    // (a before the update): rows of version 3 it still decodes.
    let without_b: Vec<Vec<String>> = seen
        .iter()
        .map(|row| vec![row[0].clone(), row[1].clone(), row[3].clone()])
        .collect();
    assert_eq!(rows(&mut r, "SELECT * FROM t ORDER BY id"), without_b);
    r.execute("COMMIT").unwrap();
    let msgs = optimize(&mut s, "t");
    assert!(note(&msgs).contains("dropped: 3"), "{msgs:?}");
    assert_eq!(
        rows(&mut s, "SELECT * FROM t ORDER BY id"),
        (1..=4)
            .map(|i| vec![
                format!("Int({i})"),
                format!("Int({})", i + 10),
                "Int(1)".into()
            ])
            .collect::<Vec<_>>()
    );
}

#[test]
fn flushes_upgrade_rows_and_the_background_sweep_drops_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    sql.set_schema_sweep_interval(Duration::from_millis(20));
    let mut s = sql.session();
    s.execute("CREATE DATABASE d").unwrap();
    s.execute("USE d").unwrap();
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))")
        .unwrap();
    for i in 0..200 {
        s.execute(&format!("INSERT INTO t VALUES ({i}, 'r{i}')"))
            .unwrap();
    }
    s.execute("ALTER TABLE t ADD COLUMN b INT DEFAULT 42 FIRST")
        .unwrap();
    let before = rows(&mut s, "SELECT * FROM t ORDER BY id");
    // The rows are still in the memtable: the flush re-encodes them.
    sql.engine().flush().unwrap();
    assert!(
        sql.schema_upgrade_counts().0 >= 200,
        "{:?}",
        sql.schema_upgrade_counts()
    );
    // Generous: CI runs many tests at once on 2 cores.
    let deadline = Instant::now() + Duration::from_secs(90);
    while sql.schema_upgrade_counts().1 < 1 {
        assert!(
            Instant::now() < deadline,
            "the sweep did not drop version 1"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(rows(&mut s, "SELECT * FROM t ORDER BY id"), before);
    assert_eq!(before[0], vec!["Int(42)", "Int(0)", "'r0'"]);
}
