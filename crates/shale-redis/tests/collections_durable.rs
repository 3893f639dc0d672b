//! kill -9 under a write load of lists, sorted sets and MULTI/EXEC blocks:
//! after restart every acknowledged write is there, in order, and every
//! EXEC is all or nothing.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{start_shale, Raw, PW};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Sends `cmd`; the reply, or None once the server is gone.
fn try_call(c: &mut Raw, cmd: &[&str]) -> Option<String> {
    let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
    c.w.write_all(&Raw::encode(&a)).ok()?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.reply())).ok()
}

/// A writer thread: runs `step(conn, i)` for i = 0, 1, ... until it fails
/// (the server died) or `stop`; `acked` holds the last i acknowledged.
fn writer(
    port: u16,
    acked: &Arc<AtomicI64>,
    stop: &Arc<AtomicBool>,
    step: impl Fn(&mut Raw, i64) -> bool + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let (acked, stop) = (acked.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut c = Raw::connect(port);
        assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
        for i in 0..200_000i64 {
            if stop.load(Ordering::SeqCst) || !step(&mut c, i) {
                break;
            }
            acked.store(i, Ordering::SeqCst);
        }
    })
}

#[test]
fn acknowledged_collection_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale(dir.path());
    let port = s.port;
    // The last i whose writes were acknowledged, per writer.
    let acked_list = Arc::new(AtomicI64::new(-1));
    let acked_tx = Arc::new(AtomicI64::new(-1));
    let stop = Arc::new(AtomicBool::new(false));
    let w1 = writer(port, &acked_list, &stop, |c, i| {
        let n = i.to_string();
        try_call(c, &["RPUSH", "l", &n]) == Some(format!(":{}\r\n", i + 1))
            && try_call(c, &["ZADD", "z", &n, &format!("m{i}")]) == Some(":1\r\n".into())
    });
    let w2 = writer(port, &acked_tx, &stop, |c, i| {
        let (n, m) = (i.to_string(), format!("m{i}"));
        let queued = [
            try_call(c, &["MULTI"]),
            try_call(c, &["LPUSH", "tl", &n]),
            try_call(c, &["ZADD", "tz", &n, &m]),
            try_call(c, &["SADD", "ts", &m]),
        ];
        let want = format!("*3\r\n:{}\r\n:1\r\n:1\r\n", i + 1);
        queued.iter().all(Option::is_some) && try_call(c, &["EXEC"]) == Some(want)
    });
    // Let both writers run, then kill the server without warning.
    let t0 = std::time::Instant::now();
    while (acked_list.load(Ordering::SeqCst) < 300 || acked_tx.load(Ordering::SeqCst) < 300)
        && t0.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(s); // SIGKILL
    stop.store(true, Ordering::SeqCst);
    w1.join().unwrap();
    w2.join().unwrap();
    let (al, at) = (
        acked_list.load(Ordering::SeqCst),
        acked_tx.load(Ordering::SeqCst),
    );
    assert!(al >= 300 && at >= 300, "load too small: {al} {at}");

    let s = start_shale(dir.path());
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    // RPUSH: 0..=al in order (one more may have landed unacknowledged).
    let len: i64 = c.call(&["LLEN", "l"])[1..].trim().parse().unwrap();
    assert!(
        len == al + 1 || len == al + 2,
        "list length {len}, acked {al}"
    );
    let first = c.call(&["LRANGE", "l", "0", "2"]);
    assert_eq!(first, "*3\r\n$1\r\n0\r\n$1\r\n1\r\n$1\r\n2\r\n");
    let idx = al.to_string();
    let at_al = c.call(&["LINDEX", "l", &idx]);
    assert_eq!(at_al, format!("${}\r\n{al}\r\n", idx.len()));
    let zcard: i64 = c.call(&["ZCARD", "z"])[1..].trim().parse().unwrap();
    assert!(
        zcard == al + 1 || zcard == al + 2,
        "zcard {zcard}, acked {al}"
    );
    let top = c.call(&["ZRANGE", "z", &idx, &idx, "BYSCORE", "WITHSCORES"]);
    let m = format!("m{al}");
    assert_eq!(
        top,
        format!("*2\r\n${}\r\n{m}\r\n${}\r\n{al}\r\n", m.len(), idx.len())
    );
    // Each EXEC is one batch: the three collections agree, and hold every
    // acknowledged transaction.
    let count = |c: &mut Raw, cmd: &[&str]| -> i64 { c.call(cmd)[1..].trim().parse().unwrap() };
    let (tl, tz, ts) = (
        count(&mut c, &["LLEN", "tl"]),
        count(&mut c, &["ZCARD", "tz"]),
        count(&mut c, &["SCARD", "ts"]),
    );
    assert!(tl == tz && tz == ts, "EXEC not atomic: {tl} {tz} {ts}");
    assert!(
        tl == at + 1 || tl == at + 2,
        "transactions {tl}, acked {at}"
    );
    assert_eq!(c.call(&["LINDEX", "tl", "-1"]), "$1\r\n0\r\n");
}
