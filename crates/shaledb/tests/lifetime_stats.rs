//! Write amplification and the other lifetime counters survive reopen and
//! manifest rewrites: `shale stats` in a new process reports the database's
//! life, not the process's.
#![allow(clippy::unwrap_used)] // a panic in a test is a failure

use shaledb::{Db, Options};

fn opts() -> Options {
    Options {
        write_buffer_size: 256 << 10,
        extent_size: 256 << 10,
        block_size: 4096,
        max_value_size: 64 << 10,
        max_manifest_size: 4 << 10, // rewrite the manifest often
        ..Options::default()
    }
}

fn prop(db: &Db, name: &str) -> f64 {
    db.property(name).unwrap().parse().unwrap()
}

#[test]
fn counters_survive_reopen_and_manifest_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let (wa, stats) = {
        let db = Db::open(dir.path(), opts()).unwrap();
        for i in 0..30_000u32 {
            db.put(format!("key{:08}", i % 10_000).as_bytes(), &[b'v'; 40])
                .unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        let wa = prop(&db, "shale.write-amplification");
        assert!(wa > 0.0);
        let stats = db.property("shale.stats").unwrap();
        db.close().unwrap();
        (wa, stats)
    };
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(prop(&db, "shale.write-amplification"), wa);
    let line = |s: &str, p: &str| s.lines().find(|l| l.starts_with(p)).unwrap().to_owned();
    let after = db.property("shale.stats").unwrap();
    for p in [
        "writes:",
        "flushes:",
        "compactions:",
        "write amplification:",
    ] {
        assert_eq!(line(&after, p), line(&stats, p), "{p}");
    }
    // They keep growing from there.
    let before = prop(&db, "shale.compaction-bytes-reused");
    for i in 0..10_000u32 {
        db.put(format!("new{i:08}").as_bytes(), &[b'w'; 40])
            .unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(prop(&db, "shale.compaction-bytes-reused") >= before);
    let more = db.property("shale.stats").unwrap();
    assert_ne!(line(&more, "writes:"), line(&stats, "writes:"));
}
