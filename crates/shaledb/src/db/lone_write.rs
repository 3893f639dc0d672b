//! Lone writes: an unsynced write that logs and inserts by itself, without
//! the group-commit queue (docs/architecture.md, "Lone writes").
//!
//! Why: on a machine with more writers than cores, a follower of group
//! commit sleeps while its leader works and is woken after: two context
//! switches per put, which measured as the largest single cost of the
//! contest's write phase (docs/benchmarks.md). A lone writer holds the WAL
//! writer only to take its sequences and copy its record (a store into the
//! mapped log), then inserts into the memtable concurrently with the other
//! lone writers and publishes its sequences in order.
//!
//! Worked example: A takes `wal`, gets sequence 10, logs, registers 10 as in
//! flight and lets go; B does the same with 11. B's insert finishes first:
//! it marks 11 done, but 10 is still in flight, so the visible sequence
//! stays at 9 and B waits. A marks 10 done, finds 10 and 11 done at the
//! front, publishes 11 and returns; B sees 11 visible and returns.
//!
//! Invariants (which lock guards what):
//! - A lone write registers in [`InFlight`] while holding `wal`, right after
//!   taking its sequences, so the in-flight list is in sequence order.
//! - Every other holder of `wal` that reads or replaces the memtables,
//!   validates reads, assigns sequences or publishes them first waits until
//!   the list is empty ([`lock_quiet`]); while it holds `wal` no lone write
//!   can register, so it sees every logged write in its memtable and may
//!   publish without regard to lone writes.
//! - `visible_sequence` is only raised by the writer that pops the in-flight
//!   list's done prefix (under `InFlight::slots`' mutex) or by a quiet
//!   `wal` holder; so it never covers a write not yet in its memtable.

use super::options::WriteOptions;
use super::{DbInner, WalState};
use crate::error::Result;
use crate::write_batch::WriteBatch;
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Spins before a waiting writer starts yielding its core: the write it
/// waits for is usually mid-insert on the other core.
const SPINS: u32 = 64;

/// The lone writes that have sequences and are not yet published.
#[derive(Default)]
pub(crate) struct InFlight {
    /// `(last sequence, inserted)` per lone write, in sequence order.
    slots: Mutex<VecDeque<(u64, bool)>>,
}

impl InFlight {
    fn is_empty(&self) -> bool {
        self.slots.lock().is_empty()
    }

    /// Registers a logged write ending at sequence `last` (caller holds
    /// `wal`, so registrations come in sequence order).
    fn register(&self, last: u64) {
        self.slots.lock().push_back((last, false));
    }

    /// Marks the write ending at `last` inserted and raises `visible` to the
    /// end of the inserted prefix of the list, under the list's mutex (a
    /// quiet `wal` holder that saw the list empty then sees the raise).
    fn finish(&self, last: u64, visible: &AtomicU64) {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.iter_mut().find(|s| s.0 == last) {
            slot.1 = true;
        }
        let mut newest = None;
        while let Some(&(seq, true)) = slots.front() {
            newest = Some(seq);
            slots.pop_front();
        }
        if let Some(seq) = newest {
            visible.fetch_max(seq, Ordering::AcqRel);
        }
    }
}

/// Whether `batch` may go the lone way: unsynced, logged, no transaction
/// marker.
pub(crate) fn eligible(inner: &DbInner, wo: &WriteOptions, batch: &WriteBatch) -> bool {
    inner.opts.lone_writes && !wo.sync && !wo.disable_wal && batch.txn_marker().is_none()
}

/// Locks the WAL writer and waits until no lone write is in flight: see the
/// module's invariants.
pub(crate) fn lock_quiet(inner: &DbInner) -> MutexGuard<'_, WalState> {
    let wal = inner.wal.lock();
    wait_until(|| inner.lone.is_empty());
    wal
}

/// Writes `batch` (validated, [`eligible`]) alone.
pub(crate) fn write(inner: &Arc<DbInner>, mut batch: WriteBatch) -> Result<()> {
    // Values first, before the WAL record that points at them (the crash
    // argument of docs/architecture.md, "Lone writes"). The claim on their
    // file is held until the write is published: GC must not measure the
    // file while the key does not point at these values yet.
    let claim = match inner.blobs.as_ref().filter(|b| b.min_blob_size > 0) {
        Some(blobs) => match blobs.separate(std::iter::once(&mut batch), false, true) {
            Ok(c) => c,
            Err(e) => {
                super::write::set_bg_error(inner, e.clone());
                return Err(e);
            }
        },
        None => None,
    };
    let mut wal = inner.wal.lock();
    super::write::check_bg(inner)?;
    if super::write::needs_room(inner) {
        // Switching memtables or stalling: the quiet path.
        wait_until(|| inner.lone.is_empty());
        super::write::make_room(inner, &mut wal)?;
    }
    let first = wal.last_sequence + 1;
    batch.set_sequence(first);
    let last = first + batch.sequences_used() - 1;
    let log = wal.number;
    if let Some(writer) = wal.writer.as_mut() {
        let logged = writer
            .add_record(batch.data())
            .and_then(|()| writer.flush());
        if let Err(e) = logged {
            super::write::set_bg_error(inner, e.clone());
            return Err(e);
        }
        let end = crate::wal::sync_point::WalPos {
            log,
            offset: writer.file_size(),
        };
        inner.write.sync.flushed(end);
    }
    wal.last_sequence = last;
    // The active memtables stay active until this write is published: a
    // switch waits for the in-flight list to empty.
    let sv = inner.sv.get();
    inner.lone.register(last);
    drop(wal);
    let inserted = super::write::insert_batch(|cf| sv.cfs.get(&cf).map(|c| &c.mem), &batch);
    publish(inner, last);
    drop(claim);
    inner.stats.add_write(1, last + 1 - first);
    inner
        .stats
        .user_bytes_written
        .fetch_add(batch.data().len() as u64, Ordering::Relaxed);
    inserted
}

/// Marks the write ending at `last` inserted, publishes the done prefix of
/// the in-flight list, and waits until `last` is visible.
fn publish(inner: &DbInner, last: u64) {
    inner.lone.finish(last, &inner.visible_sequence);
    wait_until(|| inner.visible_sequence.load(Ordering::Acquire) >= last);
}

/// Spins, then yields the core, until `done()`.
fn wait_until(done: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !done() {
        if spins < SPINS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_visible_sequence_covers_only_an_inserted_prefix() {
        let f = InFlight::default();
        let visible = AtomicU64::new(9);
        f.register(10);
        f.register(12); // a batch of two sequences: 11 and 12
        f.register(13);
        f.finish(12, &visible);
        assert_eq!(visible.load(Ordering::Acquire), 9, "10 is not inserted yet");
        f.finish(13, &visible);
        assert_eq!(visible.load(Ordering::Acquire), 9);
        f.finish(10, &visible);
        assert_eq!(visible.load(Ordering::Acquire), 13);
        assert!(f.is_empty());
        f.register(14);
        assert!(!f.is_empty());
        f.finish(14, &visible);
        assert_eq!(visible.load(Ordering::Acquire), 14);
    }
}
