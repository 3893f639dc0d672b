//! Scan readahead of value-file records (docs/format-blob.md section 5,
//! "Scan readahead"): reader threads that read records into the value
//! cache ahead of forward scans ([`ReadaheadPool`]), and the scan's side
//! ([`ScanAhead`]), a shadow iterator kept a window of entries ahead.
//!
//! Readahead changes only when a record is read, never what a scan
//! returns: the scan resolves every value through the cache itself, so a
//! job that was dropped or failed costs the scan its own read, as without
//! readahead.

use super::format::BlobIndex;
use super::BlobFile;
use crate::db::DbIterator;
use crate::error::{Error, Result};
use crossbeam::channel::{bounded, Receiver, Sender, TrySendError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Jobs queued per reader thread; a submission to a full queue is dropped
/// (the scan then reads that record itself).
const QUEUE_PER_THREAD: usize = 64;

/// One record to read into the value cache.
struct Job {
    file: Arc<BlobFile>,
    cf: u32,
    key: Vec<u8>,
    idx: BlobIndex,
}

/// The reader threads of a value cache (`Options::blob_readahead_threads`).
///
/// The pool is owned by the [`super::cache::ValueCache`]; a queued job
/// holds its file and so the cache. The threads end when the last job is
/// served after the cache (and with it the queue's only sender) is gone;
/// nothing joins them, because the last handle of the cache may be
/// dropped by one of them.
pub(crate) struct ReadaheadPool {
    jobs: Sender<Job>,
    /// Records the reader threads read (`shale.blob-readahead-reads`).
    reads: Arc<AtomicU64>,
    /// Jobs not queued: the queue was full (`shale.blob-readahead-dropped`).
    dropped: AtomicU64,
}

impl ReadaheadPool {
    /// `threads` reader threads, or `None` for 0.
    pub fn start(threads: usize) -> Result<Option<ReadaheadPool>> {
        if threads == 0 {
            return Ok(None);
        }
        let (tx, rx) = bounded(threads.saturating_mul(QUEUE_PER_THREAD));
        let reads = Arc::new(AtomicU64::new(0));
        for i in 0..threads {
            let (rx, reads) = (rx.clone(), reads.clone());
            std::thread::Builder::new()
                .name(format!("shale-blobra{i}"))
                .spawn(move || serve(&rx, &reads))
                .map_err(|e| Error::io("spawn readahead thread", PathBuf::new(), e))?;
        }
        Ok(Some(ReadaheadPool {
            jobs: tx,
            reads,
            dropped: AtomicU64::new(0),
        }))
    }

    fn submit(&self, job: Job) {
        if let Err(TrySendError::Full(_)) = self.jobs.try_send(job) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// (records read, jobs dropped).
    pub fn stats(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
        )
    }
}

/// A reader thread: serves jobs until the queue is closed and empty.
fn serve(jobs: &Receiver<Job>, reads: &AtomicU64) {
    while let Ok(job) = jobs.recv() {
        let Some(cache) = &job.file.cache else {
            continue;
        };
        let read = || super::reader::read_record(&job.file, job.cf, &job.key, &job.idx);
        if cache.prefetch(job.file.number, job.idx.offset, read) {
            reads.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The scan's side: a shadow iterator (same snapshot, bounds and value-file
/// view, values unresolved) `window` visible entries ahead of the scan.
pub(crate) struct ScanAhead {
    shadow: DbIterator,
    /// Visible entries the shadow is ahead of the scan.
    lead: usize,
    window: usize,
}

impl ScanAhead {
    /// `shadow` rests on the scan's current entry.
    pub fn new(shadow: DbIterator, window: usize) -> ScanAhead {
        ScanAhead {
            shadow,
            lead: 0,
            window,
        }
    }

    /// Keeps the shadow `window` entries ahead, queueing the record of each
    /// BlobIndex it passes. `scan_moved`: the scan moved one entry forward
    /// since the last call. An error ends this scan's readahead (the caller
    /// drops it); the scan meets any real damage on its own reads.
    pub fn step(&mut self, scan_moved: bool) -> Result<()> {
        if scan_moved {
            self.lead = self.lead.saturating_sub(1);
        }
        while self.lead < self.window && self.shadow.valid() {
            self.shadow.next()?;
            if !self.shadow.valid() {
                break;
            }
            self.lead += 1;
            if self.shadow.value_is_blob() {
                self.queue_current();
            }
        }
        Ok(())
    }

    fn queue_current(&self) {
        let Some(idx) = BlobIndex::decode(self.shadow.value()) else {
            return;
        };
        let Some(file) = self.shadow.blob_file(idx.file) else {
            return;
        };
        let Some(pool) = file.cache.as_ref().and_then(|c| c.readahead.as_ref()) else {
            return;
        };
        pool.submit(Job {
            file: file.clone(),
            cf: self.shadow.cf(),
            key: self.shadow.key().to_vec(),
            idx,
        });
    }
}
