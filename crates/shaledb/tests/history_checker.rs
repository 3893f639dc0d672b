//! Randomized concurrent list-append workload, checked by the Elle-style
//! history checker in `tests/elle` (docs/isolation.md, "History checker").
//!
//! Each isolation level of [`LEVELS`] runs a few thousand transactions on
//! `THREADS` threads. A transaction does 1-5 micro-ops on a small sliding
//! window of keys, each a `read(k)` or an `append(k, e)` done as
//! read-modify-write with a plain `get` then `put` (so Read Committed can lose
//! updates); values are lists of unique `u64` elements. Every transaction is
//! recorded with what it observed and how it ended; at the end every key is
//! read once more. The checker then infers the dependency graph and reports
//! anomalies; the run fails if it finds one the level forbids, and prints how
//! often the allowed ones (lost updates and G-single at RC, write skew at SI)
//! showed up.
//!
//! Environment (for soaks): `SHALE_ELLE_TXNS` transactions per level
//! (default 5000), `SHALE_ELLE_SECS` time cap per level (default 8),
//! `SHALE_ELLE_THREADS` (default 4), `SHALE_ELLE_SEED`.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

mod elle;

use elle::{check, History, Kind, Mop, Outcome};
use shaledb::env::mem::MemFs;
use shaledb::txn::{Isolation, Txn, TxnOptions};
use shaledb::{Db, Error, Options};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An isolation level under test and the anomalies it must never show.
struct Level {
    name: &'static str,
    isolation: Isolation,
    forbidden: &'static [Kind],
}

/// Read Committed (docs/isolation.md): no dirty writes or reads of any kind.
/// Lost update, incompatible version orders, G-single and G2 are allowed.
const RC_FORBIDS: &[Kind] = &[
    Kind::G0,
    Kind::G1a,
    Kind::G1b,
    Kind::G1c,
    Kind::Garbage,
    Kind::Internal,
];

/// Snapshot Isolation: additionally no read skew (G-single) and no lost
/// update (P4, which also shows as versions that are not prefixes of one
/// another). G2 (write skew) is allowed.
const SI_FORBIDS: &[Kind] = &[
    Kind::G0,
    Kind::G1a,
    Kind::G1b,
    Kind::G1c,
    Kind::Garbage,
    Kind::Internal,
    Kind::GSingle,
    Kind::LostUpdate,
    Kind::IncompatibleOrder,
];

/// Serializable: every anomaly the checker knows.
const SER_FORBIDS: &[Kind] = &Kind::ALL;

/// The levels checked.
const LEVELS: &[Level] = &[
    Level {
        name: "read-committed",
        isolation: Isolation::ReadCommitted,
        forbidden: RC_FORBIDS,
    },
    Level {
        name: "snapshot-isolation",
        isolation: Isolation::SnapshotIsolation,
        forbidden: SI_FORBIDS,
    },
    Level {
        name: "serializable",
        isolation: Isolation::Serializable,
        forbidden: SER_FORBIDS,
    },
];

/// Error variants after which a transaction is rolled back by design. Named
/// by their `Debug` name so that a variant not yet in `Error` (such as
/// `SerializationFailure`) needs no code change here.
const EXPECTED_ABORTS: &[&str] = &[
    "WriteConflict",
    "Deadlock",
    "LockTimeout",
    "SerializationFailure",
];

/// Keys active at once; the window slides by one key every `ROTATE`
/// transactions, so lists stay short and there are many distinct versions.
const KEYS: u64 = 8;
const ROTATE: u64 = 40;

struct Config {
    txns: u64,
    time_cap: Duration,
    threads: u64,
    seed: u64,
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

impl Config {
    fn from_env() -> Config {
        let seed = env_u64("SHALE_ELLE_SEED").unwrap_or_else(|| {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            t.map(|d| d.as_nanos() as u64).unwrap_or(1)
        });
        Config {
            txns: env_u64("SHALE_ELLE_TXNS").unwrap_or(5000),
            time_cap: Duration::from_secs(env_u64("SHALE_ELLE_SECS").unwrap_or(8)),
            threads: env_u64("SHALE_ELLE_THREADS").unwrap_or(4).max(1),
            seed,
        }
    }
}

/// xorshift64: a tiny deterministic generator per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn key_bytes(k: u64) -> Vec<u8> {
    format!("elle{k:08}").into_bytes()
}

fn encode(list: &[u64]) -> Vec<u8> {
    list.iter().flat_map(|e| e.to_le_bytes()).collect()
}

fn decode(value: Option<Vec<u8>>) -> Vec<u64> {
    let bytes = value.unwrap_or_default();
    assert!(
        bytes.len().is_multiple_of(8),
        "undecodable list value {bytes:?}"
    );
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn error_name(e: &Error) -> String {
    let debug = format!("{e:?}");
    let end = debug
        .find(|c: char| !c.is_alphanumeric())
        .unwrap_or(debug.len());
    debug[..end].to_string()
}

/// Widens the windows between micro-ops so that transactions overlap even
/// on two cores.
fn pause(rng: &mut Rng) {
    match rng.below(8) {
        0 => std::thread::sleep(Duration::from_micros(rng.below(200))),
        1 | 2 => std::thread::yield_now(),
        _ => {}
    }
}

/// Runs the micro-ops of one transaction, recording each as it goes (an
/// append is recorded before its `put`, so a failed one is in the record).
fn run_ops(
    txn: &mut Txn,
    rng: &mut Rng,
    base: u64,
    next_elem: &AtomicU64,
    ops: &mut Vec<Mop>,
) -> shaledb::Result<()> {
    for _ in 0..1 + rng.below(5) {
        let key = base + rng.below(KEYS);
        let mut list = decode(txn.get(&key_bytes(key))?);
        ops.push(Mop::Read {
            key,
            value: list.clone(),
        });
        if rng.below(2) == 0 {
            let elem = next_elem.fetch_add(1, Ordering::Relaxed);
            ops.push(Mop::Append { key, elem });
            list.push(elem);
            pause(rng);
            txn.put(&key_bytes(key), &encode(&list))?;
        }
        pause(rng);
    }
    Ok(())
}

/// Runs the workload at one level and returns its history.
fn run_workload(isolation: Isolation, cfg: &Config) -> History {
    let opts = Options {
        fs: Arc::new(MemFs::new()),
        write_buffer_size: 64 << 10, // flush often: reads also hit SSTs
        ..Options::default()
    };
    let db = Db::open("/db", opts).unwrap();
    let topts = TxnOptions {
        isolation,
        lock_wait_timeout: Duration::from_millis(20),
        ..TxnOptions::default()
    };
    let started = AtomicU64::new(0);
    let next_elem = AtomicU64::new(1);
    let history = Mutex::new(History::default());
    let deadline = Instant::now() + cfg.time_cap;
    std::thread::scope(|s| {
        for p in 0..cfg.threads {
            let (db, topts, started, next_elem, history) =
                (&db, &topts, &started, &next_elem, &history);
            let mut rng = Rng((cfg.seed ^ (p + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
            s.spawn(move || loop {
                let n = started.fetch_add(1, Ordering::Relaxed);
                if n >= cfg.txns || Instant::now() > deadline {
                    break;
                }
                let mut txn = db.begin(topts.clone());
                let mut ops = Vec::new();
                let result = run_ops(&mut txn, &mut rng, n / ROTATE, next_elem, &mut ops);
                let outcome = match result {
                    Err(e) => {
                        txn.rollback();
                        Outcome::Aborted(error_name(&e))
                    }
                    // Some voluntary rollbacks with buffered writes: G1a bait.
                    Ok(()) if rng.below(16) == 0 => {
                        txn.rollback();
                        Outcome::Aborted("voluntary".into())
                    }
                    Ok(()) => match txn.commit() {
                        Ok(()) => Outcome::Committed,
                        Err(e) if EXPECTED_ABORTS.contains(&error_name(&e).as_str()) => {
                            Outcome::Aborted(error_name(&e))
                        }
                        Err(e) => Outcome::Unknown(error_name(&e)),
                    },
                };
                history
                    .lock()
                    .unwrap()
                    .push(usize::try_from(p).unwrap(), ops, outcome);
            });
        }
    });
    let mut h = history.into_inner().unwrap();
    let last_key = started.load(Ordering::Relaxed).min(cfg.txns) / ROTATE + KEYS;
    for key in 0..=last_key {
        h.final_reads
            .insert(key, decode(db.get(&key_bytes(key)).unwrap()));
    }
    h
}

#[test]
fn every_level_passes_the_history_checker() {
    let cfg = Config::from_env();
    eprintln!(
        "elle: {} txns per level (cap {:?}), {} threads, SHALE_ELLE_SEED={}",
        cfg.txns, cfg.time_cap, cfg.threads, cfg.seed
    );
    let mut failures = Vec::new();
    for level in LEVELS {
        let t0 = Instant::now();
        let h = run_workload(level.isolation, &cfg);
        let ran = t0.elapsed();
        let report = check(&h);
        eprintln!(
            "elle {}: {} txns in {ran:.1?}, checked in {:.1?}: {}",
            level.name,
            h.txns.len(),
            t0.elapsed() - ran,
            report.summary()
        );
        // One example of each kind found, allowed or not.
        for kind in Kind::ALL {
            if let Some(a) = report.of_kinds(&[kind]).first() {
                let verdict = if level.forbidden.contains(&kind) {
                    "FORBIDDEN"
                } else {
                    "allowed"
                };
                eprintln!("  example ({verdict}) {kind}: {}", a.text.trim_end());
            }
        }
        let mut reasons = std::collections::BTreeMap::<String, usize>::new();
        for t in &h.txns {
            if let Outcome::Aborted(why) | Outcome::Unknown(why) = &t.outcome {
                *reasons.entry(why.clone()).or_default() += 1;
            }
        }
        eprintln!("  aborts: {reasons:?}");

        // The run must be meaningful: work committed, dependencies inferred.
        let s = &report.stats;
        assert!(
            s.committed * 4 >= h.txns.len(),
            "{}: too few commits",
            level.name
        );
        assert!(
            s.ww > 0 && s.wr > 0 && s.rw > 0,
            "{}: no dependencies",
            level.name
        );
        for why in reasons.keys() {
            assert!(
                why == "voluntary" || EXPECTED_ABORTS.contains(&why.as_str()),
                "{}: unexpected error {why}",
                level.name
            );
        }
        for &kind in level.forbidden {
            if let Some(a) = report.of_kinds(&[kind]).first() {
                let n = report.count(kind);
                failures.push(format!(
                    "{} forbids {kind}, found {n}, e.g.: {}",
                    level.name, a.text
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
