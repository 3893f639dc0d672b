//! `--benchmarks=txnmix` (not a db_bench benchmark): contended read-modify-write
//! transactions, with aborts, retries and a lost-update check.
//!
//! 1. Fresh DB; `--num` keys (db_bench's keys, `--key_size`) are preloaded with an 8-byte
//!    counter 0 ([`check`]); `--value_size` does not apply.
//! 2. `--threads` threads run transactions (`workload`) for `--duration` seconds, or until
//!    each committed `--writes` of them (negative: `--num`). A transaction touches `--txn_ops`
//!    keys, uniform or zipfian (`--txn_zipf`, `keys`): `get_for_update` + `put` of the
//!    counter plus one each, then commit; `--txn_read_pct` percent of them only `get` their
//!    keys. Aborts (write conflict, deadlock, lock timeout, serialization failure) are rolled
//!    back and retried.
//! 3. A full scan checks that the counters sum to the committed increments; a mismatch fails
//!    the run (the error names lost updates).
//!
//! Engines opt in through [`crate::KvEngine::txn`] ([`engine::TxnEngine`]);
//! `--isolation` (`rc`, `si`, `serializable`) and `--transaction_lock_timeout` (ms) are
//! passed to [`engine::TxnEngine::begin`]. One op of the report line is one committed
//! transaction. Example (memory backend):
//!
//! ```text
//! $ shale-bench --engine=memory --benchmarks=txnmix --num=100 --threads=4 --writes=2000 --seed=1
//! txnmix: isolation si, 4 threads, 100 keys (8-byte counters), 4 ops/txn, 0% read-only, uniform keys, lock timeout 1000 ms
//! txnmix: memory: optimistic, get_for_update validated at commit (test backend)
//! DB path: [/tmp/shalebenchtest-user/dbbench]
//! txnmix       :       2.474 micros/op 1512471 ops/sec 0.005 seconds 8000 operations; (32000 increments)
//! txnmix aborts: 1289 of 9289 attempts (13.877%): write_conflict 1289 (13.877%) deadlock 0 (0.000%) lock_timeout 0 (0.000%) serialization_failure 0 (0.000%); retried txns 1204, max retries 3
//! txnmix latency (micros): txn P50: 0.66 P99: 7.72; commit P50: 0.52 P99: 2.86
//! txnmix verify: OK (100 counters sum to 32000 = committed increments)
//! ```

pub mod check;
pub mod engine;
mod keys;
pub(crate) mod memory;
#[cfg(test)]
mod tests;
mod workload;

pub use check::TxnProblem;
pub use engine::{AbortKind, KvTxn, TxnEngine, TxnError, TxnIsolation, TxnOpts, Unsupported};

use crate::engine::{KvEngine, WriteOpts};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::random::Random64;
use crate::runner::{run_parallel, BenchResult};
use std::io::Write;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use workload::{Spec, Stop, TxnCounts};

/// The transaction options the flags give.
pub fn txn_opts(flags: &Flags) -> TxnOpts {
    TxnOpts {
        isolation: flags.isolation,
        lock_timeout: Duration::from_millis(flags.transaction_lock_timeout),
        wo: WriteOpts {
            sync: flags.sync,
            disable_wal: flags.disable_wal,
        },
    }
}

fn spec(flags: &Flags) -> Spec {
    let num = u64::try_from(flags.num).unwrap_or(0).max(1);
    let per_thread = if flags.writes < 0 {
        flags.num
    } else {
        flags.writes
    };
    Spec {
        keys: keys::KeyChooser::new(num, flags.txn_zipf),
        key_size: flags.key_size,
        txn_ops: flags.txn_ops,
        read_pct: flags.txn_read_pct,
        opts: txn_opts(flags),
        stop: if flags.duration > 0 {
            Stop::Seconds(flags.duration)
        } else {
            Stop::Txns(u64::try_from(per_thread).unwrap_or(0))
        },
    }
}

/// Runs `txnmix` on an open (fresh) engine and prints its report; `engine_name` is for
/// errors. Thread seeds continue the run-wide counter as the other benchmarks do.
pub(crate) fn run_txnmix(
    db: &dyn KvEngine,
    engine_name: &'static str,
    flags: &Flags,
    out: &mut dyn Write,
    seed_base: i64,
    total_thread_count: &mut i64,
) -> Result<BenchResult> {
    run_counted(db, engine_name, flags, out, seed_base, total_thread_count).map(|(r, _)| r)
}

/// [`run_txnmix`], also returning the merged counters.
fn run_counted(
    db: &dyn KvEngine,
    engine_name: &'static str,
    flags: &Flags,
    out: &mut dyn Write,
    seed_base: i64,
    total_thread_count: &mut i64,
) -> Result<(BenchResult, TxnCounts)> {
    let txn = db
        .txn()
        .ok_or(Error::Txn(TxnProblem::NoTransactions(engine_name)))?;
    let spec = spec(flags);
    let num = u64::try_from(flags.num).unwrap_or(0).max(1);
    check::check_key_space(num, flags.key_size).map_err(Error::Txn)?;
    // A first transaction, rolled back, surfaces an unsupported isolation level before the
    // preload.
    txn.begin(&spec.opts)
        .map_err(Error::engine("begin"))?
        .rollback()
        .map_err(|e| match e {
            TxnError::Failed(e) => Error::engine("rollback")(e),
            abort => Error::engine("rollback")(crate::EngineError::new(abort)),
        })?;
    writeln!(
        out,
        "txnmix: isolation {}, {} threads, {num} keys (8-byte counters), {} ops/txn, {}% read-only, {}, lock timeout {} ms",
        flags.isolation.name(),
        flags.threads,
        flags.txn_ops,
        flags.txn_read_pct,
        if flags.txn_zipf > 0.0 {
            format!("zipfian keys (theta {})", flags.txn_zipf)
        } else {
            "uniform keys".to_string()
        },
        flags.transaction_lock_timeout
    )?;
    writeln!(out, "txnmix: {}", txn.describe_txn(&spec.opts))?;
    check::preload(db, num, flags.key_size, spec.opts.wo)?;
    writeln!(out, "DB path: [{}]", flags.db_path().display())?;
    out.flush()?;

    let seeds: Vec<u64> = (0..flags.threads)
        .map(|_| {
            *total_thread_count += 1;
            // As in the runner: the int64 sum reinterpreted as Random64's uint64 seed.
            seed_base.wrapping_add(*total_thread_count) as u64
        })
        .collect();
    let counts = Mutex::new(TxnCounts::default());
    let stats = run_parallel(flags.threads, flags, &|tid, stats| {
        let mut rand = Random64::new(seeds.get(tid).copied().unwrap_or(0));
        let mut mine = TxnCounts::default();
        let r = workload::run_thread(txn, &spec, &mut rand, stats, &mut mine);
        counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .merge(&mine);
        r
    })?;
    let counts = counts.into_inner().unwrap_or_else(PoisonError::into_inner);
    let mut merged = stats;
    merged.add_message(&format!("({} increments)", counts.increments));
    out.write_all(merged.summary("txnmix").report_line().as_bytes())?;
    writeln!(out)?;
    write!(out, "{}", report_lines(&counts, flags.histogram))?;
    out.flush()?;
    // The check: failing loudly is the point (the error names lost updates).
    let sum = check::verify(db, num, flags.key_size, counts.increments)?;
    writeln!(
        out,
        "txnmix verify: OK ({num} counters sum to {sum} = committed increments)"
    )?;
    let result = BenchResult {
        summary: merged.summary("txnmix"),
        stats: merged,
    };
    Ok((result, counts))
}

fn pct(n: u64, of: u64) -> f64 {
    n as f64 * 100.0 / of.max(1) as f64
}

/// The abort and latency lines (and with `--histogram` the two histograms).
fn report_lines(c: &TxnCounts, histogram: bool) -> String {
    let kinds: Vec<String> = AbortKind::ALL
        .iter()
        .map(|k| {
            let n = c.aborts.get(k.index()).copied().unwrap_or(0);
            format!("{} {n} ({:.3}%)", k.name(), pct(n, c.attempts))
        })
        .collect();
    let mut s = format!(
        "txnmix aborts: {} of {} attempts ({:.3}%): {}; retried txns {}, max retries {}\n",
        c.aborts_total(),
        c.attempts,
        pct(c.aborts_total(), c.attempts),
        kinds.join(" "),
        c.retried,
        c.max_retries
    );
    s.push_str(&format!(
        "txnmix latency (micros): txn P50: {:.2} P99: {:.2}; commit P50: {:.2} P99: {:.2}\n",
        c.txn_latency.percentile(50.0),
        c.txn_latency.percentile(99.0),
        c.commit_latency.percentile(50.0),
        c.commit_latency.percentile(99.0)
    ));
    if c.read_only > 0 {
        s.push_str(&format!(
            "txnmix read-only: {} of {} committed txns\n",
            c.read_only, c.committed
        ));
    }
    if histogram {
        s.push_str(&format!(
            "Microseconds per txn:\n{}\nMicroseconds per commit:\n{}\n",
            c.txn_latency.to_rocksdb_string(),
            c.commit_latency.to_rocksdb_string()
        ));
    }
    s
}
