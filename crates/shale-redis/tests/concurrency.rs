//! Read-modify-write commands from many connections at once are atomic.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{cli, start_shale, Raw, PW};

#[test]
fn concurrent_incr_hincrby_append_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let port = s.port;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Raw::connect(port);
                assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
                for i in 0..200 {
                    assert!(c.call(&["INCR", "n"]).starts_with(':'));
                    assert!(c.call(&["HINCRBY", "h", "n", "2"]).starts_with(':'));
                    assert!(c
                        .call(&["HSET", "h", &format!("t{t}i{i}"), "x"])
                        .starts_with(':'));
                    assert!(c.call(&["APPEND", "s", "x"]).starts_with(':'));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(cli(port, &["get", "n"]), "1600");
    assert_eq!(cli(port, &["hget", "h", "n"]), "3200");
    assert_eq!(cli(port, &["hlen", "h"]), "1601");
    assert_eq!(cli(port, &["strlen", "s"]), "1600");
    assert_eq!(
        cli(port, &["config", "get", "append*"]),
        "appendonly\nyes\nappendfsync\nno"
    );
}
