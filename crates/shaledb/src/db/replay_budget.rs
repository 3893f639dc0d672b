//! The memory budget of WAL replay (X-Engine's "defend against OOM" rule).
//!
//! Replay rebuilds memtables from the log; a log much larger than memory must
//! not turn into memtables much larger than memory. The budget is
//! `Options::recovery_memory_budget()` (`recovery_memory_limit`, or
//! `write_buffer_size * max_write_buffer_number` when that is 0), and it
//! bounds the memtable memory of the active generation, plus every frozen
//! one, plus (parallel replay) the estimated memory of batches handed to
//! replay threads and not yet applied.
//!
//! Two rules keep the total `F + A` (frozen + active) under the limit `L`:
//!
//! 1. *Switch*: the active generation is frozen before it would grow past
//!    `S = min(write_buffer_size, L / 2)`: the check runs before each batch
//!    and counts the batch's estimated size, so `A <= S + C`, where `C` is one
//!    arena chunk per column family (each memtable's arena grows a chunk at a
//!    time, so one batch may add a whole chunk to each; a chunk is `S / 16`,
//!    between 16 KiB and 1 MiB).
//! 2. *Flush*: right after a switch, if `F + S + C > L` (the next generation
//!    could not fill up without crossing the limit) every frozen generation
//!    is flushed, so `F = 0`. Otherwise `F + S + C <= L`, and with rule 1,
//!    `F + A <= L` until the next switch.
//!
//! Worked example: `L` = 4 MiB, `write_buffer_size` = 64 MiB: `S` = 2 MiB.
//! The first generation fills to ~2 MiB and is frozen (`F` ~ 2 MiB); since
//! `F + S + C` > 4 MiB it is flushed at once; the second generation starts
//! with `F = 0`. With the defaults (64 MiB x 4 = 256 MiB), `S` = 64 MiB and three
//! frozen generations accumulate before a flush, as at run time.
//!
//! Memory only drops at a flush, so the largest total is always reached just
//! before a switch or at the end of replay; the peak is measured there (from
//! the memtables' own accounting, with every handed-out batch applied) and
//! published as `shale.recovery-peak-memtable-bytes`. A single batch larger
//! than `S` still gets a generation of its own: the limit can be exceeded by
//! that batch, never refused.
//!
//! Frozen generations are flushed only at switches, which in parallel replay
//! happen at barriers, so no replay thread is writing while a flush runs.
//!
//! Not implemented: X-Engine also switches a memtable that has *waited* too
//! long for a deferred switch. X-Engine defers per-subtable switches to batch
//! them into one barrier; here one generation holds every column family's
//! memtable and is switched at the first batch that does not fit, so no
//! switch is ever deferred and there is no wait to time out.

use super::recovery::freeze_active;
use super::{background, memtable_chunk_size, DbInner, Generation};
use crate::db::Options;
use crate::error::Result;
use crate::write_batch::WriteBatch;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Memtable bytes per entry beyond its key and value: the 8-byte trailer,
/// two u32 lengths, the level-0 link and on average one 16-byte upper link
/// (see `memtable/node.rs`), plus alignment.
const ENTRY_OVERHEAD: usize = 48;

/// Estimated memtable bytes `batch` adds once applied (its encoded size
/// slightly overcounts keys and values; the overhead is per entry).
pub(crate) fn estimate(batch: &WriteBatch) -> usize {
    let count = usize::try_from(batch.count()).unwrap_or(usize::MAX);
    batch
        .data()
        .len()
        .saturating_add(count.saturating_mul(ENTRY_OVERHEAD))
}

/// `S`: the size a generation is switched at during replay.
pub(crate) fn switch_size(opts: &Options) -> usize {
    opts.write_buffer_size
        .min(opts.recovery_memory_budget() / 2)
}

/// Tracks the frozen memory and the peak during one replay.
///
/// Owned by the reading thread (the serial or parallel sink): no lock.
pub(crate) struct ReplayBudget {
    limit: usize,
    switch_at: usize,
    /// `C`, one arena chunk per column family: how far a generation may
    /// grow beyond the switch size (arenas grow a chunk at a time).
    slack: usize,
    /// Memory of the frozen generations, measured at the last switch.
    frozen: usize,
    /// Memory of the active generation when it was empty (its first chunks).
    empty: usize,
    peak: usize,
}

fn frozen_bytes(inner: &DbInner) -> usize {
    let st = inner.state.lock();
    st.frozen.iter().map(Generation::memory_usage).sum()
}

impl ReplayBudget {
    /// A budget for replay into the current active generation of `inner`.
    pub(crate) fn new(inner: &DbInner) -> Self {
        let switch_at = switch_size(&inner.opts);
        let (frozen, empty, cfs) = {
            let st = inner.state.lock();
            (
                st.frozen.iter().map(Generation::memory_usage).sum(),
                st.active.memory_usage(),
                st.active.mems.len().max(1),
            )
        };
        ReplayBudget {
            limit: inner.opts.recovery_memory_budget(),
            switch_at,
            slack: memtable_chunk_size(switch_at).saturating_mul(cfs),
            frozen,
            empty,
            peak: 0,
        }
    }

    /// Whether the active generation, holding (or about to hold) `active`
    /// bytes, must be switched before `next` more bytes go in. An empty
    /// generation always takes the batch, however large.
    pub(crate) fn must_switch(&self, active: usize, next: usize) -> bool {
        active > self.empty && active.saturating_add(next) > self.switch_at
    }

    /// Records the total with the active generation at `active` bytes
    /// (measured with every handed-out batch applied) and publishes the peak.
    pub(crate) fn observe(&mut self, inner: &DbInner, active: usize) {
        self.peak = self.peak.max(self.frozen.saturating_add(active));
        let peak = u64::try_from(self.peak).unwrap_or(u64::MAX);
        inner
            .stats
            .recovery_peak_memtable_bytes
            .fetch_max(peak, Ordering::Relaxed);
    }

    /// Freezes the active generation (nothing may still be writing into it)
    /// and starts a new one on `segment`, flushing every frozen generation if
    /// the new one could not fill up under the limit. Returns the new one.
    pub(crate) fn switch(&mut self, inner: &Arc<DbInner>, segment: u64) -> Result<Generation> {
        let active = inner.state.lock().active.memory_usage();
        self.observe(inner, active);
        let fresh = freeze_active(inner, segment)?;
        self.frozen = frozen_bytes(inner);
        let next_full = self.switch_at.saturating_add(self.slack);
        if self.frozen.saturating_add(next_full) > self.limit {
            background::flush_all_frozen(inner)?;
            self.frozen = frozen_bytes(inner);
        }
        self.empty = fresh.memory_usage();
        Ok(fresh)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic in a test is a failure
mod tests {
    use super::*;

    fn opts(wbs: usize, n: usize, limit: usize) -> Options {
        Options {
            write_buffer_size: wbs,
            max_write_buffer_number: n,
            recovery_memory_limit: limit,
            ..Options::default()
        }
    }

    #[test]
    fn switch_size_is_half_the_limit_or_the_write_buffer() {
        assert_eq!(switch_size(&opts(64 << 20, 4, 0)), 64 << 20);
        assert_eq!(switch_size(&opts(64 << 20, 4, 4 << 20)), 2 << 20);
        assert_eq!(switch_size(&opts(1 << 20, 2, 64 << 20)), 1 << 20);
        // Derived limits never overflow.
        assert_eq!(
            opts(usize::MAX / 2, 4, 0).recovery_memory_budget(),
            usize::MAX
        );
    }

    #[test]
    fn estimate_counts_entries_and_bytes() {
        let empty = WriteBatch::new();
        let mut b = WriteBatch::new();
        b.put(b"key", &[7; 100]);
        b.delete(b"other");
        assert_eq!(estimate(&b) - estimate(&empty), {
            b.data().len() - empty.data().len() + 2 * ENTRY_OVERHEAD
        });
        assert!(estimate(&b) > 103 + 5 + 2 * 8);
    }

    #[test]
    fn must_switch_only_a_non_empty_generation_that_would_overflow() {
        let b = ReplayBudget {
            limit: 4 << 20,
            switch_at: 2 << 20,
            slack: 128 << 10,
            frozen: 0,
            empty: 256 << 10,
            peak: 0,
        };
        assert!(!b.must_switch(256 << 10, 10 << 20), "empty takes anything");
        assert!(!b.must_switch(1 << 20, 100));
        assert!(b.must_switch(2 << 20, 1));
        assert!(!b.must_switch((2 << 20) - 1, 1));
        assert!(b.must_switch(usize::MAX, usize::MAX), "saturates");
    }
}
