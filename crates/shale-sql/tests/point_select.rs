//! The short way for point selects (src/point_select.rs): streamed, as the
//! server runs every query, a SELECT that reads one row by its whole
//! primary key skips the general executor. Its answers must be the general
//! path's: a collecting sink (`Session::execute`) never takes the short
//! way, so each statement runs both ways here and the columns, rows and
//! errors are compared. The statements cover what the short way checks per
//! run: a missing row, a WHERE conjunct that fails, NULL and inexact keys,
//! LIMIT 0, a transaction's own writes, rows of an older schema version,
//! a composite key, and a prepared statement's cached plan.

// Test code: a panic is a test failure with its message.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

mod common;

use common::open;
use shale_sql::{ColumnMeta, Datum, Output, ResultSink, Session};

/// A streaming sink that keeps what it is sent.
#[derive(Default)]
struct Keep {
    columns: Option<Vec<ColumnMeta>>,
    rows: Vec<Vec<Datum>>,
}

impl ResultSink for Keep {
    fn columns(&mut self, columns: &[ColumnMeta]) -> shale_sql::Result<()> {
        assert!(self.columns.is_none(), "columns come once, first");
        self.columns = Some(columns.to_vec());
        Ok(())
    }
    fn row(&mut self, row: Vec<Datum>) -> shale_sql::Result<()> {
        assert!(self.columns.is_some(), "columns come before rows");
        self.rows.push(row);
        Ok(())
    }
}

type Answer = Result<(Vec<ColumnMeta>, Vec<Vec<Datum>>), u16>;

fn collected(out: shale_sql::Result<Output>) -> Answer {
    match out {
        Ok(Output::Rows { columns, rows }) => Ok((columns, rows)),
        Ok(other) => panic!("rows expected, got {other:?}"),
        Err(e) => Err(e.mysql_code()),
    }
}

fn streamed(out: shale_sql::Result<Output>, sink: Keep) -> Answer {
    match out {
        Ok(_) => Ok((sink.columns.expect("columns sent"), sink.rows)),
        Err(e) => Err(e.mysql_code()),
    }
}

/// `sql` streamed and collected: the same answer, which is returned.
fn both(s: &mut Session, sql: &str) -> Answer {
    let mut sink = Keep::default();
    let out = s.execute_streaming(sql, &mut sink);
    let fast = streamed(out, sink);
    let general = collected(s.execute(sql));
    assert_eq!(fast, general, "{sql}");
    fast
}

fn setup(s: &mut Session) {
    s.execute("CREATE DATABASE d").unwrap();
    s.execute("USE d").unwrap();
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(40), c BIGINT NOT NULL)")
        .unwrap();
    let values: Vec<String> = (1..=200)
        .map(|i| {
            let a = if i % 10 == 0 {
                "NULL".into()
            } else {
                (i % 7).to_string()
            };
            format!("({i}, {a}, 'row-{i}', {})", i * 100)
        })
        .collect();
    s.execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))
        .unwrap();
}

fn rows_of(a: &Answer) -> &[Vec<Datum>] {
    &a.as_ref().unwrap().1
}

#[test]
fn point_selects_answer_as_the_general_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut s = db.session();
    setup(&mut s);
    let found = both(&mut s, "SELECT b FROM t WHERE id = 5");
    assert_eq!(rows_of(&found), [vec![Datum::text("row-5")]]);
    // Every column, in another order, with the key among them.
    let found = both(&mut s, "SELECT c, id, b, a FROM t WHERE id = 8");
    assert_eq!(
        rows_of(&found),
        [vec![
            Datum::Int(800),
            Datum::Int(8),
            Datum::text("row-8"),
            Datum::Int(1)
        ]]
    );
    assert!(both(&mut s, "SELECT * FROM t WHERE id = 10").is_ok()); // a NULL column
    assert!(rows_of(&both(&mut s, "SELECT b FROM t WHERE id = 100000")).is_empty());
    // Conjuncts beyond the key are still evaluated on the row.
    assert!(rows_of(&both(&mut s, "SELECT b FROM t WHERE id = 5 AND a = 99")).is_empty());
    assert!(rows_of(&both(&mut s, "SELECT b FROM t WHERE id = 10 AND a = 1")).is_empty());
    let hit = both(&mut s, "SELECT b FROM t WHERE id = 5 AND b LIKE 'row-%'");
    assert_eq!(rows_of(&hit).len(), 1);
    let hit = both(&mut s, "SELECT b FROM t WHERE 5 = id AND c > 1");
    assert_eq!(rows_of(&hit).len(), 1);
    // No key (NULL), a key that does not convert exactly (a range read by
    // the general path), a string key that does.
    assert!(rows_of(&both(&mut s, "SELECT b FROM t WHERE id = NULL")).is_empty());
    assert!(rows_of(&both(&mut s, "SELECT b FROM t WHERE id = 5.5")).is_empty());
    assert_eq!(
        rows_of(&both(&mut s, "SELECT b FROM t WHERE id = '7'")).len(),
        1
    );
    assert!(rows_of(&both(&mut s, "SELECT b FROM t WHERE id = 5 LIMIT 0")).is_empty());
    assert_eq!(
        rows_of(&both(&mut s, "SELECT b FROM t WHERE id = 5 LIMIT 1")).len(),
        1
    );
    // Not point selects: computed columns, a lock, an aggregate.
    assert!(both(&mut s, "SELECT b, c + 1 FROM t WHERE id = 5").is_ok());
    assert!(both(&mut s, "SELECT COUNT(*) FROM t WHERE id = 5").is_ok());
    // An error is the general path's too.
    assert_eq!(both(&mut s, "SELECT nope FROM t WHERE id = 5"), Err(1054));
}

#[test]
fn point_selects_see_own_writes_and_old_schema_versions() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut s = db.session();
    setup(&mut s);
    s.execute("BEGIN").unwrap();
    s.execute("UPDATE t SET b = 'mine' WHERE id = 5").unwrap();
    s.execute("DELETE FROM t WHERE id = 6").unwrap();
    s.execute("INSERT INTO t VALUES (1000, 1, 'new', 1)")
        .unwrap();
    let mine = both(&mut s, "SELECT b FROM t WHERE id = 5");
    assert_eq!(rows_of(&mine), [vec![Datum::text("mine")]]);
    assert!(rows_of(&both(&mut s, "SELECT b FROM t WHERE id = 6")).is_empty());
    assert_eq!(
        rows_of(&both(&mut s, "SELECT b FROM t WHERE id = 1000")).len(),
        1
    );
    s.execute("ROLLBACK").unwrap();
    let back = both(&mut s, "SELECT b FROM t WHERE id = 5");
    assert_eq!(rows_of(&back), [vec![Datum::text("row-5")]]);
    // Rows written before a column was added decode through the old
    // version's layout; rows written after through the current one.
    s.execute("ALTER TABLE t ADD COLUMN e INT DEFAULT 3")
        .unwrap();
    s.execute("INSERT INTO t VALUES (2000, 2, 'after', 2, 9)")
        .unwrap();
    let old = both(&mut s, "SELECT e, b FROM t WHERE id = 5");
    assert_eq!(rows_of(&old), [vec![Datum::Int(3), Datum::text("row-5")]]);
    let new = both(&mut s, "SELECT e, b FROM t WHERE id = 2000");
    assert_eq!(rows_of(&new), [vec![Datum::Int(9), Datum::text("after")]]);
    // A composite primary key: the short way needs all of it.
    s.execute("CREATE TABLE u (x INT, y VARCHAR(10), v INT, PRIMARY KEY (x, y))")
        .unwrap();
    s.execute("INSERT INTO u VALUES (1, 'a', 10), (1, 'b', 11), (2, 'a', 20)")
        .unwrap();
    let one = both(&mut s, "SELECT v FROM u WHERE x = 1 AND y = 'b'");
    assert_eq!(rows_of(&one), [vec![Datum::Int(11)]]);
    let prefix = both(&mut s, "SELECT v FROM u WHERE x = 1");
    assert_eq!(rows_of(&prefix).len(), 2);
}

#[test]
fn prepared_point_selects_answer_as_the_general_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut s = db.session();
    setup(&mut s);
    let stmt = s.prepare("SELECT b, c FROM t WHERE id = ?").unwrap();
    // Twice round: the second runs the plan the first kept.
    for _ in 0..2 {
        for p in [
            Datum::Int(5),
            Datum::Int(100000),
            Datum::Null,
            Datum::text("7"),
            Datum::Int(10),
        ] {
            let params = [p.clone()];
            let mut sink = Keep::default();
            let out = s.execute_prepared_streaming(&stmt, &params, &mut sink);
            let fast = streamed(out, sink);
            let general = collected(s.execute_prepared(&stmt, &params));
            assert_eq!(fast, general, "{p:?}");
        }
    }
    let mut sink = Keep::default();
    s.execute_prepared_streaming(&stmt, &[Datum::Int(9)], &mut sink)
        .unwrap();
    assert_eq!(sink.rows, [vec![Datum::text("row-9"), Datum::Int(900)]]);
}
