//! (P)(UN)SUBSCRIBE inside MULTI: Redis 7.0 queues them and EXEC's array
//! holds their confirmations; afterwards the connection is subscribed.
//! Compared exactly with redis-server, RESP2 and RESP3.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::compare_script;

const SCRIPT: &[&[&str]] = &[
    &["MULTI"],
    &["SET", "k", "v"],
    &["SUBSCRIBE", "ch"],
    &["PSUBSCRIBE", "p*"],
    &["UNSUBSCRIBE"],
    &["PING"],
    &["EXEC"],
    &["PING", "x"],
    &["PUNSUBSCRIBE"],
    &["GET", "k"],
];

#[test]
fn subscribe_in_multi_resp2() {
    compare_script(SCRIPT, true, false, &[]);
}

#[test]
fn subscribe_in_multi_resp3() {
    compare_script(SCRIPT, true, true, &[]);
}
