//! Runs the sqllogictest-format scripts in tests/slt/ through the embedded
//! SQL API, each on a fresh database.
//!
//! Format (a subset of sqllogictest):
//!
//! ```text
//! statement ok                 the next statement must succeed
//! statement error 1062         ... must fail with this MySQL error code
//! query [rowsort]              the next statement's rows must equal the
//! <sql>                        lines after `----`: one row per line,
//! ----                         values separated by one space, NULL for
//! 1 bolt                       NULL, (empty) for an empty string
//! reopen                       close and reopen the database
//! ```
//!
//! Blank lines end a record; `#` starts a comment line. Expected results
//! were written from MySQL semantics; `bench/slt_mariadb.py` runs the same
//! scripts against MariaDB 10.11 (utf8mb4_bin) and lists every record it
//! answers differently (the deliberate differences are in docs/tables.md).

// Test code: a panic is a test failure with its message.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use shale_sql::{Database, Datum, Output};
use std::path::Path;

fn render(d: &Datum) -> String {
    match d {
        Datum::Null => "NULL".into(),
        other => {
            let t = other.to_text().unwrap_or_default();
            if t.is_empty() {
                "(empty)".into()
            } else {
                t
            }
        }
    }
}

struct Record {
    line: usize,
    kind: String,
    sql: String,
    expected: Vec<String>,
}

fn parse(text: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_end();
        if l.is_empty() || l.starts_with('#') {
            i += 1;
            continue;
        }
        let start = i + 1;
        let kind = l.to_owned();
        i += 1;
        if kind == "reopen" {
            out.push(Record {
                line: start,
                kind,
                sql: String::new(),
                expected: Vec::new(),
            });
            continue;
        }
        let mut sql = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() && lines[i].trim() != "----" {
            sql.push(lines[i]);
            i += 1;
        }
        let mut expected = Vec::new();
        if i < lines.len() && lines[i].trim() == "----" {
            i += 1;
            while i < lines.len() && !lines[i].trim().is_empty() {
                expected.push(lines[i].trim_end().to_owned());
                i += 1;
            }
        }
        out.push(Record {
            line: start,
            kind,
            sql: sql.join("\n"),
            expected,
        });
    }
    out
}

fn run_file(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).expect("read script");
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || {
        let db = shaledb::Db::open(dir.path(), shaledb::Options::default()).expect("open engine");
        Database::open(db).expect("open sql")
    };
    let mut sql = open();
    let mut s = sql.session();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let records = parse(&text);
    for r in &records {
        let at = format!("{name}:{}", r.line);
        if r.kind == "reopen" {
            let db = s.current_database().map(str::to_owned);
            drop(s);
            let engine = sql.engine().clone();
            drop(sql);
            engine.close().expect("close");
            sql = open();
            s = sql.session();
            if let Some(db) = db {
                s.set_database(&db).expect("use after reopen");
            }
            continue;
        }
        let result = s.execute(&r.sql);
        let words: Vec<&str> = r.kind.split_whitespace().collect();
        match words.as_slice() {
            ["statement", "ok"] => {
                if let Err(e) = result {
                    panic!(
                        "{at}: expected ok, got error {} ({e}) for\n{}",
                        e.mysql_code(),
                        r.sql
                    );
                }
            }
            ["statement", "error", code] => match result {
                Ok(_) => panic!(
                    "{at}: expected error {code}, statement succeeded:\n{}",
                    r.sql
                ),
                Err(e) => assert_eq!(
                    e.mysql_code().to_string(),
                    *code,
                    "{at}: wrong error ({e}) for\n{}",
                    r.sql
                ),
            },
            ["query", rest @ ..] => {
                let out = result.unwrap_or_else(|e| {
                    panic!("{at}: query failed: {} ({e})\n{}", e.mysql_code(), r.sql)
                });
                let Output::Rows { rows, .. } = out else {
                    panic!("{at}: no result set")
                };
                let mut got: Vec<String> = rows
                    .iter()
                    .map(|row| row.iter().map(render).collect::<Vec<_>>().join(" "))
                    .collect();
                let mut want = r.expected.clone();
                if rest.contains(&"rowsort") {
                    got.sort();
                    want.sort();
                }
                assert_eq!(got, want, "{at}: wrong result for\n{}", r.sql);
            }
            other => panic!("{at}: unknown record kind {other:?}"),
        }
    }
    records.len()
}

#[test]
fn sqllogictest_scripts() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("slt dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scripts in {}", dir.display());
    let mut total = 0;
    for f in &files {
        let n = run_file(f);
        eprintln!("{}: {n} records", f.display());
        total += n;
    }
    eprintln!("sqllogictest: {total} records in {} files", files.len());
}
