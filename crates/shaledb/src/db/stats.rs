//! Counters and the `shale.*` properties.

use super::DbInner;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Engine-wide counters (relaxed atomics: figures, not synchronization).
#[derive(Debug, Default)]
pub(crate) struct DbStats {
    pub write_groups: AtomicU64,
    pub write_batches: AtomicU64,
    pub write_ops: AtomicU64,
    /// Bytes of user data inserted into memtables (keys + values).
    pub user_bytes_written: AtomicU64,
    /// Point reads; sharded: every get bumps it (`util/counter.rs`).
    pub gets: crate::util::counter::ShardedCounter,
    pub stall_micros: AtomicU64,
    pub flushes: AtomicU64,
    pub flushes_to_l0: AtomicU64,
    pub flush_bytes_written: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    pub compaction_bytes_reused: AtomicU64,
    pub compaction_extents_reused: AtomicU64,
    /// Largest memtable memory (active + frozen) during WAL replay at open.
    pub recovery_peak_memtable_bytes: AtomicU64,
    /// The lifetime counters restored at open include every write up to
    /// this sequence; WAL replay counts the batches after it.
    pub counted_through: AtomicU64,
}

/// The counters kept over the database's life: every flush and compaction
/// edit carries their values to the manifest (`VersionEdit::lifetime_counters`,
/// in this order; append only), followed by the sequence they count
/// through, and an open starts from the last ones logged; a clean close logs
/// them once more. WAL replay counts the batches after that sequence, so
/// the figures hold across crashes too (a write racing the snapshot of the
/// counters may be counted twice: figures, not accounting).
const LIFETIME: [fn(&DbStats) -> &AtomicU64; 12] = [
    |s| &s.user_bytes_written,
    |s| &s.flush_bytes_written,
    |s| &s.compaction_bytes_read,
    |s| &s.compaction_bytes_written,
    |s| &s.compaction_bytes_reused,
    |s| &s.compaction_extents_reused,
    |s| &s.flushes,
    |s| &s.flushes_to_l0,
    |s| &s.compactions,
    |s| &s.write_ops,
    |s| &s.write_batches,
    |s| &s.write_groups,
];

impl DbStats {
    /// Starts the lifetime counters from the values the manifest recorded
    /// (missing ones stay 0: a database from before they existed).
    pub fn restore_lifetime(&self, values: &[u64]) {
        for (counter, v) in LIFETIME.iter().zip(values) {
            counter(self).store(*v, Ordering::Relaxed);
        }
        let through = values.get(LIFETIME.len()).copied().unwrap_or(u64::MAX);
        self.counted_through.store(through, Ordering::Relaxed);
    }

    /// The lifetime counters now, then `visible` (the sequence of the last
    /// published write), for the next manifest edit. `visible` is read
    /// before the counters and writers count before they publish, so every
    /// write up to it is in the counters.
    pub fn lifetime(&self, visible: &AtomicU64) -> Vec<u64> {
        let through = visible.load(Ordering::Acquire);
        let mut v: Vec<u64> = LIFETIME
            .iter()
            .map(|c| c(self).load(Ordering::Relaxed))
            .collect();
        v.push(through);
        v
    }

    /// Counts a batch replayed from the WAL at open, if the restored
    /// counters do not include it yet.
    pub fn count_replayed(&self, batch: &crate::write_batch::WriteBatch) {
        if batch.sequence() > self.counted_through.load(Ordering::Relaxed) {
            self.write_batches.fetch_add(1, Ordering::Relaxed);
            self.write_ops
                .fetch_add(u64::from(batch.count()), Ordering::Relaxed);
            self.user_bytes_written
                .fetch_add(batch.data().len() as u64, Ordering::Relaxed); // usize -> u64: lossless
        }
    }

    pub fn add_write(&self, batches: u64, ops: u64) {
        self.write_groups.fetch_add(1, Ordering::Relaxed);
        self.write_batches.fetch_add(batches, Ordering::Relaxed);
        self.write_ops.fetch_add(ops, Ordering::Relaxed);
    }

    /// Adds the figures of one finished merge (a flush when `flush`).
    pub fn record_merge(&self, r: &crate::compaction::MergeResult, flush: bool) {
        let written = if flush {
            &self.flush_bytes_written
        } else {
            &self.compaction_bytes_written
        };
        written.fetch_add(r.bytes_written, Ordering::Relaxed);
        self.compaction_bytes_read
            .fetch_add(r.bytes_read, Ordering::Relaxed);
        self.compaction_bytes_reused
            .fetch_add(r.bytes_reused, Ordering::Relaxed);
        self.compaction_extents_reused
            .fetch_add(r.extents_reused, Ordering::Relaxed);
    }

    pub fn add_stall(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.stall_micros.fetch_add(us, Ordering::Relaxed);
    }

    /// Bytes written to extents per byte of user data accepted.
    pub fn write_amplification(&self) -> f64 {
        let user = self.user_bytes_written.load(Ordering::Relaxed) as f64;
        let disk = (self.flush_bytes_written.load(Ordering::Relaxed)
            + self.compaction_bytes_written.load(Ordering::Relaxed)) as f64;
        if user == 0.0 {
            0.0
        } else {
            disk / user
        }
    }
}

fn memtable_bytes(inner: &DbInner) -> usize {
    let st = inner.state.lock();
    st.active.memory_usage() + st.frozen.iter().map(|g| g.memory_usage()).sum::<usize>()
}

pub(crate) fn property(inner: &std::sync::Arc<DbInner>, name: &str) -> Option<String> {
    if name.starts_with("shale.blob-") {
        return crate::blob::property(inner, name);
    }
    let s = &inner.stats;
    let v = inner.versions.current();
    let level_arg = |prefix: &str| {
        name.strip_prefix(prefix)
            .and_then(|n| n.parse::<usize>().ok())
    };
    if let Some(level) = level_arg("shale.num-extents-at-level") {
        return Some(
            v.cfs
                .values()
                .map(|c| c.level_extents(level))
                .sum::<usize>()
                .to_string(),
        );
    }
    if let Some(level) = level_arg("shale.bytes-at-level") {
        return Some(
            v.cfs
                .values()
                .map(|c| c.level_bytes(level))
                .sum::<u64>()
                .to_string(),
        );
    }
    let cache = inner.cache.as_ref().map(|c| c.stats());
    Some(match name {
        "shale.memtable-bytes" => memtable_bytes(inner).to_string(),
        "shale.cache-hits" => cache.map_or(0, |c| c.hits).to_string(),
        "shale.cache-misses" => cache.map_or(0, |c| c.misses).to_string(),
        "shale.cache-usage" => cache.map_or(0, |c| c.usage_bytes).to_string(),
        "shale.write-amplification" => format!("{:.3}", s.write_amplification()),
        "shale.stall-micros" => s.stall_micros.load(Ordering::Relaxed).to_string(),
        "shale.compaction-bytes-reused" => s
            .compaction_bytes_reused
            .load(Ordering::Relaxed)
            .to_string(),
        "shale.num-snapshots" => inner.snapshots.sequences().len().to_string(),
        "shale.l0-runs" => v
            .cfs
            .values()
            .map(|c| c.l0.len())
            .sum::<usize>()
            .to_string(),
        "shale.recovery-peak-memtable-bytes" => s
            .recovery_peak_memtable_bytes
            .load(Ordering::Relaxed)
            .to_string(),
        "shale.recovery-memory-limit" => inner.opts.recovery_memory_budget().to_string(),
        "shale.frozen-memtables" => inner.state.lock().frozen.len().to_string(),
        "shale.stats" => stats_string(inner),
        _ => return None,
    })
}

fn stats_string(inner: &DbInner) -> String {
    let s = &inner.stats;
    let v = inner.versions.current();
    let mut out = String::new();
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let _ = writeln!(out, "** ShaleDB stats **");
    let _ = writeln!(
        out,
        "sequence: {}",
        inner.visible_sequence.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "memtable bytes (active + frozen): {}",
        memtable_bytes(inner)
    );
    let _ = writeln!(out, "frozen memtables: {}", inner.state.lock().frozen.len());
    if let Some(line) = crate::blob::stats_line(inner) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "recovery: peak memtable bytes {} (limit {})",
        ld(&s.recovery_peak_memtable_bytes),
        inner.opts.recovery_memory_budget()
    );
    for (id, cf) in &v.cfs {
        let _ = writeln!(out, "column family {} ({id}):", cf.name);
        let _ = writeln!(
            out,
            "  L0: {} runs, {} extents, {} bytes",
            cf.l0.len(),
            cf.level_extents(0),
            cf.level_bytes(0)
        );
        for level in 1..inner.opts.num_levels {
            let _ = writeln!(
                out,
                "  L{level}: {} extents, {} bytes",
                cf.level_extents(level),
                cf.level_bytes(level)
            );
        }
    }
    let sp = inner.versions.space().stats();
    let _ = writeln!(
        out,
        "data files: {}, slots used {} of {}",
        sp.files, sp.used_slots, sp.total_slots
    );
    let _ = writeln!(
        out,
        "writes: {} ops in {} batches, {} groups; user bytes {}",
        ld(&s.write_ops),
        ld(&s.write_batches),
        ld(&s.write_groups),
        ld(&s.user_bytes_written)
    );
    let _ = writeln!(out, "gets: {}", s.gets.get());
    let _ = writeln!(
        out,
        "flushes: {} ({} to L0), bytes written {}",
        ld(&s.flushes),
        ld(&s.flushes_to_l0),
        ld(&s.flush_bytes_written)
    );
    let _ = writeln!(
        out,
        "compactions: {}, bytes read {}, written {}, reused {} ({} extents)",
        ld(&s.compactions),
        ld(&s.compaction_bytes_read),
        ld(&s.compaction_bytes_written),
        ld(&s.compaction_bytes_reused),
        ld(&s.compaction_extents_reused)
    );
    let _ = writeln!(out, "write amplification: {:.3}", s.write_amplification());
    let _ = writeln!(out, "stall time: {} us", ld(&s.stall_micros));
    if let Some(c) = inner.cache.as_ref().map(|c| c.stats()) {
        let _ = writeln!(
            out,
            "block cache: {} hits, {} misses, {} of {} bytes used",
            c.hits, c.misses, c.usage_bytes, c.capacity_bytes
        );
    }
    out
}
