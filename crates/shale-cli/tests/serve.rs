//! `shale serve` as an operator runs it: started on a free loopback port,
//! driven with the real `mariadb` client, stopped with SIGTERM or kill -9.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

#[allow(dead_code)] // each test file uses part of the helpers
mod common;

use common::Served;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn tables_over_the_wire_survive_sigterm_and_kill9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Served::start(&data, Some("rootpw"));
    s.ok(
        "root",
        "rootpw",
        "CREATE DATABASE shop; USE shop; \
         CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL); \
         INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three');",
    );
    assert_eq!(
        s.ok(
            "root",
            "rootpw",
            "SELECT id, name FROM shop.t WHERE id >= 2 ORDER BY id"
        ),
        "id\tname\n2\ttwo\n3\tthree\n"
    );
    let e = s.fails("root", "rootpw", "INSERT INTO shop.t VALUES (1, 'again')");
    assert!(e.contains("ERROR 1062 (23000)"), "{e}");
    let e = s.fails("root", "wrong", "SELECT 1");
    assert!(e.contains("ERROR 1045 (28000)"), "{e}");
    let (clean, stderr) = s.terminate();
    assert!(clean, "SIGTERM exit: {stderr:?}");
    assert!(
        stderr.iter().any(|l| l.contains("shut down cleanly")),
        "{stderr:?}"
    );

    // Restart: the rows are there; then commit one more, leave one
    // uncommitted in an open transaction, and kill -9.
    let s = Served::start(&data, None);
    assert_eq!(
        s.ok("root", "rootpw", "SELECT COUNT(*) FROM shop.t"),
        "COUNT(*)\n3\n"
    );
    s.ok("root", "rootpw", "INSERT INTO shop.t VALUES (4, 'four')");
    let mut open_txn = Command::new("mariadb")
        .args(["--no-defaults", "-h", "127.0.0.1", "-P"])
        .arg(s.port.to_string())
        // --unbuffered: the client flushes each result at once (a pipe
        // would otherwise hold it until exit).
        .args(["-u", "root", "-prootpw", "--batch", "--unbuffered"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = open_txn.stdin.take().unwrap();
    writeln!(
        stdin,
        "BEGIN; INSERT INTO shop.t VALUES (5, 'five'); SELECT 'inserted';"
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut first = String::new();
    BufReader::new(open_txn.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    s.kill9();
    drop(stdin);
    let _ = open_txn.wait();

    let s = Served::start(&data, None);
    assert_eq!(
        s.ok("root", "rootpw", "SELECT id FROM shop.t ORDER BY id"),
        "id\n1\n2\n3\n4\n"
    );
    let (clean, _) = s.terminate();
    assert!(clean);
}

#[test]
fn generated_root_password_and_grants() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Served::start(&data, None);
    let line = s
        .stderr
        .recv_timeout(Duration::from_secs(10))
        .expect("the generated password is printed");
    let pw = line
        .rsplit(": ")
        .next()
        .filter(|_| line.contains("generated password"))
        .unwrap_or_else(|| panic!("unexpected line: {line}"))
        .to_owned();
    assert_eq!(pw.len(), 20);
    // No password, or an empty one, never gets in.
    assert!(s.fails("root", "", "SELECT 1").contains("1045"));
    s.ok(
        "root",
        &pw,
        "CREATE DATABASE shop; CREATE TABLE shop.t (id INT PRIMARY KEY); \
         INSERT INTO shop.t VALUES (7); \
         CREATE USER 'app'@'%' IDENTIFIED BY 'apppw'; \
         GRANT SELECT ON shop.* TO 'app'@'%';",
    );
    assert_eq!(s.ok("app", "apppw", "SELECT id FROM shop.t"), "id\n7\n");
    let e = s.fails("app", "apppw", "USE shop; INSERT INTO t VALUES (8)");
    assert!(e.contains("ERROR 1142 (42000)"), "{e}");
    // CHECK TABLE needs SELECT, OPTIMIZE TABLE INSERT, in the table's database.
    assert!(s
        .ok("app", "apppw", "CHECK TABLE shop.t")
        .contains("status\tOK"));
    let e = s.fails("app", "apppw", "OPTIMIZE TABLE shop.t");
    assert!(e.contains("ERROR 1142 (42000)"), "{e}");
    let e = s.fails("app", "apppw", "USE shop; OPTIMIZE TABLE t");
    assert!(e.contains("ERROR 1142 (42000)"), "{e}");
    let e = s.fails("app", "apppw", "CHECK TABLE mysql.user");
    assert!(e.contains("ERROR 1142"), "{e}");
    assert_eq!(
        s.ok("app", "apppw", "SHOW GRANTS"),
        "Grants for app@%\nGRANT USAGE ON *.* TO `app`@`%`\nGRANT SELECT ON `shop`.* TO `app`@`%`\n"
    );
    s.ok("root", &pw, "REVOKE SELECT ON shop.* FROM 'app'@'%'");
    let e = s.fails("app", "apppw", "SELECT id FROM shop.t");
    assert!(e.contains("ERROR 1142"), "{e}");
    let (clean, _) = s.terminate();
    assert!(clean);
    // A second start creates no new root and prints no password.
    let s = Served::start(&data, None);
    assert_eq!(s.ok("root", &pw, "SELECT 1 AS x"), "x\n1\n");
    let (clean, stderr) = s.terminate();
    assert!(clean);
    assert!(!stderr.iter().any(|l| l.contains("password")), "{stderr:?}");
}

/// sysbench's OLTP read/write workload (prepared statements, transactions,
/// secondary-index updates, delete + re-insert) against `shale serve`,
/// bounded to a few seconds; afterwards the row count and the secondary
/// index still agree with the table.
#[test]
fn sysbench_oltp_read_write_runs_clean() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::start(&dir.path().join("data"), Some("pw"));
    s.ok("root", "pw", "CREATE DATABASE sbtest");
    let sysbench = |args: &[&str]| {
        let out = Command::new("sysbench")
            .arg("oltp_read_write")
            .args([
                "--db-driver=mysql",
                "--mysql-host=127.0.0.1",
                "--mysql-user=root",
                "--mysql-password=pw",
            ])
            .arg(format!("--mysql-port={}", s.port))
            .args(["--mysql-db=sbtest", "--tables=1", "--table-size=2000"])
            .args(args)
            .output()
            .expect("sysbench (scripts/install-deps.sh installs it)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "sysbench {args:?}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    sysbench(&["prepare"]);
    let run = sysbench(&["--threads=2", "--time=4", "run"]);
    let transactions: u64 = run
        .lines()
        .find_map(|l| l.trim().strip_prefix("transactions:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no transaction count in:\n{run}"));
    assert!(transactions > 0, "{run}");
    // Each transaction deletes a row and inserts it again: the count holds,
    // and a count through the k_1 index equals a count through the table.
    assert_eq!(
        s.ok("root", "pw", "SELECT COUNT(*) FROM sbtest.sbtest1"),
        "COUNT(*)\n2000\n"
    );
    assert_eq!(
        s.ok(
            "root",
            "pw",
            "SELECT COUNT(*) FROM sbtest.sbtest1 WHERE k BETWEEN -2147483648 AND 2147483647"
        ),
        "COUNT(*)\n2000\n"
    );
    let explain = s.ok(
        "root",
        "pw",
        "EXPLAIN SELECT COUNT(*) FROM sbtest.sbtest1 WHERE k BETWEEN -2147483648 AND 2147483647",
    );
    assert!(explain.contains("range\tk_1"), "{explain}");
    sysbench(&["cleanup"]);
    let (clean, stderr) = s.terminate();
    assert!(clean, "{stderr:?}");
}

/// kill -9 while DDL runs (index builds and drops, instant column changes,
/// OPTIMIZE TABLE rewriting rows and dropping schema versions):
/// after every restart the table has all its rows and CHECK TABLE finds
/// every index complete and in step with them (a half-built index is
/// never published; a dropped one leaves no entries behind).
#[test]
fn ddl_survives_kill9_at_any_moment() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Served::start(&data, Some("pw"));
    let mut load = String::from(
        "CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(20));",
    );
    for chunk in 0..6 {
        load.push_str("INSERT INTO d.t VALUES ");
        let rows: Vec<String> = (0..500)
            .map(|i| {
                let id = chunk * 500 + i;
                format!("({id}, {}, 'b{}')", id % 97, id % 13)
            })
            .collect();
        load.push_str(&rows.join(","));
        load.push(';');
    }
    s.ok("root", "pw", &load);
    let mut s = Some(s);
    for cycle in 0..6u64 {
        let server = s.take().unwrap();
        let mut ddl = String::new();
        for round in 0..20 {
            ddl.push_str(&format!(
                "CREATE INDEX ia ON d.t (a); ALTER TABLE d.t ADD COLUMN c{round} INT DEFAULT {round}; \
                 OPTIMIZE TABLE d.t; \
                 CREATE UNIQUE INDEX ib ON d.t (b, id); DROP INDEX ia ON d.t; \
                 ALTER TABLE d.t DROP COLUMN c{round}; DROP INDEX ib ON d.t;"
            ));
        }
        let mut client = Command::new("mariadb")
            .args(["--no-defaults", "-h", "127.0.0.1", "-P"])
            .arg(server.port.to_string())
            .args(["-u", "root", "-ppw", "--batch", "--force"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        client
            .stdin
            .take()
            .unwrap()
            .write_all(ddl.as_bytes())
            .unwrap();
        std::thread::sleep(Duration::from_millis(40 + cycle * 45));
        server.kill9();
        let _ = client.wait();
        let restarted = Served::start(&data, None);
        assert_eq!(
            restarted.ok("root", "pw", "SELECT COUNT(*) FROM d.t"),
            "COUNT(*)\n3000\n",
            "cycle {cycle}"
        );
        // Rows rewritten under a new schema version by OPTIMIZE TABLE
        // (and old versions dropped) still read the same.
        assert_eq!(
            restarted.ok("root", "pw", "SELECT SUM(a), COUNT(DISTINCT b) FROM d.t"),
            "SUM(a)\tCOUNT(DISTINCT b)\n143685\t13\n",
            "cycle {cycle}"
        );
        let check = restarted.ok("root", "pw", "CHECK TABLE d.t");
        assert!(
            check.ends_with("d.t\tcheck\tstatus\tOK\n"),
            "cycle {cycle}: {check}"
        );
        // Leave no index or column behind for the next cycle's script.
        let create = restarted.ok("root", "pw", "SHOW CREATE TABLE d.t");
        let cols = restarted.ok("root", "pw", "SHOW COLUMNS FROM d.t");
        eprintln!(
            "cycle {cycle}: killed with index ia {}, ib {}, {} added columns",
            create.contains("KEY `ia`"),
            create.contains("KEY `ib`"),
            cols.lines().filter(|l| l.starts_with('c')).count()
        );
        for ix in ["ia", "ib"] {
            if create.contains(&format!("KEY `{ix}`")) {
                restarted.ok("root", "pw", &format!("DROP INDEX {ix} ON d.t"));
            }
        }
        for line in cols.lines().skip(1) {
            let name = line.split('\t').next().unwrap();
            if name.starts_with('c') {
                restarted.ok("root", "pw", &format!("ALTER TABLE d.t DROP COLUMN {name}"));
            }
        }
        s = Some(restarted);
    }
    let (clean, _) = s.take().unwrap().terminate();
    assert!(clean);
}

/// A prepared XA transaction survives kill -9 of the server: after the
/// restart XA RECOVER lists it, its row is not visible until another
/// connection commits it; a second one is rolled back.
#[test]
fn xa_prepared_survives_kill9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Served::start(&data, Some("pw"));
    s.ok(
        "root",
        "pw",
        "CREATE DATABASE x; CREATE TABLE x.t (id INT PRIMARY KEY, v VARCHAR(10))",
    );
    s.ok(
        "root",
        "pw",
        "XA START 'keep'; INSERT INTO x.t VALUES (1, 'kept'); XA END 'keep'; XA PREPARE 'keep';",
    );
    s.ok(
        "root",
        "pw",
        "XA START 'drop'; INSERT INTO x.t VALUES (2, 'dropped'); XA END 'drop'; XA PREPARE 'drop';",
    );
    s.kill9();
    let s = Served::start(&data, None);
    let recovered = s.ok("root", "pw", "XA RECOVER");
    assert!(
        recovered.contains("keep") && recovered.contains("drop"),
        "{recovered}"
    );
    assert_eq!(
        s.ok("root", "pw", "SELECT COUNT(*) FROM x.t"),
        "COUNT(*)\n0\n"
    );
    s.ok("root", "pw", "XA COMMIT 'keep'; XA ROLLBACK 'drop';");
    assert_eq!(
        s.ok("root", "pw", "SELECT id, v FROM x.t"),
        "id\tv\n1\tkept\n"
    );
    let e = s.fails("root", "pw", "XA COMMIT 'keep'");
    assert!(e.contains("ERROR 1397"), "{e}");
    let (clean, _) = s.terminate();
    assert!(clean);
}

/// `shale serve --redis-port`: the Redis endpoint beside the MySQL one on
/// the same database, with the root password, driven with redis-cli; its
/// data survives a restart; never without a password.
#[test]
fn redis_endpoint_beside_mysql() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Served::start_with(&data, Some("pw"), &["--redis-port", "0"]);
    let line = s.stdout.recv_timeout(Duration::from_secs(10)).unwrap();
    let rport: u16 = line
        .strip_prefix("ShaleDB Redis endpoint on 127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected line: {line}"))
        .parse()
        .unwrap();
    let cli = |args: &[&str]| -> String {
        let out = Command::new("redis-cli")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &rport.to_string(),
                "--no-auth-warning",
                "-a",
                "pw",
            ])
            .args(args)
            .output()
            .expect("redis-cli (scripts/install-deps.sh installs redis-tools)");
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    };
    assert_eq!(cli(&["SET", "greeting", "hello"]), "OK");
    assert_eq!(cli(&["HSET", "h", "a", "1", "b", "2"]), "2");
    assert_eq!(cli(&["GET", "greeting"]), "hello");
    // SQL on the same server still works.
    s.ok(
        "root",
        "pw",
        "CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY); INSERT INTO d.t VALUES (1)",
    );
    // Without the password: NOAUTH.
    let out = Command::new("redis-cli")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &rport.to_string(),
            "GET",
            "greeting",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("NOAUTH"),
        "{out:?}"
    );
    let (clean, stderr) = s.terminate();
    assert!(clean, "{stderr:?}");
    let s = Served::start_with(&data, Some("pw"), &["--redis-port", &rport.to_string()]);
    let _ = s.stdout.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(cli(&["GET", "greeting"]), "hello");
    assert_eq!(cli(&["HGET", "h", "b"]), "2");
    assert_eq!(s.ok("root", "pw", "SELECT id FROM d.t"), "id\n1\n");
    let (clean, _) = s.terminate();
    assert!(clean);
    // No password to give the endpoint: refused at start.
    let out = Command::new(env!("CARGO_BIN_EXE_shale"))
        .arg("--db")
        .arg(&data)
        .args(["serve", "--port", "0", "--redis-port", "0"])
        .env_remove("SHALE_ROOT_PASSWORD")
        .env_remove("SHALE_REDIS_PASSWORD")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--redis-port needs a password"),
        "{out:?}"
    );
}
