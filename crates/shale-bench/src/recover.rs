//! `--benchmarks=recover`: how fast an engine reopens after a crash with a large unflushed
//! write-ahead log (the scenario of X-Engine's parallel WAL recovery work).
//!
//! 1. A writer child process (see [`crate::contest::child`]) writes `--recover_bytes` of keys
//!    and values (`--key_size`, `--value_size`; `--threads`, default 1) into a fresh DB whose
//!    write buffer is larger than all of it (`max(--write_buffer_size, 2 * recover_bytes +
//!    64 MiB)`: memtables take more memory than the raw bytes), so nothing is flushed and the
//!    whole data set is only in the WAL.
//! 2. After the child reported its last write acknowledged, the parent SIGKILLs it.
//! 3. The parent measures the WAL ([`EngineFactory::wal_files`]: `*.log` files for ShaleDB,
//!    journal files for fjall), drops the page cache (`--drop_caches`, when permitted), then
//!    times `open` with the same large write buffer: the replay.
//! 4. It verifies a sample of the keys (each thread's last write and up to 1000 random ones)
//!    and closes the engine (not timed).
//!
//! Report line: `micros/op` and `ops/sec` are per replayed entry, `MB/s` is MiB of WAL files
//! replayed per second of open, and `--device_limits` relates that to sequential read:
//!
//! ```text
//! recover      :       1.907 micros/op 524288 ops/sec 2.000 seconds 1048576 operations;  512.0 MB/s (WAL 1024.0 MiB in 1 files; ...)
//! ```
//!
//! `--recover_threads_list=1,2,4` replays *the same WAL* once per entry, with that many
//! recovery threads (ShaleDB: 0 or 1 = serial replay): the killed directory is moved aside,
//! and before every reopen the DB directory is replaced by a fresh copy of it (untimed), then
//! the page cache is dropped. (Measured: without the copy for the first entry, the first
//! reopen, reading the files the writer had just written, was up to 2x slower than the
//! others.) Each reopen prints its own line, named
//! `recover_t<N>`:
//!
//! ```text
//! recover_t1   :       3.095 micros/op 323056 ops/sec 28.653 seconds 9256396 operations;   44.1 MB/s (WAL 1262.8 MiB in 1 files; recovery_threads 1 (serial); ...)
//! recover_t2   :       1.560 micros/op 640849 ops/sec 14.444 seconds 9256396 operations;   87.4 MB/s (WAL 1262.8 MiB in 1 files; recovery_threads 2; ...)
//! ```

use crate::contest::child::{run_child, ChildOutcome, ChildSpec};
use crate::contest::data::{mix64, KeySpace, Writer};
use crate::contest::verify::VerifyFailure;
use crate::device::{drop_page_cache, share_of, DeviceLimits};
use crate::engine::{EngineFactory, EngineOptions, WalFiles};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::runner::{engine_options, BenchResult};
use crate::stats::{now_micros, Stats, Summary};
use std::io::Write;
use std::path::Path;

/// Random keys verified after the reopen, besides each thread's last one.
const SAMPLE: u64 = 1000;

/// Runs the benchmark and prints its report lines (one per `--recover_threads_list` entry);
/// nothing when skipped (an engine that does not persist, or `--use_existing_db`).
pub(crate) fn run_recover(
    flags: &Flags,
    factory: &dyn EngineFactory,
    out: &mut dyn Write,
) -> Result<Vec<BenchResult>> {
    if flags.use_existing_db || !factory.persistent() {
        let why = if flags.use_existing_db {
            "--use_existing_db is true".to_string()
        } else {
            format!("engine {} does not persist", factory.name())
        };
        writeln!(out, "recover      : skipped ({why})")?;
        return Ok(Vec::new());
    }
    // Fail on a bad --device_limits before the (long) fill.
    DeviceLimits::load(&flags.device_limits)?;
    let threads = if flags.is_given("threads") {
        flags.threads as u64
    } else {
        1
    };
    let entry = (flags.key_size + flags.value_size).max(1) as u64;
    let entries = flags.recover_bytes.div_ceil(entry).max(1);
    let ks = KeySpace::new(
        threads,
        entries.div_ceil(threads.max(1)),
        flags.key_size,
        flags.value_size,
        1,
    )?;
    let mut opts = engine_options(flags);
    opts.write_buffer_size = flags.write_buffer_size.max(
        flags
            .recover_bytes
            .saturating_mul(2)
            .saturating_add(64 << 20),
    );
    let written = ks.keys_per_domain() * entry;
    writeln!(
        out,
        "recover: {} threads x {} writes, key {} B, value {} B ({:.1} MiB), write buffer {} B",
        ks.threads,
        ks.per_thread,
        ks.key_size,
        ks.value_size,
        written as f64 / 1_048_576.0,
        opts.write_buffer_size
    )?;
    factory
        .destroy(&opts.path)
        .map_err(Error::engine("destroy"))?;
    let spec = ChildSpec {
        space: ks,
        domain: 0,
        write_buffer_size: opts.write_buffer_size,
        kill_after: None,
    };
    let seen = run_child(flags, &spec, factory.name())?;
    let wal = factory
        .wal_files(&opts.path)
        .map_err(Error::engine("wal size"))?;
    if wal.bytes.saturating_mul(10) < written.saturating_mul(9) {
        writeln!(
            out,
            "WARNING: the WAL holds {} bytes of the {written} written: the engine flushed or \
             compressed its log; the replay below covers only that part",
            wal.bytes
        )?;
    }
    let sweep = &flags.recover_threads_list;
    if sweep.is_empty() {
        let r = timed_reopen(flags, factory, &opts, &ks, wal, &seen, "recover", out)?;
        return Ok(vec![r]);
    }
    // The same WAL for every entry: the killed directory is moved aside and every reopen,
    // the first included, gets a fresh copy (so the first is not the only one reading the
    // files the writer wrote).
    let pristine = opts.path.with_extension("recover-copy");
    remove_any(&pristine)?;
    std::fs::rename(&opts.path, &pristine)?;
    let mut results = Vec::new();
    for &threads in sweep {
        remove_any(&opts.path)?;
        copy_tree(&pristine, &opts.path)?;
        let mut o = opts.clone();
        o.recovery_threads = Some(threads);
        let name = format!("recover_t{threads}");
        results.push(timed_reopen(
            flags, factory, &o, &ks, wal, &seen, &name, out,
        )?);
    }
    remove_any(&pristine)?;
    Ok(results)
}

/// Removes a file or directory tree if it exists.
fn remove_any(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path)?,
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// Copies a directory tree (regular files and directories).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Drops the page cache, times `open` (the replay), verifies a sample, closes (untimed) and
/// prints the report line `name`.
#[allow(clippy::too_many_arguments)] // one call site per mode; a struct would only rename them
fn timed_reopen(
    flags: &Flags,
    factory: &dyn EngineFactory,
    opts: &EngineOptions,
    ks: &KeySpace,
    wal: WalFiles,
    seen: &ChildOutcome,
    name: &str,
    out: &mut dyn Write,
) -> Result<BenchResult> {
    let limits = DeviceLimits::load(&flags.device_limits)?;
    let cache = drop_page_cache(flags.drop_caches);
    let t0 = now_micros();
    let engine = factory.open(opts).map_err(Error::engine("open"))?;
    let seconds = (now_micros().saturating_sub(t0) as f64 * 1e-6).max(1e-6);

    // Verify each thread's last write and a random sample.
    let mut key = Vec::new();
    let mut check = |w: Writer| -> Result<()> {
        ks.key(w, &mut key);
        let mut ok = None;
        engine
            .get(&key, &mut |v| ok = Some(ks.value_matches(&key, v)))
            .map_err(Error::engine("get"))?;
        match ok {
            Some(true) => Ok(()),
            Some(false) => Err(VerifyFailure::WrongValue {
                writer: w,
                scan: false,
            }
            .into()),
            None => Err(VerifyFailure::Missing(w).into()),
        }
    };
    for thread in 0..ks.threads {
        check(Writer {
            domain: 0,
            thread,
            index: ks.per_thread - 1,
        })?;
    }
    for s in 0..SAMPLE.min(ks.keys_per_domain()) {
        let id = mix64(s ^ 0x0072_6563_6f76_6572) % ks.keys_per_domain();
        check(Writer {
            domain: 0,
            thread: id / ks.per_thread,
            index: id % ks.per_thread,
        })?;
    }
    engine.close().map_err(Error::engine("close"))?;

    let replayed = ks.keys_per_domain();
    let mb = wal.bytes as f64 / 1_048_576.0 / seconds;
    let threads = match opts.recovery_threads {
        None => "recovery_threads default".to_string(),
        Some(n @ (0 | 1)) => format!("recovery_threads {n} (serial)"),
        Some(n) => format!("recovery_threads {n}"),
    };
    let mut message = format!(
        "(WAL {:.1} MiB in {} files; {threads}; {replayed} entries written in {:.3} s; {cache}; \
         sample verified)",
        wal.bytes as f64 / 1_048_576.0,
        wal.files,
        seen.write_seconds,
    );
    let share = share_of(Some(mb), limits.seq_read_mib_s, "seq read");
    if !share.is_empty() {
        message.push(' ');
        message.push_str(&share);
    }
    let summary = Summary {
        name: name.into(),
        micros_per_op: seconds * 1e6 / replayed as f64,
        ops_per_sec: replayed as f64 / seconds,
        seconds,
        operations: replayed,
        mb_per_sec: (wal.bytes > 0).then_some(mb),
        message,
    };
    writeln!(out, "{}", summary.report_line())?;
    out.flush()?;
    Ok(BenchResult {
        summary,
        stats: Stats::new(false, false),
    })
}
