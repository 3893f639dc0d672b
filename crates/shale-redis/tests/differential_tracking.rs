//! CLIENT TRACKING on redis-server 7 and shale-redis-server: RESP3 push
//! invalidations (default, OPTIN/OPTOUT, BCAST, NOLOOP, flush) and RESP2
//! REDIRECT to a `__redis__:invalidate` subscriber, compared exactly.
//! The absence of a message is checked by the next reply being PING's.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{mask_id, on_both_servers, Raw, PW};

/// A transcript; client ids (which differ between servers) are masked.
struct T {
    out: Vec<String>,
    ids: Vec<String>,
}

impl T {
    fn note(&mut self, who: &str, what: &str, reply: String) {
        let mut r = mask_id(&reply);
        if what.starts_with("[\"CLIENT\"") {
            for id in &self.ids {
                r = r.replace(&format!(":{id}\r\n"), ":ID\r\n");
            }
        }
        let line = format!("{who} {what} -> {r:?}");
        eprintln!("{line}"); // shown when the test fails: where it stopped
        self.out.push(line);
    }

    fn call(&mut self, who: &str, c: &mut Raw, cmd: &[&str]) {
        self.call_shown(who, c, cmd, cmd);
    }

    /// `shown`: the command as the transcript names it (ids masked).
    fn call_shown(&mut self, who: &str, c: &mut Raw, cmd: &[&str], shown: &[&str]) {
        let r = c.call(cmd);
        self.note(who, &format!("{shown:?}"), r);
    }

    fn read(&mut self, who: &str, c: &mut Raw) {
        let r = c.reply();
        self.note(who, "read", r);
    }
}

fn connect(port: u16) -> Raw {
    let mut c = Raw::connect(port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    c
}

fn resp3_session(port: u16) -> Vec<String> {
    let (mut a, mut b) = (connect(port), connect(port));
    let mut t = T {
        out: Vec::new(),
        ids: Vec::new(),
    };
    t.call("a", &mut a, &["HELLO", "3"]);
    let steps: &[(&str, &[&str])] = &[
        ("a", &["CLIENT", "TRACKINGINFO"]),
        ("a", &["CLIENT", "GETREDIR"]),
        ("a", &["CLIENT", "TRACKING", "on"]),
        ("a", &["GET", "k"]),
        ("a", &["SET", "k", "1"]),
        ("a<", &[]),
        ("a", &["GET", "k"]),
        ("b", &["SET", "k", "2"]),
        ("a<", &[]),
        ("b", &["SET", "k", "3"]),
        ("a", &["PING"]),
        ("a", &["HSET", "h", "f", "v"]),
        ("a", &["HGET", "h", "f"]),
        ("b", &["HDEL", "h", "zz"]),
        ("b", &["HDEL", "h", "f"]),
        ("a<", &[]),
        ("a", &["MGET", "m1", "m2"]),
        ("b", &["MSET", "m1", "1", "m2", "2"]),
        ("a<", &[]),
        ("a<", &[]),
        ("a", &["MULTI"]),
        ("a", &["GET", "t1"]),
        ("a", &["EXEC"]),
        ("b", &["SET", "t1", "x"]),
        ("a<", &[]),
        ("a", &["CLIENT", "TRACKINGINFO"]),
        ("a", &["CLIENT", "GETREDIR"]),
        ("b", &["CLIENT", "GETREDIR"]),
        ("a", &["CLIENT", "TRACKING", "on", "PREFIX", "a"]),
        ("a", &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"]),
        ("a", &["CLIENT", "TRACKING", "on", "REDIRECT", "987654"]),
        ("a", &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]),
        ("a", &["CLIENT", "TRACKING", "on", "OPTIN"]),
        ("a", &["CLIENT", "CACHING", "yes"]),
        ("a", &["CLIENT", "TRACKING", "off"]),
        ("a", &["CLIENT", "CACHING", "yes"]),
        ("a", &["CLIENT", "TRACKING", "on", "OPTIN"]),
        ("a", &["CLIENT", "CACHING", "no"]),
        ("a", &["CLIENT", "CACHING", "maybe"]),
        ("a", &["CLIENT", "TRACKING", "on", "OPTOUT"]),
        ("a", &["CLIENT", "TRACKINGINFO"]),
        ("a", &["GET", "o1"]),
        ("a", &["CLIENT", "CACHING", "yes"]),
        ("a", &["GET", "o2"]),
        ("a", &["GET", "o3"]),
        ("b", &["MSET", "o1", "1", "o2", "2", "o3", "3"]),
        ("a<", &[]),
        ("a", &["PING"]),
        ("a", &["CLIENT", "TRACKING", "off"]),
        (
            "a",
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab",
            ],
        ),
        ("a", &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"]),
        (
            "a",
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b", "NOLOOP",
            ],
        ),
        ("a", &["CLIENT", "TRACKINGINFO"]),
        ("b", &["MSET", "a1", "1", "a2", "2", "q", "3"]),
        ("a<", &[]),
        ("a", &["SET", "a3", "x"]),
        ("a", &["PING"]),
        ("a", &["CLIENT", "TRACKING", "maybe"]),
        ("a", &["CLIENT", "TRACKING"]),
        ("a", &["CLIENT", "TRACKING", "on", "FOO"]),
        ("a", &["CLIENT", "TRACKING", "off"]),
        ("a", &["CLIENT", "TRACKING", "on", "OPTOUT", "NOLOOP"]),
        ("a", &["GET", "n1"]),
        ("a", &["CLIENT", "CACHING", "no"]),
        ("a", &["GET", "n2"]),
        ("b", &["MSET", "n1", "1", "n2", "2"]),
        ("a<", &[]),
        ("a", &["CLIENT", "TRACKINGINFO"]),
        ("a", &["GET", "n1"]),
        ("a", &["SET", "n1", "x"]),
        ("a", &["PING"]),
        ("a", &["FLUSHDB"]),
        ("a<", &[]),
        ("b", &["FLUSHALL"]),
        ("a<", &[]),
        ("a", &["CLIENT", "NOSUCH"]),
        ("a", &["CLIENT", "ID", "x"]),
    ];
    for (who, cmd) in steps {
        match *who {
            "a" => t.call("a", &mut a, cmd),
            "b" => t.call("b", &mut b, cmd),
            _ => t.read("a", &mut a),
        }
    }
    t.out
}

fn redirect_session(port: u16) -> Vec<String> {
    let (mut sub, mut c) = (connect(port), connect(port));
    let id = sub.call(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end().to_string();
    let mut t = T {
        out: Vec::new(),
        ids: vec![id.clone()],
    };
    t.call("s", &mut sub, &["SUBSCRIBE", "__redis__:invalidate"]);
    let steps: &[(&str, &[&str])] = &[
        ("c", &["CLIENT", "TRACKING", "on", "REDIRECT", "ID"]),
        ("c", &["CLIENT", "GETREDIR"]),
        ("c", &["CLIENT", "TRACKINGINFO"]),
        ("c", &["GET", "k"]),
        ("c", &["MGET", "k2", "k3"]),
        ("c", &["SET", "k", "1"]),
        ("s<", &[]),
        ("c", &["MSET", "k2", "1", "k3", "2"]),
        ("s<", &[]),
        ("s<", &[]),
        ("c", &["GET", "k"]),
        ("c", &["FLUSHDB"]),
        ("s<", &[]),
        ("c", &["CLIENT", "TRACKING", "off"]),
        (
            "c",
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p", "REDIRECT", "ID",
            ],
        ),
        ("c", &["MSET", "p1", "1", "p2", "2", "q", "3"]),
        ("s<", &[]),
        ("c", &["CLIENT", "TRACKING", "off"]),
        (
            "c",
            &["CLIENT", "TRACKING", "on", "OPTIN", "REDIRECT", "ID"],
        ),
        ("c", &["GET", "o1"]),
        ("c", &["CLIENT", "CACHING", "yes"]),
        ("c", &["GET", "o2"]),
        ("c", &["GET", "o3"]),
        ("c", &["MSET", "o1", "1", "o2", "2", "o3", "3"]),
        ("s<", &[]),
        ("s", &["PING"]),
        ("c", &["CLIENT", "TRACKING", "off"]),
        ("c", &["CLIENT", "TRACKINGINFO"]),
        ("c", &["CLIENT", "GETREDIR"]),
        // RESP2 without a redirect: tracking is on, messages have nowhere to go.
        ("c", &["CLIENT", "TRACKING", "on"]),
        ("c", &["GET", "z"]),
        ("c", &["SET", "z", "1"]),
        ("c", &["PING"]),
    ];
    for (who, cmd) in steps {
        let real: Vec<&str> = cmd
            .iter()
            .map(|a| if *a == "ID" { id.as_str() } else { a })
            .collect();
        match *who {
            "c" => t.call_shown("c", &mut c, &real, cmd),
            "s" => t.call("s", &mut sub, cmd),
            _ => t.read("s", &mut sub),
        }
    }
    t.out
}

#[test]
fn tracking_resp3_matches_redis() {
    on_both_servers(resp3_session);
}

#[test]
fn tracking_redirect_resp2_matches_redis() {
    on_both_servers(redirect_session);
}
