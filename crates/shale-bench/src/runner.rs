//! Orchestration, after db_bench's `Benchmark::Run` / `RunBenchmark`: open the engine, print the
//! header, and for each name in `--benchmarks` set the per-benchmark parameters, recreate the DB
//! for the `fill*` benchmarks, start the threads together, merge their stats and print the
//! report.
//!
//! Thread seeds: every thread started during the run takes the next number of a run-wide
//! counter, and seeds its `Random64` with `seed_base + counter` (db_bench's
//! `total_thread_count_`). With `--seed=42 --threads=1 --benchmarks=fillrandom,readrandom` the
//! writer uses seed 43 and the reader seed 44; with `--threads=2` they use 43, 44 and 45, 46.
//!
//! Output goes to the `out` writer (stdout in the binaries); progress reports go to stderr.

use crate::engine::{EngineFactory, EngineOptions, KvEngine, WriteOpts};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::random::{Random64, ValuePool};
use crate::stats::{now_micros, Stats, Summary};
use crate::workloads::{run_thread, Method, Params, Shared, ThreadState};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

/// One benchmark's merged result.
#[derive(Clone, Debug)]
pub struct BenchResult {
    /// The numbers of the report line.
    pub summary: Summary,
    /// The merged stats (histograms included).
    pub stats: Stats,
}

/// The engine options the flags imply.
pub fn engine_options(flags: &Flags) -> EngineOptions {
    EngineOptions {
        path: flags.db_path(),
        write_buffer_size: flags.write_buffer_size,
        cache_size: u64::try_from(flags.cache_size).unwrap_or(0),
        bloom_bits: flags.bloom_bits_per_key(),
        block_size: flags.block_size,
        compression: flags.compression,
        statistics: flags.statistics,
        recovery_threads: usize::try_from(flags.recovery_threads).ok(),
        concurrent_memtable_insert: flags.allow_concurrent_memtable_write,
        wal_mapped_writes: flags.wal_mapped_writes,
        lone_writes: flags.lone_writes,
        min_blob_size: if flags.enable_blob_files {
            flags.min_blob_size
        } else {
            0
        },
        blob_direct_io: flags.blob_direct_io,
        direct_reads: flags.use_direct_reads,
        blob_cache_size: flags.blob_cache_size,
        blob_readahead: (flags.blob_readahead, flags.blob_readahead_threads),
        cache_index_and_filter_blocks: flags
            .is_given("cache_index_and_filter_blocks")
            .then_some(flags.cache_index_and_filter_blocks),
    }
}

/// Sets the parameters of one benchmark, as the big `if (name == ...)` chain of `Run()` does.
pub(crate) fn params_for(name: &str, flags: &Flags) -> Params {
    let mut p = Params {
        num: flags.num,
        flags_num: flags.num,
        reads: flags.reads_resolved(),
        writes: if flags.writes < 0 {
            flags.num
        } else {
            flags.writes
        },
        deletes: if flags.deletes < 0 {
            flags.num
        } else {
            flags.deletes
        },
        key_size: flags.key_size,
        value_size: flags.value_size,
        entries_per_batch: flags.batch_size,
        wo: WriteOpts {
            sync: flags.sync,
            disable_wal: flags.disable_wal,
        },
        threads: flags.threads,
        fresh_db: false,
        method: None,
    };
    match name {
        "fillseq" => {
            p.fresh_db = true;
            p.method = Some(Method::WriteSeq);
        }
        "fillbatch" => {
            p.fresh_db = true;
            p.entries_per_batch = 1000;
            p.method = Some(Method::WriteSeq);
        }
        "fillrandom" => {
            p.fresh_db = true;
            p.method = Some(Method::WriteRandom);
        }
        "overwrite" => p.method = Some(Method::WriteRandom),
        "fillsync" => {
            // As in 7.8.3: the key range shrinks to num/1000 but `writes_` stays FLAGS_num, so
            // fillsync issues --num synced writes over num/1000 distinct keys.
            p.fresh_db = true;
            p.num /= 1000;
            p.wo.sync = true;
            p.method = Some(Method::WriteRandom);
        }
        "readseq" => p.method = Some(Method::ReadSequential),
        "readreverse" => p.method = Some(Method::ReadReverse),
        "readrandom" => p.method = Some(Method::ReadRandom),
        "readmissing" => {
            p.key_size += 1;
            p.method = Some(Method::ReadRandom);
        }
        "seekrandom" => p.method = Some(Method::SeekRandom),
        "seekrandomwhilewriting" => {
            p.threads += 1;
            p.method = Some(Method::SeekRandomWhileWriting);
        }
        "deleteseq" => p.method = Some(Method::DeleteSeq),
        "deleterandom" => p.method = Some(Method::DeleteRandom),
        "readwhilewriting" => {
            p.threads += 1;
            p.method = Some(Method::ReadWhileWriting);
        }
        // Run by `crate::txn` on a fresh DB, not by the db_bench methods.
        "txnmix" => p.fresh_db = true,
        _ => {} // flush, stats: handled by the runner without threads.
    }
    p
}

/// Runs `--benchmarks` against engines from `factory`, writing db_bench-style output to `out`.
pub fn run(
    flags: &Flags,
    factory: &dyn EngineFactory,
    out: &mut dyn Write,
) -> Result<Vec<BenchResult>> {
    let seed_base = if flags.seed == 0 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or(1);
        writeln!(out, "Set seed to {now} because --seed was 0")?;
        now
    } else {
        flags.seed
    };
    let opts = engine_options(flags);
    if !flags.use_existing_db {
        factory
            .destroy(&opts.path)
            .map_err(Error::engine("destroy"))?;
    }
    if let Some(parent) = opts.path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Opened before the header as db_bench does, unless the first benchmark opens it itself.
    let mut engine = match flags.benchmarks.first().map(String::as_str) {
        Some("contest" | "recover") => None,
        _ => Some(factory.open(&opts).map_err(Error::engine("open"))?),
    };
    print_header(flags, factory, &opts, out)?;
    let pool = ValuePool::new(flags.compression_ratio, flags.value_size);
    let mut total_thread_count: i64 = 0;
    let mut results = Vec::new();

    for name in &flags.benchmarks {
        if matches!(name.as_str(), "contest" | "recover") {
            // Both run writer child processes on the DB directory and reopen it themselves:
            // close ours first (the engine may hold a lock), reopen for what follows.
            if let Some(e) = engine.take() {
                e.close().map_err(Error::engine("close"))?;
            }
            if name == "contest" {
                results.extend(crate::contest::run_contest(flags, factory, out, seed_base)?);
            } else {
                results.extend(crate::recover::run_recover(flags, factory, out)?);
            }
            continue;
        }
        if engine.is_none() {
            engine = Some(factory.open(&opts).map_err(Error::engine("open"))?);
        }
        let params = params_for(name, flags);
        let mut method = params.method;
        let mut skipped = false;
        if params.fresh_db {
            if flags.use_existing_db {
                writeln!(out, "{name:<12} : skipped (--use_existing_db is true)")?;
                method = None;
                skipped = true;
            } else {
                if let Some(e) = engine.take() {
                    e.close().map_err(Error::engine("close"))?;
                }
                factory
                    .destroy(&opts.path)
                    .map_err(Error::engine("destroy"))?;
                engine = Some(factory.open(&opts).map_err(Error::engine("open"))?);
            }
        }
        let Some(db) = engine.as_deref() else {
            break; // unreachable: the engine is reopened above
        };
        match name.as_str() {
            "flush" => db.flush().map_err(Error::engine("flush"))?,
            "stats" => {
                if let Some(s) = db.stats() {
                    write!(out, "\n{s}\n")?;
                }
            }
            _ => {}
        }
        if name == "txnmix" {
            if !skipped {
                results.push(crate::txn::run_txnmix(
                    db,
                    factory.name(),
                    flags,
                    out,
                    seed_base,
                    &mut total_thread_count,
                )?);
            }
            continue;
        }
        if method.is_none() {
            continue;
        }
        writeln!(out, "DB path: [{}]", opts.path.display())?;
        out.flush()?;
        let merged = run_benchmark(
            db,
            &params,
            flags,
            &pool,
            seed_base,
            &mut total_thread_count,
        )?;
        out.write_all(merged.report(name).as_bytes())?;
        out.flush()?;
        results.push(BenchResult {
            summary: merged.summary(name),
            stats: merged,
        });
    }

    if flags.statistics {
        if let Some(db) = engine.as_deref() {
            writeln!(out, "STATISTICS:\n{}", db.stats().unwrap_or_default())?;
        }
    }
    if let Some(e) = engine.take() {
        e.close().map_err(Error::engine("close"))?;
    }
    Ok(results)
}

/// Runs `body(thread id, stats)` on `threads` threads started together (each thread's stats
/// clock starts after the barrier) and merges their stats as `RunBenchmark` does.
pub(crate) fn run_parallel(
    threads: usize,
    flags: &Flags,
    body: &(dyn Fn(usize, &mut Stats) -> Result<()> + Sync),
) -> Result<Stats> {
    let n = threads.max(1);
    let barrier = Barrier::new(n);
    let outcomes: Vec<std::thread::Result<(Stats, Result<()>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|tid| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut stats = Stats::new(flags.histogram, flags.progress_reports);
                    barrier.wait();
                    stats.start();
                    let r = body(tid, &mut stats);
                    stats.stop();
                    (stats, r)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let now = now_micros();
    let mut finished = Vec::with_capacity(n);
    for o in outcomes {
        let (stats, r) = o.map_err(|_| Error::ThreadPanicked)?;
        r?;
        finished.push(stats);
    }
    Ok(Stats::merge_threads(&finished, now))
}

/// `RunBenchmark`: starts `params.threads` threads together and merges their stats.
fn run_benchmark(
    db: &dyn KvEngine,
    params: &Params,
    flags: &Flags,
    pool: &ValuePool,
    seed_base: i64,
    total_thread_count: &mut i64,
) -> Result<Stats> {
    let n = params.threads.max(1);
    let shared = Shared {
        engine: db,
        params,
        flags,
        pool,
        num_done: AtomicUsize::new(0),
        total: n,
    };
    let mut states = Vec::with_capacity(n);
    for tid in 0..n {
        *total_thread_count += 1;
        // `Random64(uint64_t)` receives the int64 sum: a two's-complement reinterpretation in
        // C++, which `as u64` reproduces exactly.
        let seed = seed_base.wrapping_add(*total_thread_count) as u64;
        states.push(ThreadState {
            tid,
            rand: Random64::new(seed),
            stats: Stats::new(flags.histogram, flags.progress_reports),
        });
    }
    let barrier = Barrier::new(n);
    let outcomes: Vec<std::thread::Result<(ThreadState, Result<()>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = states
            .into_iter()
            .map(|mut ts| {
                let shared = &shared;
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    ts.stats.start();
                    let r = run_thread(shared, &mut ts);
                    ts.stats.stop();
                    shared.num_done.fetch_add(1, Ordering::AcqRel);
                    (ts, r)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let now = now_micros();
    let mut finished = Vec::with_capacity(n);
    for o in outcomes {
        let (ts, r) = o.map_err(|_| Error::ThreadPanicked)?;
        r?;
        finished.push(ts.stats);
    }
    Ok(Stats::merge_threads(&finished, now))
}

fn print_header(
    flags: &Flags,
    factory: &dyn EngineFactory,
    opts: &EngineOptions,
    out: &mut dyn Write,
) -> Result<()> {
    writeln!(out, "ShaleBench: db_bench 7.8.3 compatible harness")?;
    let described = factory.describe(opts);
    if described.is_empty() {
        writeln!(out, "Engine:     {}", factory.name())?;
    }
    for line in described {
        writeln!(out, "{line}")?;
    }
    writeln!(
        out,
        "Keys:       {} bytes each (+ 0 bytes user-defined timestamp)",
        flags.key_size
    )?;
    // `static_cast<int>(value_size * compression_ratio + 0.5)`: truncation of a small positive.
    let compressed = (flags.value_size as f64 * flags.compression_ratio + 0.5) as i64;
    writeln!(
        out,
        "Values:     {} bytes each ({compressed} bytes after compression)",
        flags.value_size
    )?;
    writeln!(out, "Entries:    {}", flags.num)?;
    writeln!(out, "Prefix:    0 bytes")?;
    writeln!(out, "Keys per prefix:    0")?;
    let raw = (flags.key_size + flags.value_size) as f64 * flags.num as f64 / 1_048_576.0;
    writeln!(out, "RawSize:    {raw:.1} MB (estimated)")?;
    let file = (flags.key_size as f64 + flags.value_size as f64 * flags.compression_ratio)
        * flags.num as f64
        / 1_048_576.0;
    writeln!(out, "FileSize:   {file:.1} MB (estimated)")?;
    writeln!(out, "Write rate: 0 bytes/second")?;
    writeln!(out, "Read rate: 0 ops/second")?;
    let mapped = if flags.compression_type.eq_ignore_ascii_case("snappy") {
        " (snappy requested: no snappy here, mapped to LZ4)"
    } else {
        ""
    };
    writeln!(
        out,
        "Compression: {}{mapped}",
        flags.compression.rocksdb_name()
    )?;
    writeln!(
        out,
        "Cache:      {} bytes, bloom bits: {}, write buffer: {} bytes",
        opts.cache_size,
        opts.bloom_bits
            .map_or("none".to_string(), |b| b.to_string()),
        opts.write_buffer_size
    )?;
    writeln!(out, "------------------------------------------------")?;
    Ok(())
}
