//! Real client libraries against `shale serve`: the Rust `mysql` crate
//! (text and binary protocol with every SQL type, transactions, error
//! codes) and PyMySQL (Debian's python3-pymysql, which
//! scripts/install-deps.sh installs).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

#[allow(dead_code)] // each test file uses part of the helpers
mod common;

use common::Served;
use mysql::consts::{ColumnFlags, ColumnType};
use mysql::prelude::Queryable;
use mysql::{Conn, IsolationLevel, OptsBuilder, Row, TxOpts, Value};
use std::process::Command;

fn connect(port: u16, user: &str, password: &str) -> Result<Conn, mysql::Error> {
    Conn::new(
        OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(port)
            .user(Some(user))
            .pass(Some(password))
            // Else the crate asks for @@socket and tries the Unix socket.
            .prefer_socket(false),
    )
}

/// The server's error code of a failed call.
fn code(e: &mysql::Error) -> u16 {
    match e {
        mysql::Error::MySqlError(m) => m.code,
        other => panic!("not an error from the server: {other:?}"),
    }
}

const CREATE: &str = "CREATE TABLE t (id BIGINT PRIMARY KEY, ti TINYINT, si SMALLINT, \
    i INT, bi BIGINT, tu TINYINT UNSIGNED, bu BIGINT UNSIGNED, d DOUBLE, \
    amount DECIMAL(15,3), s VARCHAR(40), b BLOB, dt DATE, ts DATETIME(6), n INT)";

/// Row 1 as the binary protocol returns it (and as it was inserted).
fn row1() -> Vec<Value> {
    vec![
        Value::Int(1),
        Value::Int(-128),
        Value::Int(-32768),
        Value::Int(-2_147_483_648),
        Value::Int(i64::MIN),
        Value::UInt(255),
        Value::UInt(u64::MAX),
        Value::Double(-1.5e300),
        Value::Bytes(b"-123456789012.125".to_vec()),
        Value::Bytes("héllo ✓ 'q'".as_bytes().to_vec()),
        Value::Bytes(vec![0, 255, b'\n', 0, b'\'', b'\\']),
        Value::Date(2024, 2, 29, 0, 0, 0, 0),
        Value::Date(2026, 11, 25, 17, 45, 1, 123_456),
        Value::NULL,
    ]
}

/// Row 1 as the text protocol returns it.
fn row1_text() -> Vec<Value> {
    let t = |s: &str| Value::Bytes(s.as_bytes().to_vec());
    vec![
        t("1"),
        t("-128"),
        t("-32768"),
        t("-2147483648"),
        t(&i64::MIN.to_string()),
        t("255"),
        t(&u64::MAX.to_string()),
        t("-1.5e300"),
        t("-123456789012.125"),
        t("héllo ✓ 'q'"),
        Value::Bytes(vec![0, 255, b'\n', 0, b'\'', b'\\']),
        t("2024-02-29"),
        t("2026-11-25 17:45:01.123456"),
        Value::NULL,
    ]
}

fn values(row: Row) -> Vec<Value> {
    row.unwrap()
}

#[test]
fn mysql_crate_every_type_text_and_binary() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::start(&dir.path().join("data"), Some("pw"));
    let mut c = connect(s.port, "root", "pw").unwrap();
    c.query_drop("CREATE DATABASE app").unwrap();
    c.select_db("app").unwrap();
    c.query_drop(CREATE).unwrap();
    let insert = "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    c.exec_drop(insert, row1()).unwrap();
    // Row 2 in the text protocol, with the other extremes.
    c.query_drop(
        "INSERT INTO t VALUES (2, 127, 32767, 2147483647, 9223372036854775807, 0, 0, \
         0.1, 0.001, '', x'', '1000-01-01', '9999-12-31 23:59:59', 7)",
    )
    .unwrap();

    // Binary protocol: typed values.
    let got: Vec<Row> = c.exec("SELECT * FROM t ORDER BY id", ()).unwrap();
    assert_eq!(got.len(), 2);
    let cols = got[0].columns();
    let types: Vec<ColumnType> = cols.iter().map(|c| c.column_type()).collect();
    use ColumnType::*;
    assert_eq!(
        types,
        [
            MYSQL_TYPE_LONGLONG,
            MYSQL_TYPE_TINY,
            MYSQL_TYPE_SHORT,
            MYSQL_TYPE_LONG,
            MYSQL_TYPE_LONGLONG,
            MYSQL_TYPE_TINY,
            MYSQL_TYPE_LONGLONG,
            MYSQL_TYPE_DOUBLE,
            MYSQL_TYPE_NEWDECIMAL,
            MYSQL_TYPE_VAR_STRING,
            MYSQL_TYPE_BLOB,
            MYSQL_TYPE_DATE,
            MYSQL_TYPE_DATETIME,
            MYSQL_TYPE_LONG,
        ]
    );
    let unsigned: Vec<bool> = cols
        .iter()
        .map(|c| c.flags().contains(ColumnFlags::UNSIGNED_FLAG))
        .collect();
    assert_eq!(
        unsigned,
        [
            false, false, false, false, false, true, true, false, false, false, false, false,
            false, false
        ]
    );
    assert_eq!(cols[0].name_str(), "id");
    assert_eq!(cols[0].table_str(), "t");
    let mut rows = got.into_iter();
    // The crate decodes an unsigned column below 64 bits as `Int` (255,
    // not -1: the UNSIGNED flag was honoured).
    let mut expected = row1();
    expected[5] = Value::Int(255);
    assert_eq!(values(rows.next().unwrap()), expected);
    let r2 = rows.next().unwrap();
    assert_eq!(r2.get::<i8, _>("ti"), Some(127));
    assert_eq!(r2.get::<i64, _>("bi"), Some(i64::MAX));
    assert_eq!(r2.get::<u64, _>("bu"), Some(0));
    assert_eq!(r2.get::<f64, _>("d"), Some(0.1));
    assert_eq!(r2.get::<String, _>("amount").unwrap(), "0.001");
    assert_eq!(r2.get::<Vec<u8>, _>("b"), Some(Vec::new()));
    assert_eq!(
        r2.as_ref(12),
        Some(&Value::Date(9999, 12, 31, 23, 59, 59, 0))
    );
    assert_eq!(r2.get::<i32, _>("n"), Some(7));

    // Text protocol: the same row as text.
    let got: Vec<Row> = c.query("SELECT * FROM t WHERE id = 1").unwrap();
    assert_eq!(values(got.into_iter().next().unwrap()), row1_text());

    // A parameter of each type in a WHERE clause finds the row.
    for (col, v) in [
        ("ti", Value::Int(-128)),
        ("bu", Value::UInt(u64::MAX)),
        ("d", Value::Double(-1.5e300)),
        ("amount", Value::Bytes(b"-123456789012.125".to_vec())),
        ("s", Value::Bytes("héllo ✓ 'q'".as_bytes().to_vec())),
        ("b", Value::Bytes(vec![0, 255, b'\n', 0, b'\'', b'\\'])),
        ("dt", Value::Date(2024, 2, 29, 0, 0, 0, 0)),
        ("ts", Value::Date(2026, 11, 25, 17, 45, 1, 123_456)),
    ] {
        let ids: Vec<i64> = c
            .exec(format!("SELECT id FROM t WHERE {col} = ?"), vec![v])
            .unwrap();
        assert_eq!(ids, [1], "WHERE {col} = ?");
    }
    let nulls: Vec<i64> = c.query("SELECT id FROM t WHERE n IS NULL").unwrap();
    assert_eq!(nulls, [1]);
    // An out-of-range value is refused, not wrapped.
    let e = c
        .exec_drop("INSERT INTO t (id, tu) VALUES (?, ?)", (3, 256))
        .unwrap_err();
    assert!([1264, 1690].contains(&code(&e)), "out of range: {e:?}");
}

#[test]
fn mysql_crate_transactions_errors_and_auth() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::start(&dir.path().join("data"), Some("pw"));
    let mut c = connect(s.port, "root", "pw").unwrap();
    c.query_drop("CREATE DATABASE app").unwrap();
    c.select_db("app").unwrap();
    c.query_drop("CREATE TABLE acct (id INT PRIMARY KEY, bal BIGINT NOT NULL, UNIQUE KEY u (bal))")
        .unwrap();
    c.exec_drop("INSERT INTO acct VALUES (?, ?)", (1, 100))
        .unwrap();

    // Rolled back: nothing stays. Committed: visible to another connection.
    let mut t = c.start_transaction(TxOpts::default()).unwrap();
    t.exec_drop("INSERT INTO acct VALUES (?, ?)", (2, 200))
        .unwrap();
    t.exec_drop("UPDATE acct SET bal = bal - 1 WHERE id = ?", (1,))
        .unwrap();
    t.rollback().unwrap();
    let bal: Option<i64> = c.query_first("SELECT bal FROM acct WHERE id = 1").unwrap();
    assert_eq!(bal, Some(100));
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM acct").unwrap();
    assert_eq!(n, Some(1));
    for level in [
        IsolationLevel::ReadCommitted,
        IsolationLevel::RepeatableRead,
        IsolationLevel::Serializable,
    ] {
        let mut t = c
            .start_transaction(TxOpts::default().set_isolation_level(Some(level)))
            .unwrap();
        t.exec_drop("UPDATE acct SET bal = bal + 1 WHERE id = ?", (1,))
            .unwrap();
        t.commit().unwrap();
    }
    let mut other = connect(s.port, "root", "pw").unwrap();
    let bal: Option<i64> = other
        .query_first("SELECT bal FROM app.acct WHERE id = 1")
        .unwrap();
    assert_eq!(bal, Some(103));

    // Duplicate primary key and duplicate unique key: 1062, in both
    // protocols; the connection stays usable.
    let e = c
        .exec_drop("INSERT INTO acct VALUES (?, ?)", (1, 5))
        .unwrap_err();
    assert_eq!(code(&e), 1062, "{e:?}");
    let e = c
        .query_drop("INSERT INTO acct VALUES (9, 103)")
        .unwrap_err();
    assert_eq!(code(&e), 1062, "{e:?}");
    let e = c.query_drop("SELECT * FROM nope").unwrap_err();
    assert_eq!(code(&e), 1146, "{e:?}");
    let e = c.query_drop("SELEC 1").unwrap_err();
    assert_eq!(code(&e), 1064, "{e:?}");
    let one: Option<i64> = c.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));

    // Wrong password and unknown user: 1045.
    let e = connect(s.port, "root", "wrong").unwrap_err();
    assert_eq!(code(&e), 1045, "{e:?}");
    let e = connect(s.port, "nobody", "pw").unwrap_err();
    assert_eq!(code(&e), 1045, "{e:?}");
    // A user created over the wire logs in with its password only.
    c.query_drop("CREATE USER 'app'@'%' IDENTIFIED BY 's3cret'")
        .unwrap();
    c.query_drop("GRANT SELECT ON app.* TO 'app'@'%'").unwrap();
    let mut app = connect(s.port, "app", "s3cret").unwrap();
    let n: Option<i64> = app.query_first("SELECT COUNT(*) FROM app.acct").unwrap();
    assert_eq!(n, Some(1));
    let e = app.query_drop("DELETE FROM app.acct").unwrap_err();
    assert_eq!(code(&e), 1142, "{e:?}");
    assert_eq!(code(&connect(s.port, "app", "pw").unwrap_err()), 1045);
}

#[test]
fn connections_up_to_max_connections_then_1040() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::start_with(
        &dir.path().join("data"),
        Some("pw"),
        &["--max-connections", "200"],
    );
    // 200 idle sessions, each logged in (a thread each on the server).
    let mut held: Vec<Conn> = (0..200)
        .map(|i| connect(s.port, "root", "pw").unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    let e = connect(s.port, "root", "pw").unwrap_err();
    assert_eq!(code(&e), 1040, "{e:?}");
    // Every held session still answers, with its own connection id.
    let mut ids = std::collections::BTreeSet::new();
    for c in &mut held {
        let id: Option<u64> = c.query_first("SELECT CONNECTION_ID()").unwrap();
        ids.insert(id.unwrap());
    }
    assert_eq!(ids.len(), 200);
    // Closing one makes room for one.
    drop(held.pop());
    let mut again = None;
    for _ in 0..100 {
        // The server notices the close asynchronously.
        match connect(s.port, "root", "pw") {
            Ok(c) => {
                again = Some(c);
                break;
            }
            Err(e) => assert_eq!(code(&e), 1040, "{e:?}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let one: Option<i64> = again.unwrap().query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));
}

/// Debian's python3 with PyMySQL, if present: `/usr/bin/python3` first
/// (a `python3` earlier on PATH, e.g. pyenv's, does not see Debian's
/// packages).
fn python_with_pymysql() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import pymysql"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn pymysql_parameters_and_description() {
    let Some(python) = python_with_pymysql() else {
        // CI installs it (scripts/install-deps.sh): there it must run.
        assert!(
            std::env::var_os("CI").is_none(),
            "PyMySQL is missing; scripts/install-deps.sh installs python3-pymysql"
        );
        eprintln!("SKIPPED: PyMySQL not installed (apt-get install python3-pymysql)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let s = Served::start(&dir.path().join("data"), Some("pw"));
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/pymysql_check.py"
    );
    let out = Command::new(python)
        .arg(script)
        .arg(s.port.to_string())
        .arg("pw")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().last(), Some("pymysql ok"), "{stdout}");
}
