//! End-to-end tests of the crash benchmarks through the real binary: the parent re-executes
//! `shale-bench` as a writer child, SIGKILLs it and verifies the reopened DB.
//!
//! `logfile` persists every acknowledged write (the checks must pass); `logfile-lossy` keeps
//! acknowledged writes in a process buffer (the checks must fail). With the `shale` feature the
//! same runs go against ShaleDB. Sizes are tiny: the whole file runs in a few seconds.

use std::process::{Command, Output};

fn shale_bench(dir: &std::path::Path, args: &[&str]) -> Output {
    let db = format!("--db={}", dir.join("db").display());
    Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .args([
            db.as_str(),
            "--progress_reports=0",
            "--drop_caches=0",
            "--seed=11",
            "--compression_type=none",
        ])
        .args(args)
        .output()
        .expect("run shale-bench")
}

fn text(o: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn contest(engine: &str) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = format!("--engine={engine}");
    shale_bench(
        dir.path(),
        &[
            e.as_str(),
            "--benchmarks=contest",
            "--threads=3",
            "--num=200",
            "--value_size=1024",
            "--contest_kills=3",
            "--contest_check_num=300",
        ],
    )
}

fn passes_contest(engine: &str) {
    let o = contest(engine);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("(3 crash rounds passed;"), "{t}");
    assert_eq!(t.matches("contest_check round ").count(), 3, "{t}");
    for phase in ["contest_write :", "contest_read :", "contest_range :"] {
        assert!(t.contains(phase), "{phase}: {t}");
    }
    // 3 threads x 2 scans x 600 entries.
    assert!(t.contains("3600 operations;"), "{t}");
}

fn recovers(engine: &str, value_size: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = format!("--engine={engine}");
    let v = format!("--value_size={value_size}");
    let o = shale_bench(
        dir.path(),
        &[
            e.as_str(),
            "--benchmarks=recover",
            "--recover_bytes=2000000",
            "--threads=2",
            v.as_str(),
        ],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("sample verified"), "{t}");
    assert!(!t.contains("WARNING"), "{t}");
    let line = t
        .lines()
        .find(|l| l.starts_with("recover      :"))
        .expect("report line");
    assert!(line.contains(" MB/s (WAL "), "{line}");
}

#[test]
fn contest_passes_on_an_engine_that_keeps_acknowledged_writes() {
    passes_contest("logfile");
}

#[test]
fn contest_catches_an_engine_that_loses_acknowledged_writes() {
    let o = contest("logfile-lossy");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("verification failed:"), "{t}");
    assert!(!t.contains("crash rounds passed"), "{t}");
}

#[test]
fn recover_replays_the_log() {
    recovers("logfile", "100");
}

#[cfg(feature = "shale")]
#[test]
fn shaledb_passes_contest() {
    passes_contest("shale");
}

/// `--contest_space` with ShaleDB's value files: half the keys overwritten, the value-file GC
/// shrinks the directory, and the scan after it verifies every entry.
#[cfg(feature = "shale")]
#[test]
fn shaledb_reports_space_before_and_after_gc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = shale_bench(
        dir.path(),
        &[
            "--engine=shale",
            "--benchmarks=contest",
            "--threads=2",
            "--num=400",
            "--contest_kills=0",
            "--contest_space=true",
            "--enable_blob_files=true",
            "--min_blob_size=1024",
        ],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("contest_overwrite :"), "{t}");
    let line = t
        .lines()
        .find(|l| l.starts_with("contest_space :"))
        .unwrap_or_else(|| panic!("no contest_space line: {t}"));
    assert!(line.contains("collect_blob_garbage(0.75)"), "{line}");
    assert!(line.contains("800 entries verified by a scan"), "{line}");
    let amps: Vec<f64> = line
        .split("(amp ")
        .skip(1)
        .filter_map(|s| s.split(')').next()?.parse().ok())
        .collect();
    assert_eq!(amps.len(), 2, "{line}");
    assert!(amps[1] < amps[0], "GC did not shrink the directory: {line}");
}

#[cfg(feature = "shale")]
#[test]
fn shaledb_recovers() {
    recovers("shale", "100");
    recovers("shale", "4096");
}
