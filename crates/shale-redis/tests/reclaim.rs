//! Stale sub-records are dropped by compaction (docs/redis.md,
//! "Reclaiming stale sub-records"): the server runs in-process on the
//! engine's in-memory file system; the test counts records through the
//! engine API.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::Raw;
use rand::{Rng, SeedableRng};
use shale_redis::server::{serve_with, ServerConfig};
use shale_redis::store::CF_NAME;
use shaledb::env::mem::MemFs;
use shaledb::{Db, ReadOptions, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

struct Running {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Running {
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
    }
}

fn open(fs: &MemFs) -> Db {
    let opts = shaledb::Options {
        fs: fs.arc(),
        ..shale_redis::engine_options()
    };
    Db::open(Path::new("/db"), opts).unwrap()
}

fn start(db: Db) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = ServerConfig {
        password: None,
        ..ServerConfig::default()
    };
    let s = stop.clone();
    let thread = std::thread::spawn(move || serve_with(db, listener, cfg, s).unwrap());
    Running { port, stop, thread }
}

/// Number of `S` and `Z` records (at `snapshot`, or the latest state).
fn sub_records(db: &Db, snapshot: Option<Snapshot>) -> (usize, usize) {
    let cf = db.cf_id(CF_NAME).unwrap();
    let count = |lo: &[u8], hi: &[u8]| {
        let ro = ReadOptions {
            snapshot: snapshot.clone(),
            lower_bound: Some(lo.to_vec()),
            upper_bound: Some(hi.to_vec()),
            ..ReadOptions::default()
        };
        let mut it = db.iter_cf(&ro, cf).unwrap();
        it.seek_to_first().unwrap();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next().unwrap();
        }
        n
    };
    (count(b"S", b"T"), count(b"Z", b"["))
}

fn rewrite(db: &Db) -> u64 {
    let cf = db.cf_id(CF_NAME).unwrap();
    db.rewrite_range(cf, b"S", b"[").unwrap().entries_dropped
}

/// Sends `args` in commands of `per` members each, pipelined.
fn load(c: &mut Raw, cmd: &[&str], members: impl Fn(usize) -> Vec<String>, n: usize, per: usize) {
    let mut sent = 0;
    for start in (0..n).step_by(per) {
        let mut args: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        for i in start..(start + per).min(n) {
            args.extend(members(i));
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        c.send(&a);
        sent += 1;
    }
    for _ in 0..sent {
        let r = c.reply();
        assert!(r.starts_with(':'), "{r}");
    }
}

#[test]
fn del_of_large_collections_is_reclaimed_by_compaction_but_not_under_a_snapshot() {
    const N: usize = 100_000;
    let fs = MemFs::new();
    let db = open(&fs);
    let run = start(db.clone());
    let mut c = Raw::connect(run.port);
    load(
        &mut c,
        &["HSET", "h"],
        |i| vec![format!("f{i}"), i.to_string()],
        N,
        1000,
    );
    load(&mut c, &["SADD", "s"], |i| vec![format!("m{i}")], N, 1000);
    load(
        &mut c,
        &["ZADD", "z"],
        |i| vec![i.to_string(), format!("m{i}")],
        N,
        1000,
    );
    load(&mut c, &["RPUSH", "l"], |i| vec![format!("e{i}")], N, 1000);
    // Live keys that must come through untouched.
    assert_eq!(c.call(&["HSET", "keep:h", "a", "1", "b", "2"]), ":2\r\n");
    assert_eq!(c.call(&["ZADD", "keep:z", "1.5", "x"]), ":1\r\n");
    assert_eq!(c.call(&["RPUSH", "keep:l", "p", "q"]), ":2\r\n");
    // An overwritten collection is stale too.
    assert_eq!(c.call(&["SADD", "over", "a", "b", "c"]), ":3\r\n");
    assert_eq!(c.call(&["SET", "over", "str"]), "+OK\r\n");
    let live = (2 + 1 + 2, 1);
    assert_eq!(sub_records(&db, None), (4 * N + live.0 + 3, N + live.1));

    // A reader that started before the DEL still sees every member.
    let before = db.snapshot();
    assert_eq!(c.call(&["DEL", "h", "s", "z", "l"]), ":4\r\n");
    db.compact_range(None, None).unwrap();
    rewrite(&db);
    assert_eq!(
        sub_records(&db, Some(before.clone())),
        (4 * N + live.0, N + live.1),
        "a record a live snapshot reads was dropped"
    );
    drop(before);

    // Everything sits in the last level now, where a compaction moves
    // extents by reference: the rewrite of the sub-record range
    // (`Store::reclaim_now`) is the full compaction that drops them.
    // (A background compaction that runs once the snapshot is gone may
    // drop some of them first: the rewrite's own count is then lower, and
    // the record count below is what must hold.)
    let dropped = rewrite(&db);
    assert!(dropped > 0 && dropped <= (4 * N + N) as u64, "{dropped}");
    assert_eq!(sub_records(&db, None), live);
    // Records deleted while still in the memtable never reach an extent:
    // the flush drops them.
    load(
        &mut c,
        &["HSET", "fresh"],
        |i| vec![format!("f{i}"), "v".into()],
        5000,
        500,
    );
    assert_eq!(c.call(&["DEL", "fresh"]), ":1\r\n");
    db.compact_range(None, None).unwrap();
    assert_eq!(sub_records(&db, None), live);
    assert_eq!(
        c.call(&["HGETALL", "keep:h"]),
        "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        c.call(&["ZRANGE", "keep:z", "0", "-1", "WITHSCORES"]),
        "*2\r\n$1\r\nx\r\n$3\r\n1.5\r\n"
    );
    assert_eq!(
        c.call(&["LRANGE", "keep:l", "0", "-1"]),
        "*2\r\n$1\r\np\r\n$1\r\nq\r\n"
    );
    assert_eq!(c.call(&["GET", "over"]), "$3\r\nstr\r\n");
    drop(c);
    run.stop();
}

/// The model: key -> (type, members). Lists and hashes keep their order.
#[derive(Clone, Debug)]
enum Val {
    Hash(BTreeMap<String, String>),
    Set(BTreeSet<String>),
    ZSet(BTreeMap<String, i64>),
    List(Vec<String>),
    Str,
}

impl Val {
    fn records(&self) -> (usize, usize) {
        match self {
            Val::Hash(m) => (m.len(), 0),
            Val::Set(s) => (s.len(), 0),
            Val::ZSet(z) => (z.len(), z.len()),
            Val::List(l) => (l.len(), 0),
            Val::Str => (0, 0),
        }
    }
}

fn check(c: &mut Raw, model: &BTreeMap<String, Val>) {
    for (k, v) in model {
        match v {
            Val::Hash(m) => {
                let mut want = format!("*{}\r\n", m.len() * 2);
                for (f, x) in m {
                    want.push_str(&format!("${}\r\n{f}\r\n${}\r\n{x}\r\n", f.len(), x.len()));
                }
                assert_eq!(c.call(&["HGETALL", k]), want, "{k}");
            }
            Val::Set(s) => {
                let mut want = format!("*{}\r\n", s.len());
                for m in s {
                    want.push_str(&format!("${}\r\n{m}\r\n", m.len()));
                }
                assert_eq!(c.call(&["SMEMBERS", k]), want, "{k}");
            }
            Val::ZSet(z) => {
                assert_eq!(c.call(&["ZCARD", k]), format!(":{}\r\n", z.len()), "{k}");
                for (m, s) in z {
                    let s = s.to_string();
                    assert_eq!(
                        c.call(&["ZSCORE", k, m]),
                        format!("${}\r\n{s}\r\n", s.len())
                    );
                }
            }
            Val::List(l) => {
                let mut want = format!("*{}\r\n", l.len());
                for e in l {
                    want.push_str(&format!("${}\r\n{e}\r\n", e.len()));
                }
                assert_eq!(c.call(&["LRANGE", k, "0", "-1"]), want, "{k}");
            }
            Val::Str => assert_eq!(c.call(&["TYPE", k]), "+string\r\n"),
        }
    }
    assert_eq!(c.call(&["DBSIZE"]), format!(":{}\r\n", model.len()));
}

/// Random writes in two databases, SWAPDBs and SELECTs, FLUSHDBs,
/// rewrites and reopens against a model of both databases: SWAPDB moves no
/// record, so after every rewrite the record count is still the live
/// element count of the two.
#[test]
fn random_writes_compactions_and_reopens_match_a_model() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(14);
    let fs = MemFs::new();
    let mut db = open(&fs);
    let mut run = start(db.clone());
    let mut c = Raw::connect(run.port);
    let mut models: [BTreeMap<String, Val>; 2] = [BTreeMap::new(), BTreeMap::new()];
    let mut cur = 0;
    for step in 0..800 {
        let k = format!("k{}", rng.gen_range(0..6));
        let m = format!("m{}", rng.gen_range(0..20));
        let model = &mut models[cur];
        match rng.gen_range(0..100) {
            0..=19 => {
                let x = rng.gen_range(0..100).to_string();
                let r = c.call(&["HSET", &k, &m, &x]);
                match model.get_mut(&k) {
                    Some(Val::Hash(h)) => drop(h.insert(m, x)),
                    Some(_) => assert!(r.starts_with("-WRONGTYPE"), "{r}"),
                    None => drop(model.insert(k, Val::Hash([(m, x)].into()))),
                }
            }
            20..=34 => {
                let r = c.call(&["SADD", &k, &m]);
                match model.get_mut(&k) {
                    Some(Val::Set(s)) => drop(s.insert(m)),
                    Some(_) => assert!(r.starts_with("-WRONGTYPE"), "{r}"),
                    None => drop(model.insert(k, Val::Set([m].into()))),
                }
            }
            35..=49 => {
                let s: i64 = rng.gen_range(-5..5);
                let r = c.call(&["ZADD", &k, &s.to_string(), &m]);
                match model.get_mut(&k) {
                    Some(Val::ZSet(z)) => drop(z.insert(m, s)),
                    Some(_) => assert!(r.starts_with("-WRONGTYPE"), "{r}"),
                    None => drop(model.insert(k, Val::ZSet([(m, s)].into()))),
                }
            }
            50..=64 => {
                let r = c.call(&["RPUSH", &k, &m]);
                match model.get_mut(&k) {
                    Some(Val::List(l)) => l.push(m),
                    Some(_) => assert!(r.starts_with("-WRONGTYPE"), "{r}"),
                    None => drop(model.insert(k, Val::List(vec![m]))),
                }
            }
            65..=72 => {
                // Removals delete sub-records themselves (not stale).
                let r = c.call(&["SREM", &k, &m]);
                match model.get_mut(&k) {
                    Some(Val::Set(s)) => {
                        s.remove(&m);
                        if s.is_empty() {
                            model.remove(&k);
                        }
                    }
                    Some(_) => assert!(r.starts_with("-WRONGTYPE"), "{r}"),
                    None => {}
                }
            }
            73..=80 => {
                c.call(&["DEL", &k]);
                model.remove(&k);
            }
            81..=86 => {
                assert_eq!(c.call(&["SET", &k, "v"]), "+OK\r\n");
                model.insert(k, Val::Str);
            }
            87 => {
                assert_eq!(c.call(&["FLUSHDB"]), "+OK\r\n");
                model.clear();
            }
            88..=90 => {
                assert_eq!(c.call(&["SWAPDB", "0", "1"]), "+OK\r\n");
                models.swap(0, 1);
            }
            91..=93 => {
                cur = 1 - cur;
                assert_eq!(c.call(&["SELECT", &cur.to_string()]), "+OK\r\n");
            }
            94..=97 => {
                rewrite(&db);
                let want = models.iter().flat_map(|m| m.values()).fold((0, 0), |a, v| {
                    let r = v.records();
                    (a.0 + r.0, a.1 + r.1)
                });
                assert_eq!(sub_records(&db, None), want, "step {step}");
            }
            _ => {
                drop(c);
                run.stop();
                drop(db);
                db = open(&fs);
                run = start(db.clone());
                c = Raw::connect(run.port);
                assert_eq!(c.call(&["SELECT", &cur.to_string()]), "+OK\r\n");
            }
        }
        if step % 50 == 0 {
            check_both(&mut c, &models, cur);
        }
    }
    rewrite(&db);
    check_both(&mut c, &models, cur);
    drop(c);
    run.stop();
}

/// [`check`] of databases 0 and 1; the connection ends on `cur`.
fn check_both(c: &mut Raw, models: &[BTreeMap<String, Val>; 2], cur: usize) {
    for (i, model) in models.iter().enumerate() {
        assert_eq!(c.call(&["SELECT", &i.to_string()]), "+OK\r\n");
        check(c, model);
    }
    assert_eq!(c.call(&["SELECT", &cur.to_string()]), "+OK\r\n");
}
