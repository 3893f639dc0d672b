//! Clients that never read (docs/redis.md, "Output buffers"): a stuck
//! subscriber or tracking REDIRECT target neither stalls the clients that
//! publish / write nor makes the server buffer without bound; it is
//! disconnected once its backlog passes client-output-buffer-limit.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{start_shale, Raw, PW};
use std::time::{Duration, Instant};

fn connect(port: u16) -> Raw {
    let mut c = Raw::connect(port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    c
}

fn id(c: &mut Raw) -> String {
    c.call(&["CLIENT", "ID"])[1..].trim().to_string()
}

/// The client's `omem=` in CLIENT LIST, None once it is gone.
fn omem(c: &mut Raw, id: &str) -> Option<u64> {
    let line = c.call(&["CLIENT", "LIST", "ID", id]);
    let v = line.split(' ').find_map(|f| f.strip_prefix("omem="))?;
    Some(v.parse().unwrap())
}

const LIMIT: u64 = 1 << 20;
/// Each call must come back well before the old 10 s slow-client wait.
const QUICK: Duration = Duration::from_secs(2);

#[test]
fn a_subscriber_that_never_reads_is_dropped_without_stalling_publishers() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let mut sub = connect(s.port);
    let sub_id = id(&mut sub);
    assert!(sub.call(&["SUBSCRIBE", "ch"]).contains("subscribe"));
    // From here on `sub` never reads.
    let mut p = connect(s.port);
    assert_eq!(
        p.call(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 256kb 60"
        ]),
        "+OK\r\n"
    );
    let msg = "m".repeat(64 << 10);
    let mut dropped = false;
    let mut most = 0;
    for _ in 0..600 {
        let t = Instant::now();
        let r = p.call(&["PUBLISH", "ch", &msg]);
        assert!(t.elapsed() < QUICK, "PUBLISH stalled {:?}", t.elapsed());
        if r == ":0\r\n" {
            dropped = true;
            break;
        }
        assert_eq!(r, ":1\r\n");
        let Some(m) = omem(&mut p, &sub_id) else {
            dropped = true;
            break;
        };
        most = most.max(m);
    }
    assert!(dropped, "the stuck subscriber was never disconnected");
    assert!(most <= LIMIT + (64 << 10) + 100, "backlog reached {most}");
    assert_eq!(omem(&mut p, &sub_id), None);
    assert_eq!(
        p.call(&["PUBSUB", "NUMSUB", "ch"]),
        "*2\r\n$2\r\nch\r\n:0\r\n"
    );
}

#[test]
fn a_stuck_redirect_target_does_not_stall_writers() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let mut target = connect(s.port);
    let target_id = id(&mut target);
    assert!(target
        .call(&["SUBSCRIBE", "__redis__:invalidate"])
        .contains("subscribe"));
    // From here on `target` never reads.
    let mut reader = connect(s.port);
    assert_eq!(
        reader.call(&["CLIENT", "TRACKING", "on", "REDIRECT", &target_id]),
        "+OK\r\n"
    );
    let mut w = connect(s.port);
    assert_eq!(
        w.call(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 256kb 60"
        ]),
        "+OK\r\n"
    );
    let mut dropped = false;
    for i in 0..3000 {
        // Long key names make long invalidation messages.
        let key = format!("{i:06}{}", "k".repeat(16 << 10));
        assert_eq!(reader.call(&["GET", &key]), "$-1\r\n");
        let t = Instant::now();
        assert_eq!(w.call(&["SET", &key, "v"]), "+OK\r\n");
        assert!(t.elapsed() < QUICK, "SET stalled {:?}", t.elapsed());
        if i % 20 == 0 && omem(&mut w, &target_id).is_none() {
            dropped = true;
            break;
        }
    }
    assert!(dropped, "the stuck redirect target was never disconnected");
    // The tracking client carries on; its redirect is broken now.
    assert_eq!(reader.call(&["GET", "x"]), "$-1\r\n");
    assert_eq!(w.call(&["SET", "x", "1"]), "+OK\r\n");
}
