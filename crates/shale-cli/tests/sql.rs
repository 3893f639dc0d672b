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

/// `--batch` prints rows as they come: a sort spilled with the minimum
/// sort buffer streams out of its merge, in order, and leaves no run file.
#[test]
fn batch_output_streams_a_spilled_sort() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let digits: Vec<String> = (0..10).map(|x| format!("({x})")).collect();
    let script = format!(
        "CREATE DATABASE b; USE b; CREATE TABLE d (x INT PRIMARY KEY); \
         INSERT INTO d VALUES {}; \
         CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20)); \
         INSERT INTO t SELECT a.x * 100 + b.x * 10 + c.x, \
           CONCAT('r', (a.x * 100 + b.x * 10 + c.x) * 37 % 101) FROM d a, d b, d c; \
         SET sort_buffer_size = 32768; \
         SELECT id, s FROM t ORDER BY s DESC, id; \
         SHOW VARIABLES LIKE 'sort_buffer_size'",
        digits.join(", ")
    );
    let (ok, out, err) = shale(&db, &["sql", "--batch", "-e", &script], "");
    assert!(ok, "{err}");
    let mut rows: Vec<(i64, String)> = (0..1000)
        .map(|i| (i, format!("r{}", i * 37 % 101)))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut want = String::from("id\ts\n");
    for (id, s) in rows {
        want.push_str(&format!("{id}\t{s}\n"));
    }
    want.push_str("Variable_name\tValue\nsort_buffer_size\t32768\n");
    assert_eq!(out, want);
    let left = std::fs::read_dir(db.join("tmp")).map_or(0, |d| d.count());
    assert_eq!(left, 0, "run files left behind");
}

/// The interactive shell on a terminal (a pseudo-terminal from util-linux's
/// `script`): each line is typed once its prompt is shown; a statement over
/// two lines, an error that does not end the shell, history saved.
#[test]
fn interactive_shell_on_a_terminal() {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let cmd = format!(
        "{} --db {} --create sql",
        env!("CARGO_BIN_EXE_shale"),
        dir.path().display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("util-linux `script` runs the shell on a pseudo-terminal");
    let seen = Arc::new(Mutex::new(String::new()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let prompts = |s: &str| s.matches("shale> ").count() + s.matches("    -> ").count();
    let mut stdin = child.stdin.take().unwrap();
    for (i, line) in [
        "CREATE DATABASE x;",
        "SELECT",
        " 20 + 22 AS answer;",
        "SELECT nope;",
        "exit",
    ]
    .iter()
    .enumerate()
    {
        let until = Instant::now() + Duration::from_secs(30);
        while prompts(&seen.lock().unwrap()) <= i {
            assert!(
                Instant::now() < until,
                "no prompt: {}",
                seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Enter is a carriage return on a terminal in raw mode.
        write!(stdin, "{line}\r").unwrap();
        stdin.flush().unwrap();
    }
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    let out = seen.lock().unwrap().clone();
    assert!(
        out.contains("| answer |") && out.contains("| 42     |"),
        "{out}"
    );
    assert!(out.contains("ERROR 1054 (42S22)"), "{out}");
    let history = std::fs::read_to_string(home.path().join(".shale_sql_history")).unwrap();
    assert!(history.contains("SELECT nope;"), "{history}");
    assert!(history.contains("CREATE DATABASE x;"), "{history}");
}
