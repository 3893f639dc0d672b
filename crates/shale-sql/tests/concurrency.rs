//! Sessions on several threads against one database: uniqueness holds
//! (of two sessions inserting the same key, exactly one commits), and
//! concurrent increments are not lost.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;

use common::{count, open};
use shale_sql::Output;
use std::sync::Arc;

#[test]
fn unique_keys_hold_under_concurrent_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE c").unwrap();
    s.execute("CREATE TABLE c.t (id INT PRIMARY KEY AUTO_INCREMENT, email VARCHAR(40) NOT NULL, UNIQUE KEY by_email (email))").unwrap();
    const VALUES: usize = 200;
    const THREADS: usize = 4;
    let wins = Arc::new(std::sync::Mutex::new(vec![0usize; VALUES]));
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let sql = sql.clone();
        let wins = wins.clone();
        handles.push(std::thread::spawn(move || {
            let mut s = sql.session();
            s.execute("USE c").unwrap();
            for i in 0..VALUES {
                // Each thread walks the values in a different order.
                let v = (i * (t * 2 + 1) + t * 17) % VALUES;
                // Half the threads use explicit transactions with a read first.
                let r = if t % 2 == 0 {
                    s.execute(&format!("INSERT INTO t (email) VALUES ('user{v}@x')"))
                } else {
                    s.execute("BEGIN").unwrap();
                    let _ = s.execute(&format!("SELECT id FROM t WHERE email = 'user{v}@x'"));
                    match s.execute(&format!("INSERT INTO t (email) VALUES ('user{v}@x')")) {
                        Ok(o) => s.execute("COMMIT").map(|_| o),
                        Err(e) => {
                            s.execute("ROLLBACK").unwrap();
                            Err(e)
                        }
                    }
                };
                match r {
                    Ok(_) => wins.lock().unwrap()[v] += 1,
                    Err(e) => assert!(
                        matches!(e.mysql_code(), 1062 | 1213),
                        "unexpected error {e}"
                    ),
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let wins = wins.lock().unwrap();
    assert!(
        wins.iter().all(|w| *w == 1),
        "each value committed exactly once: {wins:?}"
    );
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM c.t"), VALUES as i64);
    assert_eq!(
        count(&mut s, "SELECT COUNT(DISTINCT email) FROM c.t"),
        VALUES as i64
    );
    // Through the unique index, each value finds its one row.
    assert_eq!(
        count(&mut s, "SELECT COUNT(*) FROM c.t WHERE email = 'user7@x'"),
        1
    );
    // Auto-increment handed out distinct ids (the primary key would refuse
    // a repeat; the count of distinct ids equals the row count).
    assert_eq!(
        count(&mut s, "SELECT COUNT(DISTINCT id) FROM c.t"),
        VALUES as i64
    );
}

#[test]
fn concurrent_increments_are_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE c").unwrap();
    s.execute("CREATE TABLE c.counter (id INT PRIMARY KEY, n BIGINT NOT NULL)")
        .unwrap();
    s.execute("INSERT INTO c.counter VALUES (1, 0)").unwrap();
    const THREADS: usize = 4;
    const PER_THREAD: usize = 100;
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let sql = sql.clone();
        handles.push(std::thread::spawn(move || {
            let mut s = sql.session();
            if t % 2 == 0 {
                s.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                    .unwrap();
            }
            let mut done = 0;
            while done < PER_THREAD {
                match s.execute("UPDATE c.counter SET n = n + 1 WHERE id = 1") {
                    Ok(Output::Affected { rows: 1, .. }) => done += 1,
                    Ok(other) => panic!("{other:?}"),
                    // A write conflict under REPEATABLE READ: retry, as
                    // sysbench and applications do.
                    Err(e) if e.mysql_code() == 1213 => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        count(&mut s, "SELECT n + 0 FROM c.counter WHERE id = 1"),
        (THREADS * PER_THREAD) as i64
    );
}

/// Autocommit UPDATEs of one hot row under REPEATABLE READ: a write
/// statement that runs alone updates the newest version under its row lock
/// (src/lone_write.rs), so none fails with a write conflict and none is
/// lost, as with InnoDB.
#[test]
fn autocommit_updates_of_a_hot_row_never_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE c").unwrap();
    s.execute("CREATE TABLE c.hot (id INT PRIMARY KEY, n BIGINT NOT NULL)")
        .unwrap();
    s.execute("INSERT INTO c.hot VALUES (1, 0)").unwrap();
    const THREADS: usize = 4;
    const PER_THREAD: usize = 150;
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let sql = sql.clone();
            std::thread::spawn(move || {
                let mut s = sql.session();
                for _ in 0..PER_THREAD {
                    match s.execute("UPDATE c.hot SET n = n + 1 WHERE id = 1") {
                        Ok(Output::Affected { rows: 1, .. }) => {}
                        other => panic!("{other:?}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        count(&mut s, "SELECT n + 0 FROM c.hot WHERE id = 1"),
        (THREADS * PER_THREAD) as i64
    );
}

/// `UPDATE/DELETE ... WHERE id = ?` locks and reads the row's newest
/// version without reading it at the snapshot first (dml.rs,
/// `Dml::point_key`). What a REPEATABLE READ (SI) transaction sees must not
/// change: a row committed after its snapshot is not there for it (0
/// rows, no error); a row it sees that changed since is a conflict (1213);
/// the rest of the WHERE still filters the locked row.
#[test]
fn point_writes_see_the_snapshot_and_conflict_only_on_rows_it_sees() {
    let dir = tempfile::tempdir().unwrap();
    let sql = open(dir.path());
    let mut s = sql.session();
    s.execute("CREATE DATABASE c").unwrap();
    s.execute("CREATE TABLE c.p (id INT PRIMARY KEY, n BIGINT NOT NULL)")
        .unwrap();
    s.execute("INSERT INTO c.p VALUES (1, 0), (2, 0)").unwrap();
    let mut other = sql.session();
    let affected = |s: &mut shale_sql::Session, q: &str| match s.execute(q).unwrap() {
        Output::Affected { rows, .. } => rows,
        o => panic!("{q}: {o:?}"),
    };

    s.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .unwrap();
    s.execute("BEGIN").unwrap();
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM c.p"), 2);
    // Committed after the snapshot: not there for `s`.
    other.execute("INSERT INTO c.p VALUES (5, 50)").unwrap();
    assert_eq!(affected(&mut s, "UPDATE c.p SET n = n + 1 WHERE id = 5"), 0);
    assert_eq!(affected(&mut s, "DELETE FROM c.p WHERE id = 5"), 0);
    // A row it sees, with the rest of the WHERE false and then true.
    assert_eq!(
        affected(&mut s, "UPDATE c.p SET n = 7 WHERE id = 2 AND n = 99"),
        0
    );
    assert_eq!(
        affected(&mut s, "UPDATE c.p SET n = 7 WHERE id = 2 AND n = 0"),
        1
    );
    // A row it sees, changed since its snapshot: first committer wins.
    other.execute("UPDATE c.p SET n = 10 WHERE id = 1").unwrap();
    let err = s
        .execute("UPDATE c.p SET n = n + 1 WHERE id = 1")
        .expect_err("a row changed after the snapshot is a write conflict");
    assert_eq!(err.mysql_code(), 1213, "{err}");
    s.execute("ROLLBACK").unwrap();

    assert_eq!(count(&mut other, "SELECT n + 0 FROM c.p WHERE id = 5"), 50);
    assert_eq!(count(&mut other, "SELECT n + 0 FROM c.p WHERE id = 2"), 0);
    assert_eq!(count(&mut other, "SELECT n + 0 FROM c.p WHERE id = 1"), 10);
}
