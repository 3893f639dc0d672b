//! Generated auto-increment keys skip the primary-key lookup when their
//! claim holds (catalog/autoinc.rs). These tests write rows with explicit
//! values through every path that can (INSERT, UPDATE, ON DUPLICATE KEY
//! UPDATE) and across sessions, then generate keys past them: a generated
//! key must never land on an existing row (it would replace it silently).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;

use common::{open, rows};
use shale_sql::{Datum, Error};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Every (id, tag) of `t`.
fn tags(s: &mut shale_sql::Session) -> Vec<(i64, String)> {
    rows(s, "SELECT id, tag FROM t ORDER BY id")
        .into_iter()
        .map(|r| {
            let id = match &r[0] {
                Datum::Int(i) => *i,
                Datum::UInt(i) => i64::try_from(*i).unwrap(),
                other => panic!("{other:?}"),
            };
            (id, r[1].to_text().unwrap())
        })
        .collect()
}

#[test]
fn generated_keys_step_over_values_written_by_update_and_on_duplicate_key_update() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE a").unwrap();
    s.execute("USE a").unwrap();
    s.execute(
        "CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, tag VARCHAR(20) NOT NULL, \
         UNIQUE KEY by_tag (tag))",
    )
    .unwrap();
    let mut next_gen = 0;
    let mut generate = |s: &mut shale_sql::Session| {
        s.execute(&format!("INSERT INTO t (tag) VALUES ('gen{next_gen}')"))
            .unwrap();
        next_gen += 1;
        let last = rows(s, "SELECT LAST_INSERT_ID()");
        match &last[0][0] {
            Datum::Int(n) => *n,
            Datum::UInt(n) => i64::try_from(*n).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(generate(&mut s), 1);
    // Each path that writes an explicit value moves the counter past it.
    s.execute("INSERT INTO t (tag) VALUES ('gen0') ON DUPLICATE KEY UPDATE id = 20")
        .unwrap();
    assert_eq!(generate(&mut s), 21, "ON DUPLICATE KEY UPDATE");
    s.execute("UPDATE t SET id = 40 WHERE tag = 'gen1'")
        .unwrap();
    assert_eq!(generate(&mut s), 41, "UPDATE");
    s.execute("INSERT INTO t (id, tag) VALUES (50, 'plain')")
        .unwrap();
    assert_eq!(generate(&mut s), 51, "INSERT");
    // Text, and a decimal rounded when stored: the stored value counts.
    s.execute("INSERT INTO t (id, tag) VALUES ('60', 'text')")
        .unwrap();
    assert_eq!(generate(&mut s), 61, "INSERT of a text value");
    s.execute("INSERT INTO t (id, tag) VALUES (79.6, 'rounded')")
        .unwrap();
    assert_eq!(generate(&mut s), 81, "INSERT of a rounded value");
    s.execute("REPLACE INTO t (id, tag) VALUES (90, 'replaced')")
        .unwrap();
    assert_eq!(generate(&mut s), 91, "REPLACE");
    let got = tags(&mut s);
    let find = |tag: &str| got.iter().find(|(_, t)| t == tag).map(|(i, _)| *i);
    assert_eq!(find("gen0"), Some(20));
    assert_eq!(find("gen1"), Some(40));
    assert_eq!(find("rounded"), Some(80));
    assert_eq!(got.len(), 11, "{got:?}");
}

#[test]
fn a_generated_key_and_an_explicit_one_racing_for_the_same_value_never_merge() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE r").unwrap();
    s.execute("CREATE TABLE r.t (id INT PRIMARY KEY AUTO_INCREMENT, tag VARCHAR(20) NOT NULL)")
        .unwrap();
    const THREADS: usize = 4;
    const INSERTS: usize = 300;
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let sql = sql.clone();
        let acknowledged = acknowledged.clone();
        handles.push(std::thread::spawn(move || {
            let mut s = sql.session();
            s.execute("USE r").unwrap();
            for i in 0..INSERTS {
                let tag = format!("t{t}-{i}");
                // Odd threads aim explicit ids just past the largest one,
                // where the even threads' generated ids land.
                let stmt = if t % 2 == 0 {
                    format!("INSERT INTO t (tag) VALUES ('{tag}')")
                } else {
                    let max = match &rows(&mut s, "SELECT MAX(id) FROM t")[0][0] {
                        Datum::Int(n) => *n,
                        Datum::UInt(n) => i64::try_from(*n).unwrap(),
                        _ => 0,
                    };
                    format!(
                        "INSERT INTO t (id, tag) VALUES ({}, '{tag}')",
                        max + 1 + (i % 3) as i64
                    )
                };
                match s.execute(&stmt) {
                    Ok(_) => acknowledged.lock().unwrap().push(tag),
                    Err(
                        Error::DuplicateKey { .. }
                        | Error::Engine(shaledb::Error::WriteConflict { .. })
                        | Error::Engine(shaledb::Error::LockTimeout { .. })
                        | Error::Deadlock,
                    ) => {}
                    Err(e) => panic!("{stmt}: {e:?}"),
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    s.execute("USE r").unwrap();
    let stored: BTreeSet<String> = tags(&mut s).into_iter().map(|(_, t)| t).collect();
    let acknowledged = acknowledged.lock().unwrap();
    assert!(
        acknowledged.len() > INSERTS * THREADS / 2,
        "{}",
        acknowledged.len()
    );
    for tag in acknowledged.iter() {
        assert!(
            stored.contains(tag),
            "acknowledged insert {tag} was overwritten"
        );
    }
    assert_eq!(stored.len(), acknowledged.len());
}

#[test]
fn a_column_cannot_become_auto_increment_after_rows_were_written() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE m").unwrap();
    s.execute("USE m").unwrap();
    s.execute("CREATE TABLE t (id INT NOT NULL PRIMARY KEY, tag VARCHAR(20))")
        .unwrap();
    s.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        .unwrap();
    let e = s
        .execute("ALTER TABLE t MODIFY id INT NOT NULL AUTO_INCREMENT")
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
    // Restating it on a column that has it is fine.
    s.execute("CREATE TABLE u (id INT NOT NULL PRIMARY KEY AUTO_INCREMENT, tag VARCHAR(20))")
        .unwrap();
    s.execute("ALTER TABLE u MODIFY id BIGINT NOT NULL AUTO_INCREMENT")
        .unwrap();
    s.execute("INSERT INTO u (tag) VALUES ('x')").unwrap();
    assert_eq!(rows(&mut s, "SELECT id FROM u").len(), 1);
}
