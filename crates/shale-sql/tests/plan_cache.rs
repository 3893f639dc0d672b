//! Prepared queries keep their plan between executions (plan_cache.rs),
//! but never past a change it was made from: the dictionary, the current
//! database, parameter values the planner read, session state, or the
//! indexes an older snapshot may read.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod common;

use common::{open, rows};
use shale_sql::{Datum, Output, PreparedStatement, Session};

fn run(s: &mut Session, p: &PreparedStatement, params: &[Datum]) -> Vec<Vec<Datum>> {
    match s.execute_prepared(p, params).unwrap() {
        Output::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    }
}

fn setup(s: &mut Session) {
    for (db, base) in [("a", 100), ("b", 200)] {
        s.execute(&format!("CREATE DATABASE {db}")).unwrap();
        s.execute(&format!("USE {db}")).unwrap();
        s.execute("CREATE TABLE t (id INT PRIMARY KEY, c INT)")
            .unwrap();
        for i in 1..=5 {
            s.execute(&format!("INSERT INTO t VALUES ({i}, {})", base + i))
                .unwrap();
        }
    }
    s.execute("USE a").unwrap();
}

#[test]
fn a_repeated_query_reuses_its_plan_until_the_dictionary_or_database_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut s = db.session();
    setup(&mut s);
    let p = s
        .prepare("SELECT * FROM t WHERE id BETWEEN ? AND ?")
        .unwrap();
    let before = db.plans_reused();
    assert_eq!(run(&mut s, &p, &[Datum::Int(1), Datum::Int(2)]).len(), 2);
    assert_eq!(db.plans_reused(), before, "the first execution plans");
    let rows = run(&mut s, &p, &[Datum::Int(2), Datum::Int(5)]);
    assert_eq!(rows.len(), 4, "new parameter values, same plan");
    assert_eq!(rows[0][1], Datum::Int(102));
    assert_eq!(db.plans_reused(), before + 1);

    // Another database: its own table, planned anew.
    s.execute("USE b").unwrap();
    let rows = run(&mut s, &p, &[Datum::Int(1), Datum::Int(1)]);
    assert_eq!(rows, vec![vec![Datum::Int(1), Datum::Int(201)]]);
    assert_eq!(db.plans_reused(), before + 1);
    run(&mut s, &p, &[Datum::Int(1), Datum::Int(1)]);
    assert_eq!(db.plans_reused(), before + 2);

    // An instant ADD COLUMN: SELECT * now has three columns.
    s.execute("ALTER TABLE t ADD COLUMN d INT DEFAULT 7")
        .unwrap();
    let rows = run(&mut s, &p, &[Datum::Int(1), Datum::Int(1)]);
    assert_eq!(
        rows,
        vec![vec![Datum::Int(1), Datum::Int(201), Datum::Int(7)]]
    );
    assert_eq!(db.plans_reused(), before + 2, "the dictionary changed");

    // A dropped table is an error, not a read through a stale plan.
    s.execute("DROP TABLE t").unwrap();
    assert!(s
        .execute_prepared(&p, &[Datum::Int(1), Datum::Int(1)])
        .is_err());
}

#[test]
fn plans_that_read_parameters_or_session_state_are_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut s = db.session();
    setup(&mut s);
    let limit = s.prepare("SELECT id FROM t ORDER BY id LIMIT ?").unwrap();
    assert_eq!(run(&mut s, &limit, &[Datum::Int(2)]).len(), 2);
    assert_eq!(run(&mut s, &limit, &[Datum::Int(4)]).len(), 4);
    let var = s.prepare("SELECT c FROM t WHERE id = @x").unwrap();
    s.execute("SET @x = 1").unwrap();
    assert_eq!(run(&mut s, &var, &[]), vec![vec![Datum::Int(101)]]);
    s.execute("SET @x = 3").unwrap();
    assert_eq!(run(&mut s, &var, &[]), vec![vec![Datum::Int(103)]]);
    let before = db.plans_reused();
    let select_list = s.prepare("SELECT ?, c FROM t WHERE id = 1").unwrap();
    run(&mut s, &select_list, &[Datum::Int(9)]);
    run(&mut s, &select_list, &[Datum::text("x")]);
    assert_eq!(db.plans_reused(), before, "none of these kept a plan");
}

/// A transaction whose snapshot predates an index must not run a plan
/// made for readers that may use it; it plans for itself.
#[test]
fn an_older_snapshot_plans_without_indexes_published_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut s = db.session();
    setup(&mut s);
    let mut old = db.session();
    old.execute("USE a").unwrap();
    old.execute("START TRANSACTION").unwrap();
    let p = old.prepare("SELECT id FROM t WHERE c = ?").unwrap();
    assert_eq!(
        run(&mut old, &p, &[Datum::Int(103)]),
        vec![vec![Datum::Int(3)]]
    );
    s.execute("CREATE INDEX ic ON t (c)").unwrap();
    s.execute("UPDATE t SET c = 999 WHERE id = 3").unwrap();
    let before = db.plans_reused();
    for _ in 0..3 {
        assert_eq!(
            run(&mut old, &p, &[Datum::Int(103)]),
            vec![vec![Datum::Int(3)]]
        );
    }
    assert_eq!(db.plans_reused(), before, "planned per execution");
    old.execute("COMMIT").unwrap();
    // A fresh snapshot reads every index: its plan is kept again.
    assert_eq!(
        run(&mut old, &p, &[Datum::Int(999)]),
        vec![vec![Datum::Int(3)]]
    );
    assert_eq!(
        run(&mut old, &p, &[Datum::Int(103)]),
        Vec::<Vec<Datum>>::new()
    );
    assert_eq!(db.plans_reused(), before + 1);
}

fn affected(s: &mut Session, p: &PreparedStatement, params: &[Datum]) -> u64 {
    match s.execute_prepared(p, params).unwrap() {
        Output::Affected { rows, .. } => rows,
        other => panic!("{other:?}"),
    }
}

/// A prepared UPDATE or DELETE keeps its plan too (sysbench's write
/// statements), with each execution's parameters; a dictionary change,
/// here a new index, makes it plan again, so the index is maintained.
#[test]
fn prepared_updates_and_deletes_reuse_their_plan_and_maintain_a_new_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut s = db.session();
    setup(&mut s);
    let upd = s.prepare("UPDATE t SET c = c + ? WHERE id = ?").unwrap();
    let del = s.prepare("DELETE FROM t WHERE id = ?").unwrap();
    let before = db.plans_reused();
    assert_eq!(affected(&mut s, &upd, &[Datum::Int(10), Datum::Int(1)]), 1);
    assert_eq!(affected(&mut s, &upd, &[Datum::Int(20), Datum::Int(2)]), 1);
    assert_eq!(affected(&mut s, &upd, &[Datum::Int(1), Datum::Int(99)]), 0);
    assert_eq!(affected(&mut s, &del, &[Datum::Int(5)]), 1);
    assert_eq!(affected(&mut s, &del, &[Datum::Int(5)]), 0);
    assert_eq!(db.plans_reused(), before + 3, "planned once each");
    assert_eq!(
        rows(&mut s, "SELECT id, c FROM t"),
        [(1, 111), (2, 122), (3, 103), (4, 104)]
            .map(|(i, c)| vec![Datum::Int(i), Datum::Int(c)])
            .to_vec()
    );

    // Another database: its own table.
    s.execute("USE b").unwrap();
    assert_eq!(affected(&mut s, &upd, &[Datum::Int(1), Datum::Int(1)]), 1);
    assert_eq!(
        rows(&mut s, "SELECT c FROM t WHERE id = 1"),
        vec![vec![Datum::Int(202)]]
    );
    s.execute("USE a").unwrap();

    // A new index on c: the next UPDATE must write its entries.
    s.execute("CREATE INDEX ic ON t (c)").unwrap();
    let reused = db.plans_reused();
    assert_eq!(affected(&mut s, &upd, &[Datum::Int(400), Datum::Int(3)]), 1);
    assert_eq!(
        db.plans_reused(),
        reused,
        "the dictionary changed: planned anew"
    );
    assert_eq!(affected(&mut s, &upd, &[Datum::Int(1), Datum::Int(3)]), 1);
    assert_eq!(db.plans_reused(), reused + 1);
    let by_index = s.prepare("SELECT id FROM t WHERE c = ?").unwrap();
    assert_eq!(
        run(&mut s, &by_index, &[Datum::Int(504)]),
        vec![vec![Datum::Int(3)]]
    );
    assert!(run(&mut s, &by_index, &[Datum::Int(103)]).is_empty());
    assert_eq!(affected(&mut s, &del, &[Datum::Int(3)]), 1);
    assert!(run(&mut s, &by_index, &[Datum::Int(504)]).is_empty());
    let msgs: Vec<String> = rows(&mut s, "CHECK TABLE t")
        .iter()
        .map(|r| r[3].to_text().unwrap())
        .collect();
    assert_eq!(msgs, ["OK"], "every index entry matches a row");

    // A LIMIT read from a parameter is planned per execution.
    let limited = s.prepare("DELETE FROM t ORDER BY id LIMIT ?").unwrap();
    let reused = db.plans_reused();
    assert_eq!(affected(&mut s, &limited, &[Datum::Int(1)]), 1);
    assert_eq!(affected(&mut s, &limited, &[Datum::Int(5)]), 2);
    assert_eq!(db.plans_reused(), reused);
}
