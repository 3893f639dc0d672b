//! ACL on redis-server 7 and shale-redis-server: SETUSER/GETUSER/LIST
//! output, rule errors, NOPERM errors, AUTH failures and ACL LOG entries,
//! compared exactly (ACL LOG's age and client-info masked), RESP2 and RESP3;
//! and users surviving a restart.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{mask_id, normalize, on_both_servers, start_shale, Raw, PW};

/// Replaces the value after `age-seconds` and `client-info` (they differ
/// between servers and runs) by `MASK`.
fn mask_log(reply: &str) -> String {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        out.push(lines[i].to_string());
        if lines[i] == "age-seconds" || lines[i] == "client-info" {
            let next = lines.get(i + 1).copied().unwrap_or("");
            i += if next.starts_with('$') { 3 } else { 2 };
            out.push("MASK".into());
            continue;
        }
        i += 1;
    }
    out.join("\r\n")
}

/// Redis lists a user's single-command rules (after the categories) in
/// its command table's hash order, which is random per process: sort them.
fn sort_command_rules(reply: &str) -> String {
    let lines: Vec<String> = reply
        .split("\r\n")
        .map(|line| {
            if !line.contains("@all") {
                return line.to_string();
            }
            let toks: Vec<&str> = line.split(' ').collect();
            let single =
                |t: &&str| (t.starts_with('+') || t.starts_with('-')) && !t[1..].starts_with('@');
            let mut head: Vec<&str> = toks.iter().copied().filter(|t| !single(t)).collect();
            let mut cmds: Vec<&str> = toks.iter().copied().filter(single).collect();
            cmds.sort_unstable();
            head.append(&mut cmds);
            head.join(" ")
        })
        .collect();
    lines.join("\r\n")
}

const ADMIN: &[&[&str]] = &[
    &["ACL", "WHOAMI"],
    &["ACL", "LIST"],
    &["ACL", "USERS"],
    &[
        "ACL", "SETUSER", "alice", "on", ">pw1", "~cache:*", "+@read", "-hgetall", "&chan*",
    ],
    &["ACL", "SETUSER", "bob"],
    &["ACL", "GETUSER", "bob"],
    &[
        "ACL",
        "SETUSER",
        "bob",
        "nopass",
        "allkeys",
        "allchannels",
        "+@all",
    ],
    &["ACL", "GETUSER", "bob"],
    &["ACL", "SETUSER", "bob", "reset"],
    &["ACL", "GETUSER", "bob"],
    &[
        "ACL",
        "SETUSER",
        "carol",
        "on",
        "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
        "+get",
        "+get",
        "-get",
        "+get",
    ],
    &[
        "ACL",
        "SETUSER",
        "dan",
        "+@all",
        "-@dangerous",
        ">x",
        ">y",
        ">x",
        "<y",
    ],
    &[
        "ACL",
        "SETUSER",
        "erin",
        "reset",
        "resetkeys",
        "%R~r*",
        "%W~w*",
        "%RW~rw*",
        "~a",
        "~a",
        "%R~a",
    ],
    &[
        "ACL",
        "SETUSER",
        "frank",
        "+config",
        "-config|get",
        "skip-sanitize-payload",
    ],
    &[
        "ACL",
        "SETUSER",
        "gina",
        "+@all",
        "-@dangerous",
        "+flushdb",
        "-@all",
        "+@hash",
        "+@list",
    ],
    &[
        "ACL",
        "SETUSER",
        "u1",
        "on",
        ">p",
        "~k*",
        "+get",
        "&c*",
        "+config|get",
    ],
    &["ACL", "SETUSER", "u1", "+multi"],
    &["ACL", "SETUSER", "x", "badrule"],
    &["ACL", "SETUSER", "x", "+nosuch"],
    &["ACL", "SETUSER", "x", "+@nosuch"],
    &["ACL", "SETUSER", "x", "+config|nosuch"],
    &["ACL", "SETUSER", "x", "allkeys", "~foo"],
    &["ACL", "SETUSER", "x", "allchannels", "&foo"],
    &["ACL", "SETUSER", "x", "<nope"],
    &["ACL", "SETUSER", "x", "#abc"],
    &["ACL", "SETUSER", "x", "%X~a"],
    &["ACL", "SETUSER", "a b"],
    &["ACL", "DELUSER", "default"],
    &["ACL", "GETUSER", "alice"],
    &["ACL", "GETUSER", "dan"],
    &["ACL", "GETUSER", "nobody"],
    &["ACL", "LIST"],
    &["ACL", "USERS"],
    &["ACL", "DELUSER", "bob", "nobody"],
    &["ACL", "USERS"],
    &["ACL", "CAT"],
    &["ACL", "CAT", "nosuch"],
    &["ACL", "nosub"],
    &["ACL", "DELUSER"],
    &["ACL", "SETUSER"],
    &["ACL", "GETUSER"],
    &["ACL", "WHOAMI", "x"],
    &["ACL", "CAT", "read", "x"],
    &["ACL", "LOG", "RESET", "x"],
    &["ACL", "LOG", "x"],
    &["ACL", "LOG", "RESET"],
    &["CONFIG", "GET", "requirepass"],
    &["CONFIG", "SET", "requirepass", "newpw"],
    &["CONFIG", "GET", "requirepass"],
    &["ACL", "GETUSER", "default"],
    &["AUTH", "pw"],
    &["AUTH", "newpw"],
    &["CONFIG", "SET", "requirepass", ""],
    &["ACL", "GETUSER", "default"],
    &["CONFIG", "SET", "requirepass", "pw"],
    &["ACL", "LIST"],
    &["ACL", "LOG", "RESET"],
];

/// What u1 (`~k* +get &c* +config|get +multi`) and alice try.
const USER: &[&[&str]] = &[
    &["AUTH", "u1", "bad"],
    &["AUTH", "nouser", "x"],
    &["AUTH", "u1", "p"],
    &["ACL", "WHOAMI"],
    &["GET", "k1"],
    &["GET", "other"],
    &["HGET", "k1", "f"],
    &["PUBLISH", "x", "y"],
    &["CONFIG", "SET", "appendfsync", "no"],
    &["CONFIG", "GET", "appendfsync"],
    &["MULTI"],
    &["GET", "k2"],
    &["GET", "zzz"],
    &["EXEC"],
    &["AUTH", "alice", "pw1"],
    &["GET", "cache:1"],
    &["HGETALL", "cache:h"],
    &["SET", "cache:1", "v"],
    &["MGET", "cache:1", "cache:2", "nope"],
];

fn session(port: u16, resp3: bool) -> Vec<String> {
    let mut admin = Raw::connect(port);
    let mut user = Raw::connect(port);
    let mut out = Vec::new();
    let mut run = |c: &mut Raw, cmd: &[&str]| {
        let raw = sort_command_rules(&mask_log(&mask_id(&c.call(cmd))));
        let raw = if cmd.len() == 3 && cmd[1] == "CAT" {
            normalize(&raw)
        } else {
            raw
        };
        out.push(format!("{cmd:?} -> {raw}"));
    };
    run(&mut admin, &["AUTH", PW]);
    if resp3 {
        run(&mut admin, &["HELLO", "3"]);
        run(&mut user, &["HELLO", "3"]);
    }
    for cmd in ADMIN {
        run(&mut admin, cmd);
    }
    // ACL CAT <category>: Redis lists the commands in hash order.
    run(&mut admin, &["ACL", "CAT", "read"]);
    for cmd in USER {
        run(&mut user, cmd);
    }
    run(&mut admin, &["ACL", "LOG"]);
    run(&mut admin, &["ACL", "LOG", "2"]);
    run(&mut admin, &["ACL", "LOG", "RESET"]);
    run(&mut admin, &["ACL", "LOG"]);
    if resp3 {
        let mut c = Raw::connect(port);
        run(&mut c, &["HELLO", "3", "AUTH", "u1", "bad"]);
        run(&mut c, &["HELLO", "3", "AUTH", "u1", "p"]);
    }
    out
}

#[test]
fn acl_matches_redis_resp2() {
    on_both_servers(|port| session(port, false));
}

#[test]
fn acl_matches_redis_resp3() {
    on_both_servers(|port| session(port, true));
}

/// Users are stored in the engine: after a restart they are all there and
/// their passwords work; a deleted one stays deleted.
#[test]
fn users_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    c.call(&["AUTH", PW]);
    let setup: &[&[&str]] = &[
        &[
            "ACL", "SETUSER", "alice", "on", ">pw1", "~cache:*", "+@read", "-hgetall", "&chan*",
        ],
        &[
            "ACL",
            "SETUSER",
            "dan",
            "+@all",
            "-@dangerous",
            "%R~r*",
            "nopass",
            "on",
        ],
        &["ACL", "SETUSER", "gone", "on"],
        &["ACL", "DELUSER", "gone"],
    ];
    for cmd in setup {
        assert!(c.call(cmd).starts_with([':', '+']), "{cmd:?}");
    }
    let before = c.call(&["ACL", "LIST"]);
    drop(c);
    assert!(s.terminate().success());
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", "alice", "pw1"]), "+OK\r\n");
    assert_eq!(c.call(&["AUTH", "dan", "anything"]), "+OK\r\n");
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    assert_eq!(c.call(&["ACL", "LIST"]), before);
    assert!(!before.contains("gone"));
}

/// Whether a connection needs AUTH is judged per request (Redis's
/// authRequired): CONFIG SET requirepass "" opens a connection that never
/// authenticated, setting a password closes it again.
#[test]
fn requirepass_changes_apply_to_open_connections() {
    on_both_servers(|port| {
        let (mut admin, mut c) = (Raw::connect(port), Raw::connect(port));
        let mut out = vec![admin.call(&["AUTH", PW])];
        out.push(c.call(&["GET", "k"]));
        out.push(c.call(&["HELLO", "3"]));
        out.push(admin.call(&["CONFIG", "SET", "requirepass", ""]));
        out.push(c.call(&["GET", "k"]));
        out.push(mask_id(&c.call(&["HELLO", "2"])));
        out.push(c.call(&["AUTH", "x"]));
        out.push(admin.call(&["CONFIG", "SET", "requirepass", PW]));
        out.push(c.call(&["GET", "k"]));
        out.push(c.call(&["ACL", "WHOAMI"]));
        out
    });
}
