//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX)
//! with several clients, run the same way against redis-server and
//! shale-redis-server: the transcripts must match byte for byte. Each
//! blocking send is followed by a short sleep so the server has queued the
//! client before the next step (Redis serves blocked clients in that order).
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{compare_scenario, Step::*};

const T: u64 = 100;

#[test]
fn immediate_forms_and_argument_errors() {
    compare_scenario(
        1,
        &[],
        &[
            Call(0, &["RPUSH", "a", "1", "2"]),
            Call(0, &["BLPOP", "nokey", "a", "0"]),
            Call(0, &["BRPOP", "a", "0"]),
            Call(0, &["BRPOP", "a", "0.05"]),
            Call(0, &["SET", "s", "x"]),
            Call(0, &["BLPOP", "s", "a", "0"]),
            Call(0, &["BLPOP", "nokey", "x"]),
            Call(0, &["BLPOP", "nokey", "-1"]),
            Call(0, &["BLPOP", "nokey", "inf"]),
            Call(0, &["BLPOP", "nokey", "1e20"]),
            Call(0, &["BLPOP", "nokey", "0.01"]),
            Call(0, &["BRPOP", "nokey"]),
            Call(0, &["RPUSH", "src", "e1", "e2"]),
            Call(0, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]),
            Call(0, &["BLMOVE", "src", "dst", "UP", "RIGHT", "0"]),
            Call(0, &["BLMOVE", "src", "s", "LEFT", "RIGHT", "0"]),
            Call(0, &["BLMOVE", "nokey", "dst", "LEFT", "RIGHT", "0.01"]),
            Call(0, &["BRPOPLPUSH", "src", "dst", "0"]),
            Call(0, &["BRPOPLPUSH", "src", "dst", "0.01"]),
            Call(0, &["LRANGE", "dst", "0", "-1"]),
            Call(0, &["ZADD", "z", "1", "a", "2", "b"]),
            Call(0, &["BZPOPMIN", "nokey", "z", "0"]),
            Call(0, &["BZPOPMAX", "z", "0"]),
            Call(0, &["BZPOPMAX", "z", "0.01"]),
            Call(0, &["BZPOPMIN", "s", "0"]),
            Call(0, &["BZPOPMIN", "z", "abc"]),
            Call(0, &["EXISTS", "z", "a"]),
            // Inside MULTI a blocking command never blocks.
            Call(0, &["MULTI"]),
            Call(0, &["BLPOP", "nokey", "0"]),
            Call(0, &["BZPOPMIN", "nokey", "0"]),
            Call(0, &["BLMOVE", "nokey", "dst", "LEFT", "LEFT", "0"]),
            Call(0, &["RPUSH", "m", "x"]),
            Call(0, &["BLPOP", "m", "0"]),
            Call(0, &["EXEC"]),
        ],
    );
}

/// Three clients blocked on one key are served in the order they blocked.
#[test]
fn blocked_clients_are_served_fifo() {
    compare_scenario(
        4,
        &[],
        &[
            Send(0, &["BLPOP", "k", "0"]),
            Sleep(T),
            Send(1, &["BLPOP", "k", "other", "0"]),
            Sleep(T),
            Send(2, &["BRPOP", "k", "0"]),
            Sleep(T),
            Call(3, &["RPUSH", "k", "a", "b", "c", "d"]),
            Read(0),
            Read(1),
            Read(2),
            Call(3, &["LRANGE", "k", "0", "-1"]),
            // One element for two waiters: the first gets it, the second waits on.
            Send(0, &["BRPOP", "one", "0"]),
            Sleep(T),
            Send(1, &["BLPOP", "one", "0"]),
            Sleep(T),
            Call(3, &["LPUSH", "one", "x"]),
            Read(0),
            Call(3, &["LPUSH", "one", "y"]),
            Read(1),
            Call(3, &["EXISTS", "one"]),
            // A client blocked on two keys is served from the one pushed.
            Send(2, &["BLPOP", "k1", "k2", "0"]),
            Sleep(T),
            Call(3, &["RPUSH", "k2", "v"]),
            Read(2),
        ],
    );
}

/// Pushes inside MULTI/EXEC wake blocked clients after EXEC, with what the
/// whole transaction left; a pop inside the same EXEC comes first.
#[test]
fn exec_wakes_blocked_clients() {
    compare_scenario(
        3,
        &[],
        &[
            Send(0, &["BLPOP", "q", "0"]),
            Sleep(T),
            Call(1, &["MULTI"]),
            Call(1, &["LPUSH", "q", "1"]),
            Call(1, &["LPUSH", "q", "2"]),
            Call(1, &["EXEC"]),
            Read(0),
            Call(1, &["LRANGE", "q", "0", "-1"]),
            Send(2, &["BLPOP", "r", "0.5"]),
            Sleep(T),
            Call(1, &["MULTI"]),
            Call(1, &["LPUSH", "r", "x"]),
            Call(1, &["LPOP", "r"]),
            Call(1, &["EXEC"]),
            Call(1, &["RPUSH", "r", "y"]),
            Read(2),
        ],
    );
}

#[test]
fn blmove_and_sorted_set_waiters() {
    compare_scenario(
        4,
        &[3],
        &[
            Send(0, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]),
            Sleep(T),
            Call(1, &["RPUSH", "src", "e1", "e2"]),
            Read(0),
            Call(1, &["LRANGE", "src", "0", "-1"]),
            Call(1, &["LRANGE", "dst", "0", "-1"]),
            // A chain: BLMOVE's push serves a client blocked on its destination.
            Send(0, &["BLPOP", "d2", "0"]),
            Sleep(T),
            Send(2, &["BRPOPLPUSH", "s2", "d2", "0"]),
            Sleep(T),
            Call(1, &["LPUSH", "s2", "z"]),
            Read(2),
            Read(0),
            Call(1, &["EXISTS", "s2", "d2"]),
            Send(0, &["BZPOPMIN", "zz", "0"]),
            Sleep(T),
            Send(3, &["BZPOPMAX", "zz", "0"]),
            Sleep(T),
            Call(1, &["ZADD", "zz", "2", "b", "1", "a", "3", "c"]),
            Read(0),
            Read(3),
            Call(1, &["ZRANGE", "zz", "0", "-1", "WITHSCORES"]),
            // A list push does not serve a sorted-set waiter (it times out),
            // and a list waiter on a key SET to a string keeps waiting.
            Send(0, &["BZPOPMIN", "t", "0.3"]),
            Sleep(T),
            Call(1, &["LPUSH", "t", "x"]),
            Read(0),
            Send(2, &["BLPOP", "u", "0.3"]),
            Sleep(T),
            Call(1, &["SET", "u", "str"]),
            Read(2),
        ],
    );
}

/// Timeouts, and a client that disconnects while blocked: the element
/// pushed afterwards stays in the list (nobody takes it for the dead client).
#[test]
fn timeouts_and_disconnected_waiters() {
    compare_scenario(
        3,
        &[2],
        &[
            Call(0, &["BLPOP", "none", "0.1"]),
            Call(2, &["BLPOP", "none", "0.1"]),
            Call(0, &["BLMOVE", "none", "x", "LEFT", "LEFT", "0.1"]),
            Call(2, &["BZPOPMAX", "none", "0.1"]),
            Send(0, &["BLPOP", "gone", "0"]),
            Sleep(T),
            Close(0),
            Sleep(3 * T),
            Call(1, &["LPUSH", "gone", "v"]),
            Call(1, &["LLEN", "gone"]),
        ],
    );
}

/// redis-cli blocked in BLPOP / BZPOPMAX prints what a push from another
/// redis-cli hands it; the same output from both servers.
#[test]
fn redis_cli_blocked_until_another_client_pushes() {
    use common::{cli, PW};
    use std::process::{Command, Stdio};
    fn session(port: u16) -> Vec<String> {
        let mut out = Vec::new();
        for (block, push) in [
            (
                &["BLPOP", "jobs", "0"][..],
                &["RPUSH", "jobs", "j1", "j2"][..],
            ),
            (
                &["BZPOPMAX", "zjobs", "5"][..],
                &["ZADD", "zjobs", "1", "a", "2", "b"][..],
            ),
        ] {
            let child = Command::new("redis-cli")
                .args(["-p", &port.to_string(), "-a", PW, "--no-auth-warning"])
                .args(block)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            out.push(cli(port, push));
            let done = child.wait_with_output().unwrap();
            out.push(String::from_utf8_lossy(&done.stdout).into_owned());
        }
        out.push(cli(port, &["LRANGE", "jobs", "0", "-1"]));
        out
    }
    let want = common::on_both_servers(session);
    assert!(want[1].contains("j1"), "{want:?}");
}
