//! Memory-bounded ORDER BY, GROUP BY and hash joins (docs/tables.md,
//! "Memory-bounded sorts, groups and joins"): with tiny bounds a few
//! thousand rows spill to run files; answers must equal the unspilled
//! run's and a model's, and no run file may outlive its statement.

// Test code: a panic is a test failure with its message.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

mod common;

use common::{open, rows};
use proptest::prelude::*;
use shale_sql::{ColumnMeta, Datum, Output, ResultSink, Session};
use std::cmp::Ordering;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Run files left in the database's temporary directory.
fn leftovers(dir: &Path) -> usize {
    match std::fs::read_dir(dir.join("tmp")) {
        Ok(d) => d.count(),
        Err(_) => 0,
    }
}

type Row = (i64, Option<i64>, Option<String>, i64);

fn setup(s: &mut Session, data: &[Row]) {
    s.execute("CREATE DATABASE d").unwrap();
    s.execute("USE d").unwrap();
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(40), c BIGINT NOT NULL)")
        .unwrap();
    for chunk in data.chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|(id, a, b, c)| {
                let a = a.map_or("NULL".into(), |v| v.to_string());
                let b = b.as_ref().map_or("NULL".into(), |v| format!("'{v}'"));
                format!("({id}, {a}, {b}, {c})")
            })
            .collect();
        s.execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))
            .unwrap();
    }
}

fn data(n: i64) -> Vec<Row> {
    // A fixed, shuffled-looking spread with NULLs and many ties.
    (0..n)
        .map(|i| {
            let h = (i * 7919 + 13) % 1009;
            let a = (h % 11 != 0).then_some(h % 37 - 18);
            let b =
                (h % 13 != 0).then(|| format!("s{:03}-{}", h % 97, "x".repeat((h % 5) as usize)));
            (i, a, b, (h * 31) % 1000)
        })
        .collect()
}

fn cmp_opt<T: Ord>(a: &Option<T>, b: &Option<T>) -> Ordering {
    // NULL sorts first, as in MySQL.
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => x.cmp(y),
    }
}

fn model(data: &[Row], order: &[(usize, bool)], offset: usize, limit: Option<usize>) -> Vec<i64> {
    let mut rows: Vec<&Row> = data.iter().collect();
    rows.sort_by_key(|r| r.0); // scan order: the primary key
    rows.sort_by(|x, y| {
        for (col, desc) in order {
            let o = match col {
                0 => cmp_opt(&x.1, &y.1),
                1 => cmp_opt(&x.2, &y.2),
                _ => x.3.cmp(&y.3),
            };
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
    rows.into_iter()
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .map(|r| r.0)
        .collect()
}

fn ids(rows: &[Vec<Datum>]) -> Vec<i64> {
    rows.iter()
        .map(|r| match r[0] {
            Datum::Int(n) => n,
            ref other => panic!("id {other:?}"),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// ORDER BY over random key lists (ASC/DESC, NULLs, ties) with
    /// OFFSET/LIMIT: spilled (32 KiB) equals unspilled equals the model,
    /// and no run file is left.
    #[test]
    fn spilled_order_by_equals_the_model(
        order in proptest::collection::vec((0usize..3, any::<bool>()), 1..4),
        offset in prop_oneof![Just(0usize), 0usize..50],
        limit in proptest::option::of(0usize..3000),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let sql = open(dir.path());
        let mut s = sql.session();
        let data = data(2500);
        setup(&mut s, &data);
        let names = ["a", "b", "c"];
        let list: Vec<String> = order
            .iter()
            .map(|(c, d)| format!("{}{}", names[*c], if *d { " DESC" } else { "" }))
            .collect();
        let mut q = format!("SELECT id, a, b, c FROM t ORDER BY {}", list.join(", "));
        if let Some(l) = limit {
            q.push_str(&format!(" LIMIT {l} OFFSET {offset}"));
        }
        let want = model(&data, &order, if limit.is_some() { offset } else { 0 }, limit);
        let big = rows(&mut s, &q);
        s.execute("SET sort_buffer_size = 32768").unwrap();
        let small = rows(&mut s, &q);
        prop_assert_eq!(ids(&small), want);
        prop_assert_eq!(&small, &big);
        prop_assert_eq!(leftovers(dir.path()), 0);
    }
}

/// A sink that keeps what it is given, to compare with `execute`.
#[derive(Default)]
struct Keep {
    columns: Vec<ColumnMeta>,
    rows: Vec<Vec<Datum>>,
}

impl ResultSink for Keep {
    fn columns(&mut self, columns: &[ColumnMeta]) -> shale_sql::Result<()> {
        assert!(
            self.columns.is_empty() && self.rows.is_empty(),
            "columns come first, once"
        );
        self.columns = columns.to_vec();
        Ok(())
    }
    fn row(&mut self, row: Vec<Datum>) -> shale_sql::Result<()> {
        self.rows.push(row);
        Ok(())
    }
}

#[test]
fn streamed_results_equal_collected_ones() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    setup(&mut s, &data(3000));
    s.execute("SET sort_buffer_size = 32768").unwrap();
    s.execute("SET tmp_table_size = 1024").unwrap();
    for q in [
        "SELECT * FROM t",
        "SELECT * FROM t LIMIT 10 OFFSET 5",
        "SELECT id, b FROM t ORDER BY b DESC, a",
        "SELECT id, a + 1, CONCAT(b, '!') FROM t ORDER BY c LIMIT 100",
        "SELECT id * 2 FROM t",
        "SELECT DISTINCT a FROM t ORDER BY a",
        "SELECT a, COUNT(*), SUM(c), MIN(b) FROM t GROUP BY a ORDER BY a",
        "SELECT a FROM t WHERE id < 10 UNION SELECT c FROM t WHERE id < 20 ORDER BY 1",
        "SELECT id FROM t WHERE id < 0 ORDER BY a",
    ] {
        let (columns, want) = match s.execute(q).unwrap() {
            Output::Rows { columns, rows } => (columns, rows),
            other => panic!("{q}: {other:?}"),
        };
        let mut got = Keep::default();
        let out = s.execute_streaming(q, &mut got).unwrap();
        assert_eq!(
            out,
            Output::Rows {
                columns: Vec::new(),
                rows: Vec::new()
            },
            "{q}"
        );
        assert_eq!(got.rows, want, "{q}");
        let names = |c: &[ColumnMeta]| c.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&got.columns), names(&columns), "{q}");
        assert_eq!(leftovers(dir.path()), 0, "{q}");
    }
}

#[test]
fn spilled_group_by_equals_the_hash_group_by() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    setup(&mut s, &data(3000));
    let queries = [
        "SELECT c, COUNT(*), SUM(a), AVG(a), MIN(b), MAX(b), COUNT(DISTINCT a) FROM t GROUP BY c ORDER BY c",
        "SELECT a, b, COUNT(*) FROM t GROUP BY a, b HAVING COUNT(*) > 1 ORDER BY a DESC, b",
        "SELECT c % 100 AS k, id, SUM(c) FROM t GROUP BY k ORDER BY k LIMIT 20 OFFSET 3",
        "SELECT b FROM t GROUP BY b ORDER BY b",
    ];
    let want: Vec<_> = queries.iter().map(|q| rows(&mut s, q)).collect();
    assert!(want[0].len() > 500, "enough groups to overflow");
    s.execute("SET tmp_table_size = 1024").unwrap();
    s.execute("SET sort_buffer_size = 32768").unwrap();
    for (q, w) in queries.iter().zip(&want) {
        assert_eq!(&rows(&mut s, q), w, "{q}");
    }
    // GROUP BY without ORDER BY: the same groups (order is not promised).
    let q = "SELECT a, COUNT(*) FROM t GROUP BY a";
    let mut spilled = rows(&mut s, q);
    s.execute("SET tmp_table_size = 16777216").unwrap();
    let mut hashed = rows(&mut s, q);
    let key = |r: &Vec<Datum>| format!("{r:?}");
    spilled.sort_by_key(key);
    hashed.sort_by_key(key);
    assert_eq!(spilled, hashed);
    assert_eq!(leftovers(dir.path()), 0);
}

#[test]
fn hash_join_over_join_buffer_size_gives_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    setup(&mut s, &data(400));
    s.execute("CREATE TABLE u (id INT PRIMARY KEY, k INT, v VARCHAR(10))")
        .unwrap();
    let values: Vec<String> = (0..300)
        .map(|i| format!("({i}, {}, 'v{i}')", i % 40 - 18))
        .collect();
    s.execute(&format!("INSERT INTO u VALUES {}", values.join(", ")))
        .unwrap();
    let q = "SELECT t.id, u.id, u.v FROM t JOIN u ON u.k = t.a ORDER BY t.id, u.id";
    let plan = rows(&mut s, &format!("EXPLAIN {q}"));
    let extra: Vec<String> = plan
        .iter()
        .map(|r| r.last().and_then(Datum::to_text).unwrap_or_default())
        .collect();
    assert!(extra.iter().any(|e| e.contains("hash join")), "{extra:?}");
    let hashed = rows(&mut s, q);
    assert!(hashed.len() > 1000);
    s.execute("SET join_buffer_size = 128").unwrap();
    assert_eq!(rows(&mut s, q), hashed);
    let left = "SELECT t.id, u.id FROM t LEFT JOIN u ON u.k = t.a ORDER BY t.id, u.id";
    let small = rows(&mut s, left);
    s.execute("SET join_buffer_size = 134217728").unwrap();
    assert_eq!(rows(&mut s, left), small);
}

#[test]
fn run_files_go_after_errors_kills_and_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let sql = open(dir.path());
        let mut s = sql.session();
        setup(&mut s, &data(3000));
        s.execute("CREATE TABLE two (k INT)").unwrap();
        s.execute("INSERT INTO two VALUES (5), (5)").unwrap();
        s.execute("SET sort_buffer_size = 32768").unwrap();
        // Fails once the scan reaches a row with c = 5, after runs were
        // written (the subquery then returns two rows).
        let e = s
            .execute("SELECT id, (SELECT k FROM two WHERE two.k = t.c) FROM t ORDER BY b")
            .unwrap_err();
        assert_eq!(e.mysql_code(), 1242, "{e}");
        assert_eq!(leftovers(dir.path()), 0);
        // KILL QUERY: the flag is seen within 1,024 rows.
        let flag = Arc::new(AtomicBool::new(true));
        s.set_interrupt_flag(flag);
        let e = s.execute("SELECT * FROM t ORDER BY b, a").unwrap_err();
        assert_eq!(e.mysql_code(), 1317, "{e}");
        assert_eq!(leftovers(dir.path()), 0);
        // The statement after works (the flag was cleared).
        assert_eq!(rows(&mut s, "SELECT * FROM t ORDER BY b, a").len(), 3000);
    }
    // What a process killed outright leaves behind goes at the next open.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("shale-1-7.spill"), b"SHLSPILL junk").unwrap();
    std::fs::write(tmp.join("keep.txt"), b"not ours").unwrap();
    let _sql = open(dir.path());
    assert!(!tmp.join("shale-1-7.spill").exists());
    assert!(tmp.join("keep.txt").exists());
}

#[test]
fn sorts_spill_only_past_sort_buffer_size() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    setup(&mut s, &data(3000));
    // A file where the temporary directory should be: any spill fails.
    std::fs::write(dir.path().join("tmp"), b"in the way").unwrap();
    let q = "SELECT * FROM t ORDER BY b";
    assert_eq!(rows(&mut s, q).len(), 3000, "8 MiB: in memory");
    s.execute("SET sort_buffer_size = 32768").unwrap();
    let e = s.execute(q).unwrap_err();
    assert!(matches!(e, shale_sql::Error::TempFile { .. }), "{e}");
    assert_eq!(rows(&mut s, "SELECT * FROM t ORDER BY b LIMIT 5").len(), 5);
    // Too many groups for tmp_table_size: GROUP BY goes through a sort,
    // which spills at this sort_buffer_size.
    let q = "SELECT c, COUNT(*) FROM t GROUP BY c";
    assert!(rows(&mut s, q).len() > 500);
    s.execute("SET tmp_table_size = 1024").unwrap();
    let e = s.execute(q).unwrap_err();
    assert!(matches!(e, shale_sql::Error::TempFile { .. }), "{e}");
    assert_eq!(rows(&mut s, "SELECT COUNT(*) FROM t").len(), 1);
    // A bound below MySQL's minimum is raised to it; non-numbers refused.
    s.execute("SET sort_buffer_size = 1").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT @@sort_buffer_size"),
        vec![vec![Datum::Int(32768)]]
    );
    assert_eq!(
        s.execute("SET sort_buffer_size = 'big'")
            .unwrap_err()
            .mysql_code(),
        1232,
        "a string for a number is the wrong type, as in MySQL"
    );
    std::fs::remove_file(dir.path().join("tmp")).unwrap();
}
