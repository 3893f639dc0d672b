//! shale-redis-server driven by the real redis-cli and by raw RESP.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{cli, cli_script, start_shale, Raw, PW};
use std::time::Duration;

#[test]
fn strings_via_redis_cli() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let p = s.port;
    assert_eq!(cli(p, &["set", "k", "hello"]), "OK");
    assert_eq!(cli(p, &["get", "k"]), "hello");
    assert_eq!(cli(p, &["append", "k", " world"]), "11");
    assert_eq!(cli(p, &["strlen", "k"]), "11");
    assert_eq!(cli(p, &["mset", "a", "1", "b", "2"]), "OK");
    assert_eq!(cli(p, &["mget", "a", "nokey", "b"]), "1\n\n2");
    assert_eq!(cli(p, &["incrby", "a", "41"]), "42");
    assert_eq!(cli(p, &["decr", "a"]), "41");
    assert_eq!(
        cli(p, &["incr", "k"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(cli(p, &["getset", "a", "x"]), "41");
    assert_eq!(cli(p, &["getdel", "a"]), "x");
    assert_eq!(cli(p, &["exists", "a", "b", "b"]), "2");
    assert_eq!(cli(p, &["del", "b", "k", "nokey"]), "2");
    assert_eq!(cli(p, &["dbsize"]), "0");
    assert_eq!(
        cli(p, &["get"]),
        "ERR wrong number of arguments for 'get' command"
    );
}

#[test]
fn hashes_via_redis_cli() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let p = s.port;
    assert_eq!(cli(p, &["hset", "h", "f1", "v1", "f2", "v2"]), "2");
    assert_eq!(cli(p, &["hset", "h", "f1", "new", "f3", "v3"]), "1");
    assert_eq!(cli(p, &["hgetall", "h"]), "f1\nnew\nf2\nv2\nf3\nv3");
    assert_eq!(cli(p, &["hlen", "h"]), "3");
    assert_eq!(cli(p, &["hdel", "h", "f2", "f2", "nof"]), "1");
    assert_eq!(cli(p, &["hkeys", "h"]), "f1\nf3");
    assert_eq!(cli(p, &["hincrby", "h", "n", "7"]), "7");
    assert_eq!(
        cli(p, &["hincrby", "h", "f1", "1"]),
        "ERR hash value is not an integer"
    );
    // DEL then HSET: a new version, the old fields are gone.
    assert_eq!(cli(p, &["del", "h"]), "1");
    assert_eq!(cli(p, &["hset", "h", "z", "1"]), "1");
    assert_eq!(cli(p, &["hgetall", "h"]), "z\n1");
    // Overwrite by SET, then a hash again: still no old fields.
    assert_eq!(cli(p, &["set", "h", "str"]), "OK");
    assert_eq!(
        cli(p, &["hset", "h", "y", "2"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(cli(p, &["del", "h"]), "1");
    assert_eq!(cli(p, &["hset", "h", "y", "2"]), "1");
    assert_eq!(cli(p, &["hgetall", "h"]), "y\n2");
    // HDEL of the last field deletes the key.
    assert_eq!(cli(p, &["hdel", "h", "y"]), "1");
    assert_eq!(cli(p, &["exists", "h"]), "0");
}

#[test]
fn expiry_is_lazy_and_exact() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let p = s.port;
    assert_eq!(cli(p, &["set", "k", "v", "px", "100"]), "OK");
    assert_eq!(cli(p, &["get", "k"]), "v");
    assert_eq!(cli(p, &["hset", "h", "f", "v"]), "1");
    assert_eq!(cli(p, &["pexpire", "h", "100"]), "1");
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(cli(p, &["get", "k"]), "");
    assert_eq!(cli(p, &["ttl", "k"]), "-2");
    assert_eq!(cli(p, &["exists", "k", "h"]), "0");
    assert_eq!(cli(p, &["hget", "h", "f"]), "");
    // Expired hash recreated: the old field must not come back.
    assert_eq!(cli(p, &["hset", "h", "g", "w"]), "1");
    assert_eq!(cli(p, &["hgetall", "h"]), "g\nw");
    assert_eq!(cli(p, &["set", "t", "v", "ex", "100"]), "OK");
    assert_eq!(cli(p, &["ttl", "t"]), "100");
    assert_eq!(cli(p, &["persist", "t"]), "1");
    assert_eq!(cli(p, &["ttl", "t"]), "-1");
    assert_eq!(cli(p, &["expire", "t", "0"]), "1");
    assert_eq!(cli(p, &["exists", "t"]), "0");
}

#[test]
fn noauth_wrongpass_and_select() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(
        c.call(&["GET", "k"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(c.call(&["PING"]), "-NOAUTH Authentication required.\r\n");
    assert_eq!(
        c.call(&["AUTH", "bad"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(c.call(&["AUTH", "default", PW]), "+OK\r\n");
    assert_eq!(c.call(&["SET", "k", "db0"]), "+OK\r\n");
    assert_eq!(c.call(&["SELECT", "15"]), "+OK\r\n");
    assert_eq!(c.call(&["GET", "k"]), "$-1\r\n");
    assert_eq!(
        c.call(&["SELECT", "16"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(c.call(&["SELECT", "0"]), "+OK\r\n");
    assert_eq!(c.call(&["GET", "k"]), "$3\r\ndb0\r\n");
    assert_eq!(c.call(&["QUIT"]), "+OK\r\n");
    assert_eq!(c.rest(), "");
}

#[test]
fn pipelining_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    let mut buf = Raw::encode(&[b"AUTH", PW.as_bytes()]);
    for i in 0..2000 {
        let k = format!("k{i}");
        buf.extend(Raw::encode(&[
            b"SET",
            k.as_bytes(),
            i.to_string().as_bytes(),
        ]));
        buf.extend(Raw::encode(&[b"INCR", k.as_bytes()]));
    }
    buf.extend(b"PING\r\n"); // an inline command at the end
    std::io::Write::write_all(&mut c.w, &buf).unwrap();
    assert_eq!(c.reply(), "+OK\r\n");
    for i in 0..2000 {
        assert_eq!(c.reply(), "+OK\r\n");
        assert_eq!(c.reply(), format!(":{}\r\n", i + 1));
    }
    assert_eq!(c.reply(), "+PONG\r\n");
    // redis-cli --pipe (mass insertion) on the same server.
    let mut mass = String::new();
    for i in 0..500 {
        mass.push_str(&format!("HSET big f{i} v{i}\r\n"));
    }
    let out = cli_script_pipe(s.port, &mass);
    assert!(out.contains("errors: 0, replies: 500"), "{out}");
    assert_eq!(cli(s.port, &["hlen", "big"]), "500");
}

fn cli_script_pipe(port: u16, data: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &port.to_string(),
            "-a",
            PW,
            "--no-auth-warning",
            "--pipe",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(data.as_bytes())
        .unwrap();
    String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned()
}

#[test]
fn protocol_errors_reply_then_close() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    for (input, msg) in [
        (&b"*1\r\n$abc\r\n"[..], "invalid bulk length"),
        (b"*1\r\n$1099511627776\r\n", "invalid bulk length"),
        (b"*x\r\n", "invalid multibulk length"),
        (b"*1\r\n*1\r\n$1\r\na\r\n", "expected '$', got '*'"),
        (b"*1\r\n$1\r\naXY", "expected CRLF after bulk data"),
        (b"SET \"a b\r\n", "unbalanced quotes in request"),
    ] {
        let mut c = Raw::connect(s.port);
        std::io::Write::write_all(&mut c.w, input).unwrap();
        assert_eq!(c.rest(), format!("-ERR Protocol error: {msg}\r\n"));
    }
    // Garbage never kills the server.
    let mut c = Raw::connect(s.port);
    std::io::Write::write_all(&mut c.w, &[0xff, 0x00, 0x2a, 0x0d, 0x0a, 0x24]).unwrap();
    drop(c);
    assert_eq!(cli(s.port, &["ping"]), "PONG");
}

#[test]
fn unknown_command_and_arity() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let out = cli_script(
        s.port,
        "foo a b\nhset h f\nset k v ex 0\nset k v xx nx\n",
        true,
    );
    // redis-cli prints an empty line after each error in this mode.
    assert_eq!(
        out,
        "ERR unknown command 'foo', with args beginning with: 'a' 'b' \n\n\
         ERR wrong number of arguments for 'hset' command\n\n\
         ERR invalid expire time in 'set' command\n\n\
         ERR syntax error\n\n"
    );
}

#[test]
fn refuses_to_start_without_password() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shale-redis-server"))
        .args(["--db", dir.path().to_str().unwrap(), "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to start without a password"));
}

#[test]
fn data_survives_restart_and_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let p = s.port;
    assert_eq!(cli(p, &["set", "s", "v1"]), "OK");
    assert_eq!(cli(p, &["hset", "h", "a", "1", "b", "2"]), "2");
    assert_eq!(cli(p, &["set", "t", "v", "ex", "1000"]), "OK");
    assert_eq!(cli(p, &["-n", "3", "set", "d3", "x"]), "OK");
    assert!(s.terminate().success(), "clean shutdown on SIGTERM");

    let s = start_shale(dir.path());
    let p = s.port;
    assert_eq!(cli(p, &["get", "s"]), "v1");
    assert_eq!(cli(p, &["hgetall", "h"]), "a\n1\nb\n2");
    let ttl: i64 = cli(p, &["ttl", "t"]).parse().unwrap();
    assert!((990..=1000).contains(&ttl), "ttl {ttl}");
    assert_eq!(cli(p, &["-n", "3", "get", "d3"]), "x");
    // Acknowledged writes, then SIGKILL with no shutdown at all.
    let mut c = Raw::connect(p);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    for i in 0..300 {
        assert_eq!(c.call(&["HSET", "after", &format!("f{i}"), "v"]), ":1\r\n");
        assert_eq!(c.call(&["INCR", "counter"]), format!(":{}\r\n", i + 1));
    }
    drop(s); // Drop sends SIGKILL

    let s = start_shale(dir.path());
    assert_eq!(cli(s.port, &["hlen", "after"]), "300");
    assert_eq!(cli(s.port, &["get", "counter"]), "300");
    assert_eq!(cli(s.port, &["get", "s"]), "v1");
}

/// SRANDMEMBER with a negative count builds its reply in memory: a huge
/// count is refused instead of exhausting memory (Redis streams it).
#[test]
fn srandmember_negative_count_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    assert_eq!(c.call(&["SADD", "s", "a"]), ":1\r\n");
    assert_eq!(
        c.call(&["SRANDMEMBER", "s", "-3"]),
        "*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"
    );
    assert!(c
        .call(&["SRANDMEMBER", "s", "-9223372036854775807"])
        .starts_with("-ERR count is too large"));
    assert_eq!(c.call(&["PING"]), "+PONG\r\n");
}
