//! CONFIG GET / SET appendfsync on redis-server and shale-redis-server:
//! replies compared exactly, RESP2 and RESP3.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::compare_script;

const SCRIPT: &[&[&str]] = &[
    &["CONFIG", "GET", "appendfsync"],
    &["CONFIG", "SET", "appendfsync", "bogus"],
    &["CONFIG", "SET", "appendfsync"],
    &["CONFIG", "SET", "appendfsync", "no", "foo"],
    &[
        "CONFIG",
        "SET",
        "appendfsync",
        "no",
        "appendfsync",
        "always",
    ],
    &["CONFIG", "SET", "foo", "1"],
    &["CONFIG", "SET", "appendfsync", "no", "foo", "1"],
    &["CONFIG", "GET", "appendfsync"],
    &["CONFIG", "SET", "APPENDFSYNC", "Always"],
    &["CONFIG", "GET", "appendfsync"],
    &["CONFIG", "SET", "appendfsync", "no"],
    &["CONFIG", "SET", "appendfsync", "everysec"],
    &["CONFIG", "GET", "appendfsync"],
    &["CONFIG", "GET"],
    &["CONFIG", "RESETSTAT"],
    &["CONFIG", "RESETSTAT", "x"],
];

#[test]
fn config_appendfsync_resp2() {
    compare_script(SCRIPT, true, false, &[]);
}

#[test]
fn config_appendfsync_resp3() {
    compare_script(SCRIPT, true, true, &[]);
}
