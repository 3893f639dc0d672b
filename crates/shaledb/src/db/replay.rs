//! Parallel WAL replay (X-Engine's parallel recovery, seed 002).
//!
//! The recovering thread is the *reader*: it streams records from the WAL
//! segments (`recovery::read_segments`), decodes each into a `WriteBatch`,
//! and packs consecutive batches into jobs (up to `JOB_BATCHES` batches or
//! `JOB_BYTES` bytes) that it sends, in log order, over a bounded channel to
//! `recovery_threads` replay threads. A replay thread inserts a job's batches
//! into the memtables of the generation the job names. The memtables are
//! concurrent and every batch carries its own sequence, so the order in which
//! threads apply batches does not matter: the skiplist orders entries by
//! (user key, sequence), whatever the insertion order.
//!
//! A generation may only be frozen when nothing is still being written into
//! it, so switching is a *barrier*: when the active generation's memory plus
//! the estimated memory of the batches handed out but not yet applied plus
//! the next batch would not fit the switch size (`replay_budget`: the write
//! buffer, or half the recovery memory limit if smaller), the reader stops
//! handing out work, waits until the in-flight count is zero, then freezes
//! the generation exactly as serial replay does (flushing the frozen ones
//! when the next generation would not fit the recovery memory limit or too
//! many pile up) and continues with the new generation. Counting handed-out
//! work is what keeps parallel replay under the same limit as serial replay:
//! the channel can hold several jobs of 256 KiB.
//!
//! Worked example (2 threads, a generation holds ~3 jobs):
//!
//! ```text
//! reader:   J1 J2 J3 | barrier: wait J1..J3 | freeze G1, G2 active | J4 J5 ...
//! thread A: J1    J3                                                 J4 ...
//! thread B:    J2                                                       J5 ...
//! ```
//!
//! Errors: the first failed batch (lowest segment, offset) is recorded; from
//! then on the reader hands out nothing more (its next `apply` reports the
//! error), threads skip queued jobs, and the reader drops the channel so the
//! threads end before `replay_parallel` returns. A reader error (a damaged
//! record) waits for the jobs already handed out first, so that an earlier
//! bad batch wins as it would in serial replay. The in-flight count is
//! decremented by a drop guard, so even a panicking thread cannot leave the
//! reader waiting forever (the panic then resurfaces when the scope joins).
//!
//! Locking: `Shared::progress` guards the in-flight count and the first
//! error; `Shared::done` is signalled when the count reaches zero or an error
//! is recorded. `failed` and `pending_bytes` are lock-free mirrors read on
//! every batch.

use super::recovery::{as_corruption, read_segments, BatchSink, InDoubt, WalRange};
use super::replay_budget::{estimate, ReplayBudget};
use super::{write, DbInner, Generation};
use crate::error::{Error, Result};
use crate::write_batch::WriteBatch;
use crossbeam::channel::{bounded, Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Batches per job: amortizes the channel and the in-flight bookkeeping.
const JOB_BATCHES: usize = 64;
/// Bytes of batch data per job.
const JOB_BYTES: usize = 256 << 10;

/// Consecutive batches of one segment, applied by one replay thread.
struct Job {
    gen: Arc<Generation>,
    segment: u64,
    path: Arc<Path>,
    /// (offset of the record in the segment, batch).
    batches: Vec<(u64, WriteBatch)>,
    /// Estimated memtable bytes of `batches` (`replay_budget::estimate`).
    bytes: usize,
}

#[derive(Default)]
struct Progress {
    /// Jobs sent and not yet finished.
    in_flight: usize,
    /// The earliest failed batch: ((segment, offset), error).
    error: Option<((u64, u64), Error)>,
}

#[derive(Default)]
struct Shared {
    progress: Mutex<Progress>,
    done: Condvar,
    failed: AtomicBool,
    /// Estimated memtable bytes of the batches sent but not yet applied.
    pending_bytes: AtomicUsize,
}

impl Shared {
    fn fail(&self, at: (u64, u64), e: Error) {
        let mut p = self.progress.lock();
        if p.error.as_ref().is_none_or(|(first, _)| at < *first) {
            p.error = Some((at, e));
        }
        self.failed.store(true, Ordering::Release);
        self.done.notify_all();
    }
}

/// Marks a job finished even if applying it panics.
struct JobDone<'a> {
    shared: &'a Shared,
    bytes: usize,
}

impl Drop for JobDone<'_> {
    fn drop(&mut self) {
        self.shared
            .pending_bytes
            .fetch_sub(self.bytes, Ordering::AcqRel);
        let mut p = self.shared.progress.lock();
        p.in_flight = p.in_flight.saturating_sub(1);
        if p.in_flight == 0 {
            self.shared.done.notify_all();
        }
    }
}

fn replay_thread(shared: &Shared, rx: Receiver<Job>) {
    for job in rx.iter() {
        let _done = JobDone {
            shared,
            bytes: job.bytes,
        };
        if shared.failed.load(Ordering::Acquire) {
            continue;
        }
        for (offset, batch) in &job.batches {
            if let Err(e) = write::insert_batch(|cf| job.gen.mems.get(&cf), batch) {
                shared.fail((job.segment, *offset), as_corruption(e, &job.path, *offset));
                break;
            }
        }
    }
}

/// The reader's side: packs batches into jobs, switches generations at barriers.
struct ParallelSink<'a> {
    inner: &'a Arc<DbInner>,
    shared: &'a Shared,
    tx: Sender<Job>,
    gen: Arc<Generation>,
    /// The job being filled (not yet sent).
    job: Option<Job>,
    budget: ReplayBudget,
}

impl ParallelSink<'_> {
    fn send_job(&mut self) -> Result<()> {
        let Some(job) = self.job.take() else {
            return Ok(());
        };
        let bytes = job.bytes;
        let path = job.path.clone();
        self.shared.progress.lock().in_flight += 1;
        self.shared.pending_bytes.fetch_add(bytes, Ordering::AcqRel);
        if self.tx.send(job).is_err() {
            // Every replay thread is gone (only a panic ends them early).
            self.shared.pending_bytes.fetch_sub(bytes, Ordering::AcqRel);
            self.shared.progress.lock().in_flight -= 1;
            return Err(Error::io(
                "replay WAL",
                path.to_path_buf(),
                std::io::Error::other("replay threads exited"),
            ));
        }
        Ok(())
    }

    /// Bytes the active generation holds or will hold once handed-out work lands.
    fn estimated_usage(&self) -> usize {
        let queued = self.job.as_ref().map_or(0, |j| j.bytes);
        self.gen.memory_usage() + self.shared.pending_bytes.load(Ordering::Acquire) + queued
    }
}

impl BatchSink for ParallelSink<'_> {
    fn apply(
        &mut self,
        batch: WriteBatch,
        segment: u64,
        path: &Arc<Path>,
        offset: u64,
    ) -> Result<()> {
        if self.shared.failed.load(Ordering::Acquire) {
            return self.barrier();
        }
        let bytes = estimate(&batch);
        if self.budget.must_switch(self.estimated_usage(), bytes) {
            self.barrier()?;
            let fresh = self
                .budget
                .switch(self.inner, segment)
                .map_err(|e| as_corruption(e, path, offset))?;
            self.gen = Arc::new(fresh);
        }
        if self.job.as_ref().is_some_and(|j| j.segment != segment) {
            self.send_job()?;
        }
        let job = self.job.get_or_insert_with(|| Job {
            gen: self.gen.clone(),
            segment,
            path: path.clone(),
            batches: Vec::with_capacity(JOB_BATCHES),
            bytes: 0,
        });
        job.bytes = job.bytes.saturating_add(bytes);
        job.batches.push((offset, batch));
        if job.batches.len() >= JOB_BATCHES || job.bytes >= JOB_BYTES {
            self.send_job()?;
        }
        Ok(())
    }

    fn barrier(&mut self) -> Result<()> {
        let sent = self.send_job();
        let mut p = self.shared.progress.lock();
        while p.in_flight > 0 {
            self.shared.done.wait(&mut p);
        }
        let result = match &p.error {
            Some((_, e)) => Err(e.clone()),
            None => sent,
        };
        drop(p);
        // Everything handed out is applied: the generation's real size.
        self.budget.observe(self.inner, self.gen.memory_usage());
        result
    }
}

/// Replays `segments` with `threads` replay threads; returns the largest
/// sequence seen (at least `max_seq`). Same results and errors as serial replay.
pub(crate) fn replay_parallel(
    inner: &Arc<DbInner>,
    segments: WalRange<'_>,
    max_seq: u64,
    threads: usize,
    in_doubt: &mut InDoubt,
) -> Result<u64> {
    let shared = Shared::default();
    let gen = Arc::new(inner.state.lock().active.clone());
    let (tx, rx) = bounded::<Job>(threads * 2);
    std::thread::scope(|s| {
        let mut sink = ParallelSink {
            inner,
            shared: &shared,
            tx,
            gen,
            job: None,
            budget: ReplayBudget::new(inner),
        };
        for i in 0..threads {
            let rx = rx.clone();
            let shared = &shared;
            std::thread::Builder::new()
                .name(format!("shale-replay-{i}"))
                .spawn_scoped(s, move || replay_thread(shared, rx))
                .map_err(|e| Error::io("spawn replay thread", inner.dir.clone(), e))?;
        }
        drop(rx);
        let result = read_segments(inner, segments, max_seq, &mut sink, in_doubt);
        // Whatever happened, nothing handed out may still be running when we
        // return; a failed batch before the reader's error wins.
        let waited = sink.barrier();
        drop(sink); // closes the channel: the threads end, the scope joins them
        match (result, waited) {
            (Ok(seq), Ok(())) => Ok(seq),
            (_, Err(e)) | (Err(e), Ok(())) => Err(e),
        }
    })
}
