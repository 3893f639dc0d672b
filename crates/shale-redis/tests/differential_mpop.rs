//! LMPOP / ZMPOP / BLMPOP / BZMPOP on redis-server 7 and here, RESP2 and
//! RESP3: replies (errors included) compared exactly, and a blocked BLMPOP
//! / BZMPOP served by a later push from another client.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{compare_scenario, compare_script, Step};

const SCRIPT: &[&[&str]] = &[
    &["RPUSH", "l1", "a", "b", "c"],
    &["ZADD", "z1", "1", "a", "2", "b", "3", "c"],
    &["SET", "s", "x"],
    &["LMPOP", "2", "nol", "l1", "LEFT"],
    &["LMPOP", "2", "nol", "l1", "RIGHT", "COUNT", "5"],
    &["LMPOP", "1", "l1", "LEFT"],
    &["LMPOP", "0", "l1", "LEFT"],
    &["LMPOP", "-1", "l1", "LEFT"],
    &["LMPOP", "x", "l1", "LEFT"],
    &["LMPOP", "3", "l1", "LEFT"],
    &["LMPOP", "1", "l1", "UP"],
    &["LMPOP", "1", "l1", "LEFT", "COUNT", "0"],
    &["LMPOP", "1", "l1", "LEFT", "COUNT", "x"],
    &["LMPOP", "1", "l1", "LEFT", "COUNT", "1", "COUNT", "2"],
    &["LMPOP", "1", "l1", "LEFT", "FOO"],
    &["LMPOP", "1", "l1", "LEFT", "COUNT"],
    &["LMPOP", "1", "s", "LEFT"],
    &["LMPOP", "2", "nol", "s", "LEFT"],
    &["LMPOP", "1"],
    &["ZMPOP", "2", "noz", "z1", "MIN"],
    &["ZMPOP", "1", "z1", "MAX", "COUNT", "10"],
    &["ZMPOP", "1", "z1", "MAX"],
    &["ZMPOP", "1", "z1", "MID"],
    &["ZMPOP", "0", "z1", "MIN"],
    &["ZMPOP", "1", "s", "MIN"],
    &["EXISTS", "l1", "z1"],
    &["BLMPOP", "0.01", "1", "nol", "LEFT"],
    &["BZMPOP", "0.01", "1", "noz", "MIN"],
    &["BLMPOP", "-1", "1", "nol", "LEFT"],
    &["BLMPOP", "x", "0", "nol", "LEFT"],
    &["BLMPOP", "0", "0", "nol", "LEFT"],
    &["RPUSH", "l2", "q", "r"],
    &["BLMPOP", "0", "1", "l2", "LEFT", "COUNT", "3"],
    &["ZADD", "z2", "5", "m", "1.5", "n"],
    &["BZMPOP", "0", "1", "z2", "MAX"],
    &["MULTI"],
    &["BLMPOP", "0", "1", "nol", "LEFT"],
    &["BZMPOP", "0", "1", "z2", "MIN", "COUNT", "2"],
    &["EXEC"],
];

#[test]
fn mpop_resp2() {
    compare_script(SCRIPT, true, false, &[]);
}

#[test]
fn mpop_resp3() {
    compare_script(SCRIPT, true, true, &[]);
}

#[test]
fn blocked_mpop_served_by_a_push() {
    let steps = [
        Step::Send(0, &["BLMPOP", "5", "2", "la", "lb", "RIGHT", "COUNT", "2"]),
        Step::Send(1, &["BZMPOP", "5", "1", "zz", "MAX", "COUNT", "5"]),
        Step::Sleep(100),
        Step::Call(2, &["RPUSH", "lb", "1", "2", "3"]),
        Step::Read(0),
        Step::Call(2, &["ZADD", "zz", "1", "x", "2", "y"]),
        Step::Read(1),
        Step::Call(2, &["LRANGE", "lb", "0", "-1"]),
    ];
    compare_scenario(3, &[1], &steps);
}
