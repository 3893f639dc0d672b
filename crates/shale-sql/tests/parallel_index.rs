//! Aggregates through the partition scan loop (`scan.rs`): covering
//! secondary-index ranges split into partitions, COUNT(*) without decoding,
//! conjuncts the key range guarantees, rows decoded into a reused buffer.
//! Every answer is checked against values computed here from the rows
//! written, and against the serial path (inside a transaction), also after
//! deletes, updates, DROP/CREATE INDEX and TRUNCATE (range tombstones).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;

use common::{open, parallel_scans_possible, text_rows};
use shale_sql::{Database, Session};
use std::collections::BTreeMap;

fn one(s: &mut Session, sql: &str) -> String {
    text_rows(s, sql)[0].join(" ")
}

/// The model: id -> (k, c, pad).
type Model = BTreeMap<i64, (Option<i64>, String, String)>;

fn insert(s: &mut Session, m: &mut Model, ids: impl Iterator<Item = i64>) {
    let mut values = Vec::new();
    for id in ids {
        let k = (id % 53 != 0).then_some((id * 7919) % 20011);
        let c = format!("{}-{}", (id * 31) % 97, id);
        let pad = format!("p{:05}", (id * 13) % 10007);
        values.push(format!(
            "({id}, {}, '{c}', '{pad}')",
            k.map_or("NULL".into(), |k| k.to_string())
        ));
        m.insert(id, (k, c, pad));
        if values.len() == 1000 {
            s.execute(&format!("INSERT INTO t VALUES {}", values.join(",")))
                .unwrap();
            values.clear();
        }
    }
    if !values.is_empty() {
        s.execute(&format!("INSERT INTO t VALUES {}", values.join(",")))
            .unwrap();
    }
}

fn count_k(m: &Model, f: impl Fn(i64) -> bool) -> String {
    m.values()
        .filter(|v| v.0.is_some_and(&f))
        .count()
        .to_string()
}

/// Queries whose answers the model gives, with those answers.
fn checks(m: &Model) -> Vec<(String, String)> {
    let sum_k =
        |f: &dyn Fn(i64) -> bool| -> i64 { m.values().filter_map(|v| v.0).filter(|k| f(*k)).sum() };
    let like1: Vec<_> = m.values().filter(|v| v.1.starts_with('1')).collect();
    let thirds: Vec<_> = m.iter().filter(|(id, _)| *id % 3 == 0).collect();
    let max_pad = thirds.iter().map(|(_, v)| v.2.clone()).max();
    let sum_thirds: i64 = thirds.iter().filter_map(|(_, v)| v.0).sum();
    let n_thirds = thirds.iter().filter(|(_, v)| v.0.is_some()).count();
    vec![
        (
            "SELECT COUNT(*) FROM t WHERE k > 10000".into(),
            count_k(m, |k| k > 10000),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE k >= 10000".into(),
            count_k(m, |k| k >= 10000),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE 10000 < k".into(),
            count_k(m, |k| k > 10000),
        ),
        // An upper bound alone: the NULL entries are in the range.
        (
            "SELECT COUNT(*) FROM t WHERE k < 15000".into(),
            count_k(m, |k| k < 15000),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE k <= 15000".into(),
            count_k(m, |k| k <= 15000),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE k > 300 AND k <= 15000".into(),
            count_k(m, |k| k > 300 && k <= 15000),
        ),
        // Only one of two lower bounds bounds the range.
        (
            "SELECT COUNT(*) FROM t WHERE k > 10000 AND k > 12000".into(),
            count_k(m, |k| k > 12000),
        ),
        // Not exactly an INT: the bound is dropped, the filter stays.
        (
            "SELECT COUNT(*) FROM t WHERE k > 10000.5".into(),
            count_k(m, |k| k > 10000),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE k > '10000'".into(),
            count_k(m, |k| k > 10000),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE k BETWEEN 100 AND 9000".into(),
            count_k(m, |k| (100..=9000).contains(&k)),
        ),
        ("SELECT COUNT(*) FROM t WHERE k > 30000".into(), "0".into()),
        (
            "SELECT COUNT(*) FROM t WHERE k IS NULL".into(),
            m.values().filter(|v| v.0.is_none()).count().to_string(),
        ),
        (
            "SELECT COUNT(k), SUM(k), MIN(k), MAX(k) FROM t WHERE k > 2000".into(),
            {
                let ks: Vec<i64> = m
                    .values()
                    .filter_map(|v| v.0)
                    .filter(|k| *k > 2000)
                    .collect();
                if ks.is_empty() {
                    "0 NULL NULL NULL".into()
                } else {
                    format!(
                        "{} {} {} {}",
                        ks.len(),
                        sum_k(&|k| k > 2000),
                        ks.iter().min().unwrap(),
                        ks.iter().max().unwrap()
                    )
                }
            },
        ),
        (
            "SELECT COUNT(*), MAX(id) FROM t WHERE k >= 5000".into(),
            format!(
                "{} {}",
                count_k(m, |k| k >= 5000),
                m.iter()
                    .filter(|(_, v)| v.0.is_some_and(|k| k >= 5000))
                    .map(|(id, _)| id.to_string())
                    .next_back()
                    .unwrap_or_else(|| "NULL".into())
            ),
        ),
        ("SELECT COUNT(*) FROM t".into(), m.len().to_string()),
        (
            "SELECT COUNT(*) FROM t WHERE id > 5000".into(),
            m.keys().filter(|id| **id > 5000).count().to_string(),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE id >= 5000 AND id < 15000".into(),
            m.keys()
                .filter(|id| (5000..15000).contains(*id))
                .count()
                .to_string(),
        ),
        (
            "SELECT SUM(k), COUNT(*) FROM t WHERE c LIKE '1%'".into(),
            if like1.is_empty() {
                "NULL 0".into()
            } else {
                let s: i64 = like1.iter().filter_map(|v| v.0).sum();
                format!("{s} {}", like1.len())
            },
        ),
        (
            "SELECT SUM(k), MAX(pad), COUNT(k) FROM t WHERE id % 3 = 0".into(),
            if n_thirds == 0 {
                format!("NULL {} 0", max_pad.unwrap_or_else(|| "NULL".into()))
            } else {
                format!("{sum_thirds} {} {n_thirds}", max_pad.unwrap())
            },
        ),
    ]
}

/// Grouped and other queries compared between the parallel and the serial
/// path only.
const COMPARED: &[&str] = &[
    "SELECT k, COUNT(*), MIN(id) FROM t WHERE k > 19000 GROUP BY k ORDER BY k",
    "SELECT AVG(k), MAX(pad) FROM t WHERE id % 3 = 0",
    "SELECT COUNT(*), SUM(id) FROM t WHERE k < 700 AND id % 2 = 1",
];

fn verify(sql: &Database, s: &mut Session, m: &Model, stage: &str) {
    let before = sql.parallel_scans();
    let auto: Vec<(String, String)> = checks(m)
        .into_iter()
        .map(|(q, want)| {
            let got = one(s, &q);
            assert_eq!(got, want, "{stage}: {q}");
            (q, got)
        })
        .collect();
    let auto_cmp: Vec<_> = COMPARED.iter().map(|q| text_rows(s, q)).collect();
    let used = sql.parallel_scans() - before;
    if !m.is_empty() {
        assert!(
            used >= 12,
            "{stage}: the parallel path ran only {used} times"
        );
    }
    s.execute("BEGIN").unwrap();
    for (q, want) in &auto {
        assert_eq!(&one(s, q), want, "{stage} (in a transaction): {q}");
    }
    for (q, p) in COMPARED.iter().zip(&auto_cmp) {
        assert_eq!(&text_rows(s, q), p, "{stage}: {q}");
    }
    s.execute("COMMIT").unwrap();
    assert_eq!(
        sql.parallel_scans() - before,
        used,
        "{stage}: serial in a transaction"
    );
}

#[test]
fn partitioned_aggregates_are_exact() {
    if !parallel_scans_possible() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE p").unwrap();
    s.execute("USE p").unwrap();
    s.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, k INT, c VARCHAR(20), pad CHAR(10), KEY k_1 (k))",
    )
    .unwrap();
    let mut m = Model::new();
    insert(&mut s, &mut m, 1..=20000);
    verify(&sql, &mut s, &m, "loaded");

    // Deletes and updates: tombstones and newer versions over the entries.
    s.execute("DELETE FROM t WHERE id % 5 = 0").unwrap();
    m.retain(|id, _| id % 5 != 0);
    s.execute("UPDATE t SET k = k + 1 WHERE id % 7 = 0 AND k IS NOT NULL")
        .unwrap();
    for (id, v) in m.iter_mut() {
        if id % 7 == 0 {
            v.0 = v.0.map(|k| k + 1);
        }
    }
    verify(&sql, &mut s, &m, "after deletes and updates");

    // The old index's entries go under a range tombstone; a new one is built.
    s.execute("DROP INDEX k_1 ON t").unwrap();
    s.execute("CREATE INDEX k_1 ON t (k)").unwrap();
    verify(&sql, &mut s, &m, "after DROP and CREATE INDEX");

    // TRUNCATE: every entry of the table under range tombstones.
    s.execute("TRUNCATE TABLE t").unwrap();
    m.clear();
    verify(&sql, &mut s, &m, "after TRUNCATE");
    insert(&mut s, &mut m, (1..=30000).filter(|i| i % 3 != 1));
    verify(&sql, &mut s, &m, "refilled after TRUNCATE");
}

#[test]
fn transactions_see_their_own_writes_and_their_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE p").unwrap();
    s.execute("USE p").unwrap();
    s.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, k INT, c VARCHAR(20), pad CHAR(10), KEY k_1 (k))",
    )
    .unwrap();
    let mut m = Model::new();
    insert(&mut s, &mut m, 1..=12000);
    let mut other = sql.session();
    other.execute("USE p").unwrap();

    // Uncommitted writes count in their own transaction only.
    s.execute("BEGIN").unwrap();
    let mut mine = m.clone();
    insert(&mut s, &mut mine, 12001..=13000);
    s.execute("DELETE FROM t WHERE id <= 500").unwrap();
    mine.retain(|id, _| *id > 500);
    s.execute("UPDATE t SET k = 15000 WHERE id BETWEEN 600 AND 700")
        .unwrap();
    for (id, v) in mine.iter_mut() {
        if (600..=700).contains(id) {
            v.0 = Some(15000);
        }
    }
    for (q, want) in checks(&mine) {
        assert_eq!(one(&mut s, &q), want, "own writes: {q}");
    }
    for (q, want) in checks(&m) {
        assert_eq!(one(&mut other, &q), want, "another session: {q}");
    }
    s.execute("COMMIT").unwrap();
    for (q, want) in checks(&mine) {
        assert_eq!(one(&mut other, &q), want, "after commit: {q}");
    }

    // A transaction keeps reading its snapshot while others commit.
    other.execute("BEGIN").unwrap();
    let q = "SELECT COUNT(*), SUM(k) FROM t WHERE k > 10000";
    let seen = one(&mut other, q);
    s.execute("DELETE FROM t WHERE k > 18000").unwrap();
    mine.retain(|_, v| v.0.is_none_or(|k| k <= 18000));
    assert_eq!(one(&mut other, q), seen, "repeatable read");
    other.execute("COMMIT").unwrap();
    for (q, want) in checks(&mine) {
        assert_eq!(one(&mut other, &q), want, "after the delete: {q}");
    }
}
