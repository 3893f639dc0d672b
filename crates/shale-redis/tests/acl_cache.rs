//! A connection caches "my user may run anything" (`commands::acl::check`)
//! until any user changes: an ACL change made on another connection takes
//! effect on the very next request, pipelined or not, as in redis-server.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{on_both_servers, Raw, PW};

#[test]
fn an_acl_change_applies_to_the_next_request_of_other_connections() {
    on_both_servers(|port| {
        let mut a = Raw::connect(port);
        let mut admin = Raw::connect(port);
        let mut out = Vec::new();
        let mut step = |who: &str, c: &mut Raw, cmd: &[&str]| {
            out.push(format!("{who} {cmd:?} -> {}", c.call(cmd)));
        };
        step("admin", &mut admin, &["AUTH", PW]);
        step(
            "admin",
            &mut admin,
            &["ACL", "SETUSER", "u", "on", ">p", "~*", "&*", "+@all"],
        );
        step("a", &mut a, &["AUTH", "u", "p"]);
        step("a", &mut a, &["SET", "k", "v"]);
        step("a", &mut a, &["GET", "k"]);
        step("admin", &mut admin, &["ACL", "SETUSER", "u", "-get"]);
        step("a", &mut a, &["GET", "k"]);
        step("a", &mut a, &["SET", "k", "w"]);
        step(
            "admin",
            &mut admin,
            &["ACL", "SETUSER", "u", "+get", "resetkeys", "~x*"],
        );
        step("a", &mut a, &["GET", "k"]);
        step("a", &mut a, &["GET", "x1"]);
        step("admin", &mut admin, &["ACL", "SETUSER", "u", "allkeys"]);
        step("a", &mut a, &["GET", "k"]);
        out
    });
}
