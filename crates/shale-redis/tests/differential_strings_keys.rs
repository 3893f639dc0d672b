//! GETEX, GETRANGE, SETRANGE, EXPIRETIME / PEXPIRETIME, MOVE, RANDOMKEY,
//! TIME, LASTSAVE and SHUTDOWN: replies compared with a real redis-server
//! (RESP2 and RESP3), then the commands whose replies depend on the clock
//! or on chance checked for their shape, and SHUTDOWN for its effect.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{compare_script, start_shale, Raw, PW};

const SCRIPT: &[&[&str]] = &[
    // GETRANGE: Redis's clamping of negative and out-of-range indexes.
    &["SET", "s", "Hello, World"],
    &["GETRANGE", "s", "0", "4"],
    &["GETRANGE", "s", "-5", "-1"],
    &["GETRANGE", "s", "-100", "2"],
    &["GETRANGE", "s", "5", "1000"],
    &["GETRANGE", "s", "7", "3"],
    &["GETRANGE", "s", "-1", "-5"],
    &["GETRANGE", "s", "100", "200"],
    &["GETRANGE", "s", "0", "-1"],
    &["GETRANGE", "nokey", "0", "10"],
    &["GETRANGE", "s", "x", "1"],
    &["GETRANGE", "s", "0"],
    // SETRANGE: overwrite, zero padding, a missing key, errors.
    &["SETRANGE", "s", "7", "Redis"],
    &["GET", "s"],
    &["SETRANGE", "s", "20", "!"],
    &["GET", "s"],
    &["STRLEN", "s"],
    &["SETRANGE", "new", "3", "abc"],
    &["GET", "new"],
    &["SETRANGE", "empty", "5", ""],
    &["EXISTS", "empty"],
    &["SETRANGE", "s", "0", ""],
    &["SETRANGE", "s", "-1", "x"],
    &["SETRANGE", "s", "x", "x"],
    &["SETRANGE", "s", "536870912", "x"],
    &["SETRANGE", "s", "536870911", ""],
    &["RPUSH", "list", "a"],
    &["SETRANGE", "list", "0", "x"],
    &["GETRANGE", "list", "0", "1"],
    // GETEX: options, conflicts, errors, expiry set and removed.
    &["SET", "g", "v"],
    &["GETEX", "g"],
    &["TTL", "g"],
    &["GETEX", "g", "EX", "100"],
    &["TTL", "g"],
    &["GETEX", "g", "PX", "200000"],
    &["TTL", "g"],
    &["GETEX", "g", "PERSIST"],
    &["TTL", "g"],
    &["GETEX", "g", "EXAT", "4102444800"],
    &["EXPIRETIME", "g"],
    &["PEXPIRETIME", "g"],
    &["GETEX", "g", "PXAT", "4102444800123"],
    &["PEXPIRETIME", "g"],
    &["EXPIRETIME", "g"],
    &["GETEX", "g", "EX", "0"],
    &["GETEX", "g", "EX", "-5"],
    &["GETEX", "g", "EX", "abc"],
    &["GETEX", "g", "EX"],
    &["GETEX", "g", "EX", "10", "PX", "10"],
    &["GETEX", "g", "PERSIST", "EX", "10"],
    &["GETEX", "g", "KEEPTTL"],
    &["GETEX", "g", "NX"],
    &["GETEX", "g", "EX", "9223372036854775807"],
    &["GETEX", "nokey", "EX", "10"],
    &["GETEX", "nokey", "EX", "0"],
    &["GETEX", "list", "EX", "10"],
    &["GETEX", "list"],
    &["GETEX", "g", "EXAT", "1"],
    &["EXISTS", "g"],
    // EXPIRETIME / PEXPIRETIME.
    &["EXPIRETIME", "nokey"],
    &["PEXPIRETIME", "nokey"],
    &["EXPIRETIME", "s"],
    &["SET", "e", "v", "PXAT", "4102444800499"],
    &["EXPIRETIME", "e"],
    &["SET", "e", "v", "PXAT", "4102444800500"],
    &["EXPIRETIME", "e"],
    &["PEXPIRETIME", "e"],
    &["EXPIRETIME"],
    // MOVE: to another db, onto an existing key, same db, bad index.
    &["SET", "m", "v1", "EX", "1000"],
    &["MOVE", "m", "1"],
    &["EXISTS", "m"],
    &["SELECT", "1"],
    &["GET", "m"],
    &["TTL", "m"],
    &["SET", "m2", "in1"],
    &["SELECT", "0"],
    &["SET", "m2", "in0"],
    &["MOVE", "m2", "1"],
    &["GET", "m2"],
    &["HSET", "h", "f", "1", "g", "2"],
    &["MOVE", "h", "2"],
    &["SELECT", "2"],
    &["HGETALL", "h"],
    &["MOVE", "h", "2"],
    &["SELECT", "0"],
    &["MOVE", "nokey", "1"],
    &["MOVE", "s", "16"],
    &["MOVE", "s", "-1"],
    &["MOVE", "s", "x"],
    &["MOVE", "s"],
    // RANDOMKEY on an empty db and on a db with one key.
    &["SELECT", "9"],
    &["RANDOMKEY"],
    &["SET", "only", "1"],
    &["RANDOMKEY"],
    &["RANDOMKEY", "x"],
    &["SELECT", "0"],
    &["TIME", "x"],
    &["LASTSAVE", "x"],
    // SHUTDOWN's refusals (a successful one ends the server).
    &["SHUTDOWN", "ABORT"],
    &["SHUTDOWN", "SAVE", "NOSAVE"],
    &["SHUTDOWN", "ABORT", "NOW"],
    &["SHUTDOWN", "BOGUS"],
];

#[test]
fn strings_and_keys_commands_match_redis_server() {
    compare_script(SCRIPT, true, false, &[]);
}

#[test]
fn strings_and_keys_commands_match_redis_server_in_resp3() {
    compare_script(SCRIPT, true, true, &[]);
}

/// TIME is now; LASTSAVE is the start; RANDOMKEY returns only live keys and,
/// over many calls, more than one of them.
#[test]
fn time_lastsave_and_randomkey() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let time = c.call(&["TIME"]);
    let parts: Vec<&str> = time.split("\r\n").collect();
    assert_eq!(parts[0], "*2", "{time}");
    let secs: u64 = parts[2].parse().unwrap();
    let micros: u64 = parts[4].parse().unwrap();
    assert!(secs.abs_diff(now) <= 2 && micros < 1_000_000, "{time}");
    let last: u64 = c.call(&["LASTSAVE"])[1..].trim().parse().unwrap();
    assert!(
        last <= secs && secs - last < 60,
        "LASTSAVE {last}, now {secs}"
    );
    for i in 0..20 {
        assert_eq!(c.call(&["SET", &format!("k{i}"), "v"]), "+OK\r\n");
    }
    assert_eq!(c.call(&["SET", "gone", "v", "PX", "1"]), "+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let r = c.call(&["RANDOMKEY"]);
        let key = r.split("\r\n").nth(1).unwrap().to_string();
        assert!(key.starts_with('k'), "RANDOMKEY gave {r:?}");
        seen.insert(key);
    }
    assert!(seen.len() > 5, "RANDOMKEY chose only {seen:?}");
}

/// SHUTDOWN closes the connection without a reply and the server exits
/// cleanly; what was acknowledged before it is there after a restart.
#[test]
fn shutdown_stops_the_server_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    assert_eq!(c.call(&["SET", "kept", "yes"]), "+OK\r\n");
    c.send(&["SHUTDOWN", "NOSAVE"]);
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut c.r, &mut rest).unwrap();
    assert!(rest.is_empty(), "SHUTDOWN replied {rest:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(std::time::Instant::now() < deadline, "still running");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let s = start_shale(dir.path());
    assert_eq!(common::cli(s.port, &["get", "kept"]), "yes");
}
