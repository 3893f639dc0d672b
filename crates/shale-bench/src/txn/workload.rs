//! One thread of `txnmix`: transactions until the time or count limit, each retried until it
//! commits.
//!
//! A read-write transaction picks `--txn_ops` keys (with repetition; a repeated key reads the
//! transaction's own write and is incremented again), then for each key in the order drawn
//! `get_for_update`s it and `put`s the counter plus one, then commits. A read-only one (with
//! probability `--txn_read_pct` percent) `get`s its keys and commits. An [`AbortKind`] error
//! at any step rolls the transaction back, counts an abort of that kind and retries the same
//! keys at once; any other error ends the benchmark. Every committed read-write transaction
//! adds `txn_ops` increments, which the final check compares with the sum of the counters.
//!
//! Latencies (microseconds): `txn` is from the first `begin` to the successful commit,
//! retries included; `commit` is the successful `commit()` call alone.

use super::check::TxnProblem;
use super::engine::{AbortKind, KvTxn, TxnEngine, TxnError, TxnOpts};
use super::keys::KeyChooser;
use crate::error::{EngineError, Error, Result};
use crate::histogram::Histogram;
use crate::keys::generate_key_from_int;
use crate::random::Random64;
use crate::stats::{now_micros, OpType, Stats};

/// When a thread stops starting transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// After this many seconds (`--duration`).
    Seconds(u64),
    /// After this many committed transactions.
    Txns(u64),
}

/// What every thread runs.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub keys: KeyChooser,
    pub key_size: usize,
    pub txn_ops: usize,
    /// Percent of transactions that are read-only, 0..=100.
    pub read_pct: u64,
    pub opts: TxnOpts,
    pub stop: Stop,
}

/// Counters of one thread, or merged.
#[derive(Clone, Debug, Default)]
pub(crate) struct TxnCounts {
    /// Committed transactions (read-only ones included).
    pub committed: u64,
    /// Committed read-only transactions.
    pub read_only: u64,
    /// Counter increments committed.
    pub increments: u64,
    /// Transaction attempts (committed + aborted).
    pub attempts: u64,
    /// Aborts by [`AbortKind::index`].
    pub aborts: [u64; 4],
    /// Committed transactions that needed at least one retry.
    pub retried: u64,
    /// Most retries one transaction needed.
    pub max_retries: u64,
    pub txn_latency: Histogram,
    pub commit_latency: Histogram,
}

impl TxnCounts {
    /// All aborts.
    pub fn aborts_total(&self) -> u64 {
        self.aborts.iter().sum()
    }

    /// Adds another thread's counters.
    pub fn merge(&mut self, o: &TxnCounts) {
        self.committed += o.committed;
        self.read_only += o.read_only;
        self.increments += o.increments;
        self.attempts += o.attempts;
        for (a, b) in self.aborts.iter_mut().zip(o.aborts) {
            *a += b;
        }
        self.retried += o.retried;
        self.max_retries = self.max_retries.max(o.max_retries);
        self.txn_latency.merge(&o.txn_latency);
        self.commit_latency.merge(&o.commit_latency);
    }
}

/// Decodes a counter: exactly 8 bytes, little-endian.
pub(crate) fn decode_counter(key: &[u8], v: Option<&[u8]>) -> std::result::Result<u64, TxnProblem> {
    let v = v.ok_or_else(|| TxnProblem::MissingKey { key: key.to_vec() })?;
    let bytes: [u8; 8] = v.try_into().map_err(|_| TxnProblem::NotACounter {
        key: key.to_vec(),
        len: v.len(),
    })?;
    Ok(u64::from_le_bytes(bytes))
}

fn problem(p: TxnProblem) -> TxnError {
    TxnError::Failed(EngineError::new(p))
}

/// The operations of one attempt, on an open transaction.
fn body(t: &mut dyn KvTxn, keys: &[Vec<u8>], read_only: bool) -> std::result::Result<(), TxnError> {
    for key in keys {
        if read_only {
            let v = t.get(key)?;
            decode_counter(key, v.as_deref()).map_err(problem)?;
        } else {
            let v = t.get_for_update(key)?;
            let n = decode_counter(key, v.as_deref()).map_err(problem)?;
            t.put(key, &n.wrapping_add(1).to_le_bytes())?;
        }
    }
    Ok(())
}

/// One attempt: begin, body, commit; rolls back on a failed body. Returns the commit call's
/// microseconds.
fn attempt(
    engine: &dyn TxnEngine,
    opts: &TxnOpts,
    keys: &[Vec<u8>],
    read_only: bool,
) -> std::result::Result<u64, TxnError> {
    let mut t = engine.begin(opts)?;
    if let Err(e) = body(t.as_mut(), keys, read_only) {
        // The body's error is the one to report; a rollback failure after an abort is not
        // expected, and is reported only if the body merely aborted.
        let rolled_back = t.rollback();
        return match (e, rolled_back) {
            (TxnError::Abort(k), Ok(())) => Err(TxnError::Abort(k)),
            (TxnError::Abort(_), Err(r)) => Err(r),
            (failed, _) => Err(failed),
        };
    }
    let start = now_micros();
    t.commit()?;
    Ok(now_micros().saturating_sub(start))
}

/// Runs transactions on one thread until `spec.stop`, counting into `counts`; `stats` counts
/// one op per committed transaction (the db_bench report line and progress reports).
pub(crate) fn run_thread(
    engine: &dyn TxnEngine,
    spec: &Spec,
    rand: &mut Random64,
    stats: &mut Stats,
    counts: &mut TxnCounts,
) -> Result<()> {
    let start = now_micros();
    let mut keys: Vec<Vec<u8>> = vec![Vec::with_capacity(spec.key_size); spec.txn_ops];
    loop {
        let done = match spec.stop {
            Stop::Seconds(s) => now_micros().saturating_sub(start) >= s.saturating_mul(1_000_000),
            Stop::Txns(n) => counts.committed >= n,
        };
        if done {
            return Ok(());
        }
        for k in keys.iter_mut() {
            generate_key_from_int(spec.keys.next(rand), spec.key_size, k);
        }
        let read_only = spec.read_pct > 0 && rand.next_u64() % 100 < spec.read_pct;
        let began = now_micros();
        let mut retries = 0u64;
        let commit_micros = loop {
            counts.attempts += 1;
            match attempt(engine, &spec.opts, &keys, read_only) {
                Ok(micros) => break micros,
                Err(TxnError::Abort(kind)) => {
                    if let Some(n) = counts.aborts.get_mut(AbortKind::index(kind)) {
                        *n += 1;
                    }
                    retries += 1;
                }
                Err(TxnError::Failed(e)) => return Err(Error::engine("txn")(e)),
            }
        };
        counts.committed += 1;
        if read_only {
            counts.read_only += 1;
        } else {
            counts.increments += spec.txn_ops as u64;
        }
        counts.retried += u64::from(retries > 0);
        counts.max_retries = counts.max_retries.max(retries);
        counts.txn_latency.add(now_micros().saturating_sub(began));
        counts.commit_latency.add(commit_micros);
        stats.finished_ops(1, OpType::Write);
    }
}
