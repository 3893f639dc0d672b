//! Checks of what an engine returns against the [`KeySpace`] rules.
//!
//! After a crash (SIGKILL of the writer child) the parent knows, per domain and thread, a lower
//! bound `acked` of the writes the child saw acknowledged. Each writer thread issues its writes
//! one at a time in index order, so once the engine reopens:
//!
//! * every index `< acked` must read back with its exact value (no acknowledged write lost);
//! * the indices present for a thread must be a prefix `0..m` with `m >= acked`: index `j` was
//!   only written after `j - 1` was acknowledged, so a present `j` with a missing `j - 1` means an
//!   acknowledged write vanished while a later one survived (a hole);
//! * a full ordered scan must return strictly increasing keys, every one a key of the space
//!   (domain, thread and index in range) with its exact value.
//!
//! Example: `acked = [[3, 0]]` (domain 0: thread 0 acknowledged 3 writes, thread 1 none), scan
//! finds thread 0 indices {0, 1, 2, 3} and thread 1 indices {0}: fine (index 3 and thread 1's
//! index 0 were in flight and made it). Finding thread 0 indices {0, 2, 3} is a `Hole`; finding
//! {0, 1} is `Lost`.

use super::data::{KeySpace, Writer};
use crate::engine::{CursorStart, KvEngine};
use crate::error::{Error, Result};
use std::fmt;

/// What a verification found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyFailure {
    /// A get of a written (acknowledged) key found nothing.
    Missing(Writer),
    /// A key read back with a value other than its own (`scan` tells get from scan).
    WrongValue {
        /// Whose key.
        writer: Writer,
        /// Found by the ordered scan (else by a get).
        scan: bool,
    },
    /// The scan returned a key not greater than the one before it.
    OutOfOrder {
        /// 0-based position in the scan.
        position: u64,
    },
    /// The scan returned a key that nobody wrote (not of the space, or out of its range).
    Foreign {
        /// 0-based position in the scan.
        position: u64,
        /// The key, hex.
        key_hex: String,
    },
    /// A thread's surviving writes are not a prefix of its writes.
    Hole {
        /// Domain (crash round).
        domain: u64,
        /// Thread.
        thread: u64,
        /// Distinct indices found.
        present: u64,
        /// Highest index found, plus one.
        end: u64,
    },
    /// The scan found fewer writes of a thread than were acknowledged.
    Lost {
        /// Domain (crash round).
        domain: u64,
        /// Thread.
        thread: u64,
        /// Writes acknowledged to the child.
        acked: u64,
        /// Writes found.
        present: u64,
    },
    /// The scan returned a different number of entries than were written.
    Count {
        /// Entries written.
        expected: u64,
        /// Entries seen.
        seen: u64,
    },
}

impl fmt::Display for VerifyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyFailure::Missing(w) => write!(f, "written key ({w}) not found"),
            VerifyFailure::WrongValue { writer, scan } => write!(
                f,
                "wrong value for the key of {writer} ({})",
                if *scan { "range scan" } else { "get" }
            ),
            VerifyFailure::OutOfOrder { position } => {
                write!(f, "range scan out of order at entry {position}")
            }
            VerifyFailure::Foreign { position, key_hex } => {
                write!(f, "range scan entry {position} has unknown key {key_hex}")
            }
            VerifyFailure::Hole {
                domain,
                thread,
                present,
                end,
            } => write!(
                f,
                "round {domain} thread {thread}: {present} writes survived but the last is \
                 number {end}: an earlier acknowledged write was lost"
            ),
            VerifyFailure::Lost {
                domain,
                thread,
                acked,
                present,
            } => write!(
                f,
                "round {domain} thread {thread}: {acked} writes acknowledged, {present} found"
            ),
            VerifyFailure::Count { expected, seen } => {
                write!(f, "range scan saw {seen} entries, {expected} were written")
            }
        }
    }
}

/// Checks that the first `acked[d][t]` writes of every domain `d` and thread `t` read back
/// exactly with gets. Returns the number of keys checked.
pub fn check_acked_gets(engine: &dyn KvEngine, ks: &KeySpace, acked: &[Vec<u64>]) -> Result<u64> {
    let mut key = Vec::new();
    let mut checked = 0;
    for (domain, threads) in (0u64..).zip(acked) {
        for (thread, &n) in (0u64..).zip(threads) {
            for index in 0..n {
                let w = Writer {
                    domain,
                    thread,
                    index,
                };
                ks.key(w, &mut key);
                let mut ok = None;
                engine
                    .get(&key, &mut |v| ok = Some(ks.value_matches(&key, v)))
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
                    Some(true) => checked += 1,
                }
            }
        }
    }
    Ok(checked)
}

/// What an ordered scan saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanTally {
    /// Entries.
    pub entries: u64,
    /// Key + value bytes.
    pub bytes: u64,
    /// Per `domain * threads + thread`: (entries, highest index + 1).
    pub per_thread: Vec<(u64, u64)>,
}

/// Scans the whole engine in order, checking order, keys and values; `domains` bounds the
/// domains a key may belong to. `on_entry` is called after each verified entry (for stats).
pub fn scan_verify(
    engine: &dyn KvEngine,
    ks: &KeySpace,
    domains: u64,
    on_entry: &mut dyn FnMut(),
) -> Result<ScanTally> {
    let slots = usize::try_from(domains * ks.threads).unwrap_or(0);
    let mut tally = ScanTally {
        per_thread: vec![(0, 0); slots],
        ..ScanTally::default()
    };
    let mut prev: Vec<u8> = Vec::new();
    let mut it = engine
        .cursor(CursorStart::First)
        .map_err(Error::engine("iterate"))?;
    while it.valid() {
        let (key, value) = (it.key(), it.value());
        let position = tally.entries;
        if position > 0 && key <= prev.as_slice() {
            return Err(VerifyFailure::OutOfOrder { position }.into());
        }
        let foreign = || VerifyFailure::Foreign {
            position,
            key_hex: key.iter().map(|b| format!("{b:02x}")).collect(),
        };
        let w = ks.decode(key).ok_or_else(foreign)?;
        let slot = usize::try_from(w.domain * ks.threads + w.thread).unwrap_or(usize::MAX);
        let counts = match tally.per_thread.get_mut(slot) {
            Some(c) if w.domain < domains => c,
            _ => return Err(foreign().into()),
        };
        if !ks.value_matches(key, value) {
            return Err(VerifyFailure::WrongValue {
                writer: w,
                scan: true,
            }
            .into());
        }
        counts.0 += 1;
        counts.1 = counts.1.max(w.index + 1);
        tally.entries += 1;
        tally.bytes += (key.len() + value.len()) as u64;
        prev.clear();
        prev.extend_from_slice(key);
        on_entry();
        it.advance().map_err(Error::engine("iterate"))?;
    }
    Ok(tally)
}

/// Checks the prefix rule of a crash: per domain and thread, the writes found are exactly
/// `0..m` with `m >= acked`.
pub fn check_prefixes(ks: &KeySpace, tally: &ScanTally, acked: &[Vec<u64>]) -> Result<()> {
    for (domain, threads) in (0u64..).zip(acked) {
        for (thread, &acked) in (0u64..).zip(threads) {
            let slot = usize::try_from(domain * ks.threads + thread).unwrap_or(usize::MAX);
            let (present, end) = tally.per_thread.get(slot).copied().unwrap_or((0, 0));
            if present != end {
                return Err(VerifyFailure::Hole {
                    domain,
                    thread,
                    present,
                    end,
                }
                .into());
            }
            if present < acked {
                return Err(VerifyFailure::Lost {
                    domain,
                    thread,
                    acked,
                    present,
                }
                .into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::engine::{BatchOp, KvCursor, WriteOpts};
    use crate::error::EngineError;
    use crate::memory::MemoryEngine;

    fn put(e: &MemoryEngine, ks: &KeySpace, domain: u64, thread: u64, index: u64) {
        let (mut k, mut v) = (Vec::new(), Vec::new());
        ks.key(
            Writer {
                domain,
                thread,
                index,
            },
            &mut k,
        );
        ks.value(&k, &mut v);
        e.put(WriteOpts::default(), &k, &v).unwrap();
    }

    fn verify(e: &MemoryEngine, ks: &KeySpace, acked: &[Vec<u64>]) -> Result<ScanTally> {
        check_acked_gets(e, ks, acked)?;
        let tally = scan_verify(e, ks, acked.len() as u64, &mut || {})?;
        check_prefixes(ks, &tally, acked)?;
        Ok(tally)
    }

    fn failure(r: Result<ScanTally>) -> VerifyFailure {
        match r {
            Err(Error::Verify(f)) => f,
            other => panic!("expected a verify failure, got {other:?}"),
        }
    }

    /// Two threads, 10 writes each; thread 0 wrote 0..4 (3 acked), thread 1 wrote 0..1 (0 acked).
    fn crashed() -> (MemoryEngine, KeySpace, Vec<Vec<u64>>) {
        let ks = KeySpace::new(2, 10, 8, 64, 1).unwrap();
        let e = MemoryEngine::new();
        for i in 0..4 {
            put(&e, &ks, 0, 0, i);
        }
        put(&e, &ks, 0, 1, 0);
        (e, ks, vec![vec![3, 0]])
    }

    #[test]
    fn a_consistent_crash_passes() {
        let (e, ks, acked) = crashed();
        let t = verify(&e, &ks, &acked).unwrap();
        assert_eq!(t.entries, 5);
        assert_eq!(t.bytes, 5 * 72);
        assert_eq!(t.per_thread, vec![(4, 4), (1, 1)]);
    }

    #[test]
    fn a_lost_acknowledged_write_fails() {
        let (e, ks, _) = crashed();
        let f = failure(verify(&e, &ks, &[vec![5, 0]]));
        assert!(matches!(f, VerifyFailure::Missing(w) if w.index == 4));
        // Without the gets, the prefix check catches it too.
        let t = scan_verify(&e, &ks, 1, &mut || {}).unwrap();
        assert!(matches!(
            check_prefixes(&ks, &t, &[vec![5, 0]]),
            Err(Error::Verify(VerifyFailure::Lost {
                acked: 5,
                present: 4,
                ..
            }))
        ));
    }

    #[test]
    fn a_hole_fails() {
        let (e, ks, acked) = crashed();
        put(&e, &ks, 0, 1, 2); // thread 1: {0, 2}
        assert!(matches!(
            failure(verify(&e, &ks, &acked)),
            VerifyFailure::Hole {
                thread: 1,
                present: 2,
                end: 3,
                ..
            }
        ));
    }

    #[test]
    fn a_damaged_value_fails() {
        let (e, ks, acked) = crashed();
        let mut k = Vec::new();
        ks.key(
            Writer {
                domain: 0,
                thread: 0,
                index: 3,
            },
            &mut k,
        );
        e.put(WriteOpts::default(), &k, b"not the value").unwrap();
        // Index 3 was not acknowledged, so only the scan reads it.
        assert!(matches!(
            failure(verify(&e, &ks, &acked)),
            VerifyFailure::WrongValue { scan: true, .. }
        ));
        ks.key(
            Writer {
                domain: 0,
                thread: 0,
                index: 1,
            },
            &mut k,
        );
        e.put(WriteOpts::default(), &k, b"").unwrap();
        assert!(matches!(
            failure(verify(&e, &ks, &acked)),
            VerifyFailure::WrongValue { scan: false, .. }
        ));
    }

    /// An engine whose scan returns fixed entries in the given (possibly wrong) order.
    struct Listed(Vec<(Vec<u8>, Vec<u8>)>);

    struct ListedCursor<'a>(&'a [(Vec<u8>, Vec<u8>)]);

    impl KvCursor for ListedCursor<'_> {
        fn valid(&self) -> bool {
            !self.0.is_empty()
        }
        fn key(&self) -> &[u8] {
            &self.0[0].0
        }
        fn value(&self) -> &[u8] {
            &self.0[0].1
        }
        fn advance(&mut self) -> std::result::Result<(), EngineError> {
            self.0 = &self.0[1..];
            Ok(())
        }
    }

    impl KvEngine for Listed {
        fn put(&self, _: WriteOpts, _: &[u8], _: &[u8]) -> std::result::Result<(), EngineError> {
            unimplemented!()
        }
        fn delete(&self, _: WriteOpts, _: &[u8]) -> std::result::Result<(), EngineError> {
            unimplemented!()
        }
        fn write(&self, _: WriteOpts, _: &[BatchOp<'_>]) -> std::result::Result<(), EngineError> {
            unimplemented!()
        }
        fn get(
            &self,
            _: &[u8],
            _: &mut dyn FnMut(&[u8]),
        ) -> std::result::Result<bool, EngineError> {
            unimplemented!()
        }
        fn cursor(
            &self,
            _: CursorStart<'_>,
        ) -> std::result::Result<Box<dyn KvCursor + '_>, EngineError> {
            Ok(Box::new(ListedCursor(&self.0)))
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
    }

    #[test]
    fn out_of_order_and_duplicate_entries_fail() {
        let ks = KeySpace::new(1, 10, 8, 16, 1).unwrap();
        let entry = |i| {
            let (mut k, mut v) = (Vec::new(), Vec::new());
            ks.key(
                Writer {
                    domain: 0,
                    thread: 0,
                    index: i,
                },
                &mut k,
            );
            ks.value(&k, &mut v);
            (k, v)
        };
        let mut sorted: Vec<_> = (0..4).map(entry).collect();
        sorted.sort();
        let t = scan_verify(&Listed(sorted.clone()), &ks, 1, &mut || {}).unwrap();
        assert_eq!(t.entries, 4);
        let mut swapped = sorted.clone();
        swapped.swap(1, 2);
        assert!(matches!(
            scan_verify(&Listed(swapped), &ks, 1, &mut || {}),
            Err(Error::Verify(VerifyFailure::OutOfOrder { position: 2 }))
        ));
        let mut dup = sorted;
        dup.insert(1, dup[0].clone());
        assert!(matches!(
            scan_verify(&Listed(dup), &ks, 1, &mut || {}),
            Err(Error::Verify(VerifyFailure::OutOfOrder { position: 1 }))
        ));
    }

    #[test]
    fn foreign_keys_fail() {
        let (e, ks, acked) = crashed();
        e.put(WriteOpts::default(), b"short", b"x").unwrap();
        assert!(matches!(
            failure(verify(&e, &ks, &acked)),
            VerifyFailure::Foreign { .. }
        ));
        let (e, ks, acked) = crashed();
        put(&e, &ks, 1, 0, 0); // a domain beyond the rounds run so far
        assert!(matches!(
            failure(verify(&e, &ks, &acked)),
            VerifyFailure::Foreign { .. }
        ));
    }
}
