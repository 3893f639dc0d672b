//! The data of `txnmix` and its final check: `--num` keys (db_bench's keys for 0..num), each
//! holding an 8-byte little-endian counter, preloaded with 0. After the run, a full scan must
//! find exactly those keys in order, and the counters must sum to the committed increments.
//!
//! Why the sum: every committed read-write transaction added exactly `txn_ops` to it. A lost
//! update (two transactions read 5 and both write 6) makes it smaller; an aborted
//! transaction whose writes leaked makes it larger. Example: 3 committed transactions of 4
//! ops must leave a sum of 12; 11 means one increment was lost.

use crate::engine::{BatchOp, CursorStart, KvEngine, WriteOpts};
use crate::error::{Error, Result};
use crate::keys::key_from_int;
use std::fmt;

/// Preload batch size (entries per atomic write).
const BATCH: u64 = 1000;

/// Something `txnmix` found wrong with the engine or the flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnProblem {
    /// The engine (`--engine`) has no transactions.
    NoTransactions(&'static str),
    /// A key of the preloaded range is missing.
    MissingKey {
        /// The key.
        key: Vec<u8>,
    },
    /// A value is not an 8-byte counter.
    NotACounter {
        /// The key.
        key: Vec<u8>,
        /// The value's length.
        len: usize,
    },
    /// The scan found a key other than the expected next one (extra or missing keys).
    UnexpectedKey {
        /// Position in the scan.
        index: u64,
        /// The key found.
        key: Vec<u8>,
    },
    /// The scan found a different number of keys than `--num`.
    KeyCount {
        /// Keys found.
        found: u64,
        /// `--num`.
        expected: u64,
    },
    /// The counters do not sum to the committed increments: updates were lost (sum smaller)
    /// or uncommitted writes became visible (sum larger).
    LostUpdates {
        /// Sum of the counters.
        sum: u64,
        /// Increments of the committed transactions.
        expected: u64,
    },
    /// Flags that cannot give `--num` distinct keys (`--key_size` below 8 bytes).
    KeySpace {
        /// `--num`.
        num: u64,
        /// `--key_size`.
        key_size: usize,
    },
}

impl fmt::Display for TxnProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnProblem::NoTransactions(e) => {
                write!(f, "txnmix: engine {e} has no transactions")
            }
            TxnProblem::MissingKey { key } => {
                write!(f, "txnmix: preloaded key {} is missing", hex(key))
            }
            TxnProblem::NotACounter { key, len } => write!(
                f,
                "txnmix: key {} holds {len} bytes, not an 8-byte counter",
                hex(key)
            ),
            TxnProblem::UnexpectedKey { index, key } => write!(
                f,
                "txnmix: scan position {index} holds key {}, not key {index}",
                hex(key)
            ),
            TxnProblem::KeyCount { found, expected } => {
                write!(f, "txnmix: scan found {found} keys, expected {expected}")
            }
            TxnProblem::LostUpdates { sum, expected } => {
                let (what, n) = if sum < expected {
                    ("LOST UPDATES", expected - sum)
                } else {
                    ("UNCOMMITTED INCREMENTS VISIBLE", sum - expected)
                };
                write!(
                    f,
                    "txnmix: {what}: counters sum to {sum} but committed transactions made \
                     {expected} increments (off by {n})"
                )
            }
            TxnProblem::KeySpace { num, key_size } => write!(
                f,
                "txnmix: --num={num} keys do not fit in --key_size={key_size} bytes"
            ),
        }
    }
}

impl std::error::Error for TxnProblem {}

fn hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks that `num` keys of `key_size` bytes are distinct.
pub(crate) fn check_key_space(num: u64, key_size: usize) -> std::result::Result<(), TxnProblem> {
    let fits = key_size >= 8 || num <= 1u64 << (8 * key_size as u32);
    if fits {
        Ok(())
    } else {
        Err(TxnProblem::KeySpace { num, key_size })
    }
}

/// Writes counter 0 under keys `0..num`, `BATCH` per atomic write.
pub(crate) fn preload(
    engine: &dyn KvEngine,
    num: u64,
    key_size: usize,
    wo: WriteOpts,
) -> Result<()> {
    let zero = 0u64.to_le_bytes();
    let mut start = 0;
    while start < num {
        let end = (start + BATCH).min(num);
        let keys: Vec<Vec<u8>> = (start..end).map(|i| key_from_int(i, key_size)).collect();
        let ops: Vec<BatchOp<'_>> = keys.iter().map(|k| BatchOp::Put(k, &zero)).collect();
        engine.write(wo, &ops).map_err(Error::engine("preload"))?;
        start = end;
    }
    Ok(())
}

/// Scans the whole DB: keys `0..num` in order, each an 8-byte counter; returns their sum.
pub(crate) fn sum_counters(engine: &dyn KvEngine, num: u64, key_size: usize) -> Result<u64> {
    let mut it = engine
        .cursor(CursorStart::First)
        .map_err(Error::engine("scan"))?;
    let (mut index, mut sum) = (0u64, 0u64);
    while it.valid() {
        let key = it.key();
        if index >= num || key != key_from_int(index, key_size).as_slice() {
            return Err(Error::Txn(TxnProblem::UnexpectedKey {
                index,
                key: key.to_vec(),
            }));
        }
        let n = super::workload::decode_counter(key, Some(it.value())).map_err(Error::Txn)?;
        sum = sum.wrapping_add(n);
        index += 1;
        it.advance().map_err(Error::engine("scan"))?;
    }
    if index != num {
        return Err(Error::Txn(TxnProblem::KeyCount {
            found: index,
            expected: num,
        }));
    }
    Ok(sum)
}

/// The final check: the counters sum to `increments`.
pub(crate) fn verify(
    engine: &dyn KvEngine,
    num: u64,
    key_size: usize,
    increments: u64,
) -> Result<u64> {
    let sum = sum_counters(engine, num, key_size)?;
    if sum != increments {
        return Err(Error::Txn(TxnProblem::LostUpdates {
            sum,
            expected: increments,
        }));
    }
    Ok(sum)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::memory::MemoryEngine;

    #[test]
    fn preload_then_verify_and_each_failure() {
        let e = MemoryEngine::new();
        let wo = WriteOpts::default();
        preload(&e, 2500, 16, wo).unwrap();
        assert_eq!(e.len(), 2500);
        assert_eq!(verify(&e, 2500, 16, 0).unwrap(), 0);
        e.put(wo, &key_from_int(7, 16), &3u64.to_le_bytes())
            .unwrap();
        assert_eq!(verify(&e, 2500, 16, 3).unwrap(), 3);
        let lost = verify(&e, 2500, 16, 4).unwrap_err();
        assert!(lost.to_string().contains("LOST UPDATES"), "{lost}");
        assert!(lost.to_string().contains("off by 1"), "{lost}");
        let leaked = verify(&e, 2500, 16, 2).unwrap_err();
        assert!(leaked.to_string().contains("UNCOMMITTED"), "{leaked}");
        // Wrong sizes, missing and extra keys.
        assert!(matches!(
            verify(&e, 2501, 16, 3),
            Err(Error::Txn(TxnProblem::KeyCount { found: 2500, .. }))
        ));
        assert!(matches!(
            verify(&e, 2499, 16, 3),
            Err(Error::Txn(TxnProblem::UnexpectedKey { index: 2499, .. }))
        ));
        e.put(wo, &key_from_int(9, 16), b"abc").unwrap();
        assert!(matches!(
            verify(&e, 2500, 16, 3),
            Err(Error::Txn(TxnProblem::NotACounter { len: 3, .. }))
        ));
        e.delete(wo, &key_from_int(0, 16)).unwrap();
        assert!(matches!(
            verify(&e, 2500, 16, 3),
            Err(Error::Txn(TxnProblem::UnexpectedKey { index: 0, .. }))
        ));
    }

    #[test]
    fn key_space() {
        assert!(check_key_space(1 << 20, 8).is_ok());
        assert!(check_key_space(256, 1).is_ok());
        assert!(check_key_space(257, 1).is_err());
        assert!(check_key_space(u64::MAX, 16).is_ok());
    }
}
