//! The server as the `redis` crate (redis-rs), the Rust client
//! applications use, sees it: typed replies of every data type, atomic
//! pipelines, the WATCH retry loop of `redis::transaction`, SCAN
//! iteration, pub/sub, a selected database in the URL, RESP3, and a wrong
//! password refused.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{start_shale, PW};
use redis::Commands;
use std::collections::{BTreeSet, HashMap};

fn url(port: u16, db: u8, resp3: bool) -> String {
    let proto = if resp3 { "?protocol=resp3" } else { "" };
    format!("redis://:{PW}@127.0.0.1:{port}/{db}{proto}")
}

/// Every data type through the crate's typed API, on RESP2 and RESP3.
fn data_types(con: &mut redis::Connection) {
    let _: () = con.set("s", "v").unwrap();
    assert_eq!(con.get::<_, String>("s").unwrap(), "v");
    assert_eq!(con.get::<_, Option<String>>("nokey").unwrap(), None);
    let _: () = con.set_ex("ttl", 1, 100).unwrap();
    let ttl: i64 = con.ttl("ttl").unwrap();
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(con.incr::<_, _, i64>("n", 5).unwrap(), 5);
    assert_eq!(con.incr::<_, _, f64>("f", 2.5).unwrap(), 2.5);
    let _: () = con.mset(&[("m1", "a"), ("m2", "b")]).unwrap();
    let got: Vec<Option<String>> = con.mget(&["m1", "nokey", "m2"]).unwrap();
    assert_eq!(got, [Some("a".into()), None, Some("b".into())]);

    let _: () = con.hset_multiple("h", &[("f1", 1), ("f2", 2)]).unwrap();
    let h: HashMap<String, i64> = con.hgetall("h").unwrap();
    assert_eq!(h, HashMap::from([("f1".into(), 1), ("f2".into(), 2)]));
    assert_eq!(con.hincr::<_, _, _, i64>("h", "f1", 10).unwrap(), 11);

    assert_eq!(con.rpush::<_, _, i64>("l", &["a", "b", "c"]).unwrap(), 3);
    assert_eq!(
        con.lrange::<_, Vec<String>>("l", 0, -1).unwrap(),
        ["a", "b", "c"]
    );
    assert_eq!(
        con.lpop::<_, Option<String>>("l", None).unwrap(),
        Some("a".into())
    );

    assert_eq!(con.sadd::<_, _, i64>("set", &["x", "y", "x"]).unwrap(), 2);
    let members: BTreeSet<String> = con.smembers("set").unwrap();
    assert_eq!(members, BTreeSet::from(["x".into(), "y".into()]));
    assert!(con.sismember::<_, _, bool>("set", "y").unwrap());

    let _: () = con
        .zadd_multiple("z", &[(1.5, "one"), (3.0, "three")])
        .unwrap();
    let z: Vec<(String, f64)> = con.zrange_withscores("z", 0, -1).unwrap();
    assert_eq!(z, [("one".into(), 1.5), ("three".into(), 3.0)]);
    assert_eq!(
        con.zscore::<_, _, Option<f64>>("z", "three").unwrap(),
        Some(3.0)
    );

    // WRONGTYPE comes back as the crate's typed server error.
    let e = con.get::<_, String>("h").unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"), "{e}");
}

#[test]
fn redis_rs_typed_commands_resp2_and_resp3() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    for (db, resp3) in [(0, false), (1, true)] {
        let client = redis::Client::open(url(s.port, db, resp3)).unwrap();
        let mut con = client.get_connection().unwrap();
        data_types(&mut con);
        assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap(), 10);
    }
    // The two runs went to their own databases (the URL's /db).
    let client = redis::Client::open(url(s.port, 1, false)).unwrap();
    let mut con = client.get_connection().unwrap();
    let _: () = con.set("only1", "x").unwrap();
    let mut con0 = redis::Client::open(url(s.port, 0, false))
        .unwrap()
        .get_connection()
        .unwrap();
    assert!(!con0.exists::<_, bool>("only1").unwrap());
}

#[test]
fn redis_rs_pipelines_transactions_scan_and_pubsub() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let client = redis::Client::open(url(s.port, 0, false)).unwrap();
    let mut con = client.get_connection().unwrap();

    // An atomic pipeline is MULTI ... EXEC.
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .incr("p", 1)
        .incr("p", 1)
        .query(&mut con)
        .unwrap();
    assert_eq!((a, b), (1, 2));
    // A plain pipeline of 1,000 commands.
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.set(format!("k{i}"), i).ignore();
    }
    pipe.get("k999");
    let (last,): (i64,) = pipe.query(&mut con).unwrap();
    assert_eq!(last, 999);

    // redis::transaction retries while another client changes the key.
    let mut other = client.get_connection().unwrap();
    let mut attempts = 0;
    let (v,): (i64,) = redis::transaction(&mut con, &["t"], |con, pipe| {
        attempts += 1;
        let cur: i64 = con.get::<_, Option<i64>>("t")?.unwrap_or(0);
        if attempts == 1 {
            let _: () = other.set("t", 100)?;
        }
        pipe.set("t", cur + 1).ignore().get("t").query(con)
    })
    .unwrap();
    assert_eq!((v, attempts), (101, 2));

    // SCAN through the crate's cursor iterator sees every key once.
    let keys: BTreeSet<String> = con
        .scan_match::<_, String>("k*")
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(keys.len(), 1000);

    // Pub/sub on a connection of its own.
    let mut sub_con = client.get_connection().unwrap();
    let mut sub = sub_con.as_pubsub();
    sub.subscribe("news").unwrap();
    sub.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    assert_eq!(con.publish::<_, _, i64>("news", "hello").unwrap(), 1);
    let msg = sub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "news");
    assert_eq!(msg.get_payload::<String>().unwrap(), "hello");

    // SWAPDB through the generic command API.
    let _: () = redis::cmd("SWAPDB").arg(0).arg(1).query(&mut con).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap(), 0);
}

#[test]
fn redis_rs_wrong_password_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let bad = format!("redis://:wrong@127.0.0.1:{}/0", s.port);
    let e = redis::Client::open(bad)
        .unwrap()
        .get_connection()
        .err()
        .expect("a wrong password was accepted");
    assert_eq!(e.kind(), redis::ErrorKind::AuthenticationFailed, "{e}");
    let none = format!("redis://127.0.0.1:{}/0", s.port);
    let mut con = redis::Client::open(none).unwrap().get_connection().unwrap();
    let e = con.get::<_, String>("k").unwrap_err();
    assert_eq!(e.code(), Some("NOAUTH"), "{e}");
}
