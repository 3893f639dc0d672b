//! Server and connection commands, and ZUNION / ZINTER / ZDIFF, on
//! redis-server and shale-redis-server: replies compared exactly, RESP2
//! and RESP3.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::compare_script;

const ZALGEBRA: &[&[&str]] = &[
    &["ZADD", "a", "1", "x", "2", "y", "3", "z", "0", "w"],
    &["ZADD", "b", "4", "y", "1.5", "z", "-2", "v"],
    &["SADD", "s", "x", "v", "q"],
    &["SET", "str", "1"],
    &["ZUNION", "2", "a", "b"],
    &["ZUNION", "2", "a", "b", "WITHSCORES"],
    &[
        "ZUNION",
        "3",
        "a",
        "b",
        "s",
        "WEIGHTS",
        "1",
        "-1",
        "2.5",
        "WITHSCORES",
    ],
    &["ZUNION", "2", "a", "b", "AGGREGATE", "MAX", "WITHSCORES"],
    &[
        "ZUNION",
        "2",
        "a",
        "b",
        "aggregate",
        "min",
        "withscores",
        "WITHSCORES",
    ],
    &["ZINTER", "2", "a", "b", "WITHSCORES"],
    &["ZINTER", "2", "a", "s"],
    &["ZINTER", "2", "a", "missing", "WITHSCORES"],
    &["ZDIFF", "2", "a", "b", "WITHSCORES"],
    &["ZDIFF", "1", "missing"],
    &["ZDIFF", "2", "a", "s"],
    &["ZUNION", "1", "a", "WEIGHTS", "0", "WITHSCORES"],
    &["ZUNION", "1", "a", "WEIGHTS", "-1", "WITHSCORES"],
    &["ZUNION", "2", "a", "str"],
    &["ZUNION", "0", "a"],
    &["ZUNION", "-1", "a"],
    &["ZUNION", "x", "a"],
    &["ZUNION", "3", "a", "b"],
    &["ZUNION", "1", "a", "WEIGHTS", "x"],
    &["ZUNION", "1", "a", "WEIGHTS"],
    &["ZUNION", "1", "a", "AGGREGATE", "avg"],
    &["ZUNION", "1", "a", "LIMIT"],
    &["ZDIFF", "1", "a", "WEIGHTS", "2"],
    &["ZDIFF", "2", "a", "b", "AGGREGATE", "SUM"],
    &["ZUNION", "1"],
    &["ZINTER", "1"],
    &["ZUNIONSTORE", "d", "1", "a", "WITHSCORES"],
    &["ZUNIONSTORE", "d", "2", "a", "b"],
    &["ZRANGE", "d", "0", "-1", "WITHSCORES"],
];

#[test]
fn zunion_zinter_zdiff_resp2() {
    compare_script(ZALGEBRA, true, false, &[]);
}

#[test]
fn zunion_zinter_zdiff_resp3() {
    compare_script(ZALGEBRA, true, true, &[]);
}

const CONNECTION: &[&[&str]] = &[
    &["CLIENT", "GETNAME"],
    &["CLIENT", "SETNAME", "conn-1"],
    &["CLIENT", "GETNAME"],
    &["CLIENT", "SETNAME", "bad name"],
    &["CLIENT", "SETNAME", "bad\nname"],
    &["CLIENT", "GETNAME"],
    &["CLIENT", "SETNAME", ""],
    &["CLIENT", "GETNAME"],
    &["CLIENT", "SETNAME"],
    &["CLIENT", "GETNAME", "x"],
    &["CLIENT", "NO-EVICT", "on"],
    &["CLIENT", "NO-EVICT", "OFF"],
    &["CLIENT", "NO-EVICT", "maybe"],
    &["CLIENT", "NO-EVICT"],
    &["CLIENT", "KILL"],
    &["CLIENT", "KILL", "1.2.3.4:5"],
    &["CLIENT", "KILL", "ID", "999999"],
    &["CLIENT", "KILL", "ID", "0"],
    &["CLIENT", "KILL", "ID", "x"],
    &["CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "yes"],
    &["CLIENT", "KILL", "LADDR", "1.2.3.4:5"],
    &["CLIENT", "KILL", "USER", "nobody"],
    &["CLIENT", "KILL", "USER", "default", "TYPE", "master"],
    &["CLIENT", "KILL", "TYPE", "bogus"],
    &["CLIENT", "KILL", "TYPE", "pubsub"],
    &["CLIENT", "KILL", "SKIPME", "maybe"],
    &["CLIENT", "KILL", "ID", "1", "ID"],
    &["CLIENT", "KILL", "foo", "bar"],
    &["CLIENT", "LIST", "TYPE", "bogus"],
    &["CLIENT", "LIST", "ID", "x"],
    &["CLIENT", "LIST", "ID", "999999"],
    &["CLIENT", "LIST", "TYPE", "master"],
    &["CLIENT", "LIST", "foo"],
    &["CLIENT", "INFO", "x"],
    &["EXEC", "x"],
    // RESET: out of MULTI, db 0, no name, RESP2, unauthenticated again.
    &["SELECT", "3"],
    &["SET", "k", "v"],
    &["CLIENT", "SETNAME", "n"],
    &["MULTI"],
    &["GET", "k"],
    &["RESET"],
    &["EXEC"],
    &["EXEC", "x"],
    &["AUTH", "pw"],
    &["CLIENT", "GETNAME"],
    &["GET", "k"],
    &["RESET", "x"],
    &["HELLO", "3"],
    &["WATCH", "k"],
    &["RESET"],
    &["PING"],
    &["SUBSCRIBE", "ch"],
    &["RESET"],
    &["PING"],
    &["AUTH", "pw"],
    &["PING"],
];

#[test]
fn client_subcommands_and_reset_resp2() {
    compare_script(CONNECTION, true, false, &[]);
}

#[test]
fn client_subcommands_and_reset_resp3() {
    compare_script(CONNECTION, true, true, &[]);
}

/// The `name=value` names of a CLIENT LIST / INFO line, in order.
fn field_names(reply: &str) -> Vec<String> {
    let body = reply.split_once("\r\n").unwrap().1;
    let line = body.lines().next().unwrap();
    line.split(' ')
        .map(|f| f.split_once('=').unwrap().0.to_string())
        .collect()
}

/// Values may differ between the servers (addresses, ages, memory); the
/// fields and their order may not.
#[test]
fn client_list_and_info_have_redis_fields() {
    common::on_both_servers(|port| {
        let mut c = common::Raw::connect(port);
        assert_eq!(c.call(&["AUTH", common::PW]), "+OK\r\n");
        let list = c.call(&["CLIENT", "LIST"]);
        let info = c.call(&["CLIENT", "INFO"]);
        assert_eq!(c.call(&["HELLO", "3"]).chars().next(), Some('%'));
        let v = c.call(&["CLIENT", "INFO"]);
        assert!(v.starts_with('=') && v.contains("\r\ntxt:id="), "{v}");
        vec![
            field_names(&list).join(" "),
            field_names(&info).join(" "),
            list.contains("cmd=client|list ").to_string(),
            info.contains("cmd=client|info ").to_string(),
        ]
    });
}

#[test]
fn client_kill_closes_the_named_connections() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::start_shale(dir.path());
    let connect = || {
        let mut c = common::Raw::connect(s.port);
        assert_eq!(c.call(&["AUTH", common::PW]), "+OK\r\n");
        c
    };
    let (mut a, mut b, mut d) = (connect(), connect(), connect());
    let id = |c: &mut common::Raw| c.call(&["CLIENT", "ID"])[1..].trim().to_string();
    let b_id = id(&mut b);
    assert_eq!(b.call(&["CLIENT", "SETNAME", "victim"]), "+OK\r\n");
    let list = a.call(&["CLIENT", "LIST", "ID", &b_id]);
    assert!(list.contains(" name=victim "), "{list}");
    assert_eq!(a.call(&["CLIENT", "KILL", "ID", &b_id]), ":1\r\n");
    assert_eq!(b.rest(), "", "the killed connection got a reply");
    // Old form, by address.
    let info = d.call(&["CLIENT", "INFO"]);
    let addr = info
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap();
    assert_eq!(a.call(&["CLIENT", "KILL", addr]), "+OK\r\n");
    assert_eq!(d.rest(), "");
    // SKIPME yes (the default) spares the caller; SKIPME no kills it
    // after its reply.
    assert_eq!(a.call(&["CLIENT", "KILL", "USER", "default"]), ":0\r\n");
    assert_eq!(
        a.call(&["CLIENT", "KILL", "USER", "default", "SKIPME", "no"]),
        ":1\r\n"
    );
    assert_eq!(a.rest(), "");
    let mut e = connect();
    let list = e.call(&["CLIENT", "LIST"]);
    assert_eq!(list.matches(" laddr=").count(), 1, "{list}");
}

/// `# Section` titles and field names of an INFO reply, in order (values
/// differ between the servers), plus the reply's type byte.
fn info_shape(reply: &str) -> String {
    let (head, body) = reply.split_once("\r\n").unwrap();
    let mut out = head[..1].to_string();
    for line in body.split("\r\n") {
        if line.starts_with('#') {
            out.push_str(&format!(" [{line}]"));
        } else if let Some((k, _)) = line.split_once(':') {
            // RESP3's verbatim `txt:` prefix is part of the first line.
            out.push_str(&format!(" {}", k.trim_start_matches("txt:")));
        }
    }
    out
}

#[test]
fn info_sections_have_redis_fields() {
    common::on_both_servers(|port| {
        let mut c = common::Raw::connect(port);
        assert_eq!(c.call(&["AUTH", common::PW]), "+OK\r\n");
        assert_eq!(c.call(&["SET", "k", "v"]), "+OK\r\n");
        // No TTL: Redis's avg_ttl is an estimate its expiry cycle updates.
        assert_eq!(c.call(&["SET", "t", "v"]), "+OK\r\n");
        assert_eq!(c.call(&["SELECT", "5"]), "+OK\r\n");
        assert_eq!(c.call(&["SET", "k", "v"]), "+OK\r\n");
        let mut out = Vec::new();
        for args in [
            &["INFO"][..],
            &["INFO", "default"],
            &["INFO", "server"],
            &["INFO", "Clients", "MEMORY"],
            &["INFO", "persistence", "stats"],
            &["INFO", "replication", "cpu", "cluster"],
            &["INFO", "keyspace"],
            &["INFO", "nosuchsection"],
        ] {
            out.push(format!("{args:?} {}", info_shape(&c.call(args))));
        }
        let keyspace = c.call(&["INFO", "keyspace"]);
        out.push(keyspace.split_once("\r\n").unwrap().1.to_string());
        assert_eq!(c.call(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
        let stats = c.call(&["INFO", "stats"]);
        out.push(
            stats
                .contains("\r\ntotal_connections_received:0\r\n")
                .to_string(),
        );
        assert_eq!(c.call(&["HELLO", "3"]).chars().next(), Some('%'));
        out.push(info_shape(&c.call(&["INFO", "server"])));
        out
    });
}

const COMMAND: &[&[&str]] = &[
    &[
        "COMMAND",
        "INFO",
        "get",
        "SET",
        "zadd",
        "nosuchcommand",
        "client",
        "blmpop",
    ],
    &["COMMAND", "INFO", "config|get"],
    &["COMMAND", "DOCS", "get", "zunionstore", "nosuchcommand"],
    &["COMMAND", "DOCS", "nosuchcommand"],
    &["COMMAND", "GETKEYS", "get", "k"],
    &["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"],
    &[
        "COMMAND",
        "GETKEYS",
        "zunionstore",
        "d",
        "2",
        "a",
        "b",
        "WEIGHTS",
        "1",
        "2",
    ],
    &["COMMAND", "GETKEYS", "zunionstore", "d", "5", "a", "b"],
    &["COMMAND", "GETKEYS", "lmpop", "2", "a", "b", "LEFT"],
    &["COMMAND", "GETKEYS", "get", "a", "b"],
    &["COMMAND", "GETKEYS", "ping", "x"],
    &["COMMAND", "GETKEYS", "nosuchcommand", "x"],
    &["COMMAND", "GETKEYS", "get"],
    &["COMMAND", "COUNT", "x"],
    &["COMMAND", "LIST", "FILTERBY", "MODULE", "m"],
    &["COMMAND", "LIST", "FILTERBY", "bogus", "x"],
    &["COMMAND", "LIST", "FILTERBY"],
    &["COMMAND", "LIST", "FILTERBY", "PATTERN", "nomatch*"],
    &["COMMAND", "NOSUCH"],
];

#[test]
fn command_info_docs_getkeys_resp2() {
    // Redis lists subcommands in its dict's (randomly seeded) order.
    compare_script(COMMAND, true, false, &["COMMAND"]);
}

#[test]
fn command_info_docs_getkeys_resp3() {
    compare_script(COMMAND, true, true, &["COMMAND"]);
}

/// Every command this server has is described as Redis describes it.
#[test]
fn command_info_of_every_listed_command_matches_redis() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::start_shale(dir.path());
    let mut c = common::Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", common::PW]), "+OK\r\n");
    let list = c.call(&["COMMAND", "LIST"]);
    let names: Vec<String> = list
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(str::to_string)
        .collect();
    assert_eq!(
        c.call(&["COMMAND", "COUNT"]),
        format!(":{}\r\n", names.len())
    );
    assert!(names.len() > 100, "{names:?}");
    let mut script: Vec<Vec<&str>> = Vec::new();
    for n in &names {
        script.push(vec!["COMMAND", "INFO", n]);
        script.push(vec!["COMMAND", "DOCS", n]);
    }
    let refs: Vec<&[&str]> = script.iter().map(Vec::as_slice).collect();
    compare_script(&refs, true, true, &["COMMAND"]);
}

const INTROSPECTION: &[&[&str]] = &[
    &["SET", "s", "12"],
    &["SET", "e", "hello"],
    &[
        "SET",
        "r",
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    ],
    &["SET", "n", "-0"],
    &["SET", "big", "99999999999999999999"],
    &["SET", "i", "10000"],
    &["SET", "i2", "9999"],
    &["HSET", "h", "a", "1"],
    &[
        "HSET",
        "hl",
        "a",
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    ],
    &["RPUSH", "l", "a"],
    &["SADD", "si", "1", "2", "-3"],
    &["SADD", "ss", "1", "a"],
    &["ZADD", "z", "1", "a"],
    &["OBJECT", "ENCODING", "s"],
    &["OBJECT", "ENCODING", "e"],
    &["OBJECT", "ENCODING", "r"],
    &["OBJECT", "ENCODING", "n"],
    &["OBJECT", "ENCODING", "big"],
    &["OBJECT", "ENCODING", "h"],
    &["OBJECT", "ENCODING", "hl"],
    &["OBJECT", "ENCODING", "l"],
    &["OBJECT", "ENCODING", "si"],
    &["OBJECT", "ENCODING", "ss"],
    &["OBJECT", "ENCODING", "z"],
    &["OBJECT", "ENCODING", "nosuch"],
    &["OBJECT", "REFCOUNT", "s"],
    &["OBJECT", "REFCOUNT", "i"],
    &["OBJECT", "REFCOUNT", "i2"],
    &["OBJECT", "REFCOUNT", "e"],
    &["OBJECT", "REFCOUNT", "h"],
    &["OBJECT", "REFCOUNT", "nosuch"],
    &["OBJECT", "IDLETIME", "nosuch"],
    &["OBJECT", "FREQ", "e"],
    &["OBJECT", "NOSUCH", "e"],
    &["OBJECT", "ENCODING"],
    &["OBJECT", "ENCODING", "a", "b"],
    &["MEMORY", "USAGE", "nosuch"],
    &["MEMORY", "USAGE", "e", "SAMPLES", "x"],
    &["MEMORY", "USAGE", "e", "FOO"],
    &["MEMORY", "NOSUCH"],
    &["MEMORY", "USAGE"],
    &["LATENCY", "LATEST"],
    &["LATENCY", "HISTORY", "command"],
    &["LATENCY", "RESET"],
    &["LATENCY", "RESET", "a", "b"],
    &["LATENCY", "HISTORY"],
    &["LATENCY", "NOSUCH"],
    &["LATENCY", "LATEST", "x"],
    &["SLOWLOG", "RESET"],
    &["SLOWLOG", "GET", "x"],
    &["SLOWLOG", "GET", "-2"],
    &["SLOWLOG", "LEN", "x"],
    &["SLOWLOG", "NOSUCH"],
    &["CONFIG", "GET", "slowlog-max-len"],
    &["CONFIG", "GET", "slowlog-log-slower-than"],
    &["CONFIG", "SET", "slowlog-max-len", "-1"],
    &["CONFIG", "SET", "slowlog-log-slower-than", "x"],
    &["CONFIG", "SET", "slowlog-log-slower-than", "-5"],
    &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
    &["SLOWLOG", "RESET"],
    &["GET", "e"],
    &["SLOWLOG", "LEN"],
    &["SLOWLOG", "GET"],
    &[
        "CONFIG",
        "SET",
        "slowlog-max-len",
        "3",
        "slowlog-log-slower-than",
        "0",
    ],
    &["SLOWLOG", "LEN"],
    &["CONFIG", "SET", "slowlog-max-len", "0"],
    &["SLOWLOG", "LEN"],
    &[
        "CONFIG",
        "SET",
        "slowlog-log-slower-than",
        "10000",
        "slowlog-max-len",
        "128",
    ],
];

#[test]
fn object_memory_latency_slowlog_resp2() {
    compare_script(INTROSPECTION, true, false, &[]);
}

#[test]
fn object_memory_latency_slowlog_resp3() {
    compare_script(INTROSPECTION, true, true, &[]);
}

/// The entry shape of SLOWLOG GET (durations, times and addresses differ).
fn slowlog_shape(reply: &str) -> String {
    reply
        .split("\r\n")
        .map(|l| match l.as_bytes().first() {
            Some(b':') => ":N".to_string(),
            _ if l.starts_with("127.0.0.1:") => "ADDR".to_string(),
            Some(b'$') if l.len() == 3 && l != "$-1" => "$L".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn slowlog_entries_have_redis_shape_and_redact_passwords() {
    common::on_both_servers(|port| {
        let mut c = common::Raw::connect(port);
        assert_eq!(c.call(&["AUTH", common::PW]), "+OK\r\n");
        assert_eq!(c.call(&["CLIENT", "SETNAME", "slow"]), "+OK\r\n");
        c.call(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        c.call(&["SLOWLOG", "RESET"]);
        c.call(&["AUTH", common::PW]);
        let long = "x".repeat(200);
        c.call(&["SET", "k", &long]);
        let mut many = vec!["RPUSH", "l"];
        many.extend(std::iter::repeat_n("e", 40));
        c.call(&many);
        let got = c.call(&["SLOWLOG", "GET", "4"]);
        c.call(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
        vec![slowlog_shape(&got)]
    });
}

/// DEBUG SLEEP sleeps (redis-server refuses DEBUG by default, so this runs
/// on shale-redis-server only), and SLOWLOG records how long it took.
#[test]
fn debug_sleep_is_logged_as_slow() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::start_shale(dir.path());
    let mut c = common::Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", common::PW]), "+OK\r\n");
    let t = std::time::Instant::now();
    assert_eq!(c.call(&["DEBUG", "SLEEP", "0.2"]), "+OK\r\n");
    assert!(t.elapsed() >= std::time::Duration::from_millis(200));
    let log = c.call(&["SLOWLOG", "GET", "1"]);
    let micros: u64 = log.split("\r\n").nth(4).unwrap()[1..].parse().unwrap();
    assert!(micros >= 200_000, "{log}");
    assert!(
        log.contains("$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$3\r\n0.2\r\n"),
        "{log}"
    );
    assert!(c
        .call(&["DEBUG", "RELOAD"])
        .starts_with("-ERR unknown subcommand 'RELOAD'"));
}
