//! Opening: replay the WAL segments that hold unflushed writes.
//!
//! Segments `>= log_number` (from the manifest) are replayed in number order.
//! Older segments still present are kept only because a prepared
//! transaction needed them (see `crate::txn::prepared`): they are read for
//! two-phase-commit markers only, their data being already flushed. The
//! reader handles every marker itself, in log order, so serial and parallel
//! replay find the same in-doubt set: a prepare record is remembered under
//! its XID with its prepare sequence (its writes are not applied), and a
//! commit or rollback naming the same XID *and* prepare sequence removes it
//! (a commit record carries the writes and is replayed like any batch). What
//! remains are the transactions that come back prepared.
//! A torn tail of the *last* segment is the expected result of a crash and is
//! truncated; any other damage is `Error::Corruption`. Earlier segments were
//! fsynced whole when the writer moved past them (see `write::switch_memtable`),
//! so they cannot have torn tails. Memory stays under the recovery memory
//! limit: a generation that fills during replay is frozen, and frozen ones are
//! flushed when the next would not fit or too many pile up (`replay_budget`).

use super::replay_budget::{estimate, switch_size, ReplayBudget};
use super::{background, write, DbInner, Generation};
use crate::error::{Error, Result};
use crate::txn::marker::TxnMarker;
use crate::txn::prepared::RecoveredPrepare;
use crate::wal::LogReader;
use crate::write_batch::WriteBatch;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Lists `*.log` segment numbers in the directory, sorted.
fn wal_segments(inner: &DbInner) -> Result<Vec<u64>> {
    let mut v: Vec<u64> = inner
        .fs
        .list_dir(&inner.dir)?
        .iter()
        .filter_map(|n| n.strip_suffix(".log"))
        .filter_map(|n| n.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Transactions prepared and not resolved, by XID, as recovery found them.
pub(crate) type InDoubt = BTreeMap<Vec<u8>, RecoveredPrepare>;

/// Removes files no longer part of the database: WAL segments below
/// `keep_logs_from`, manifests other than the live one, and temporary files.
pub(crate) fn remove_obsolete_files(inner: &DbInner, keep_logs_from: u64) -> Result<()> {
    let live_manifest = crate::env::read_to_vec(inner.fs.as_ref(), &inner.dir.join("CURRENT"))?;
    let live_manifest = String::from_utf8_lossy(&live_manifest).trim().to_owned();
    for name in inner.fs.list_dir(&inner.dir)? {
        let obsolete = if let Some(n) = name.strip_suffix(".log") {
            n.parse::<u64>().is_ok_and(|n| n < keep_logs_from)
        } else if name.starts_with("MANIFEST-") {
            name != live_manifest
        } else {
            name.ends_with(".tmp")
        };
        if obsolete {
            inner.fs.remove_file(&inner.dir.join(&name))?;
        }
    }
    Ok(())
}

/// Replays the WAL; returns the transactions that come back prepared.
pub(crate) fn recover(inner: &Arc<DbInner>, log_number: u64) -> Result<InDoubt> {
    // Segments are only deleted once the replay knows which ones prepared
    // transactions still need.
    remove_obsolete_files(inner, 0)?;
    let segments = wal_segments(inner)?;
    let max_seq = inner.wal.lock().last_sequence;
    {
        let mut st = inner.state.lock();
        let cfs: Vec<u32> = st.cf_names.values().copied().collect();
        st.active = Generation::new(
            segments
                .iter()
                .copied()
                .find(|&n| n >= log_number)
                .unwrap_or(0),
            cfs.into_iter(),
            switch_size(&inner.opts),
            &inner.opts,
        );
        background::install_super_version(inner, &st);
    }
    let threads = inner.opts.recovery_threads;
    let mut in_doubt = InDoubt::new();
    let from = WalRange {
        segments: &segments,
        log_number,
    };
    let max_seq = if threads <= 1 {
        read_segments(
            inner,
            from,
            max_seq,
            &mut SerialSink::new(inner),
            &mut in_doubt,
        )?
    } else {
        super::replay::replay_parallel(inner, from, max_seq, threads, &mut in_doubt)?
    };
    let keep_from = in_doubt
        .values()
        .map(|p| p.segment)
        .min()
        .map_or(log_number, |s| s.min(log_number));
    remove_obsolete_files(inner, keep_from)?;
    {
        let mut wal = inner.wal.lock();
        wal.last_sequence = max_seq;
        inner.visible_sequence.store(max_seq, Ordering::Release);
        // Freeze what was replayed (its flush retires the old segments) and
        // start a fresh segment.
        write::switch_memtable(inner, &mut wal)?;
    }
    Ok(in_doubt)
}

/// The segments recovery reads: all of them; data is applied from those
/// `>= log_number`, markers are honoured in all.
#[derive(Clone, Copy)]
pub(crate) struct WalRange<'a> {
    pub segments: &'a [u64],
    pub log_number: u64,
}

/// Where the reader hands decoded batches: applied at once ([`SerialSink`])
/// or by a pool of threads (`replay::ParallelSink`).
pub(crate) trait BatchSink {
    /// Applies (or hands out) one batch read at `offset` of segment `segment`.
    fn apply(
        &mut self,
        batch: WriteBatch,
        segment: u64,
        path: &Arc<Path>,
        offset: u64,
    ) -> Result<()>;
    /// Returns once every batch handed out so far is applied, with the
    /// error of the earliest failed one.
    fn barrier(&mut self) -> Result<()>;
}

/// Applies each batch on the reading thread (`recovery_threads <= 1`).
struct SerialSink<'a> {
    inner: &'a Arc<DbInner>,
    budget: ReplayBudget,
}

impl<'a> SerialSink<'a> {
    fn new(inner: &'a Arc<DbInner>) -> Self {
        let budget = ReplayBudget::new(inner);
        SerialSink { inner, budget }
    }
}

impl BatchSink for SerialSink<'_> {
    fn apply(
        &mut self,
        batch: WriteBatch,
        segment: u64,
        path: &Arc<Path>,
        offset: u64,
    ) -> Result<()> {
        replay_batch(self.inner, &mut self.budget, &batch, segment)
            .map_err(|e| as_corruption(e, path, offset))
    }

    fn barrier(&mut self) -> Result<()> {
        let active = self.inner.state.lock().active.memory_usage();
        self.budget.observe(self.inner, active);
        Ok(())
    }
}

/// An `InvalidArgument` from inserting a logged batch means its bytes are bad.
pub(crate) fn as_corruption(e: Error, path: &Path, offset: u64) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::corruption(path, offset, m),
        other => other,
    }
}

/// Reads every segment in order, handing each batch to apply to `sink` and
/// tracking prepared transactions in `in_doubt`; returns the largest
/// sequence seen (at least `max_seq`). Truncates a torn tail of the last
/// segment, after `sink` has applied everything before it (so an earlier
/// failed batch wins, as in serial replay).
pub(crate) fn read_segments(
    inner: &Arc<DbInner>,
    range: WalRange<'_>,
    mut max_seq: u64,
    sink: &mut dyn BatchSink,
    in_doubt: &mut InDoubt,
) -> Result<u64> {
    let segments = range.segments;
    for (i, &number) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let path: Arc<Path> = super::wal_path(&inner.dir, number).into();
        let file = inner.fs.open_sequential(&path)?;
        let mut reader = LogReader::new(file, path.to_path_buf(), number)?;
        while let Some((offset, record)) = reader.read_record()? {
            let batch = WriteBatch::from_data(record)
                .map_err(|e| Error::corruption(&*path, offset, format!("bad write batch: {e}")))?;
            if !blob_refs_present(inner, &batch) {
                // A power loss kept this unsynced WAL record but not the
                // unsynced values it points at: it was never acknowledged
                // durable, and no later record was synced (a synced group
                // syncs the value files first). Cut the log here, as a torn
                // tail, so recovery keeps a prefix (docs/architecture.md).
                sink.barrier()?;
                if !last {
                    return Err(Error::corruption(
                        &*path,
                        offset,
                        "WAL record points past the end of a value file",
                    ));
                }
                tracing::warn!(
                    "truncating WAL {} at {offset}: its values did not survive",
                    path.display()
                );
                inner.fs.truncate(&path, offset)?;
                return Ok(max_seq);
            }
            let end = batch.sequence() + batch.sequences_used().saturating_sub(1);
            max_seq = max_seq.max(end);
            if let Some(marker) = batch.txn_marker() {
                track_prepared(in_doubt, marker, &batch, number)
                    .map_err(|reason| Error::corruption(&*path, offset, reason))?;
            }
            if number >= range.log_number && batch.applies_data() {
                inner.stats.count_replayed(&batch);
                sink.apply(batch, number, &path, offset)?;
            }
        }
        if reader.hit_torn_tail() {
            sink.barrier()?;
            if !last {
                return Err(Error::corruption(
                    &*path,
                    reader.valid_end(),
                    "torn record in a WAL segment that is not the last",
                ));
            }
            tracing::warn!(
                "truncating torn WAL tail of {} at {}",
                path.display(),
                reader.valid_end()
            );
            inner.fs.truncate(&path, reader.valid_end())?;
        }
    }
    sink.barrier()?;
    Ok(max_seq)
}

/// False if a BlobIndex op of `batch` points past the end of its value
/// file (a missing file is fine: GC deleted it, see
/// `blob::reader::record_in_bounds`). Checks lengths only: no value is read.
fn blob_refs_present(inner: &DbInner, batch: &WriteBatch) -> bool {
    let Some(blobs) = &inner.blobs else {
        return true;
    };
    if !batch.applies_data() {
        return true;
    }
    let files = blobs.current();
    batch.iter().map_while(|op| op.ok()).all(|op| match op {
        crate::write_batch::BatchOp::BlobIndex { key, index, .. } => {
            crate::blob::reader::record_in_bounds(&files, key, index)
        }
        _ => true,
    })
}

/// Applies one 2PC marker to the in-doubt set; `Err(reason)` if the log
/// contradicts itself (a second prepare of an XID still prepared).
fn track_prepared(
    in_doubt: &mut InDoubt,
    marker: TxnMarker,
    batch: &WriteBatch,
    segment: u64,
) -> std::result::Result<(), String> {
    match marker {
        TxnMarker::Prepare { xid } => {
            if in_doubt.contains_key(&xid) {
                return Err("a second prepare of an XID that is still prepared".into());
            }
            let rec = RecoveredPrepare {
                prepare_seq: batch.sequence(),
                segment,
                writes: batch.without_txn_marker(),
            };
            in_doubt.insert(xid, rec);
        }
        TxnMarker::Commit { xid, prepare_seq } | TxnMarker::Rollback { xid, prepare_seq } => {
            // A resolution whose prepare is older than every kept segment
            // finds nothing here, which is fine: that prepare was resolved.
            if in_doubt
                .get(&xid)
                .is_some_and(|p| p.prepare_seq == prepare_seq)
            {
                in_doubt.remove(&xid);
            }
        }
    }
    Ok(())
}

fn replay_batch(
    inner: &Arc<DbInner>,
    budget: &mut ReplayBudget,
    batch: &WriteBatch,
    segment: u64,
) -> Result<()> {
    {
        let st = inner.state.lock();
        if !budget.must_switch(st.active.memory_usage(), estimate(batch)) {
            return write::insert_batch(|cf| st.active.mems.get(&cf), batch);
        }
    }
    budget.switch(inner, segment)?;
    let st = inner.state.lock();
    write::insert_batch(|cf| st.active.mems.get(&cf), batch)
}

/// Freezes the active generation and starts a new one on `segment`; flushes
/// every frozen generation when too many pile up. Returns the new active one.
pub(crate) fn freeze_active(inner: &Arc<DbInner>, segment: u64) -> Result<Generation> {
    let mut st = inner.state.lock();
    let cfs: Vec<u32> = st.active.mems.keys().copied().collect();
    // The new generation continues the same segment: flushing the frozen
    // one must not retire `segment`, and it does not, because the log
    // number after that flush is this generation's number, `segment`.
    let fresh = Generation::new(
        segment,
        cfs.into_iter(),
        switch_size(&inner.opts),
        &inner.opts,
    );
    let old = std::mem::replace(&mut st.active, fresh.clone());
    st.frozen.push_back(old);
    let too_many = st.frozen.len() + 1 >= inner.opts.max_write_buffer_number;
    background::install_super_version(inner, &st);
    drop(st);
    if too_many {
        background::flush_all_frozen(inner)?;
    }
    Ok(fresh)
}
