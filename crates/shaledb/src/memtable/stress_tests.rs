//! A many-thread stress model of the memtable's insert/read races.
//!
//! Writers add entries with sequences from one global counter (as group
//! commit hands them out), to keys of their own and to a small set of hot
//! keys every writer updates, so inserts race on the same predecessors and
//! versions of one key arrive out of sequence order. Each writer logs every
//! acknowledged `(key, seq)` and then publishes its progress (Release).
//! Readers, concurrently:
//! - scan forward and backward: internal keys strictly ordered (so the
//!   versions of a key newest first), every value exactly the one derived
//!   from its key and sequence (no torn or misplaced node), and every entry
//!   acknowledged before the scan started present in it;
//! - probe acknowledged entries: `get(key, seq)` returns exactly that
//!   version, `get(key, MAX)` one at least as new, and `seek` /
//!   `seek_for_prev` on its internal key land on it.
//!
//! Nothing waits on time: readers loop until the writers are done, then make
//! one last pass over the complete table. Bounded to about a second in a
//! debug build; under Miri (which also checks the accesses for data races)
//! the sizes shrink.

use super::{MemTable, MemTableIterator};
use crate::iter::InternalIterator;
use crate::types::{compare_internal_keys, make_internal_key, parse_internal_key, ValueKind};
use crate::types::{KIND_FOR_SEEK, MAX_SEQUENCE};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

const WRITERS: usize = 6;
const READERS: usize = 2;
const OPS: usize = if cfg!(miri) { 40 } else { 10_000 };
/// Keys every writer updates: a new version of a key lands right after the
/// same predecessor as the previous one, so writers fight over one link.
const HOT_KEYS: u64 = 8;
/// Fresh memtables raced in turn (a lost race shows up in some rounds only).
const ROUNDS: usize = if cfg!(miri) { 1 } else { 6 };

/// User key number `n`: even numbers as 8 big-endian bytes (the 8-byte
/// prefix decides comparisons), odd ones as text sharing a long prefix (the
/// prefix never decides).
fn user_key(n: u64) -> Vec<u8> {
    if n.is_multiple_of(2) {
        n.to_be_bytes().to_vec()
    } else {
        format!("shared-prefix-{n:08}").into_bytes()
    }
}

/// The key number writer `t` uses for its `i`-th op: every other op hits a
/// hot key, the others a key only this writer writes.
fn key_number(t: usize, i: usize) -> u64 {
    if i.is_multiple_of(2) {
        (i as u64 / 2 + t as u64) % HOT_KEYS
    } else {
        HOT_KEYS + (i * WRITERS + t) as u64
    }
}

/// The value stored for `(key, seq)`; its length varies so that nodes of all
/// sizes straddle arena chunk ends.
fn value_of(key: &[u8], seq: u64) -> Vec<u8> {
    let mut v = seq.to_le_bytes().to_vec();
    v.extend_from_slice(key);
    v.extend((0..seq % 61).map(|j| (seq as u8).wrapping_add(j as u8)));
    v
}

/// What the writers share with the readers.
struct Shared {
    mem: Arc<MemTable>,
    next_seq: AtomicU64,
    /// `acked[t][i]`: the sequence writer `t`'s op `i` got (valid below `done[t]`).
    acked: Vec<Vec<AtomicU64>>,
    /// Ops writer `t` has finished (Release after the op's `acked` store).
    done: Vec<AtomicUsize>,
    writers_finished: AtomicBool,
}

impl Shared {
    /// The acknowledged entries of every writer, as `(key, seq)`.
    fn acknowledged(&self) -> Vec<(Vec<u8>, u64)> {
        let mut out = Vec::new();
        for (t, (log, done)) in self.acked.iter().zip(&self.done).enumerate() {
            let n = done.load(Ordering::Acquire);
            for (i, seq) in log.iter().enumerate().take(n) {
                out.push((user_key(key_number(t, i)), seq.load(Ordering::Relaxed)));
            }
        }
        out
    }
}

fn write(shared: &Shared, t: usize) {
    let (Some(log), Some(done)) = (shared.acked.get(t), shared.done.get(t)) else {
        return;
    };
    for (i, slot) in log.iter().enumerate() {
        let key = user_key(key_number(t, i));
        let seq = shared.next_seq.fetch_add(1, Ordering::Relaxed);
        shared
            .mem
            .add(seq, ValueKind::Put, &key, &value_of(&key, seq));
        slot.store(seq, Ordering::Relaxed);
        done.store(i + 1, Ordering::Release);
    }
}

/// Checks the entry under `it` and returns its `(user key, seq)`.
fn check_entry(it: &MemTableIterator) -> (Vec<u8>, u64) {
    let p = parse_internal_key(it.key()).expect("a well-formed internal key");
    assert_eq!(p.kind, ValueKind::Put);
    assert_eq!(
        it.value(),
        value_of(p.user_key, p.seq),
        "torn or misplaced value"
    );
    (p.user_key.to_vec(), p.seq)
}

/// One scan in either direction; checks order and values, returns the entries.
fn scan(mem: &Arc<MemTable>, forward: bool) -> HashSet<(Vec<u8>, u64)> {
    let mut it = mem.iter();
    let mut seen = HashSet::new();
    let mut last: Option<Vec<u8>> = None;
    if forward {
        it.seek_to_first().expect("memtable seek");
    } else {
        it.seek_to_last().expect("memtable seek");
    }
    while it.valid() {
        let key = it.key().to_vec();
        if let Some(prev) = &last {
            let want = if forward {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            };
            assert_eq!(compare_internal_keys(prev, &key), want, "order broken");
        }
        seen.insert(check_entry(&it));
        last = Some(key);
        if forward {
            it.next().expect("memtable next");
        } else {
            it.prev().expect("memtable prev");
        }
    }
    seen
}

fn read(shared: &Shared, r: usize) -> usize {
    let mut passes = 0;
    let mut it = shared.mem.iter();
    loop {
        let last_pass = shared.writers_finished.load(Ordering::Acquire);
        let before = shared.acknowledged();
        if r == 0 || last_pass {
            let seen = scan(&shared.mem, r.is_multiple_of(2));
            for e in &before {
                assert!(seen.contains(e), "scan lost acknowledged {e:?}");
            }
        } else {
            for (key, seq) in before.iter().rev().step_by(r) {
                let g = shared.mem.get(key, *seq).expect("acknowledged entry");
                assert_eq!((g.seq, g.value), (*seq, &value_of(key, *seq)[..]));
                let newest = shared.mem.get(key, MAX_SEQUENCE).expect("acknowledged");
                assert!(newest.seq >= *seq, "newest version older than acked");
                let ikey = make_internal_key(key, *seq, ValueKind::Put);
                it.seek(&make_internal_key(key, *seq, KIND_FOR_SEEK))
                    .expect("memtable seek");
                assert_eq!(it.key(), ikey, "seek missed an acknowledged entry");
                it.seek_for_prev(&ikey).expect("memtable seek");
                assert_eq!(it.key(), ikey, "seek_for_prev missed it");
                check_entry(&it);
            }
        }
        passes += 1;
        if last_pass {
            return passes;
        }
    }
}

#[test]
fn writers_and_readers_race_without_losing_or_tearing_entries() {
    for _ in 0..ROUNDS {
        race_once();
    }
}

fn race_once() {
    let shared = Arc::new(Shared {
        // Small chunks: arena refills race with the inserts too.
        mem: Arc::new(MemTable::with_chunk_size(1, 16 << 10)),
        next_seq: AtomicU64::new(1),
        acked: (0..WRITERS)
            .map(|_| (0..OPS).map(|_| AtomicU64::new(0)).collect())
            .collect(),
        done: (0..WRITERS).map(|_| AtomicUsize::new(0)).collect(),
        writers_finished: AtomicBool::new(false),
    });
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || read(&shared, r))
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || write(&shared, t))
        })
        .collect();
    for w in writers {
        w.join().expect("writer panicked");
    }
    shared.writers_finished.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().expect("reader panicked") >= 1);
    }

    let all = shared.acknowledged();
    assert_eq!(all.len(), WRITERS * OPS);
    assert_eq!(shared.mem.num_entries(), (WRITERS * OPS) as u64);
    assert_eq!(scan(&shared.mem, true).len(), WRITERS * OPS);
    shared.mem.list.check_invariants();
}
