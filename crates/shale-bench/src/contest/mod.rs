//! `--benchmarks=contest`: the phases of the first PolarDB database performance contest
//! (Alibaba Tianchi, 2018), scaled by flags. The contest ran 64 threads x 1,000,000 writes of
//! 8-byte keys and 4 KiB values on an Optane SSD; here `--threads` (default 16), `--num` writes
//! per thread (default 10,000), `--key_size` (8) and `--value_size` (4096) default to a machine
//! of our size unless given. Phases, each printed as a db_bench report line:
//!
//! | line | phase |
//! |------|-------|
//! | `contest_check` | correctness: `--contest_kills` rounds; each starts a writer child process (see [`child`]), SIGKILLs it at a random number of acknowledged writes, reopens the DB and verifies every acknowledged write, the prefix rule and a full ordered scan (see [`verify`]) |
//! | `contest_write` | fresh DB; `T` threads each put `N` distinct random keys |
//! | `contest_read` | page cache dropped, DB reopened; `T` threads get every key once (thread `t` reads thread `t+1`'s keys in a random order), verifying each value |
//! | `contest_range` | page cache dropped, DB reopened; `T` threads each scan the whole DB in order twice, verifying order, keys, values and the count |
//!
//! Keys and values come from [`data`]: distinct by construction and verifiable from the key
//! alone. MB/s counts key + value bytes moved (MiB per second of the phase's wall time; open
//! and close are timed separately and shown in the message), and with `--device_limits` each
//! phase is related to the device: seq write, 4 KiB random read at queue depth `T`, seq read.
//! Engines that do not persist (the `memory` backend) skip the correctness phase and are not
//! reopened between phases.
//!
//! Example (memory backend, tiny):
//!
//! ```text
//! $ shale-bench --engine=memory --benchmarks=contest --threads=2 --num=1000 --seed=1
//! contest: 2 threads x 1000 writes, key 8 B, value 4096 B (7.8 MiB)
//! contest_check : skipped (engine memory does not persist)
//! DB path: [/tmp/shalebenchtest-user/dbbench]
//! contest_write :      17.428 micros/op 97570 ops/sec 0.020 seconds 2000 operations;  381.9 MB/s
//! contest_read :       6.426 micros/op 254744 ops/sec 0.008 seconds 2000 operations;  997.0 MB/s (not reopened: engine does not persist)
//! contest_range :      10.554 micros/op 163281 ops/sec 0.049 seconds 8000 operations;  639.1 MB/s (not reopened: engine does not persist)
//! ```
//!
//! With ShaleDB each crash round adds a line such as `contest_check round 1/3: SIGKILL after
//! 744 acknowledged writes (0.012 s of writing); reopened in 0.035 s; 744 gets and 745 scanned
//! entries verified` (more entries than acknowledged: writes in flight at the kill survive too).

pub mod child;
pub mod data;
pub mod verify;

use crate::device::{drop_page_cache, share_of, DeviceLimits};
use crate::engine::{EngineFactory, KvEngine, WriteOpts};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::random::Random64;
use crate::runner::{engine_options, run_parallel, BenchResult};
use crate::stats::{now_micros, OpType, Stats, Summary};
use data::{KeySpace, Writer};
use std::io::Write;
use verify::VerifyFailure;

/// The contest's shape after per-benchmark defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub threads: usize,
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    /// Writes per thread of each crash round.
    pub check_num: u64,
}

impl Shape {
    /// `--threads`, `--num`, `--key_size`, `--value_size` as given, else the contest defaults.
    pub(crate) fn from_flags(flags: &Flags) -> Shape {
        let pick = |name: &str, given: u64, default: u64| {
            if flags.is_given(name) {
                given
            } else {
                default
            }
        };
        let num = pick("num", u64::try_from(flags.num).unwrap_or(0), 10_000);
        let check_num = u64::try_from(flags.contest_check_num).unwrap_or((num / 10).max(1));
        Shape {
            threads: pick("threads", flags.threads as u64, 16) as usize,
            num,
            key_size: pick("key_size", flags.key_size as u64, 8) as usize,
            value_size: pick("value_size", flags.value_size as u64, 4096) as usize,
            check_num,
        }
    }
}

/// Runs the four phases; returns one result per phase that ran.
pub(crate) fn run_contest(
    flags: &Flags,
    factory: &dyn EngineFactory,
    out: &mut dyn Write,
    seed_base: i64,
) -> Result<Vec<BenchResult>> {
    if flags.use_existing_db {
        writeln!(out, "contest      : skipped (--use_existing_db is true)")?;
        return Ok(Vec::new());
    }
    let shape = Shape::from_flags(flags);
    let limits = DeviceLimits::load(&flags.device_limits)?;
    let ks = KeySpace::new(
        shape.threads as u64,
        shape.num,
        shape.key_size,
        shape.value_size,
        1,
    )?;
    let total_mib =
        (ks.keys_per_domain() as f64) * (shape.key_size + shape.value_size) as f64 / 1_048_576.0;
    writeln!(
        out,
        "contest: {} threads x {} writes, key {} B, value {} B ({total_mib:.1} MiB)",
        shape.threads, shape.num, shape.key_size, shape.value_size
    )?;
    let mut results = Vec::new();
    // The crash rounds draw their kill points from their own stream of the run's seed.
    let mut rng = Random64::new((seed_base as u64) ^ 0x636f_6e74_6573_7421);
    if let Some(r) = check_phase(flags, factory, &shape, &mut rng, out)? {
        results.push(r);
    }

    let opts = engine_options(flags);
    factory
        .destroy(&opts.path)
        .map_err(Error::engine("destroy"))?;
    writeln!(out, "DB path: [{}]", opts.path.display())?;
    let mut engine = factory.open(&opts).map_err(Error::engine("open"))?;
    let wo = WriteOpts {
        sync: flags.sync,
        disable_wal: flags.disable_wal,
    };
    let entry = (shape.key_size + shape.value_size) as u64;
    let cpu0 = cpu::process_cpu();
    let write = run_parallel(shape.threads, flags, &|tid, st| {
        put_keys(&ks, engine.as_ref(), (wo, entry), (tid, 1), st)
    })?;
    let note = cpu::per_op(cpu0, cpu::process_cpu(), ks.keys_per_domain(), "put");
    results.push(report(
        out,
        "contest_write",
        write,
        &limits.seq_write_mib_s,
        "seq write",
        &note,
    )?);

    // Phase 2: every key once, by a thread other than its writer, in a random order.
    let note;
    (engine, note) = reopen(flags, factory, engine)?;
    let cpu0 = cpu::process_cpu();
    let read = run_parallel(shape.threads, flags, &|tid, st| {
        let owner = ((tid + 1) % shape.threads) as u64;
        let order = Permutation::new(ks.per_thread, seed_base as u64 ^ tid as u64);
        let mut key = Vec::new();
        let mut bytes = 0u64;
        for i in 0..ks.per_thread {
            let w = Writer {
                domain: 0,
                thread: owner,
                index: order.at(i),
            };
            ks.key(w, &mut key);
            let mut ok = None;
            engine
                .get(&key, &mut |v| {
                    bytes += (key.len() + v.len()) as u64;
                    ok = Some(ks.value_matches(&key, v));
                })
                .map_err(Error::engine("get"))?;
            match ok {
                None => return Err(VerifyFailure::Missing(w).into()),
                Some(false) => {
                    return Err(VerifyFailure::WrongValue {
                        writer: w,
                        scan: false,
                    }
                    .into())
                }
                Some(true) => st.finished_ops(1, OpType::Read),
            }
        }
        st.add_bytes(bytes);
        Ok(())
    })?;
    let note = format!(
        "{note} {}",
        cpu::per_op(cpu0, cpu::process_cpu(), ks.keys_per_domain(), "get")
    );
    let qd = format!("4K random read QD{}", shape.threads);
    results.push(report(
        out,
        "contest_read",
        read,
        &limits.rand_read_4k_mib_s,
        &qd,
        &note,
    )?);

    // Phase 3: every thread scans everything, twice.
    let note;
    (engine, note) = reopen(flags, factory, engine)?;
    let range = run_parallel(shape.threads, flags, &|_, st| {
        for _ in 0..2 {
            let tally = verify::scan_verify(engine.as_ref(), &ks, 1, &mut || {
                st.finished_ops(1, OpType::Read)
            })?;
            if tally.entries != ks.keys_per_domain() {
                return Err(VerifyFailure::Count {
                    expected: ks.keys_per_domain(),
                    seen: tally.entries,
                }
                .into());
            }
            st.add_bytes(tally.bytes);
        }
        Ok(())
    })?;
    results.push(report(
        out,
        "contest_range",
        range,
        &limits.seq_read_mib_s,
        "seq read",
        &note,
    )?);
    if flags.contest_space && !factory.persistent() {
        writeln!(out, "contest_space : skipped (engine does not persist)")?;
    } else if flags.contest_space {
        results.push(space_phase(
            flags,
            &shape,
            &ks,
            engine.as_ref(),
            &opts.path,
            &limits.seq_write_mib_s,
            out,
        )?);
    }
    engine.close().map_err(Error::engine("close"))?;
    Ok(results)
}

/// Puts every `step`-th key of writer thread `tid` (`step` 1: the write phase; 2: the space
/// phase's overwrite of half the keys), counting ops and `entry` bytes per put in `st`.
fn put_keys(
    ks: &KeySpace,
    engine: &dyn KvEngine,
    (wo, entry): (WriteOpts, u64),
    (tid, step): (usize, usize),
    st: &mut Stats,
) -> Result<()> {
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut n = 0u64;
    for index in (0..ks.per_thread).step_by(step) {
        let writer = Writer {
            domain: 0,
            thread: tid as u64,
            index,
        };
        ks.key(writer, &mut key);
        ks.value(&key, &mut value);
        engine.put(wo, &key, &value).map_err(Error::engine("put"))?;
        st.finished_ops(1, OpType::Write);
        n += 1;
    }
    st.add_bytes(n * entry);
    Ok(())
}

/// `--contest_space`: every thread overwrites every second key it wrote (same value: the old
/// copy becomes garbage), the engine flushes, and the DB directory's bytes are compared with
/// the live data (keys + values) before and after [`KvEngine::collect_garbage`]; then one
/// scan verifies every key and value. Prints `contest_overwrite` (a report line) and
/// `contest_space` (a summary line).
fn space_phase(
    flags: &Flags,
    shape: &Shape,
    ks: &KeySpace,
    engine: &dyn KvEngine,
    path: &std::path::Path,
    write_limit: &Option<f64>,
    out: &mut dyn Write,
) -> Result<BenchResult> {
    let wo = WriteOpts {
        sync: flags.sync,
        disable_wal: flags.disable_wal,
    };
    let entry = (shape.key_size + shape.value_size) as u64;
    let over = run_parallel(shape.threads, flags, &|tid, st| {
        put_keys(ks, engine, (wo, entry), (tid, 2), st)
    })?;
    let result = report(
        out,
        "contest_overwrite",
        over,
        write_limit,
        "seq write",
        "(every second key of every thread)",
    )?;
    engine.flush().map_err(Error::engine("flush"))?;
    let mib = |b: u64| b as f64 / 1_048_576.0;
    let live = ks.keys_per_domain() * entry;
    let before = dir_bytes(path)?;
    let t0 = now_micros();
    let gc = engine
        .collect_garbage()
        .map_err(Error::engine("collect_garbage"))?;
    let gc_s = now_micros().saturating_sub(t0) as f64 * 1e-6;
    let gc_part = match gc {
        Some(what) => {
            let after = dir_bytes(path)?;
            format!(
                "GC {gc_s:.2} s ({what}); after GC {:.1} MiB (amp {:.2})",
                mib(after),
                after as f64 / live as f64
            )
        }
        None => "no GC call (engine has none, or values are inline)".to_string(),
    };
    let tally = verify::scan_verify(engine, ks, 1, &mut || {})?;
    if tally.entries != ks.keys_per_domain() {
        return Err(VerifyFailure::Count {
            expected: ks.keys_per_domain(),
            seen: tally.entries,
        }
        .into());
    }
    writeln!(
        out,
        "contest_space : live data {:.1} MiB; after overwriting half the keys and a flush \
         {:.1} MiB (amp {:.2}); {gc_part}; {} entries verified by a scan",
        mib(live),
        mib(before),
        before as f64 / live as f64,
        tally.entries
    )?;
    out.flush()?;
    Ok(result)
}

/// Bytes of the files under `dir` (file lengths, recursively).
///
/// The engine's background work goes on meanwhile: a file listed and deleted (by a compaction
/// or GC) before its size is read counts as gone, not as an error.
fn dir_bytes(dir: &std::path::Path) -> Result<u64> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = match entry {
            Err(e) if gone(&e) => continue,
            other => other?,
        };
        let meta = match entry.metadata() {
            Err(e) if gone(&e) => continue,
            other => other?,
        };
        if meta.is_dir() {
            total += dir_bytes(&entry.path())?;
        } else {
            total += meta.len();
        }
    }
    Ok(total)
}

/// Closes, drops the page cache and reopens (persistent engines only); returns the note for
/// the next phase's report line.
fn reopen(
    flags: &Flags,
    factory: &dyn EngineFactory,
    engine: Box<dyn KvEngine>,
) -> Result<(Box<dyn KvEngine>, String)> {
    if !factory.persistent() {
        return Ok((engine, "(not reopened: engine does not persist)".into()));
    }
    let t0 = now_micros();
    engine.close().map_err(Error::engine("close"))?;
    let close_s = now_micros().saturating_sub(t0) as f64 * 1e-6;
    let cache = drop_page_cache(flags.drop_caches);
    let t1 = now_micros();
    let engine = factory
        .open(&engine_options(flags))
        .map_err(Error::engine("open"))?;
    let open_s = now_micros().saturating_sub(t1) as f64 * 1e-6;
    let note = format!("(close {close_s:.3} s, {cache}, open {open_s:.3} s)");
    Ok((engine, note))
}

/// Prints a phase's report (line + histograms) with the device share and `note` appended.
fn report(
    out: &mut dyn Write,
    name: &str,
    mut stats: Stats,
    limit: &Option<f64>,
    what: &str,
    note: &str,
) -> Result<BenchResult> {
    let share = share_of(stats.summary(name).mb_per_sec, *limit, what);
    stats.add_message(note);
    stats.add_message(&share);
    out.write_all(stats.report(name).as_bytes())?;
    out.flush()?;
    Ok(BenchResult {
        summary: stats.summary(name),
        stats,
    })
}

/// The crash rounds; `None` when skipped.
fn check_phase(
    flags: &Flags,
    factory: &dyn EngineFactory,
    shape: &Shape,
    rng: &mut Random64,
    out: &mut dyn Write,
) -> Result<Option<BenchResult>> {
    let why_not = if flags.contest_kills == 0 {
        Some("--contest_kills=0".to_string())
    } else if !factory.persistent() {
        Some(format!("engine {} does not persist", factory.name()))
    } else {
        None
    };
    if let Some(why) = why_not {
        writeln!(out, "contest_check : skipped ({why})")?;
        return Ok(None);
    }
    let rounds = u64::from(flags.contest_kills);
    let ks = KeySpace::new(
        shape.threads as u64,
        shape.check_num,
        shape.key_size,
        shape.value_size,
        rounds,
    )?;
    let opts = engine_options(flags);
    factory
        .destroy(&opts.path)
        .map_err(Error::engine("destroy"))?;
    let start = now_micros();
    let mut acked: Vec<Vec<u64>> = Vec::new();
    let (mut verified, mut survived) = (0u64, 0u64);
    for round in 0..rounds {
        let kill_after = 1 + rng.next_u64() % ks.keys_per_domain();
        let spec = child::ChildSpec {
            space: ks,
            domain: round,
            write_buffer_size: flags.write_buffer_size,
            kill_after: Some(kill_after),
        };
        let seen = child::run_child(flags, &spec, factory.name())?;
        let acked_now: u64 = seen.acked.iter().sum();
        acked.push(seen.acked);
        let t0 = now_micros();
        let engine = factory.open(&opts).map_err(Error::engine("open"))?;
        let open_s = now_micros().saturating_sub(t0) as f64 * 1e-6;
        let gets = verify::check_acked_gets(engine.as_ref(), &ks, &acked)?;
        let tally = verify::scan_verify(engine.as_ref(), &ks, round + 1, &mut || {})?;
        verify::check_prefixes(&ks, &tally, &acked)?;
        engine.close().map_err(Error::engine("close"))?;
        writeln!(
            out,
            "contest_check round {}/{rounds}: SIGKILL after {acked_now} acknowledged writes{} \
             ({:.3} s of writing); reopened in {open_s:.3} s; {gets} gets and {} scanned \
             entries verified",
            round + 1,
            if seen.finished { " (all done)" } else { "" },
            seen.write_seconds,
            tally.entries
        )?;
        verified += gets + tally.entries;
        survived = tally.entries;
    }
    let seconds = now_micros().saturating_sub(start) as f64 * 1e-6;
    let summary = Summary {
        name: "contest_check".into(),
        micros_per_op: seconds * 1e6 / verified.max(1) as f64,
        ops_per_sec: verified as f64 / seconds.max(1e-9),
        seconds,
        operations: verified.max(1),
        mb_per_sec: None,
        message: format!(
            "({rounds} crash rounds passed; {survived} entries survived, all acknowledged \
             writes found)"
        ),
    };
    writeln!(out, "{}", summary.report_line())?;
    Ok(Some(BenchResult {
        summary,
        stats: Stats::new(false, false),
    }))
}

/// A random permutation of `0..n`: `i -> (a * i + b) mod n` with `a` coprime to `n`.
struct Permutation {
    n: u64,
    a: u64,
    b: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Permutation {
    fn new(n: u64, seed: u64) -> Self {
        let n = n.max(1);
        let mut a = data::mix64(seed) % n;
        while gcd(a, n) != 1 {
            a = (a + 1) % n;
        }
        Permutation {
            n,
            a,
            b: data::mix64(seed ^ 0x5bd1_e995) % n,
        }
    }

    fn at(&self, i: u64) -> u64 {
        // u128: a, i < n <= 2^64, so the product fits and the result is < n.
        ((u128::from(self.a) * u128::from(i) + u128::from(self.b)) % u128::from(self.n)) as u64
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests;

/// The process's CPU time per operation of a phase (issue 12 measured the
/// write phase's CPU per put this way; crash-round children are other
/// processes and not counted).
mod cpu {
    /// (user, system) seconds of this process so far, all threads (live and
    /// exited), from `/proc/self/stat`; `None` off Linux. Clock ticks are
    /// taken as 100 per second (Linux's `USER_HZ` on every architecture the
    /// benchmark runs on).
    pub fn process_cpu() -> Option<(f64, f64)> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let after = stat.get(stat.rfind(')')? + 1..)?;
        let mut fields = after.split_whitespace().skip(11);
        let user: f64 = fields.next()?.parse().ok()?;
        let sys: f64 = fields.next()?.parse().ok()?;
        Some((user / 100.0, sys / 100.0))
    }

    /// "(cpu U + S us per put)" between two readings, or "" without them.
    pub fn per_op(a: Option<(f64, f64)>, b: Option<(f64, f64)>, ops: u64, what: &str) -> String {
        match (a, b) {
            (Some((u0, s0)), Some((u1, s1))) if ops > 0 => {
                let us = |x: f64| x * 1e6 / ops as f64;
                format!(
                    "(cpu {:.2} + {:.2} us per {what})",
                    us(u1 - u0),
                    us(s1 - s0)
                )
            }
            _ => String::new(),
        }
    }
}
