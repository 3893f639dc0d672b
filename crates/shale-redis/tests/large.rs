//! Large values through the server and across a restart.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{start_shale, Raw, PW};

fn expect_bulk(reply: &str, want: &str) {
    assert_eq!(
        reply.len(),
        want.len() + format!("${}\r\n\r\n", want.len()).len()
    );
    assert!(
        reply.ends_with(&format!("{want}\r\n")),
        "bulk content differs"
    );
}

#[test]
fn megabyte_values_and_many_fields_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let big: String = (0..4 * 1024 * 1024)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let field_val: String = "v".repeat(300 * 1024);
    {
        let s = start_shale(dir.path());
        let mut c = Raw::connect(s.port);
        assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
        assert_eq!(c.call(&["SET", "big", &big]), "+OK\r\n");
        assert_eq!(c.call(&["HSET", "h", "f", &field_val]), ":1\r\n");
        for i in 0..2000 {
            c.send(&["HSET", "many", &format!("f{i:05}"), &i.to_string()]);
        }
        for _ in 0..2000 {
            assert_eq!(c.reply(), ":1\r\n");
        }
        expect_bulk(&c.call(&["GET", "big"]), &big);
        assert_eq!(s.terminate().code(), Some(0));
    }
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    expect_bulk(&c.call(&["GET", "big"]), &big);
    expect_bulk(&c.call(&["HGET", "h", "f"]), &field_val);
    assert_eq!(c.call(&["HLEN", "many"]), ":2000\r\n");
    let all = c.call(&["HGETALL", "many"]);
    assert!(
        all.starts_with("*4000\r\n$6\r\nf00000\r\n$1\r\n0\r\n"),
        "{}",
        &all[..40]
    );
    assert_eq!(c.call(&["STRLEN", "big"]), format!(":{}\r\n", big.len()));
    // Value-file writes acknowledged, then SIGKILL: still there after restart.
    let after: String = "w".repeat(200 * 1024);
    for i in 0..20 {
        assert_eq!(c.call(&["SET", &format!("after{i}"), &after]), "+OK\r\n");
    }
    drop(s); // SIGKILL
    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    for i in 0..20 {
        expect_bulk(&c.call(&["GET", &format!("after{i}")]), &after);
    }
    expect_bulk(&c.call(&["GET", "big"]), &big);
}
