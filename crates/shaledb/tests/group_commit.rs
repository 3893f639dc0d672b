//! Group commit's followers (docs/architecture.md, "Write path", step 2):
//! a writer waiting for another's group polls before it sleeps only while
//! the queued writers fit on the cores; with more writers than cores it
//! sleeps at once, leaving the cores to the leader and to writers with work.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::{Db, Options, ReadOptions, WriteOptions};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Duration;

fn cores() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

fn counter(db: &Db, name: &str) -> u64 {
    db.property(name).unwrap().parse().unwrap()
}

/// `threads` writers, `per_thread` synced puts of 1 KiB values each,
/// started together; returns (followers, follower polls) after checking
/// every write landed. The values go to value files, which the leader
/// syncs inside its group (docs/architecture.md, crash argument), and each
/// sync of the in-memory file system takes 300 us: a group lasts that long
/// at least, so the other writers queue up behind it.
fn run_writers(threads: u64, per_thread: u64) -> (u64, u64) {
    let fs = Arc::new(MemFs::new());
    let opts = Options {
        fs: fs.clone(),
        min_blob_size: 100,
        background_threads: false,
        ..Options::default()
    };
    let db = Arc::new(Db::open(Path::new("/db"), opts).unwrap());
    fs.set_sync_latency(Duration::from_micros(300));
    let start = Arc::new(Barrier::new(threads as usize));
    let synced = WriteOptions {
        sync: true,
        disable_wal: false,
    };
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                for i in 0..per_thread {
                    let key = format!("t{t:03}-{i:06}");
                    db.put_opt(&synced, key.as_bytes(), &[b'v'; 1024]).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.value(), &[b'v'; 1024][..]);
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, threads * per_thread);
    let followers = counter(&db, "shale.write-followers");
    let polls = counter(&db, "shale.write-follower-polls");
    eprintln!("{threads} writers: {followers} followers, {polls} polled");
    assert!(polls <= followers, "{polls} polls, {followers} followers");
    (followers, polls)
}

/// Many more writers than cores: the queue holds more writers than there
/// are cores nearly all the time, so most followers sleep without polling
/// (before, every follower polled: polls == followers).
#[test]
fn followers_do_not_poll_when_writers_outnumber_cores() {
    let threads = (8 * cores()).max(16);
    let (followers, polls) = run_writers(threads, 100);
    assert!(followers > 0, "no writer ever waited for a group");
    assert!(
        polls * 2 <= followers,
        "{polls} of {followers} followers polled with {threads} writers on {} cores",
        cores()
    );
}

/// Two writers on two or more cores: both always fit, so every follower
/// polls before sleeping (the short wait that keeps a follower's latency
/// low when a core is free).
#[test]
fn followers_poll_when_the_writers_fit_on_the_cores() {
    if cores() < 2 {
        return; // one core: two writers never fit, nothing to check
    }
    let (followers, polls) = run_writers(2, 200);
    assert!(followers > 0, "no writer ever waited for a group");
    assert_eq!(polls, followers);
}
