//! The same commands sent to a real redis-server and to shale-redis-server:
//! replies compared exactly, as raw RESP bytes and as redis-cli prints them.
//! redis-server missing is a failure (install it with scripts/install-deps.sh).
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{assert_same, cli_script, start_redis, start_shale, Raw};

/// Deterministic commands (no SCAN cursors, INFO or millisecond TTLs), errors included.
/// Hash fields are inserted in sorted order: Redis keeps small hashes in
/// insertion order, ShaleDB in field order.
const SCRIPT: &[&[&str]] = &[
    &["GET", "s1"], // NOAUTH
    &["AUTH", "wrong"],
    &["AUTH", "pw"],
    &["PING"],
    &["PING", "hello"],
    &["ECHO", "hi there"],
    &["SET", "s1", "hello"],
    &["GET", "s1"],
    &["GET", "nokey"],
    &["SET", "s1", "v2", "NX"],
    &["SET", "s1", "v3", "XX"],
    &["SET", "s1", "v4", "GET"],
    &["SET", "s1", "v", "EX", "0"],
    &["SET", "s1", "v", "EX", "abc"],
    &["SET", "s1", "v", "NX", "XX"],
    &["SET", "s1", "v", "BADOPT"],
    &["SET", "s1", "v", "EX", "10", "PX", "10"],
    &["SET", "nx1", "a", "NX", "GET"],
    &["GET", "s1"],
    &["SETNX", "s1", "x"],
    &["SETNX", "s2", "x"],
    &["GETSET", "s2", "y"],
    &["GETDEL", "s2"],
    &["GETDEL", "s2"],
    &["MSET", "a", "1", "b", "2", "c", "3"],
    &["MSET", "a", "1", "b"],
    &["MGET", "a", "b", "nokey", "c"],
    &["INCR", "a"],
    &["INCRBY", "a", "10"],
    &["DECR", "a"],
    &["DECRBY", "a", "5"],
    &["INCRBY", "a", "-3"],
    &["INCR", "s1"],
    &["INCRBY", "a", "abc"],
    &["INCRBY", "a", "+1"],
    &["INCRBY", "a", "01"],
    &["SET", "big", "9223372036854775807"],
    &["INCR", "big"],
    &["SET", "neg", " 1"],
    &["INCR", "neg"],
    &["APPEND", "s1", "xyz"],
    &["STRLEN", "s1"],
    &["STRLEN", "nokey"],
    &["APPEND", "newk", "abc"],
    &["HSET", "h", "f1", "v1", "f2", "v2"],
    &["HSET", "h", "f1", "v1b", "f3", "v3"],
    &["HSET", "h", "f1"],
    // HMSET: HSET's effect, +OK.
    &["HMSET", "hm", "a", "1", "b", "2"],
    &["HMSET", "hm", "a", "3"],
    &["HGETALL", "hm"],
    &["HMSET", "hm", "a"],
    &["HMSET", "hm"],
    &["SET", "str", "x"],
    &["HMSET", "str", "a", "1"],
    &["DEL", "str"],
    &["HGET", "h", "f1"],
    &["HGET", "h", "nof"],
    &["HMGET", "h", "f1", "nof", "f3"],
    &["HMGET", "nokey", "a"],
    &["HGETALL", "h"],
    &["HLEN", "h"],
    &["HEXISTS", "h", "f2"],
    &["HEXISTS", "h", "zz"],
    &["HDEL", "h", "f2", "nof"],
    &["HKEYS", "h"],
    &["HVALS", "h"],
    &["HINCRBY", "h", "n", "5"],
    &["HINCRBY", "h", "n", "x"],
    &["HINCRBY", "h", "f1", "1"],
    &["HGETALL", "nokey"],
    &["GET", "h"],
    &["HGET", "s1", "f"],
    &["HSET", "s1", "f", "v"],
    &["INCR", "h"],
    &["TYPE", "h"],
    &["TYPE", "s1"],
    &["TYPE", "nokey"],
    &["EXISTS", "a", "b", "nokey", "a"],
    &["DEL", "a", "b", "nokey"],
    &["EXPIRE", "c", "100"],
    &["TTL", "c"],
    &["TTL", "nokey"],
    &["PTTL", "nokey"],
    &["EXPIRE", "c", "200", "NX"],
    &["EXPIRE", "c", "200", "XX"],
    &["TTL", "c"],
    &["EXPIRE", "c", "100", "GT"],
    &["EXPIRE", "c", "10", "NX", "XX"],
    &["EXPIRE", "c", "10", "GT", "LT"],
    &["EXPIRE", "c", "10", "BAD"],
    &["PERSIST", "c"],
    &["PERSIST", "c"],
    &["TTL", "c"],
    &["PTTL", "c"],
    &["EXPIRE", "c", "abc"],
    &["EXPIRE", "nokey", "10"],
    &["EXPIRE", "c", "-1"],
    &["EXISTS", "c"],
    &["KEYS", "s?"],
    &["KEYS", "[h]"],
    &["SELECT", "1"],
    &["GET", "s1"],
    &["DBSIZE"],
    &["SELECT", "16"],
    &["SELECT", "x"],
    &["SELECT", "0"],
    &["FOO", "bar", "baz"],
    &["FOO"],
    &["GET"],
    &["GET", "a", "b"],
    &["DBSIZE"],
    &["FLUSHDB", "NOPE"],
    &["FLUSHDB"],
    &["DBSIZE"],
    &["EXISTS", "s1", "h"],
    &["HSET", "h", "x", "1"],
    &["HGETALL", "h"],
    &["SCAN", "0"],
    &["SCAN", "abc"],
    &["SCAN", "0", "COUNT", "0"],
    &["SETEX", "se", "100", "v"],
    &["TTL", "se"],
    &["SETEX", "se", "0", "v"],
    &["SETEX", "se", "x", "v"],
    &["PSETEX", "pse", "-5", "v"],
    &["PSETEX", "pse", "100000", "v"],
    &["TTL", "pse"],
    &["SETEX", "se", "10"],
    &["MSETNX", "m1", "1", "m2", "2"],
    &["MSETNX", "m2", "x", "m3", "3"],
    &["MGET", "m1", "m2", "m3"],
    &["MSETNX", "m1"],
    &["UNLINK", "m1", "m2", "nokey"],
    &["HSETNX", "h", "x", "2"],
    &["HSETNX", "h", "y", "2"],
    &["HSETNX", "se", "y", "2"],
    &["HSTRLEN", "h", "y"],
    &["HSTRLEN", "h", "nof"],
    &["HSTRLEN", "nokey", "f"],
    &["EXPIREAT", "h", "99999999999"],
    &["PERSIST", "h"], // not TTL: an absolute time's TTL depends on when each server runs
    &["PEXPIREAT", "h", "1"],
    &["EXISTS", "h"],
    &["EXPIREAT", "nokey", "99999999999"],
    &["EXPIREAT", "se", "abc"],
    &["EXPIREAT", "se", "9223372036854775807"],
    &["QUIT"],
];

fn transcript(port: u16) -> Vec<String> {
    let mut c = Raw::connect(port);
    SCRIPT
        .iter()
        .map(|cmd| format!("{cmd:?} -> {}", c.call(cmd)))
        .collect()
}

#[test]
fn same_replies_as_redis_server() {
    assert!(SCRIPT.len() >= 40);
    let dir = tempfile::tempdir().unwrap();
    let redis_dir = tempfile::tempdir().unwrap();
    let redis = start_redis(redis_dir.path());
    let shale = start_shale(dir.path());
    assert_same(&transcript(redis.port), &transcript(shale.port));
}

#[test]
fn same_output_through_redis_cli() {
    let dir = tempfile::tempdir().unwrap();
    let redis_dir = tempfile::tempdir().unwrap();
    let redis = start_redis(redis_dir.path());
    let shale = start_shale(dir.path());
    let script =
        "SET k v\nGET k\nHSET hh a 1 b 2\nHGETALL hh\nGET hh\nINCR k\nTTL k\nEXPIRE k 50\nTTL k\n\
                  MGET k nokey\nDEL k hh\nFOO 1\nSET x 1 PX -5\nGET\n";
    assert_eq!(
        cli_script(shale.port, script, true),
        cli_script(redis.port, script, true)
    );
}
