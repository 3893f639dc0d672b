//! appendfsync under simulated power loss: the server runs in-process on
//! the engine's in-memory file system, whose `crash` drops every byte that
//! was not fsynced. Under `always` every acknowledged write survives; under
//! `no` acknowledged writes are lost (so the check can fail); under
//! `everysec` what was acknowledged a second before the crash survives.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::Raw;
use shale_redis::durability::Appendfsync;
use shale_redis::server::{serve_with, ServerConfig};
use shaledb::env::fault::FaultFs;
use shaledb::env::mem::MemFs;
use shaledb::Db;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CLIENTS: usize = 8;
const WRITES: usize = 40;

fn opts(fs: &FaultFs) -> shaledb::Options {
    shaledb::Options {
        fs: fs.arc(),
        ..shale_redis::engine_options()
    }
}

struct Running {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

fn start(db: Db, mode: Appendfsync) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = ServerConfig {
        password: None,
        appendfsync: mode,
        tls: None,
        io_threads: None,
    };
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        // After the simulated power loss the final fsync fails: ignored.
        let _ = serve_with(db, listener, cfg, s);
    });
    Running { port, stop, thread }
}

/// `CLIENTS` connections each SET `WRITES` keys; the acknowledged keys.
fn write_load(port: u16, tag: &str) -> Vec<String> {
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let tag = tag.to_string();
            std::thread::spawn(move || {
                let mut conn = Raw::connect(port);
                let mut acked = Vec::new();
                for i in 0..WRITES {
                    let k = format!("{tag}:{c}:{i}");
                    assert_eq!(conn.call(&["SET", &k, &k]), "+OK\r\n");
                    acked.push(k);
                }
                acked
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

/// Power loss now, then the server stops; reopens the engine and returns
/// how many of `acked` are there.
fn crash_and_count(mem: &MemFs, fault: &FaultFs, run: Running, acked: &[String]) -> usize {
    mem.crash();
    run.stop.store(true, Ordering::SeqCst);
    run.thread.join().unwrap();
    let db = Db::open("/db", opts(fault)).unwrap();
    let port_db = start(db, Appendfsync::No);
    let mut c = Raw::connect(port_db.port);
    let n = acked
        .iter()
        .filter(|k| c.call(&["GET", k]) == format!("${}\r\n{k}\r\n", k.len()))
        .count();
    port_db.stop.store(true, Ordering::SeqCst);
    port_db.thread.join().unwrap();
    n
}

fn fresh() -> (MemFs, FaultFs, Db) {
    let mem = MemFs::new();
    let fault = FaultFs::new(mem.arc());
    let db = Db::open(Path::new("/db"), opts(&fault)).unwrap();
    (mem, fault, db)
}

#[test]
fn always_keeps_every_acknowledged_write() {
    let (mem, fault, db) = fresh();
    let run = start(db, Appendfsync::Always);
    let acked = write_load(run.port, "a");
    let n = crash_and_count(&mem, &fault, run, &acked);
    assert_eq!(n, acked.len(), "acknowledged writes lost under always");
}

/// On a real disk an fsync takes long enough for the other clients' writes
/// to queue behind it: the group commit carries them all with one fsync.
/// (On the in-memory file system an fsync is instant and groups rarely form.)
#[test]
fn always_shares_fsyncs_between_clients_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let fault = FaultFs::new(shaledb::env::posix::PosixFs::arc());
    let db = Db::open(dir.path(), opts(&fault)).unwrap();
    let run = start(db, Appendfsync::Always);
    let before = fault.syncs();
    let acked = write_load(run.port, "d");
    let syncs = fault.syncs() - before;
    eprintln!(
        "always on disk: {} acknowledged writes, {syncs} fsyncs",
        acked.len()
    );
    assert!(syncs >= 1, "no fsync under always");
    assert!(
        (syncs as usize) < acked.len(),
        "every write had its own fsync ({syncs} for {})",
        acked.len()
    );
    run.stop.store(true, Ordering::SeqCst);
    run.thread.join().unwrap();
}

#[test]
fn no_loses_acknowledged_writes_on_power_loss() {
    let (mem, fault, db) = fresh();
    let run = start(db, Appendfsync::No);
    let acked = write_load(run.port, "n");
    let n = crash_and_count(&mem, &fault, run, &acked);
    eprintln!("no: {} acknowledged, {n} survived", acked.len());
    assert!(n < acked.len(), "nothing lost: the crash proves nothing");
}

#[test]
fn everysec_syncs_within_a_second() {
    let (mem, fault, db) = fresh();
    let run = start(db, Appendfsync::EverySec);
    let mut c = Raw::connect(run.port);
    assert_eq!(
        c.call(&["CONFIG", "GET", "appendfsync"]),
        "*2\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n"
    );
    let acked = write_load(run.port, "e");
    // The background fsync runs once a second.
    std::thread::sleep(Duration::from_millis(1500));
    let n = crash_and_count(&mem, &fault, run, &acked);
    assert_eq!(n, acked.len(), "lost writes acknowledged 1.5 s before");
}

/// CONFIG SET appendfsync always on a server started with `no` (which
/// would lose everything here): the later writes are fsynced.
#[test]
fn config_set_appendfsync_takes_effect() {
    let (mem, fault, db) = fresh();
    let run = start(db, Appendfsync::No);
    let mut c = Raw::connect(run.port);
    assert_eq!(
        c.call(&["CONFIG", "SET", "appendfsync", "always"]),
        "+OK\r\n"
    );
    let acked = write_load(run.port, "s");
    let n = crash_and_count(&mem, &fault, run, &acked);
    assert_eq!(
        n,
        acked.len(),
        "lost writes after CONFIG SET appendfsync always"
    );
}

/// Under `always` a reader is never shown a value that power loss then takes
/// away. The engine makes a SET visible before its fsync ends (so the key's
/// next writer can go ahead); a GET that sees it must wait for that fsync
/// before replying. The fsync is held in flight for 400 ms here: a GET that
/// replied at once would be followed by a power cut that loses the value.
#[test]
fn always_shows_readers_only_durable_values() {
    let (mem, fault, db) = fresh();
    let run = start(db, Appendfsync::Always);
    mem.set_sync_latency(Duration::from_millis(400));
    let port = run.port;
    let writer = std::thread::spawn(move || Raw::connect(port).call(&["SET", "seen", "seen"]));
    let mut reader = Raw::connect(port);
    let started = std::time::Instant::now();
    while reader.call(&["GET", "seen"]) != "$4\r\nseen\r\n" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the SET never became visible"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // The reader was shown the value: cut the power at once.
    let n = crash_and_count(&mem, &fault, run, &["seen".to_string()]);
    let _ = writer.join().unwrap();
    assert_eq!(n, 1, "a value shown to a reader was lost on power loss");
}
