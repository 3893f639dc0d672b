//! Aggregates over a parallel partitioned scan (autocommit) equal the same
//! aggregates computed serially (inside a transaction), and the parallel
//! path is really taken.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;

use common::{open, parallel_scans_possible, text_rows};

#[test]
fn parallel_aggregates_equal_serial_ones() {
    if !parallel_scans_possible() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE p").unwrap();
    s.execute("USE p").unwrap();
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, d DECIMAL(10,2), f DOUBLE, c VARCHAR(10))").unwrap();
    for chunk in 0..20 {
        let values: Vec<String> = (0..1000)
            .map(|i| {
                let id = chunk * 1000 + i + 1;
                let d = if id % 7 == 0 {
                    "NULL".to_owned()
                } else {
                    format!("{}.{:02}", id % 100, id % 97)
                };
                format!(
                    "({id}, {}, {d}, {}, 'c{}')",
                    id % 13,
                    f64::from(id) / 8.0,
                    id % 10
                )
            })
            .collect();
        s.execute(&format!("INSERT INTO t VALUES {}", values.join(",")))
            .unwrap();
    }
    let queries = [
        "SELECT COUNT(*), SUM(k), MIN(d), MAX(d), SUM(d), AVG(d), SUM(f), COUNT(d) FROM t",
        "SELECT COUNT(*), SUM(k) FROM t WHERE c = 'c3' AND k > 4",
        "SELECT k, COUNT(*), SUM(d), MAX(c) FROM t GROUP BY k ORDER BY k",
        "SELECT c, AVG(k) FROM t WHERE id BETWEEN 2500 AND 17000 GROUP BY c HAVING COUNT(*) > 100 ORDER BY c",
        "SELECT SUM(k) FROM t WHERE id > 19990",
    ];
    let before = sql.parallel_scans();
    let parallel: Vec<_> = queries.iter().map(|q| text_rows(&mut s, q)).collect();
    let used = sql.parallel_scans() - before;
    assert!(used >= 4, "the parallel path ran {used} times");
    s.execute("BEGIN").unwrap();
    let serial: Vec<_> = queries.iter().map(|q| text_rows(&mut s, q)).collect();
    s.execute("COMMIT").unwrap();
    assert_eq!(
        sql.parallel_scans() - before,
        used,
        "inside a transaction the scan is serial"
    );
    for ((q, p), se) in queries.iter().zip(&parallel).zip(&serial) {
        // DOUBLE sums may differ in the last bits by summation order.
        let norm = |v: &Vec<Vec<String>>| -> Vec<Vec<String>> {
            v.iter()
                .map(|r| {
                    r.iter()
                        .map(|x| x.parse::<f64>().map_or(x.clone(), |f| format!("{f:.6}")))
                        .collect()
                })
                .collect()
        };
        assert_eq!(norm(p), norm(se), "{q}");
    }
    assert_eq!(parallel[0][0][0], "20000");
}
