//! `shale sql`: statements from -e and stdin, mysql-style output, errors
//! with code, SQLSTATE and line, and the data there on the next run.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use std::io::Write;
use std::process::{Command, Stdio};

fn shale(dir: &std::path::Path, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .arg("--db")
        .arg(dir)
        .arg("--create")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sql_from_argument_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out, err) = shale(
        &db,
        &["sql", "-e", "CREATE DATABASE a; CREATE TABLE a.t (id INT PRIMARY KEY, n VARCHAR(10)); INSERT INTO a.t VALUES (1, 'x'), (2, NULL); SELECT * FROM a.t"],
        "",
    );
    assert!(ok, "{err}");
    assert!(out.contains("Query OK, 2 rows affected"), "{out}");
    assert!(
        out.contains("| id | n    |\n+----+------+\n| 1  | x    |\n| 2  | NULL |"),
        "{out}"
    );
    assert!(out.contains("2 rows in set"), "{out}");
    // A new process: the data is there; stdin, batch output.
    let (ok, out, err) = shale(
        &db,
        &["sql", "--batch"],
        "USE a;\nSELECT n FROM t\nWHERE id = 1;\n",
    );
    assert!(ok, "{err}");
    assert_eq!(out, "n\nx\n");
    // An error stops the run with its code, SQLSTATE and line.
    let (ok, _, err) = shale(
        &db,
        &["sql"],
        "USE a;\nSELECT 1;\nSELECT nope FROM t;\nSELECT 2;\n",
    );
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "ERROR 1054 (42S22) at line 3: Unknown column 'nope' in 'field list'"
    );
}
