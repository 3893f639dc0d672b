//! INCRBYFLOAT / HINCRBYFLOAT (long double arithmetic and printing) and
//! the count forms of SRANDMEMBER / HRANDFIELD / ZRANDMEMBER, against
//! redis-server, in RESP2 and RESP3. Random picks are compared where the
//! answer is determined (every element, one element repeated, errors,
//! shapes), sorted.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::compare_script;

const UNORDERED: &[&str] = &["SRANDMEMBER", "HRANDFIELD", "ZRANDMEMBER", "SMEMBERS"];

const FLOATS: &[&[&str]] = &[
    &["SET", "k", "10.50"],
    &["INCRBYFLOAT", "k", "0.1"],
    &["INCRBYFLOAT", "k", "-5"],
    &["INCRBYFLOAT", "k", "5.0e3"],
    &["INCRBYFLOAT", "k", "2.0e2"],
    &["INCRBYFLOAT", "k", "0.1"],
    &["GET", "k"],
    &["SET", "k", "123456789"],
    &["INCRBYFLOAT", "k", "0.3"],
    &["SET", "k", "0.1"],
    &["INCRBYFLOAT", "k", "0.2"],
    &["INCRBYFLOAT", "k", "1e-20"],
    &["INCRBYFLOAT", "k", "-0.3"],
    &["INCRBYFLOAT", "k", "1e300"],
    &["INCRBYFLOAT", "k", "1.5e308"],
    &["INCRBYFLOAT", "new", "3"],
    &["INCRBYFLOAT", "new", "0x10"],
    &["INCRBYFLOAT", "new", "-19"],
    &["INCRBYFLOAT", "new", "-0.0"],
    &["INCRBYFLOAT", "new", ".5"],
    &["INCRBYFLOAT", "new", "5."],
    &["INCRBYFLOAT", "new", "-1e-5"],
    &["INCRBYFLOAT", "new", "inf"],
    &["INCRBYFLOAT", "new", "nan"],
    &["INCRBYFLOAT", "new", "abc"],
    &["INCRBYFLOAT", "new", " 1"],
    &["INCRBYFLOAT", "new", ""],
    &["INCRBYFLOAT", "new", "1e99999"],
    &["INCRBYFLOAT", "new"],
    &["SET", "bad", "1x"],
    &["INCRBYFLOAT", "bad", "1"],
    &["EXPIRE", "new", "100"],
    &["INCRBYFLOAT", "new", "1"],
    &["TTL", "new"],
    &["LPUSH", "list", "a"],
    &["INCRBYFLOAT", "list", "1"],
    &["HINCRBYFLOAT", "h", "f", "1.5"],
    &["HINCRBYFLOAT", "h", "f", "1e2"],
    &["HINCRBYFLOAT", "h", "f", "0.1"],
    &["HINCRBYFLOAT", "h", "g", "-0.25"],
    &["HSET", "h", "s", "x"],
    &["HINCRBYFLOAT", "h", "s", "1"],
    &["HINCRBYFLOAT", "h", "f", "x"],
    &["HINCRBYFLOAT", "h", "f", "inf"],
    &["HINCRBYFLOAT", "h", "f"],
    &["HINCRBYFLOAT", "list", "f", "1"],
    &["HLEN", "h"],
    &["HGET", "h", "f"],
];

const RANDOM: &[&[&str]] = &[
    &["SADD", "s", "a", "b", "c"],
    &["SRANDMEMBER", "s", "3"],
    &["SRANDMEMBER", "s", "10"],
    &["SRANDMEMBER", "s", "0"],
    &["SRANDMEMBER", "s", "-9223372036854775808"],
    &["SRANDMEMBER", "s", "x"],
    &["SRANDMEMBER", "s", "1", "2"],
    &["SRANDMEMBER", "nokey", "-3"],
    &["SRANDMEMBER", "nokey"],
    &["SADD", "one", "x"],
    &["SRANDMEMBER", "one", "-3"],
    &["SRANDMEMBER", "one"],
    &["HSET", "h", "a", "1", "b", "2", "c", "3"],
    &["HRANDFIELD", "h", "3"],
    &["HRANDFIELD", "h", "5", "WITHVALUES"],
    &["HRANDFIELD", "h", "0"],
    &["HRANDFIELD", "h", "0", "withvalues"],
    &["HRANDFIELD", "h", "x"],
    &["HRANDFIELD", "h", "1", "BAD"],
    &["HRANDFIELD", "h", "1", "WITHVALUES", "x"],
    &["HRANDFIELD", "h", "-9223372036854775808"],
    &["HRANDFIELD", "h", "-4611686018427387905", "WITHVALUES"],
    &["HRANDFIELD", "nokey"],
    &["HRANDFIELD", "nokey", "3"],
    &["HRANDFIELD", "nokey", "3", "WITHVALUES"],
    &["HRANDFIELD", "s"],
    &["HRANDFIELD", "s", "1"],
    &["HSET", "h1", "only", "v"],
    &["HRANDFIELD", "h1"],
    &["HRANDFIELD", "h1", "-3", "WITHVALUES"],
    &["ZADD", "z", "1", "a", "2.5", "b", "-inf", "c"],
    &["ZRANDMEMBER", "z", "3"],
    &["ZRANDMEMBER", "z", "10", "WITHSCORES"],
    &["ZRANDMEMBER", "z", "0", "WITHSCORES"],
    &["ZRANDMEMBER", "z", "x"],
    &["ZRANDMEMBER", "z", "1", "x"],
    &["ZRANDMEMBER", "z", "1", "WITHSCORES", "x"],
    &["ZRANDMEMBER", "z", "-9223372036854775808"],
    &["ZRANDMEMBER", "z", "-4611686018427387905", "WITHSCORES"],
    &["ZRANDMEMBER", "nokey"],
    &["ZRANDMEMBER", "nokey", "2", "WITHSCORES"],
    &["ZRANDMEMBER", "s"],
    &["ZADD", "z1", "1.1", "m"],
    &["ZRANDMEMBER", "z1"],
    &["ZRANDMEMBER", "z1", "-2", "WITHSCORES"],
    &["ZRANDMEMBER", "z1", "1"],
];

#[test]
fn incrbyfloat_matches_redis_server() {
    compare_script(FLOATS, true, false, UNORDERED);
}

#[test]
fn random_counts_match_redis_server() {
    compare_script(RANDOM, true, false, UNORDERED);
}

#[test]
fn both_match_redis_server_in_resp3() {
    compare_script(FLOATS, true, true, UNORDERED);
    compare_script(RANDOM, true, true, UNORDERED);
}
