//! The event loops (`reactor`): a connection that would make its loop wait
//! moves to a thread of its own, so the other connections on that loop go
//! on; replies stay in order across the move; `--io-threads 0` (a thread
//! per connection) still serves.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{cli, start_shale_with, Raw, PW};
use std::io::Write;
use std::time::{Duration, Instant};

fn authed(port: u16) -> Raw {
    let mut c = Raw::connect(port);
    assert_eq!(c.call(&["AUTH", PW]), "+OK\r\n");
    c
}

/// With one loop every connection shares it: a DEBUG SLEEP run on the
/// loop would hold up every other client for its whole length.
#[test]
fn a_sleeping_client_does_not_stall_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale_with(dir.path(), &["--io-threads", "1"]);
    let mut sleeper = authed(s.port);
    let mut others: Vec<Raw> = (0..3).map(|_| authed(s.port)).collect();
    let t0 = Instant::now();
    sleeper.send(&["DEBUG", "SLEEP", "4"]);
    std::thread::sleep(Duration::from_millis(100));
    for (i, c) in others.iter_mut().enumerate() {
        assert_eq!(c.call(&["SET", &format!("k{i}"), "v"]), "+OK\r\n");
        assert_eq!(c.call(&["GET", &format!("k{i}")]), "$1\r\nv\r\n");
    }
    let others_done = t0.elapsed();
    assert_eq!(sleeper.reply(), "+OK\r\n");
    assert!(
        others_done < Duration::from_secs(3),
        "the other clients waited {others_done:?} behind DEBUG SLEEP 4"
    );
    // The moved connection keeps working, in order.
    assert_eq!(sleeper.call(&["GET", "k0"]), "$1\r\nv\r\n");
}

/// A client that pipelines far more reply bytes than the socket holds and
/// reads nothing yet: the loop cannot write them without waiting, so the
/// connection moves to a thread; meanwhile another client on the same loop
/// is served, and the first then reads every reply, in order.
#[test]
fn a_client_that_does_not_read_moves_to_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale_with(dir.path(), &["--io-threads", "1"]);
    let mut big = authed(s.port);
    let value = "x".repeat(512 * 1024);
    assert_eq!(big.call(&["SET", "big", &value]), "+OK\r\n");
    const GETS: usize = 64; // 32 MiB of replies
    let mut bytes = Vec::new();
    for i in 0..GETS {
        let k = i.to_string();
        bytes.extend(Raw::encode(&[b"GET", b"big"]));
        bytes.extend(Raw::encode(&[b"SET", b"n", k.as_bytes()]));
    }
    big.w.write_all(&bytes).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut other = authed(s.port);
    assert_eq!(other.call(&["INCR", "other"]), ":1\r\n");
    for _ in 0..GETS {
        let r = big.reply();
        assert_eq!(r.len(), value.len() + "$524288\r\n\r\n".len());
        assert_eq!(big.reply(), "+OK\r\n");
    }
    assert_eq!(big.call(&["GET", "n"]), format!("$2\r\n{}\r\n", GETS - 1));
}

#[test]
fn a_thread_per_connection_still_serves() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_shale_with(dir.path(), &["--io-threads", "0"]);
    let mut c = authed(s.port);
    assert_eq!(c.call(&["RPUSH", "l", "a", "b"]), ":2\r\n");
    assert_eq!(
        c.call(&["LRANGE", "l", "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(cli(s.port, &["llen", "l"]), "2");
}

/// The server's threads serving a connection moved off its loop.
fn threads_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter(|t| {
            let comm = std::fs::read_to_string(t.as_ref().unwrap().path().join("comm"));
            comm.is_ok_and(|c| c.trim() == "redis-moved")
        })
        .count()
}

fn read_bytes_of(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Sends `STRLEN k{i}` for `i` in `0..n` in one write: each reads a whole
/// value, the replies are small (a socket that does not take its replies
/// at once would move the connection by itself).
fn pipelined_reads(c: &mut Raw, n: usize) {
    let mut bytes = Vec::new();
    for i in 0..n {
        bytes.extend(Raw::encode(&[b"STRLEN", format!("k{i}").as_bytes()]));
    }
    c.w.write_all(&bytes).unwrap();
    for _ in 0..n {
        assert_eq!(c.reply(), format!(":{}\r\n", 80 * 1024));
    }
}

/// A connection whose GETs read the device (values in value files read
/// with O_DIRECT) moves off the loop to a thread of its own
/// (`device_reads.rs`); one whose GETs are served from memory stays.
#[test]
fn a_client_waiting_for_the_device_moves_to_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    const N: usize = 64;
    // 80 KiB values go to value files (64 KiB and more). Written by one
    // server and read by the next, they are only on disk.
    let big = "v".repeat(80 * 1024);
    {
        let s = start_shale_with(dir.path(), &[]);
        let mut writer = authed(s.port);
        for i in 0..N {
            assert_eq!(writer.call(&["SET", &format!("k{i}"), &big]), "+OK\r\n");
            assert_eq!(writer.call(&["SET", &format!("small{i}"), "x"]), "+OK\r\n");
        }
        assert!(s.terminate().success());
    }
    let s = start_shale_with(dir.path(), &["--io-threads", "1", "--blob-direct-reads"]);
    let pid = s.child.id();
    // In-memory reads: nothing moves.
    let mut mem = authed(s.port);
    let before = threads_of(pid);
    for _ in 0..20 {
        let mut bytes = Vec::new();
        for i in 0..N {
            bytes.extend(Raw::encode(&[b"GET", format!("small{i}").as_bytes()]));
        }
        mem.w.write_all(&bytes).unwrap();
        for _ in 0..N {
            assert_eq!(mem.reply(), "$1\r\nx\r\n");
        }
    }
    assert_eq!(threads_of(pid), before, "an in-memory client left the loop");
    // Reads from value files with O_DIRECT: the loop's thread reads the
    // device, and the connection moves (at most one look per 10 ms, so
    // give it a few rounds).
    let mut disk = authed(s.port);
    let read0 = read_bytes_of(pid);
    for _ in 0..10 {
        pipelined_reads(&mut disk, N);
        std::thread::sleep(Duration::from_millis(20));
    }
    let device_read = read_bytes_of(pid) > read0;
    let after = threads_of(pid);
    if device_read {
        assert_eq!(
            after,
            before + 1,
            "the device-bound client stayed on the loop"
        );
    } else {
        // A file system without O_DIRECT reads from the device (tmpfs):
        // nothing waited, so nothing may move.
        eprintln!("no device reads on this file system: nothing to move");
        assert_eq!(after, before);
    }
    // Still served, in order, on its thread.
    pipelined_reads(&mut disk, N);
    assert_eq!(cli(s.port, &["get", "small0"]), "x");
}
