//! Server-wide counters and per-stage latency histograms (seed 004's
//! "perf hist"), read by `SHOW STATUS` and `SHOW ENGINE SHALE STATUS`.
//!
//! Counters are relaxed atomics: each is exact on its own, and a reader may
//! see one updated before another (as MySQL's status variables).
//!
//! A [`StageHistogram`] has exponential buckets: bucket `i` counts samples
//! in `[2^i, 2^(i+1))` nanoseconds, so 40 buckets span 1 ns to 18 minutes
//! with a relative error of at most 2x, for one atomic add per sample.
//! Worked example: a 3 µs command run lands in bucket 11
//! (2048 ns <= 3000 ns < 4096 ns). The stages of one command:
//!
//! | stage | from | to |
//! |---|---|---|
//! | `recv` | first byte of the command available | whole packet decoded |
//! | `run` | command handed to the session | reply ready |
//! | `send` | reply ready | last byte written |
//!
//! Recording is off until enabled (`perf_hist`), since reading the clock
//! three times per command is not free on every machine.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Number of buckets of a [`StageHistogram`].
pub const BUCKETS: usize = 40;

/// Latency samples of one stage, in exponential buckets.
pub struct StageHistogram {
    buckets: [AtomicU64; BUCKETS],
    /// Sum of all samples in ns (Prometheus' `_sum`).
    sum_ns: AtomicU64,
}

impl Default for StageHistogram {
    fn default() -> Self {
        StageHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl StageHistogram {
    /// Adds one sample.
    pub fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        let i = (63 - ns.leading_zeros()) as usize; // floor(log2(ns)) <= 63
        if let Some(b) = self.buckets.get(i.min(BUCKETS - 1)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Sum of all samples, in ns.
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns.load(Ordering::Relaxed)
    }

    /// `(lower bound in ns, count)` of every non-empty bucket.
    pub fn snapshot(&self) -> Vec<(u64, u64)> {
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| (1u64 << i, b.load(Ordering::Relaxed)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// The upper bound of the bucket holding the `p`-th percentile
    /// (0 < p <= 100), or `None` without samples.
    pub fn percentile_upper_ns(&self, p: f64) -> Option<u64> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((p / 100.0) * total as f64).ceil().max(1.0); // counts are far below 2^53
        let mut seen = 0u64;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen as f64 >= rank {
                return Some(1u64 << (i + 1).min(63));
            }
        }
        Some(u64::MAX)
    }

    /// Drops every sample.
    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
        self.sum_ns.store(0, Ordering::Relaxed);
    }
}

/// Server-wide counters (`SHOW GLOBAL STATUS` names in the comments).
#[derive(Default)]
pub struct ServerStats {
    /// `Connections`: connection attempts accepted.
    pub connections: AtomicU64,
    /// `Aborted_connects`: failed logins and broken handshakes.
    pub aborted_connects: AtomicU64,
    /// `Threads_connected`: sessions now open.
    pub threads_connected: AtomicU64,
    /// `Questions`: statements sent by clients (COM_QUERY, COM_STMT_EXECUTE).
    pub questions: AtomicU64,
    /// `Bytes_received` / `Bytes_sent`.
    pub bytes_received: AtomicU64,
    pub bytes_sent: AtomicU64,
    /// `Com_stmt_prepare`, `Com_stmt_execute`.
    pub com_stmt_prepare: AtomicU64,
    pub com_stmt_execute: AtomicU64,
    /// Sessions inside an explicit transaction as of their last command
    /// (`SHOW ENGINE SHALE STATUS`, TRANSACTIONS).
    pub open_transactions: AtomicU64,
    /// Per-stage histograms, recorded while `perf_hist` is on.
    pub perf_hist: AtomicBool,
    pub recv: StageHistogram,
    pub run: StageHistogram,
    pub send: StageHistogram,
}

impl ServerStats {
    /// The counters as `(Variable_name, Value)` rows.
    pub fn status_rows(&self) -> Vec<(&'static str, u64)> {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        vec![
            ("Aborted_connects", g(&self.aborted_connects)),
            ("Bytes_received", g(&self.bytes_received)),
            ("Bytes_sent", g(&self.bytes_sent)),
            ("Com_stmt_execute", g(&self.com_stmt_execute)),
            ("Com_stmt_prepare", g(&self.com_stmt_prepare)),
            ("Connections", g(&self.connections)),
            ("Questions", g(&self.questions)),
            ("Threads_connected", g(&self.threads_connected)),
        ]
    }

    /// Stage histogram summaries as status rows: `Stage_<name>_count` and
    /// the upper bounds of the buckets holding the 50th, 95th and 99th
    /// percentiles, in microseconds (`Stage_run_p95_us`). Empty while no
    /// sample was taken.
    pub fn stage_rows(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for (name, h) in self.stages() {
            let count: u64 = h.snapshot().iter().map(|(_, n)| n).sum();
            if count == 0 {
                continue;
            }
            out.push((format!("Stage_{name}_count"), count));
            for p in [50u32, 95, 99] {
                let ns = h.percentile_upper_ns(f64::from(p)).unwrap_or(0);
                out.push((format!("Stage_{name}_p{p}_us"), ns.div_ceil(1000)));
            }
        }
        out
    }

    /// The three stage histograms by name.
    pub fn stages(&self) -> [(&'static str, &StageHistogram); 3] {
        [
            ("recv", &self.recv),
            ("run", &self.run),
            ("send", &self.send),
        ]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn samples_land_in_power_of_two_buckets() {
        let h = StageHistogram::default();
        h.record(Duration::from_nanos(3000));
        h.record(Duration::from_nanos(2048));
        h.record(Duration::from_nanos(4096));
        h.record(Duration::ZERO);
        h.record(Duration::from_secs(1 << 40));
        assert_eq!(
            h.snapshot(),
            vec![(1, 1), (2048, 2), (4096, 1), (1 << 39, 1)]
        );
        // 4 of 5 samples are below 8192 ns.
        assert_eq!(h.percentile_upper_ns(80.0), Some(8192));
        assert_eq!(h.percentile_upper_ns(100.0), Some(1 << 40));
        h.reset();
        assert!(h.snapshot().is_empty());
        assert_eq!(h.percentile_upper_ns(50.0), None);
    }
}
