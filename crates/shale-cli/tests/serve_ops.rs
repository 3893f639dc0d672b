//! Operator features of `shale serve`, driven by the real `mariadb`
//! client: `SHOW ENGINE SHALE STATUS` and the slow-query log.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

#[allow(dead_code)] // each test file uses part of the helpers
mod common;

use common::Served;
use mysql::prelude::Queryable;
use std::process::Command;

fn connect(port: u16) -> mysql::Conn {
    mysql::Conn::new(
        mysql::OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(port)
            .user(Some("root"))
            .pass(Some("pw"))
            .prefer_socket(false),
    )
    .unwrap()
}

#[test]
fn show_engine_shale_status() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::start(&dir.path().join("data"), Some("pw"));
    s.ok(
        "root",
        "pw",
        "CREATE DATABASE e; CREATE TABLE e.t (id INT PRIMARY KEY, v VARCHAR(10)); \
         INSERT INTO e.t VALUES (1, 'a'), (2, 'b'); \
         XA START 'held'; INSERT INTO e.t VALUES (3, 'c'); XA END 'held'; XA PREPARE 'held';",
    );
    // A session with an open transaction while the status is read.
    let mut open = connect(s.port);
    open.query_drop("BEGIN").unwrap();
    open.query_drop("UPDATE e.t SET v = 'z' WHERE id = 1")
        .unwrap();

    for stmt in [
        "SHOW ENGINE SHALE STATUS",
        "show engine shale status",
        "SHOW ENGINE `ShaleDB` STATUS",
    ] {
        // --raw: the Status text with its newlines, not escaped.
        let out = s.sql_args("root", "pw", &["--raw"], stmt);
        assert!(
            out.status.success(),
            "{stmt}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.starts_with("Type\tName\tStatus\nShale\t\t\n"),
            "{text}"
        );
        for want in [
            "SHALEDB ENGINE STATUS",
            "MEMTABLES\n",
            "LEVELS AND EXTENTS\n",
            "L0: ",
            "COMPACTION\n",
            "BLOCK CACHE\n",
            "\nWAL files ",
            "Sessions in a transaction 1\n",
            "Prepared (XA) transactions 1\n",
            "---XA xid 'held'",
            "BLOB FILES\n",
            "Threads connected 2,",
            "** ShaleDB stats **",
            "END OF SHALEDB ENGINE STATUS",
        ] {
            assert!(text.contains(want), "{want:?} missing:\n{text}");
        }
    }
    open.query_drop("COMMIT").unwrap();
    drop(open);
    let text = s.ok("root", "pw", "SHOW ENGINE SHALE STATUS");
    assert!(text.contains("Sessions in a transaction 0"), "{text}");

    let e = s.fails("root", "pw", "SHOW ENGINE INNODB STATUS");
    assert!(e.contains("ERROR 1286") && e.contains("'INNODB'"), "{e}");
    // PROCESS is needed, as in MySQL.
    s.ok(
        "root",
        "pw",
        "CREATE USER 'r'@'%' IDENTIFIED BY 'rpw'; GRANT SELECT ON e.* TO 'r'@'%'",
    );
    let e = s.fails("r", "rpw", "SHOW ENGINE SHALE STATUS");
    assert!(e.contains("ERROR 1227"), "{e}");
    s.ok("root", "pw", "XA ROLLBACK 'held'");
}

/// The slow-log entries of `text`: (Query_time line, statement).
fn entries(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("# Query_time: ") {
            let stmt = lines[i + 1..]
                .iter()
                .find(|l| !l.starts_with("use ") && !l.starts_with("SET timestamp="))
                .unwrap();
            out.push((l.to_string(), stmt.to_string()));
        }
    }
    out
}

#[test]
fn slow_query_log_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("slow.log");
    let log_arg = log.to_str().unwrap();
    let s = Served::start_with(
        &dir.path().join("data"),
        Some("pw"),
        &["--slow-query-log", log_arg, "--long-query-time", "0"],
    );
    s.ok(
        "root",
        "pw",
        "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); \
         INSERT INTO app.t VALUES (1), (2), (3)",
    );
    s.ok("root", "pw", "USE app; SELECT * FROM t WHERE id > 1");
    let mut c = connect(s.port);
    let ids: Vec<i32> = c.exec("SELECT id FROM app.t WHERE id < ?", (3,)).unwrap();
    assert_eq!(ids, [1, 2]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("shale serve, Version: "), "{text}");
    assert!(text.contains("\n# Time: 20"), "{text}");
    assert!(
        text.contains("\n# User@Host: root[root] @  [127.0.0.1]  Id:"),
        "{text}"
    );
    assert!(text.contains("\nuse app;\nSET timestamp="), "{text}");
    let got = entries(&text);
    let stmts: Vec<&str> = got.iter().map(|(_, s)| s.as_str()).collect();
    for want in [
        "CREATE DATABASE app;",
        "INSERT INTO app.t VALUES (1), (2), (3);",
        "SELECT * FROM t WHERE id > 1;",
        "SELECT id FROM app.t WHERE id < ?;",
    ] {
        assert!(stmts.contains(&want), "{want} not logged: {stmts:?}");
    }
    let (select, _) = got
        .iter()
        .find(|(_, s)| s == "SELECT * FROM t WHERE id > 1;")
        .unwrap();
    assert!(
        select.contains("Lock_time: 0.000000 Rows_sent: 2  Rows_examined: 0"),
        "{select}"
    );
    // mariadb-dumpslow (from mariadb-server, when installed) reads it.
    if let Ok(out) = Command::new("mariadb-dumpslow")
        .args(["-s", "c"])
        .arg(&log)
        .output()
    {
        let summary = String::from_utf8_lossy(&out.stdout);
        assert!(
            summary.contains("SELECT * FROM t WHERE id > N"),
            "{summary}"
        );
    }

    assert_eq!(
        s.ok("root", "pw", "SHOW GLOBAL VARIABLES LIKE '%query_%'"),
        format!(
            "Variable_name\tValue\nlong_query_time\t0.000000\nslow_query_log\tON\nslow_query_log_file\t{log_arg}\n"
        )
    );
    // A high threshold logs nothing more; switched off, nothing either.
    let before = entries(&std::fs::read_to_string(&log).unwrap()).len();
    s.ok("root", "pw", "SET GLOBAL long_query_time = 1000");
    s.ok("root", "pw", "SELECT COUNT(*) FROM app.t; SELECT 1");
    c.exec_drop("SELECT id FROM app.t WHERE id = ?", (1,))
        .unwrap();
    s.ok(
        "root",
        "pw",
        "SET GLOBAL slow_query_log = OFF; SET GLOBAL long_query_time = 0",
    );
    s.ok("root", "pw", "SELECT 2");
    let vars = s.ok("root", "pw", "SHOW VARIABLES LIKE 'slow_query_log'");
    assert_eq!(vars, "Variable_name\tValue\nslow_query_log\tOFF\n");
    let text = std::fs::read_to_string(&log).unwrap();
    let after: Vec<String> = entries(&text).into_iter().map(|(_, s)| s).collect();
    // Only the SET that raised the threshold (timed against the old one).
    assert_eq!(after.len(), before + 1, "{after:?}");
    assert_eq!(after.last().unwrap(), "SET GLOBAL long_query_time = 1000;");
    let (clean, _) = s.terminate();
    assert!(clean);

    // Started with a high threshold: the file has its header only.
    let quiet = dir.path().join("quiet.log");
    let s = Served::start_with(
        &dir.path().join("data"),
        None,
        &[
            "--slow-query-log",
            quiet.to_str().unwrap(),
            "--long-query-time",
            "1000",
        ],
    );
    s.ok(
        "root",
        "pw",
        "SELECT * FROM app.t; INSERT INTO app.t VALUES (4)",
    );
    let text = std::fs::read_to_string(&quiet).unwrap();
    assert!(!text.contains("# Time:"), "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");
}
