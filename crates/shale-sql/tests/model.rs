//! A model test: random DML and DDL (inserts, updates of indexed and
//! unique columns, deletes, ADD/DROP COLUMN, CREATE/DROP INDEX) against an
//! in-memory reference, with reopens; after each phase the table equals the
//! model and CHECK TABLE finds every index in step with the rows.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shale_sql::{Database, Datum, Output};
use std::collections::BTreeMap;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, seeded per run.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Row {
    k: i64,
    u: Option<String>,
    c: String,
    /// Values of the columns added by ADD COLUMN, in order.
    extra: Vec<i64>,
}

fn rows(s: &mut shale_sql::Session, extra: &[String]) -> BTreeMap<i64, Row> {
    let cols: String = extra.iter().map(|e| format!(", {e}")).collect();
    let Output::Rows { rows, .. } = s
        .execute(&format!("SELECT id, k, u, c{cols} FROM m.t ORDER BY id"))
        .unwrap()
    else {
        panic!()
    };
    rows.into_iter()
        .map(|r| {
            let int = |d: &Datum| match d {
                Datum::Int(n) => *n,
                other => panic!("{other:?}"),
            };
            let text = |d: &Datum| d.to_text();
            (
                int(&r[0]),
                Row {
                    k: int(&r[1]),
                    u: text(&r[2]),
                    c: text(&r[3]).unwrap(),
                    extra: r[4..].iter().map(int).collect(),
                },
            )
        })
        .collect()
}

fn check_ok(s: &mut shale_sql::Session) {
    let Output::Rows { rows, .. } = s.execute("CHECK TABLE m.t").unwrap() else {
        panic!()
    };
    let msgs: Vec<String> = rows.iter().map(|r| r[3].to_text().unwrap()).collect();
    assert_eq!(msgs, vec!["OK".to_owned()], "CHECK TABLE: {msgs:?}");
}

#[test]
fn random_statements_match_the_model_across_reopens() {
    let seed = std::env::var("SHALE_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_1234_u64);
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        // The background sweeper holds the engine until the end of a sweep
        // it started before the last `Database` was dropped, and the
        // directory stays locked until then: wait for it (bounded).
        let mut tries = 0;
        let db = loop {
            match shaledb::Db::open(dir.path(), shaledb::Options::default()) {
                Err(shaledb::Error::Locked(_)) if tries < 500 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => break other.unwrap(),
            }
        };
        let sql = Database::open(db).unwrap();
        // Background sweeps of unused schema versions run between and
        // during the statements (docs/tables.md, "Retiring schema versions").
        sql.set_schema_sweep_interval(std::time::Duration::from_millis(5));
        sql
    };
    let mut sql = open();
    let mut s = sql.session();
    s.execute("CREATE DATABASE m").unwrap();
    s.execute("CREATE TABLE m.t (id INT PRIMARY KEY, k INT NOT NULL, u VARCHAR(10), c VARCHAR(20) NOT NULL, KEY k_ix (k), UNIQUE KEY u_ix (u))").unwrap();
    let mut model: BTreeMap<i64, Row> = BTreeMap::new();
    let mut extra: Vec<String> = Vec::new();
    let mut defaults: Vec<i64> = Vec::new();
    let mut next_col = 0;
    let mut indexed_c = false;
    for phase in 0..12 {
        for _ in 0..150 {
            let id = rng.below(60) as i64;
            let k = rng.below(10) as i64;
            let u = (rng.below(3) > 0).then(|| format!("u{}", rng.below(80)));
            let c = format!("c{}", rng.below(1000));
            let u_sql = u.as_ref().map_or("NULL".to_owned(), |u| format!("'{u}'"));
            let u_taken = |m: &BTreeMap<i64, Row>, except: i64| {
                u.is_some() && m.iter().any(|(i, r)| *i != except && r.u == u)
            };
            match rng.below(6) {
                0 | 1 => {
                    let r = s.execute(&format!(
                        "INSERT INTO m.t (id, k, u, c) VALUES ({id}, {k}, {u_sql}, '{c}')"
                    ));
                    if model.contains_key(&id) || u_taken(&model, id) {
                        assert_eq!(r.unwrap_err().mysql_code(), 1062);
                    } else {
                        r.unwrap();
                        model.insert(
                            id,
                            Row {
                                k,
                                u: u.clone(),
                                c: c.clone(),
                                extra: defaults.clone(),
                            },
                        );
                    }
                }
                2 => {
                    s.execute(&format!(
                        "UPDATE m.t SET k = k + {k}, c = '{c}' WHERE id = {id}"
                    ))
                    .unwrap();
                    if let Some(r) = model.get_mut(&id) {
                        r.k += k;
                        r.c = c;
                    }
                }
                3 => {
                    let r = s.execute(&format!("UPDATE m.t SET u = {u_sql} WHERE id = {id}"));
                    if model.contains_key(&id) && u_taken(&model, id) {
                        assert_eq!(r.unwrap_err().mysql_code(), 1062);
                    } else {
                        r.unwrap();
                        if let Some(row) = model.get_mut(&id) {
                            row.u = u;
                        }
                    }
                }
                4 => {
                    s.execute(&format!("DELETE FROM m.t WHERE id = {id}"))
                        .unwrap();
                    model.remove(&id);
                }
                _ => {
                    s.execute(&format!(
                        "DELETE FROM m.t WHERE k = {k} AND id > {}",
                        id + 30
                    ))
                    .unwrap();
                    model.retain(|i, r| !(r.k == k && *i > id + 30));
                }
            }
        }
        // Schema changes between phases: instant column changes and index builds.
        match phase % 4 {
            0 => {
                let name = format!("x{next_col}");
                let default = next_col as i64 * 100;
                s.execute(&format!(
                    "ALTER TABLE m.t ADD COLUMN {name} INT NOT NULL DEFAULT {default}"
                ))
                .unwrap();
                next_col += 1;
                extra.push(name);
                defaults.push(default);
                for r in model.values_mut() {
                    r.extra.push(default);
                }
            }
            1 if !indexed_c => {
                s.execute("CREATE INDEX c_ix ON m.t (c, k)").unwrap();
                indexed_c = true;
            }
            1 => {
                s.execute("DROP INDEX c_ix ON m.t").unwrap();
                indexed_c = false;
            }
            2 if extra.len() > 1 => {
                // Drop the first added column: rows of every version lose it.
                let name = extra.remove(0);
                defaults.remove(0);
                s.execute(&format!("ALTER TABLE m.t DROP COLUMN {name}"))
                    .unwrap();
                for r in model.values_mut() {
                    r.extra.remove(0);
                }
            }
            _ => {
                // Every other time, rewrite the rows under the current
                // schema version and drop the old versions first.
                if phase % 8 == 3 {
                    let Output::Rows { rows, .. } = s.execute("OPTIMIZE TABLE m.t").unwrap() else {
                        panic!()
                    };
                    let status = rows.last().map(|r| r[3].to_text().unwrap());
                    assert_eq!(status.as_deref(), Some("OK"), "{rows:?}");
                }
                drop(s);
                let engine = sql.engine().clone();
                drop(sql);
                engine.close().unwrap();
                sql = open();
                s = sql.session();
            }
        }
        assert_eq!(
            rows(&mut s, &extra),
            model,
            "phase {phase} (seed {seed:#x})"
        );
        check_ok(&mut s);
        // Covering reads through k_ix and u_ix agree with the model too.
        let Output::Rows { rows: by_k, .. } = s
            .execute("SELECT id, k FROM m.t WHERE k >= 0 ORDER BY id")
            .unwrap()
        else {
            panic!()
        };
        let want_k: Vec<(i64, i64)> = model.iter().map(|(i, r)| (*i, r.k)).collect();
        let got_k: Vec<(i64, i64)> = by_k
            .iter()
            .map(|r| {
                (
                    r[0].to_i128().unwrap() as i64,
                    r[1].to_i128().unwrap() as i64,
                )
            })
            .collect();
        assert_eq!(got_k, want_k, "k_ix, phase {phase}");
        let Output::Rows { rows: by_u, .. } = s
            .execute("SELECT u, id FROM m.t WHERE u >= '' ORDER BY id")
            .unwrap()
        else {
            panic!()
        };
        let want_u: Vec<(String, i64)> = model
            .iter()
            .filter_map(|(i, r)| r.u.clone().map(|u| (u, *i)))
            .collect();
        let got_u: Vec<(String, i64)> = by_u
            .iter()
            .map(|r| (r[0].to_text().unwrap(), r[1].to_i128().unwrap() as i64))
            .collect();
        assert_eq!(got_u, want_u, "u_ix, phase {phase}");
        let Output::Rows { rows: plan, .. } = s
            .execute("EXPLAIN SELECT id, k FROM m.t WHERE k >= 0")
            .unwrap()
        else {
            panic!()
        };
        assert!(
            plan[0][9].to_text().unwrap().contains("Using index"),
            "{plan:?}"
        );
    }
}
