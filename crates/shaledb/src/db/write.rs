//! The write path: group commit (docs/architecture.md, "Write path" and
//! "Pipelined group commit").
//!
//! Every writer takes a ticket and queues its batch. Whoever finds no leader
//! active becomes the leader: it takes the queued batches (up to
//! `MAX_GROUP_BYTES`), and for the whole group does one WAL append and one
//! flush to the OS, inserts the batches into the memtables, publishes the
//! group's last sequence and lets go of the WAL writer. Followers sleep until
//! their ticket is done. A synced writer then waits on the WAL's
//! [`SyncPoint`] for an fsync that began after its group was flushed; that
//! fsync runs outside the WAL writer's mutex, so the next group is appended
//! meanwhile, and one fsync covers every group flushed before it began.
//! Example: writers A, B, C arrive while D leads; when D finishes, A leads
//! the group {A, B, C}: one `write(2)` for the three, and (if any of them
//! asked) one `fdatasync`, which may also cover the group after them.

use super::options::WriteOptions;
use super::{background, DbInner, WalState};
use crate::blob::gc::Repoint;
use crate::error::{Error, Result};
use crate::txn::marker::TxnMarker;
use crate::txn::serializable::{self, GroupWrites, ReadCheck};
use crate::types::ValueKind;
use crate::wal::sync_point::{SyncPoint, WalPos};
use crate::wal::LogWriter;
use crate::write_batch::{BatchOp, WriteBatch};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of batches one group may carry.
const MAX_GROUP_BYTES: usize = 1 << 20;

struct Pending {
    ticket: u64,
    batch: WriteBatch,
    sync: bool,
    /// The writer wants its WAL position back (`Db::write_unsynced`).
    mark: bool,
    disable_wal: bool,
    /// A Serializable transaction's reads, validated by the leader right
    /// before the batch gets its sequence (`crate::txn::serializable`).
    check: Option<ReadCheck>,
    /// Blob GC: the leader replaces `batch` by BlobIndex puts of the keys
    /// that still point at the old record (`blob::gc::apply_repoints`).
    repoint: Option<Vec<Repoint>>,
}

#[derive(Default)]
struct QueueState {
    pending: VecDeque<Pending>,
    leader_active: bool,
    /// The logged group whose batches are being inserted, and the tickets
    /// of its members (who help insert).
    work: Option<(Arc<InsertWork>, std::ops::RangeInclusive<u64>)>,
    next_ticket: u64,
    /// Every ticket below this is finished.
    done_below: u64,
    /// Tickets that finished with an error.
    failed: BTreeMap<u64, Error>,
    /// Finished synced tickets and the WAL position they wait to be
    /// durable up to (taken by the writer of the ticket).
    durable_at: BTreeMap<u64, WalPos>,
}

/// The group-commit queue.
#[derive(Default)]
pub(crate) struct WriteQueue {
    state: Mutex<QueueState>,
    cv: Condvar,
    /// Mirror of `QueueState::done_below`, for followers polling briefly
    /// before they sleep on `cv`.
    done_hint: std::sync::atomic::AtomicU64,
    /// The WAL's durability watermark: synced writers wait here after
    /// their group is logged, outside the queue and the WAL writer.
    pub(crate) sync: SyncPoint,
}

/// How long a follower polls for its group to finish before sleeping: a
/// group's WAL write and memtable insert usually take less, and a futex
/// sleep + wake-up costs tens of microseconds at the tail.
const FOLLOWER_POLL: Duration = Duration::from_micros(50);

/// Entry point of every user write. A batch carrying a two-phase-commit
/// marker is refused: only the transaction layer writes those.
pub(crate) fn write(inner: &Arc<DbInner>, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
    if batch.txn_marker().is_some() {
        return Err(Error::InvalidArgument(
            "a user write batch may not carry a two-phase-commit marker".into(),
        ));
    }
    if batch.is_empty() {
        return Ok(());
    }
    validate(inner, &batch)?;
    if super::lone_write::eligible(inner, wo, &batch) {
        return super::lone_write::write(inner, batch);
    }
    enqueue(inner, wo, batch)
}

/// Entry point of prepare, commit and rollback records (`crate::txn::prepared`).
pub(crate) fn write_txn_record(
    inner: &Arc<DbInner>,
    wo: &WriteOptions,
    batch: WriteBatch,
    check: Option<ReadCheck>,
) -> Result<()> {
    validate(inner, &batch)?;
    enqueue_checked(inner, wo, batch, check)
}

/// Entry point of a Serializable transaction's commit: the batch is written
/// only if `check` passes in the leader (else `SerializationFailure`).
pub(crate) fn write_checked(
    inner: &Arc<DbInner>,
    wo: &WriteOptions,
    batch: WriteBatch,
    check: ReadCheck,
) -> Result<()> {
    validate(inner, &batch)?;
    enqueue_checked(inner, wo, batch, Some(check))
}

fn enqueue(inner: &Arc<DbInner>, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
    enqueue_checked(inner, wo, batch, None)
}

/// Entry point of blob GC's re-point write: a synced write of BlobIndex
/// puts, each made only if its key still points at the old record.
pub(crate) fn write_repoints(inner: &Arc<DbInner>, repoints: Vec<Repoint>) -> Result<()> {
    inner.check_open()?;
    let wo = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    enqueue_pending(inner, &wo, WriteBatch::new(), None, Some(repoints), false).map(drop)
}

fn enqueue_checked(
    inner: &Arc<DbInner>,
    wo: &WriteOptions,
    batch: WriteBatch,
    check: Option<ReadCheck>,
) -> Result<()> {
    enqueue_pending(inner, wo, batch, check, None, false).map(drop)
}

/// Queues a batch and returns once it is written (and, with `wo.sync`,
/// durable). With `mark`, returns where the batch's group ends in the WAL
/// (`None` without a WAL).
fn enqueue_pending(
    inner: &Arc<DbInner>,
    wo: &WriteOptions,
    batch: WriteBatch,
    check: Option<ReadCheck>,
    repoint: Option<Vec<Repoint>>,
    mark: bool,
) -> Result<Option<WalPos>> {
    let q = &inner.write;
    let mut qs = q.state.lock();
    let ticket = qs.next_ticket;
    qs.next_ticket += 1;
    qs.pending.push_back(Pending {
        ticket,
        batch,
        sync: wo.sync,
        mark,
        disable_wal: wo.disable_wal,
        check,
        repoint,
    });
    let mut polled = false;
    loop {
        if ticket < qs.done_below {
            if let Some(e) = qs.failed.remove(&ticket) {
                return Err(e);
            }
            let Some(pos) = qs.durable_at.remove(&ticket) else {
                return Ok(None);
            };
            drop(qs);
            if wo.sync {
                wait_durable(inner, pos)?;
                return Ok(None);
            }
            return Ok(Some(pos));
        }
        if let Some((work, members)) = &qs.work {
            if members.contains(&ticket) && !work.claimed_all() {
                // A member of the group being inserted: help the leader.
                let work = work.clone();
                drop(qs);
                work.help();
                qs = q.state.lock();
                continue;
            }
        }
        if !qs.leader_active {
            qs.leader_active = true;
            let mut group = Vec::new();
            let mut bytes = 0;
            while let Some(p) = qs.pending.front() {
                if !group.is_empty() && bytes + p.batch.approximate_size() > MAX_GROUP_BYTES {
                    break;
                }
                bytes += p.batch.approximate_size();
                if let Some(p) = qs.pending.pop_front() {
                    group.push(p);
                }
            }
            drop(qs);
            let last_ticket = group.last().map_or(ticket, |p| p.ticket);
            let mut rejected = Vec::new();
            let result = lead_group(inner, &mut group, &mut rejected);
            qs = q.state.lock();
            qs.failed.extend(rejected);
            match result {
                Err(e) => {
                    for p in &group {
                        qs.failed.insert(p.ticket, e.clone());
                    }
                }
                Ok(Some(pos)) => {
                    for p in group.iter().filter(|p| p.sync || p.mark) {
                        qs.durable_at.insert(p.ticket, pos);
                    }
                }
                Ok(None) => {}
            }
            qs.done_below = last_ticket + 1;
            q.done_hint.store(qs.done_below, Ordering::Release);
            qs.leader_active = false;
            q.cv.notify_all();
            continue;
        }
        if !polled {
            // A follower whose group is being written: poll (yielding the
            // core) before sleeping.
            polled = true;
            drop(qs);
            let start = Instant::now();
            while q.done_hint.load(Ordering::Acquire) <= ticket && start.elapsed() < FOLLOWER_POLL {
                std::thread::yield_now();
            }
            qs = q.state.lock();
            continue;
        }
        q.cv.wait(&mut qs);
    }
}

fn validate(inner: &DbInner, batch: &WriteBatch) -> Result<()> {
    inner.check_open()?;
    // More than u32::MAX ops cannot be encoded; say so rather than let the
    // op walk below report the clamped header as a malformed batch.
    batch.check()?;
    let (k, v) = batch.max_key_and_value_len();
    if k > inner.opts.max_key_size {
        return Err(Error::InvalidArgument(format!(
            "key of {k} bytes exceeds max_key_size {}",
            inner.opts.max_key_size
        )));
    }
    if v > inner.opts.max_value_size {
        return Err(Error::InvalidArgument(format!(
            "value of {v} bytes exceeds max_value_size {}",
            inner.opts.max_value_size
        )));
    }
    let sv = inner.sv.get();
    let marked = batch.txn_marker().is_some();
    for op in batch.iter() {
        let op = op.map_err(|e| Error::InvalidArgument(format!("malformed batch: {e}")))?;
        let cf = match op {
            BatchOp::Put { cf, .. } | BatchOp::Delete { cf, .. } => cf,
            BatchOp::BlobIndex { .. } => {
                return Err(Error::InvalidArgument(
                    "a user write batch may not carry a BlobIndex op".into(),
                ))
            }
            BatchOp::RangeDelete { cf, begin, end } => {
                if begin >= end {
                    return Err(Error::InvalidArgument(
                        "delete_range needs begin < end".into(),
                    ));
                }
                cf
            }
        };
        // A prepared transaction's column family may have been dropped since
        // it prepared; its writes there vanish (as in `insert_batch`).
        if !marked && cf != crate::version::DEFAULT_CF_ID && !sv.cfs.contains_key(&cf) {
            return Err(Error::ColumnFamilyNotFound(cf.to_string()));
        }
    }
    Ok(())
}

/// Waits until the WAL is durable up to `pos` (see [`SyncPoint::wait`]).
fn wait_durable(inner: &Arc<DbInner>, pos: WalPos) -> Result<()> {
    inner.write.sync.wait(
        pos,
        || {
            if !inner.bg_error_flag.load(Ordering::Acquire) {
                return None;
            }
            let e = inner.state.lock().bg_error.clone()?;
            Some(Error::Background(Arc::new(e)))
        },
        |target| {
            // No sync handle: fsync through the writer. A log other than
            // the target's was synced in full when it was switched out.
            let mut guard = inner.wal.lock();
            let wal = &mut *guard;
            match wal.writer.as_mut() {
                Some(w) if wal.number == target.log => w.sync(),
                _ => Ok(()),
            }
        },
        |e| set_bg_error(inner, e.clone()),
    )
}

impl super::Db {
    /// Writes `batch` without waiting for an fsync (as `sync: false`) and
    /// returns where it ends in the WAL; [`Self::sync_to`] later waits until
    /// that is durable. Lets a caller release what it holds (a key lock)
    /// between the write and the wait, so the next writer goes ahead while
    /// the fsync runs; unlike [`Self::sync_wal`] the wait does not extend
    /// to writes made after this one.
    pub fn write_unsynced(&self, batch: WriteBatch) -> Result<WalMark> {
        if batch.txn_marker().is_some() {
            return Err(Error::InvalidArgument(
                "a user write batch may not carry a two-phase-commit marker".into(),
            ));
        }
        if batch.is_empty() {
            return Ok(WalMark(None));
        }
        validate(&self.inner, &batch)?;
        let wo = WriteOptions::default();
        enqueue_pending(&self.inner, &wo, batch, None, None, true).map(WalMark)
    }

    /// Waits until the write that returned `mark` is durable (an fsync that
    /// began after it reached the OS has succeeded), starting an fsync if
    /// none is in flight.
    pub fn sync_to(&self, mark: WalMark) -> Result<()> {
        self.inner.check_open()?;
        match mark.0 {
            Some(pos) => wait_durable(&self.inner, pos),
            None => Ok(()),
        }
    }

    /// Makes every write acknowledged before this call durable: waits for
    /// an fsync of the WAL that began after those writes reached the OS,
    /// starting one if none is in flight. Callers that wrote with
    /// `sync: false` (and released what they held) use it to share one
    /// fsync among many writes, as the Redis endpoint does under
    /// `appendfsync always`.
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.check_open()?;
        let pos = self.inner.write.sync.flushed_pos();
        wait_durable(&self.inner, pos)
    }
}

/// Where a write ended in the WAL ([`super::Db::write_unsynced`]).
#[derive(Clone, Copy, Debug)]
pub struct WalMark(Option<WalPos>);

/// The leader's work for one group. Members whose read check fails are
/// taken out of `group` and added to `rejected` with their error; the rest
/// are written. Returns where the group ends in the WAL (`None` without a
/// log): its synced members wait for that to be durable.
fn lead_group(
    inner: &Arc<DbInner>,
    group: &mut Vec<Pending>,
    rejected: &mut Vec<(u64, Error)>,
) -> Result<Option<WalPos>> {
    let mut wal = super::lone_write::lock_quiet(inner);
    check_bg(inner)?;
    make_room(inner, &mut wal)?;
    check_reads(inner, group, rejected)?;
    crate::blob::gc::apply_repoints(
        inner,
        group
            .iter_mut()
            .map(|p| (&mut p.batch, &mut p.repoint, &mut p.disable_wal)),
    )?;
    if let Some(blobs) = inner.blobs.as_ref().filter(|b| b.min_blob_size > 0) {
        // Values first: the WAL records written below point into them
        // (docs/architecture.md, crash argument).
        let sync = group.iter().any(|p| p.sync);
        if let Err(e) = blobs.separate(group.iter_mut().map(|p| &mut p.batch), sync, false) {
            set_bg_error(inner, e.clone());
            return Err(e);
        }
    }
    let first_seq = wal.last_sequence + 1;
    let mut seq = first_seq;
    for p in group.iter_mut() {
        p.batch.set_sequence(seq);
        seq += p.batch.sequences_used();
    }
    let last_seq = seq - 1;
    let mut durable_at = None;
    let log = wal.number;
    if let Some(writer) = wal.writer.as_mut() {
        let logged = log_group(writer, group);
        if let Err(e) = logged {
            // The WAL's state is unknown now (a record may be half written):
            // stop accepting writes.
            set_bg_error(inner, e.clone());
            return Err(e);
        }
        let end = WalPos {
            log,
            offset: writer.file_size(),
        };
        inner.write.sync.flushed(end);
        durable_at = Some(end);
    }
    wal.last_sequence = last_seq;
    for p in group.iter() {
        if let Some(TxnMarker::Prepare { xid }) = p.batch.txn_marker() {
            // Logged: from now on the prepare record pins this segment.
            inner
                .prepared
                .mark_prepared(&xid, p.batch.sequence(), wal.number);
        }
    }
    // The published super version holds the active memtables: only a holder
    // of `wal` (this leader, create_cf, drop_cf) replaces them, so they stay
    // the active ones until every batch is in (the leader keeps `wal`).
    let sv = inner.sv.get();
    let bytes: usize = group.iter().map(|p| p.batch.data().len()).sum();
    if inner.opts.concurrent_memtable_insert && group.len() > 1 {
        insert_in_parallel(inner, sv, group)?;
    } else {
        for p in group.iter() {
            insert_batch(|cf| sv.cfs.get(&cf).map(|c| &c.mem), &p.batch)?;
        }
    }
    inner
        .stats
        .add_write(group.len() as u64, last_seq + 1 - first_seq);
    inner
        .stats
        .user_bytes_written
        .fetch_add(bytes as u64, Ordering::Relaxed);
    // Visible before its fsync completes (docs/architecture.md, "Pipelined
    // group commit": `sync` is about the acknowledgement's durability).
    inner.visible_sequence.store(last_seq, Ordering::Release);
    Ok(durable_at)
}

/// The memtable inserts of one logged group, shared by its members.
/// Batches are claimed by index (`next`), so whoever is awake inserts.
struct InsertWork {
    sv: Arc<super::SuperVersion>,
    batches: Vec<WriteBatch>,
    /// Next batch index to claim.
    next: AtomicUsize,
    /// Batches inserted (or failed).
    finished: AtomicUsize,
    /// The first insert error.
    error: Mutex<Option<Error>>,
    /// Signalled when `finished` reaches `batches.len()`.
    all_done: Condvar,
    done_lock: Mutex<()>,
}

impl InsertWork {
    fn claimed_all(&self) -> bool {
        self.next.load(Ordering::Acquire) >= self.batches.len()
    }

    /// Claims and inserts batches until none is left.
    fn help(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            let Some(batch) = self.batches.get(i) else {
                return;
            };
            let sv = &self.sv;
            if let Err(e) = insert_batch(|cf| sv.cfs.get(&cf).map(|c| &c.mem), batch) {
                self.error.lock().get_or_insert(e);
            }
            if self.finished.fetch_add(1, Ordering::AcqRel) + 1 == self.batches.len() {
                let _g = self.done_lock.lock();
                self.all_done.notify_all();
            }
        }
    }
}

/// The commit pipeline's parallel stage: the group's members (woken from
/// their wait) and the leader insert the logged batches concurrently into
/// the concurrent memtables; the leader returns once all are in, and then
/// publishes the group's last sequence (in order: one group at a time).
fn insert_in_parallel(
    inner: &Arc<DbInner>,
    sv: Arc<super::SuperVersion>,
    group: &mut [Pending],
) -> Result<()> {
    let (Some(first), Some(last)) = (group.first(), group.last()) else {
        return Ok(());
    };
    let members = first.ticket..=last.ticket;
    let batches = group
        .iter_mut()
        .map(|p| std::mem::take(&mut p.batch))
        .collect();
    let work = Arc::new(InsertWork {
        sv,
        batches,
        next: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
        error: Mutex::new(None),
        all_done: Condvar::new(),
        done_lock: Mutex::new(()),
    });
    let q = &inner.write;
    q.state.lock().work = Some((work.clone(), members));
    q.cv.notify_all();
    work.help();
    {
        let mut g = work.done_lock.lock();
        while work.finished.load(Ordering::Acquire) < work.batches.len() {
            work.all_done.wait(&mut g);
        }
    }
    q.state.lock().work = None;
    // The batches stay with `work` (a helper may hold its clone an instant
    // longer); nothing after this stage reads them.
    let error = work.error.lock().take();
    error.map_or(Ok(()), Err)
}

/// Validates the Serializable members of a group, in group order, against
/// the database and against the members before them (which will commit
/// first). Runs under `wal`, so no other group commits meanwhile: a member
/// that passes has read exactly the state at its commit point.
fn check_reads(
    inner: &Arc<DbInner>,
    group: &mut Vec<Pending>,
    rejected: &mut Vec<(u64, Error)>,
) -> Result<()> {
    if group.iter().all(|p| p.check.is_none()) {
        return Ok(());
    }
    let mut earlier = GroupWrites::default();
    let mut kept = Vec::with_capacity(group.len());
    for p in group.drain(..) {
        if let Some(check) = &p.check {
            if let Err(e) = serializable::validate(inner, check, &earlier) {
                rejected.push((p.ticket, e));
                continue;
            }
        }
        earlier.add(&p.batch);
        kept.push(p);
    }
    *group = kept;
    Ok(())
}

/// Appends the group's records and hands them to the OS; the fsync, if
/// any member asked, comes later outside the WAL writer ([`wait_durable`]).
fn log_group(writer: &mut LogWriter, group: &[Pending]) -> Result<()> {
    for p in group.iter().filter(|p| !p.disable_wal) {
        writer.add_record(p.batch.data())?;
    }
    writer.flush()
}

/// Inserts a batch whose sequence is set into the memtables.
pub(crate) fn insert_batch<'a>(
    mem_for: impl Fn(u32) -> Option<&'a Arc<crate::memtable::MemTable>>,
    batch: &WriteBatch,
) -> Result<()> {
    if !batch.applies_data() {
        return Ok(()); // a prepare or rollback record
    }
    for (seq, op) in (batch.sequence()..).zip(batch.iter()) {
        let op = op.map_err(|e| Error::InvalidArgument(format!("malformed batch: {e}")))?;
        let (cf, kind, key, value) = match op {
            BatchOp::Put { cf, key, value } => (cf, ValueKind::Put, key, value),
            BatchOp::BlobIndex { cf, key, index } => (cf, ValueKind::BlobIndex, key, index),
            BatchOp::Delete { cf, key } => (cf, ValueKind::Delete, key, &[][..]),
            BatchOp::RangeDelete { cf, begin, end } => (cf, ValueKind::RangeDelete, begin, end),
        };
        // A column family dropped after validation: its writes vanish with it.
        if let Some(m) = mem_for(cf) {
            m.add(seq, kind, key, value);
        }
    }
    Ok(())
}

pub(crate) fn set_bg_error(inner: &DbInner, e: Error) {
    let mut st = inner.state.lock();
    if st.bg_error.is_none() {
        tracing::error!("background error, writes stopped: {e}");
        st.bg_error = Some(e);
        inner.bg_error_flag.store(true, Ordering::Release);
    }
    inner.bg_cv.notify_all();
}

/// The sticky background error, if any.
pub(crate) fn check_bg(inner: &DbInner) -> Result<()> {
    if inner.bg_error_flag.load(Ordering::Acquire) {
        if let Some(e) = inner.state.lock().bg_error.clone() {
            return Err(Error::Background(Arc::new(e)));
        }
    }
    Ok(())
}

/// Whether [`make_room`] has anything to do: a full memtable, a pile-up of
/// L0 runs or a background error. Read without the state lock.
pub(crate) fn needs_room(inner: &DbInner) -> bool {
    let opts = &inner.opts;
    let sv = inner.sv.get();
    let room = sv
        .cfs
        .values()
        .all(|c| c.mem.approximate_memory_usage() < opts.write_buffer_size);
    let l0 = sv
        .cfs
        .values()
        .map(|c| c.version.l0.len())
        .max()
        .unwrap_or(0);
    !(room && l0 < opts.l0_slowdown_runs && !inner.bg_error_flag.load(Ordering::Acquire))
}

/// Switches the memtable when it is full; slows down or stops the writer when
/// the background is behind. Caller holds `wal` with no lone write in flight
/// (a group leader, or a lone writer that waited: `lone_write.rs`).
pub(crate) fn make_room(inner: &Arc<DbInner>, wal: &mut WalState) -> Result<()> {
    let opts = &inner.opts;
    if !needs_room(inner) {
        return Ok(());
    }
    let mut slowed = false;
    let started = Instant::now();
    let mut st = inner.state.lock();
    loop {
        if let Some(e) = st.bg_error.clone() {
            return Err(Error::Background(Arc::new(e)));
        }
        let l0_runs = background::max_l0_runs(inner);
        let full = st
            .active
            .mems
            .values()
            .any(|m| m.approximate_memory_usage() >= opts.write_buffer_size);
        if !slowed && l0_runs >= opts.l0_slowdown_runs && l0_runs < opts.l0_stop_runs {
            // Give compaction a little room without stopping writes (1 ms per group).
            slowed = true;
            drop(st);
            std::thread::sleep(Duration::from_millis(1));
            st = inner.state.lock();
            continue;
        }
        if l0_runs >= opts.l0_stop_runs
            || (full && st.frozen.len() + 1 >= opts.max_write_buffer_number)
        {
            if inner.shutting_down.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            if !opts.background_threads {
                drop(st);
                background::run_until_idle(inner)?;
                st = inner.state.lock();
                continue;
            }
            inner.bg_cv.notify_all();
            inner.bg_cv.wait_for(&mut st, Duration::from_millis(100));
            continue;
        }
        if full {
            drop(st);
            switch_memtable(inner, wal)?;
            st = inner.state.lock();
            continue;
        }
        break;
    }
    if slowed || started.elapsed() > Duration::from_micros(100) {
        inner.stats.add_stall(started.elapsed());
    }
    Ok(())
}

/// Opens a new WAL segment and freezes the current memtables. Caller holds `wal`.
pub(crate) fn switch_memtable(inner: &Arc<DbInner>, wal: &mut WalState) -> Result<()> {
    // Sync the finished segment *before* the next one exists, so that only the
    // last segment can ever have a torn tail (recovery relies on it). A failure
    // means the file's state is unknown: stop.
    // The value files first: the segment's BlobIndex records must not be
    // durable while the values they point at are not.
    if let Some(blobs) = &inner.blobs {
        if let Err(e) = blobs.sync_active() {
            set_bg_error(inner, e.clone());
            return Err(e);
        }
    }
    // An fsync of the old segment may be in flight through its sync handle
    // (`SyncPoint`); this one covers everything appended, so its waiters
    // are released by it at the latest.
    let old_log = wal.number;
    if let Some(old) = wal.writer.as_mut() {
        if let Err(e) = old.sync() {
            set_bg_error(inner, e.clone());
            return Err(e);
        }
        inner.write.sync.synced(WalPos {
            log: old_log,
            offset: old.file_size(),
        });
    }
    let number = inner.versions.new_file_number();
    let path = super::wal_path(&inner.dir, number);
    let writer = (|| {
        let file = if inner.opts.wal_mapped_writes {
            inner.fs.create_mapped(&path)?
        } else {
            inner.fs.create(&path)?
        };
        let w = LogWriter::new(file, number)?;
        let handle = w.sync_handle()?;
        inner.fs.sync_dir(&inner.dir)?;
        Ok::<_, Error>((w, handle))
    })();
    let (writer, handle) = match writer {
        Ok(w) => w,
        Err(e) => {
            set_bg_error(inner, e.clone());
            return Err(e);
        }
    };
    wal.writer = Some(writer);
    wal.number = number;
    inner.write.sync.set_active(number, handle);
    let mut st = inner.state.lock();
    let cfs: Vec<u32> = st.active.mems.keys().copied().collect();
    let old = std::mem::replace(
        &mut st.active,
        super::Generation::new(
            number,
            cfs.into_iter(),
            inner.opts.write_buffer_size,
            &inner.opts,
        ),
    );
    // Even an empty generation is queued: its flush is what retires its WAL segment.
    st.frozen.push_back(old);
    background::install_super_version(inner, &st);
    inner.bg_cv.notify_all();
    Ok(())
}
