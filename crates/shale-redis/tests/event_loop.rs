//! The event loops (`reactor`): a connection that would make its loop wait
//! moves to a thread of its own, so the other connections on that loop go
//! on; replies stay in order across the move; `--io-threads 0` (a thread
//! per connection) still serves.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{cli, start_shale_with, Raw, PW};
use std::io::Write;
use std::time::{Duration, Instant};

fn authed(port: u16) -> Raw {
    let mut c = Raw::connect(port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    c
}

/// With one loop every connection shares it: a DEBUG SLEEP run on the
/// loop would hold up every other client for its whole length.
#[test]
fn a_sleeping_client_does_not_stall_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale_with(dir.path(), &["--io-threads", "1"]);
    let mut sleeper = authed(s.port);
    let mut others: Vec<Raw> = (0..3).map(|_| authed(s.port)).collect();
    let t0 = Instant::now();
    sleeper.send(&["DEBUG", "SLEEP", "4"]);
    std::thread::sleep(Duration::from_millis(100));
    for (i, c) in others.iter_mut().enumerate() {
        assert_eq!(c.call(&["SET", &format!("k{i}"), "v"]), "+OK\r\n");
        assert_eq!(c.call(&["GET", &format!("k{i}")]), "$1\r\nv\r\n");
    }
    let others_done = t0.elapsed();
    assert_eq!(sleeper.reply(), "+OK\r\n");
    assert!(
        others_done < Duration::from_secs(3),
        "the other clients waited {others_done:?} behind DEBUG SLEEP 4"
    );
    // The moved connection keeps working, in order.
    assert_eq!(sleeper.call(&["GET", "k0"]), "$1\r\nv\r\n");
}

/// A client that pipelines far more reply bytes than the socket holds and
/// reads nothing yet: the loop cannot write them without waiting, so the
/// connection moves to a thread; meanwhile another client on the same loop
/// is served, and the first then reads every reply, in order.
#[test]
fn a_client_that_does_not_read_moves_to_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale_with(dir.path(), &["--io-threads", "1"]);
    let mut big = authed(s.port);
    let value = "x".repeat(512 * 1024);
    assert_eq!(big.call(&["SET", "big", &value]), "+OK\r\n");
    const GETS: usize = 64; // 32 MiB of replies
    let mut bytes = Vec::new();
    for i in 0..GETS {
        let k = i.to_string();
        bytes.extend(Raw::encode(&[b"GET", b"big"]));
        bytes.extend(Raw::encode(&[b"SET", b"n", k.as_bytes()]));
    }
    big.w.write_all(&bytes).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut other = authed(s.port);
    assert_eq!(other.call(&["INCR", "other"]), ":1\r\n");
    for _ in 0..GETS {
        let r = big.reply();
        assert_eq!(r.len(), value.len() + "$524288\r\n\r\n".len());
        assert_eq!(big.reply(), "+OK\r\n");
    }
    assert_eq!(big.call(&["GET", "n"]), format!("$2\r\n{}\r\n", GETS - 1));
}

#[test]
fn a_thread_per_connection_still_serves() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale_with(dir.path(), &["--io-threads", "0"]);
    let mut c = authed(s.port);
    assert_eq!(c.call(&["RPUSH", "l", "a", "b"]), ":2\r\n");
    assert_eq!(
        c.call(&["LRANGE", "l", "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(cli(s.port, &["llen", "l"]), "2");
}
