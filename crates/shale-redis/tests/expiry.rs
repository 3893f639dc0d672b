//! Active expiry: keys with a TTL are deleted by the background cycle
//! without any client touching them (INFO `expired_keys` counts them), and
//! after a restart too (the expiry index is on disk).
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{start_shale, Raw, PW};
use std::time::{Duration, Instant};

fn expired_keys(c: &mut Raw) -> u64 {
    let info = c.call(&["INFO", "stats"]);
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .unwrap_or_else(|| panic!("no expired_keys in {info:?}"));
    line.trim().parse().unwrap()
}

/// Polls until `expired_keys` reaches `n` (the cycle runs every 100 ms).
fn wait_for(c: &mut Raw, n: u64) {
    let t0 = Instant::now();
    while expired_keys(c) < n {
        assert!(t0.elapsed() < Duration::from_secs(10), "expiry cycle stuck");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(expired_keys(c), n);
}

#[test]
fn untouched_keys_expire_in_the_background_and_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    assert_eq!(c.call(&["SET", "s", "v", "PX", "50"]), "+OK\r\n");
    assert_eq!(c.call(&["RPUSH", "l", "a", "b"]), ":2\r\n");
    assert_eq!(c.call(&["PEXPIRE", "l", "50"]), ":1\r\n");
    // A TTL removed before it fires: never counted.
    assert_eq!(c.call(&["SET", "p", "v", "PX", "60"]), "+OK\r\n");
    assert_eq!(c.call(&["PERSIST", "p"]), ":1\r\n");
    assert_eq!(c.call(&["SET", "later", "v", "PX", "700"]), "+OK\r\n");
    wait_for(&mut c, 2);
    assert_eq!(c.call(&["EXISTS", "s", "l", "p", "later"]), ":2\r\n");
    drop(c);
    assert!(s.terminate().success());

    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    wait_for(&mut c, 1);
    assert_eq!(c.call(&["EXISTS", "p", "later"]), ":1\r\n");
    assert_eq!(c.call(&["DBSIZE"]), ":1\r\n");
}

/// A watched key that expires (and is deleted by the cycle) before EXEC
/// aborts it, on both servers; an untouched one with a TTL does not.
#[test]
fn watched_key_expiring_aborts_exec_like_redis() {
    use common::{compare_scenario, Step::*};
    compare_scenario(
        1,
        &[],
        &[
            Call(0, &["SET", "k", "v", "PX", "100"]),
            Call(0, &["SET", "long", "v", "EX", "100"]),
            Call(0, &["WATCH", "k", "long"]),
            Sleep(600),
            Call(0, &["DBSIZE"]),
            Call(0, &["MULTI"]),
            Call(0, &["GET", "long"]),
            Call(0, &["EXEC"]),
            Call(0, &["WATCH", "long"]),
            Call(0, &["MULTI"]),
            Call(0, &["GET", "long"]),
            Call(0, &["EXEC"]),
        ],
    );
}
