//! Helpers shared by the SQL integration tests: open a database on a
//! directory, run a statement and take its rows.
//!
//! Every test binary compiles this module on its own and uses a subset of
//! it, so a helper one binary leaves unused would be dead code there: the
//! helpers not every including file calls carry an item-level
//! `#[allow(dead_code)]` (never a module- or crate-wide one, so a helper
//! no file uses any more still shows).

use shale_sql::{Database, Datum, Output, Session};
use std::path::Path;

/// The engine and the SQL layer on `dir`, with default options.
pub fn open(dir: &Path) -> Database {
    let db = shaledb::Db::open(dir, shaledb::Options::default()).unwrap();
    Database::open(db).unwrap()
}

/// The rows `sql` returns; panics (the test fails) on an error or on a
/// statement that returns no rows.
#[allow(dead_code)] // see the module doc
pub fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Datum>> {
    match s.execute(sql).unwrap() {
        Output::Rows { rows, .. } => rows,
        other => panic!("{sql}: rows expected, got {other:?}"),
    }
}

/// The rows `sql` returns as text, `NULL` for NULL: for comparing answers
/// of two plans, or with values computed by the test.
#[allow(dead_code)] // see the module doc
pub fn text_rows(s: &mut Session, sql: &str) -> Vec<Vec<String>> {
    rows(s, sql)
        .iter()
        .map(|r| {
            r.iter()
                .map(|d| d.to_text().unwrap_or_else(|| "NULL".into()))
                .collect()
        })
        .collect()
}

/// The first value of the first row `sql` returns.
#[allow(dead_code)] // see the module doc
pub fn scalar(s: &mut Session, sql: &str) -> Datum {
    rows(s, sql)[0][0].clone()
}

/// The first value of the first row `sql` returns, which must be an INT
/// (a COUNT, or an integer column read as `n + 0`).
#[allow(dead_code)] // see the module doc
pub fn count(s: &mut Session, sql: &str) -> i64 {
    match scalar(s, sql) {
        Datum::Int(n) => n,
        other => panic!("{sql}: an INT expected, got {other:?}"),
    }
}

/// Whether a partitioned scan can run in parallel here; on one CPU it never
/// does, and a test comparing it with the serial path has nothing to
/// compare (it says so and passes).
#[allow(dead_code)] // see the module doc
pub fn parallel_scans_possible() -> bool {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("one CPU: the parallel path is never taken; nothing to compare");
        return false;
    }
    true
}
