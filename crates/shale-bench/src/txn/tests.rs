//! Tests of `txnmix` end to end: the memory backend under real concurrency, and a
//! fault-injecting wrapper that makes aborts (and lost updates) deterministic.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use crate::engine::{BatchOp, CursorStart, EngineFactory, KvCursor};
use crate::error::EngineError;
use crate::flags::Command;
use crate::memory::{MemoryEngine, MemoryFactory};
use std::sync::atomic::{AtomicU64, Ordering};

fn flags(args: &[&str]) -> Flags {
    match Flags::parse(args).unwrap() {
        Command::Run(f) => *f,
        Command::Help => panic!("help"),
    }
}

#[test]
fn memory_backend_with_contention_verifies_and_reports() {
    let f = flags(&[
        "--engine=memory",
        "--benchmarks=txnmix",
        "--num=8",
        "--threads=4",
        "--writes=300",
        "--txn_ops=3",
        "--seed=5",
        "--progress_reports=0",
        "--histogram=1",
    ]);
    let mut out = Vec::new();
    let results = crate::run(&f, &MemoryFactory, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].summary.operations, 1200, "{text}");
    assert!(text.contains("(3600 increments)"), "{text}");
    assert!(
        text.contains("txnmix verify: OK (8 counters sum to 3600 = committed increments)"),
        "{text}"
    );
    assert!(text.contains("txnmix aborts: "), "{text}");
    assert!(text.contains("write_conflict "), "{text}");
    assert!(text.contains("Microseconds per commit:"), "{text}");
}

#[test]
fn read_only_share_and_zipf() {
    let f = flags(&[
        "--num=1000",
        "--threads=2",
        "--writes=500",
        "--txn_read_pct=50",
        "--txn_zipf=0.99",
        "--progress_reports=0",
    ]);
    let e = MemoryEngine::new();
    let (_, c) = run_counted(&e, "memory", &f, &mut Vec::new(), 3, &mut 0).unwrap();
    assert_eq!(c.committed, 1000);
    assert!((350..650).contains(&c.read_only), "{}", c.read_only);
    assert_eq!(c.increments, (c.committed - c.read_only) * 4);
}

#[test]
fn engine_without_transactions_and_refused_isolation() {
    let f = flags(&["--benchmarks=txnmix", "--num=10", "--writes=1"]);
    let lf = crate::logfile::LogFileFactory { lossy: false };
    let dir = tempfile::tempdir().unwrap();
    let f2 = Flags {
        db: dir.path().join("db").display().to_string(),
        ..f.clone()
    };
    let err = crate::run(&f2, &lf, &mut Vec::new()).unwrap_err();
    assert!(
        matches!(err, Error::Txn(TxnProblem::NoTransactions(_))),
        "{err}"
    );
    let ser = Flags {
        isolation: TxnIsolation::Serializable,
        ..f
    };
    let err = crate::run(&ser, &MemoryFactory, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("no serializable"), "{err}");
}

/// Injected faults, counted over the whole engine (single-threaded tests are deterministic).
#[derive(Default)]
struct Faulty {
    inner: MemoryEngine,
    /// Every `deadlock_every`-th `get_for_update` fails with Deadlock (0 = never).
    deadlock_every: u64,
    /// Every `timeout_every`-th commit fails with LockTimeout.
    timeout_every: u64,
    /// Every `lose_every`-th commit is silently dropped (a lost update).
    lose_every: u64,
    gfu: AtomicU64,
    commits: AtomicU64,
}

fn nth(counter: &AtomicU64, every: u64) -> bool {
    let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
    every > 0 && n.is_multiple_of(every)
}

struct FaultyTxn<'a> {
    engine: &'a Faulty,
    inner: Box<dyn KvTxn + 'a>,
}

impl KvTxn for FaultyTxn<'_> {
    fn get(&mut self, key: &[u8]) -> std::result::Result<Option<Vec<u8>>, TxnError> {
        self.inner.get(key)
    }
    fn get_for_update(&mut self, key: &[u8]) -> std::result::Result<Option<Vec<u8>>, TxnError> {
        if nth(&self.engine.gfu, self.engine.deadlock_every) {
            return Err(TxnError::Abort(AbortKind::Deadlock));
        }
        self.inner.get_for_update(key)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> std::result::Result<(), TxnError> {
        self.inner.put(key, value)
    }
    fn commit(self: Box<Self>) -> std::result::Result<(), TxnError> {
        let n = self.engine.commits.fetch_add(1, Ordering::Relaxed) + 1;
        let every = |e: u64| e > 0 && n.is_multiple_of(e);
        if every(self.engine.timeout_every) {
            self.inner.rollback()?;
            return Err(TxnError::Abort(AbortKind::LockTimeout));
        }
        if every(self.engine.lose_every) {
            return self.inner.rollback(); // acknowledged, never applied
        }
        self.inner.commit()
    }
    fn rollback(self: Box<Self>) -> std::result::Result<(), TxnError> {
        self.inner.rollback()
    }
}

impl TxnEngine for Faulty {
    fn begin(&self, opts: &TxnOpts) -> std::result::Result<Box<dyn KvTxn + '_>, EngineError> {
        Ok(Box::new(FaultyTxn {
            engine: self,
            inner: self.inner.begin(opts)?,
        }))
    }
    fn describe_txn(&self, _opts: &TxnOpts) -> String {
        "faulty".into()
    }
}

impl KvEngine for Faulty {
    fn put(&self, wo: WriteOpts, k: &[u8], v: &[u8]) -> std::result::Result<(), EngineError> {
        self.inner.put(wo, k, v)
    }
    fn delete(&self, wo: WriteOpts, k: &[u8]) -> std::result::Result<(), EngineError> {
        self.inner.delete(wo, k)
    }
    fn write(&self, wo: WriteOpts, b: &[BatchOp<'_>]) -> std::result::Result<(), EngineError> {
        self.inner.write(wo, b)
    }
    fn get(
        &self,
        k: &[u8],
        found: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<bool, EngineError> {
        self.inner.get(k, found)
    }
    fn cursor(
        &self,
        start: CursorStart<'_>,
    ) -> std::result::Result<Box<dyn KvCursor + '_>, EngineError> {
        self.inner.cursor(start)
    }
    fn flush(&self) -> std::result::Result<(), EngineError> {
        Ok(())
    }
    fn stats(&self) -> Option<String> {
        None
    }
    fn close(self: Box<Self>) -> std::result::Result<(), EngineError> {
        Ok(())
    }
    fn txn(&self) -> Option<&dyn TxnEngine> {
        Some(self)
    }
}

#[test]
fn aborts_are_counted_by_kind_and_retried() {
    let e = Faulty {
        deadlock_every: 7,
        timeout_every: 5,
        ..Faulty::default()
    };
    let f = flags(&[
        "--num=50",
        "--threads=1",
        "--writes=200",
        "--progress_reports=0",
    ]);
    let mut out = Vec::new();
    let (_, c) = run_counted(&e, "faulty", &f, &mut out, 1, &mut 0).unwrap();
    let text = String::from_utf8(out).unwrap();
    let [conflict, deadlock, timeout, ser] = c.aborts;
    assert_eq!((conflict, ser), (0, 0));
    assert!(deadlock > 0 && timeout > 0, "{text}");
    assert_eq!(c.committed, 200);
    assert_eq!(c.attempts, c.committed + c.aborts_total());
    assert!(c.retried > 0 && c.max_retries >= 1);
    // Every 5th commit attempt times out: a fifth of the attempts that reach commit.
    assert_eq!(e.commits.load(Ordering::Relaxed), c.committed + timeout);
    assert!(text.contains(&format!("deadlock {deadlock} (")), "{text}");
    assert!(text.contains("txnmix verify: OK"), "{text}");
}

#[test]
fn lost_updates_fail_the_run_loudly() {
    let e = Faulty {
        lose_every: 10,
        ..Faulty::default()
    };
    let f = flags(&[
        "--num=50",
        "--threads=1",
        "--writes=100",
        "--progress_reports=0",
    ]);
    let err = run_counted(&e, "faulty", &f, &mut Vec::new(), 1, &mut 0).unwrap_err();
    // 10 of 100 commits dropped, 4 increments each.
    assert!(
        matches!(
            err,
            Error::Txn(TxnProblem::LostUpdates {
                sum: 360,
                expected: 400
            })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("LOST UPDATES"), "{err}");
}

#[test]
fn by_duration() {
    let f = flags(&[
        "--num=100",
        "--threads=2",
        "--duration=1",
        "--progress_reports=0",
    ]);
    let e = MemoryEngine::new();
    let started = std::time::Instant::now();
    let (r, c) = run_counted(&e, "memory", &f, &mut Vec::new(), 9, &mut 0).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    assert!(c.committed > 0);
    assert_eq!(r.summary.operations, c.committed);
    let _ = MemoryFactory.name();
}
