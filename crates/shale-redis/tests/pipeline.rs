//! Pipelined requests: runs of data commands share one engine commit
//! (`commands::pipeline`). The replies must be exactly what redis-server
//! sends for the same bytes in one write, and concurrent pipelines on
//! shared keys must neither lose updates nor deadlock.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{cli, on_both_servers, start_shale, start_shale_with, Raw, PW};
use std::io::Write;

/// Sends every command of `script` in one write, then reads one reply each.
fn pipelined(c: &mut Raw, script: &[&[&str]]) -> Vec<String> {
    let mut bytes = Vec::new();
    for cmd in script {
        let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        bytes.extend(Raw::encode(&a));
    }
    c.w.write_all(&bytes).unwrap();
    script
        .iter()
        .map(|cmd| format!("{cmd:?} -> {}", c.reply()))
        .collect()
}

#[test]
fn a_pipeline_gets_redis_replies_in_order() {
    let script: &[&[&str]] = &[
        &["AUTH", PW],
        &["SET", "a", "1"],
        &["INCR", "a"],
        &["INCRBY", "a", "5"],
        &["GET", "a"],
        // A failing command in the middle of a batch changes nothing.
        &["LPUSH", "a", "x"],
        &["INCR", "a"],
        &["HSET", "h", "f", "1", "g", "2"],
        &["HINCRBY", "h", "f", "10"],
        &["HGETALL", "h"],
        &["RPUSH", "l", "1", "2", "3"],
        &["LPOP", "l"],
        &["LRANGE", "l", "0", "-1"],
        // Not batched: the batch before it commits first.
        &["CLIENT", "SETNAME", "p"],
        &["SADD", "s", "m1", "m2"],
        &["SREM", "s", "m1"],
        &["SMEMBERS", "s"],
        &["ZADD", "z", "1", "one", "2", "two"],
        &["ZINCRBY", "z", "5", "one"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["MSET", "m1", "a", "m2", "b", "m3", "c"],
        &["MGET", "m1", "m2", "m3", "nope"],
        &["DEL", "m1", "m2"],
        &["EXISTS", "m1", "m2", "m3"],
        &["SET", "t", "v", "EX", "100"],
        &["TTL", "t"],
        &["PERSIST", "t"],
        &["TTL", "t"],
        // Wrong arity and unknown commands inside a run.
        &["GET"],
        &["NOSUCHCOMMAND", "x"],
        &["GETSET", "a", "new"],
        &["SELECT", "1"],
        &["GET", "a"],
        &["SET", "a", "db1"],
        &["SELECT", "0"],
        &["GET", "a"],
        // MULTI in a pipeline: queued, then EXEC'd as one.
        &["MULTI"],
        &["INCR", "c"],
        &["INCR", "c"],
        &["EXEC"],
        &["GET", "c"],
        &["TYPE", "h"],
        &["UNLINK", "h", "l", "s", "z"],
        &["DEL", "a", "c", "m3", "t"],
    ];
    let want = on_both_servers(|port| {
        let mut c = Raw::connect(port);
        pipelined(&mut c, script)
    });
    assert_eq!(want.len(), script.len());
}

/// Many connections pipelining read-modify-writes on shared keys, with
/// multi-key commands taking their keys in opposite orders: every
/// increment lands once, and nothing deadlocks (a hang fails the test by
/// its 10 s read timeout).
#[test]
fn concurrent_pipelines_lose_nothing_and_do_not_deadlock() {
    concurrent_pipelines(&[]);
}

/// The same on one event loop: every turn batches the requests of all the
/// connections that were ready, so batches span clients.
#[test]
fn concurrent_pipelines_on_one_event_loop() {
    concurrent_pipelines(&["--io-threads", "1"]);
}

/// And with a thread per connection (batches of one client each).
#[test]
fn concurrent_pipelines_on_threads() {
    concurrent_pipelines(&["--io-threads", "0"]);
}

fn concurrent_pipelines(server_args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale_with(dir.path(), server_args);
    let port = s.port;
    const CLIENTS: usize = 8;
    const ROUNDS: usize = 60;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Raw::connect(port);
                assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
                let (x, y) = if t % 2 == 0 {
                    ("k1", "k9")
                } else {
                    ("k9", "k1")
                };
                let tag = format!("t{t}");
                for i in 0..ROUNDS {
                    let field = format!("{tag}-{i}");
                    // Half the clients take k1 then k9, the others k9
                    // then k1, each in its own command of one batch.
                    let script: &[&[&str]] = &[
                        &["INCR", x],
                        &["INCR", y],
                        &["INCR", "n"],
                        &["HINCRBY", "h", "n", "2"],
                        &["MSET", x, "1", y, "2"],
                        &["INCR", x],
                        &["INCR", y],
                        &["HSET", "h", &field, "x"],
                        &["RPUSH", "l", &field],
                        &["ZINCRBY", "z", "1", "m"],
                        &["GET", "n"],
                    ];
                    for r in pipelined(&mut c, script) {
                        assert!(!r.contains("-ERR") && !r.contains("WRONGTYPE"), "{r}");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let total = (CLIENTS * ROUNDS).to_string();
    assert_eq!(cli(port, &["get", "n"]), total);
    assert_eq!(
        cli(port, &["hget", "h", "n"]),
        (2 * CLIENTS * ROUNDS).to_string()
    );
    assert_eq!(
        cli(port, &["hlen", "h"]),
        (CLIENTS * ROUNDS + 1).to_string()
    );
    assert_eq!(cli(port, &["llen", "l"]), total);
    assert_eq!(cli(port, &["zscore", "z", "m"]), total);
    // The last MSET left 1 or 2, and every INCR after it added one.
    let k1: i64 = cli(port, &["get", "k1"]).parse().unwrap();
    assert!(k1 >= 2, "k1 = {k1}");
}

/// The batch's writes are durable like single commands: acknowledged
/// pipelined writes survive kill -9 of the server.
#[test]
fn acknowledged_pipelined_writes_survive_kill9() {
    let dir = tempfile::tempdir().unwrap();
    let port;
    {
        let s = start_shale(dir.path());
        port = s.port;
        let mut c = Raw::connect(port);
        assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
        for i in 0..50 {
            let v = i.to_string();
            let script: &[&[&str]] = &[&["SET", "last", &v], &["RPUSH", "log", &v], &["INCR", "n"]];
            let replies = pipelined(&mut c, script);
            assert!(
                replies[2].ends_with(&format!(":{}\r\n", i + 1)),
                "{replies:?}"
            );
        }
        // `s` is dropped here: SIGKILL, no shutdown.
    }
    let _ = port;
    let s = start_shale(dir.path());
    assert_eq!(cli(s.port, &["get", "last"]), "49");
    assert_eq!(cli(s.port, &["llen", "log"]), "50");
    assert_eq!(cli(s.port, &["get", "n"]), "50");
}

/// Pipelined pops read the next elements ahead (`tx::prefetch`): pops
/// from both ends, interleaved with pushes, LINDEX and a second list, give
/// redis-server's replies exactly.
#[test]
fn pipelined_pops_read_ahead_like_redis() {
    let many: Vec<String> = (0..300).map(|i| format!("e{i}")).collect();
    let mut push: Vec<&str> = vec!["RPUSH", "q"];
    push.extend(many.iter().map(String::as_str));
    let mut script: Vec<Vec<&str>> = vec![vec!["RPUSH", "r", "a", "b"]];
    for i in 0..150 {
        script.push(vec!["RPOP", "q"]);
        match i % 10 {
            3 => script.push(vec!["LPOP", "q"]),
            5 => script.push(vec!["RPUSH", "q", "tail-new"]),
            7 => script.push(vec!["LINDEX", "q", "-1"]),
            8 => script.push(vec!["RPOP", "r"]),
            9 => script.push(vec!["LPUSH", "q", "head-new"]),
            _ => {}
        }
    }
    script.push(vec!["LRANGE", "q", "0", "-1"]);
    script.push(vec!["LLEN", "r"]);
    let script: Vec<&[&str]> = script.iter().map(Vec::as_slice).collect();
    let want = on_both_servers(|port| {
        let mut c = Raw::connect(port);
        // Committed before the pipeline, so its pops read the engine.
        assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
        assert_eq!(c.call(&push), ":300\r\n");
        pipelined(&mut c, &script)
    });
    assert_eq!(want.len(), script.len());
}

/// Consumers popping one queue with pipelines while a producer pushes:
/// every element is popped exactly once (a read-ahead must never serve an
/// element another batch popped or miss one pushed meanwhile).
#[test]
fn concurrent_pipelined_consumers_pop_each_element_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let port = s.port;
    const N: usize = 3000;
    let producer = std::thread::spawn(move || {
        let mut c = Raw::connect(port);
        assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
        for chunk in (0..N).collect::<Vec<_>>().chunks(100) {
            let names: Vec<String> = chunk.iter().map(|i| format!("v{i}")).collect();
            let mut cmd: Vec<&str> = vec!["LPUSH", "q"];
            cmd.extend(names.iter().map(String::as_str));
            assert!(c.call(&cmd).starts_with(':'));
        }
    });
    let popped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let popped = popped.clone();
            std::thread::spawn(move || {
                let mut c = Raw::connect(port);
                assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
                let mut got = Vec::new();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                while popped.load(std::sync::atomic::Ordering::SeqCst) < N {
                    assert!(std::time::Instant::now() < deadline, "consumers stalled");
                    let script: Vec<&[&str]> = vec![&["RPOP", "q"]; 16];
                    for r in pipelined(&mut c, &script) {
                        let Some(bulk) = r.split("-> $").nth(1) else {
                            continue;
                        };
                        if !bulk.starts_with("-1") {
                            got.push(bulk.lines().nth(1).unwrap().to_string());
                            popped.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                }
                got
            })
        })
        .collect();
    producer.join().unwrap();
    let mut all: Vec<String> = consumers
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(all.len(), N, "every pushed element popped once");
    all.sort();
    all.dedup();
    assert_eq!(all.len(), N, "no element popped twice");
    assert_eq!(cli(port, &["llen", "q"]), "0");
}

/// Identical LRANGEs in one batch share a reply (`tx/reply_cache.rs`); a
/// write in between, by the same client or by the batch, makes the next
/// one read again. Compared with redis-server.
#[test]
fn repeated_lranges_in_a_pipeline_see_the_writes_between_them() {
    let script: &[&[&str]] = &[
        &["LRANGE", "l", "0", "-1"],
        &["LRANGE", "l", "0", "-1"],
        &["RPUSH", "l", "c"],
        &["LRANGE", "l", "0", "-1"],
        &["LRANGE", "l", "0", "-1"],
        &["LRANGE", "l", "1", "1"],
        &["LPOP", "l"],
        &["LRANGE", "l", "0", "-1"],
        &["LRANGE", "l", "1", "1"],
        &["LSET", "l", "0", "changed"],
        &["LRANGE", "l", "0", "-1"],
        &["SET", "l", "now a string"],
        &["LRANGE", "l", "0", "-1"],
        &["DEL", "l"],
        &["LRANGE", "l", "0", "-1"],
        &["RPUSH", "l", "z"],
        &["LRANGE", "l", "0", "-1"],
    ];
    on_both_servers(|port| {
        let mut c = Raw::connect(port);
        assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
        assert_eq!(c.call(&["RPUSH", "l", "a", "b"]), ":2\r\n");
        pipelined(&mut c, script)
    });
}
