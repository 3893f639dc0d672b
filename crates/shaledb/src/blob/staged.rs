//! Staged direct writes of the active value file: layout, invariant and
//! crash argument in docs/format-blob.md, section 6.
//!
//! The group leader appends a group's records with [`StagedWriter`]'s
//! `append`: one buffered positioned write to the stage file (the bytes are
//! then in the page cache, which survives kill -9) and a copy into the
//! current aligned [`Piece`]. A full piece goes to the file's writer thread,
//! which writes it to the value file with `O_DIRECT`, publishes the written
//! length ([`StageView::written`]) and punches the stage pages the value
//! file now holds. No put waits for the device; a synced group waits for
//! the writer thread and fdatasyncs the value file.
//!
//! Worked example (pieces of 1 MiB, [`ALIGN`] = 4 KiB): groups of 16 x
//! 4,120-byte records fill piece 0 = value-file bytes `[0, 1 MiB)`; the
//! 16th group overflows it, so piece 0 is queued and piece 1 starts at
//! 1 MiB with the overflow. A `sync=true` group at logical length
//! 1,100,000 queues piece 1 (`[1 MiB, 1,100,000)`, written zero-padded to
//! 1,101,824) and piece 2 starts at 1,097,728 (the last partial block)
//! carrying bytes `[1,097,728, 1,100,000)`, which it writes again, whole,
//! with what follows.
//!
//! Stage format 2 (section 6.1, `stage_ring.rs`) writes value-file byte `o`
//! to ring offset `o mod R` instead and punches nothing: after each piece
//! the writer thread writes the new mark into the stage header and then
//! publishes it as `ring_free`; the leader writes value-file bytes below
//! `ring_free + R` only (it waits otherwise). A sealed file's ring is kept
//! in the blob store's [`SpareRing`] and renamed for the next active file.
//!
//! Which lock guards what: `IoShared::state` guards the queue, the free
//! pieces, the busy flag and the sticky error. The leader (holding the blob
//! store's `active` lock) is the only writer of the stage file beyond the
//! written length (format 2: of the ring) and of the current piece; the
//! writer thread is the only writer of the value file, of `written`, of the
//! punched range, of the mark and of `ring_free`. The [`SpareRing`]'s own
//! mutex guards the kept ring's path.

use super::format;
use super::stage_ring::{encode_mark, encode_ring_header, ring_spans, MARK_AT};
use crate::env::{ExtentFile, FileSystem, WritableFile};
use crate::error::{Error, Result};
use crate::util::coding::mask_crc;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Alignment of every value-file write (offset, length, buffer address).
pub(crate) const ALIGN: usize = 4096;
/// Bytes per piece: one `O_DIRECT` write of the writer thread.
pub(crate) const PIECE: usize = 1 << 20;
/// Pieces queued before an append waits for the writer thread (32 MiB).
const QUEUED_MAX: usize = 32;
/// The stage file's header; value-file byte `o` is at stage offset `o + STAGE_HEADER`.
pub(crate) const STAGE_HEADER: u64 = 4096;
/// Stage pages are punched in runs of at least this many bytes.
const PUNCH_MIN: u64 = 4 << 20;
/// Magic at the start of a stage file.
pub(crate) const STAGE_MAGIC: &[u8; 8] = b"SHALESTG";
/// Stage file format version.
pub(crate) const STAGE_VERSION: u32 = 1;
/// Bytes of the stage header that carry data (the rest is zeros).
pub(crate) const STAGE_HEADER_USED: usize = 24;
/// Where the blob store keeps a sealed file's ring for the next active
/// file (format 2): the path of the kept stage file.
pub(crate) type SpareRing = Arc<Mutex<Option<PathBuf>>>;
/// File name suffix of stage files.
pub(crate) const STAGE_SUFFIX: &str = "stage";

/// `dir/NNNNNN.stage` of value file `number`.
pub(crate) fn stage_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.{STAGE_SUFFIX}"))
}

/// The value-file number of a stage file name.
pub(crate) fn parse_stage_name(name: &str) -> Option<u64> {
    let (num, ext) = name.split_once('.')?;
    (ext == STAGE_SUFFIX && !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()))
        .then(|| num.parse().ok())
        .flatten()
}

/// The stage header (docs/format-blob.md, section 6), padded to [`STAGE_HEADER`].
pub(crate) fn encode_stage_header(number: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(ALIGN);
    h.extend_from_slice(STAGE_MAGIC);
    h.extend_from_slice(&STAGE_VERSION.to_le_bytes());
    h.extend_from_slice(&number.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&h));
    h.extend_from_slice(&crc.to_le_bytes());
    h.resize(ALIGN, 0);
    h
}

/// An aligned buffer holding value-file bytes `[start, start + len)`;
/// `start` is a multiple of [`ALIGN`] and `len <= PIECE`.
struct Piece {
    store: Vec<u8>,
    /// Offset in `store` of the aligned start.
    off: usize,
    start: u64,
    len: usize,
}

impl Piece {
    fn new(start: u64) -> Piece {
        let store = vec![0u8; PIECE + ALIGN];
        let off = store.as_ptr().align_offset(ALIGN).min(ALIGN);
        Piece {
            store,
            off,
            start,
            len: 0,
        }
    }

    /// A placeholder without storage (never pushed to).
    fn empty() -> Piece {
        Piece {
            store: Vec::new(),
            off: 0,
            start: 0,
            len: 0,
        }
    }

    /// Copies as much of `data` as fits; returns how much.
    fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(PIECE - self.len);
        let at = self.off + self.len;
        match (self.store.get_mut(at..at + n), data.get(..n)) {
            (Some(dst), Some(src)) => {
                dst.copy_from_slice(src);
                self.len += n;
                n
            }
            _ => 0, // off + PIECE <= store.len(): not reached
        }
    }

    fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    /// The last `n` bytes held.
    fn tail(&self, n: usize) -> &[u8] {
        let end = self.off + self.len;
        self.store
            .get(end - n.min(self.len)..end)
            .unwrap_or_default()
    }

    /// The held bytes zero-padded to whole blocks (what one aligned write takes).
    fn padded(&mut self) -> &[u8] {
        let end = self.len.div_ceil(ALIGN) * ALIGN;
        if let Some(pad) = self.store.get_mut(self.off + self.len..self.off + end) {
            pad.fill(0);
        }
        self.store.get(self.off..self.off + end).unwrap_or_default()
    }
}

/// What readers of the active value file need: the stage file, and how
/// much of the value file the writer thread has written.
pub(crate) struct StageView {
    pub stage: Arc<dyn ExtentFile>,
    written: AtomicU64,
    /// Format 2: the ring size (value-file byte `o` at ring offset `o mod
    /// ring`); 0 for format 1 (at offset `o`).
    pub ring: u64,
}

impl StageView {
    /// A view with a fixed written length (tests of the read path).
    #[cfg(test)]
    pub(crate) fn fixed(stage: Arc<dyn ExtentFile>, written: u64) -> StageView {
        StageView {
            stage,
            written: AtomicU64::new(written),
            ring: 0,
        }
    }

    /// Value-file bytes `[0, written)` are in the value file (kill -9 safe);
    /// a record ending past it is read from the stage file.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }
}

struct IoState {
    queue: VecDeque<Piece>,
    free: Vec<Piece>,
    /// The writer thread is writing a piece it took off the queue.
    busy: bool,
    /// The first error of the writer thread; sticky.
    error: Option<Error>,
    stop: bool,
}

/// State shared by the leader and the writer thread.
struct IoShared {
    file: Arc<dyn ExtentFile>,
    view: Arc<StageView>,
    state: Mutex<IoState>,
    /// Signalled when the queue, the free list or `busy` changes.
    cv: Condvar,
    /// Stage bytes `[0, punched)` of the value file's range were punched (writer thread only).
    punched: AtomicU64,
    /// `state.error` is set: lets [`IoShared::sticky`], called once per
    /// write group, skip the state lock while all is well.
    failed: AtomicBool,
    /// The value file's number (in the mark's checksum).
    number: u64,
    /// Format 2: ring bytes of value-file offsets below this may be reused
    /// (the mark in the stage header says so already); writer thread only.
    ring_free: AtomicU64,
}

impl IoShared {
    fn run(&self) {
        loop {
            let mut piece = {
                let mut st = self.state.lock();
                loop {
                    if st.stop {
                        return;
                    }
                    if let Some(p) = st.queue.pop_front() {
                        st.busy = st.error.is_none();
                        if st.busy {
                            break p;
                        }
                        // After an error nothing more is written: the stage
                        // file keeps the bytes for recovery.
                        st.free.push(p);
                        self.cv.notify_all();
                        continue;
                    }
                    self.cv.wait(&mut st);
                }
            };
            let res = self.write_piece(&mut piece);
            let mut st = self.state.lock();
            st.busy = false;
            if let Err(e) = res {
                st.error.get_or_insert(e);
                self.failed.store(true, Ordering::Release);
            }
            st.free.push(piece);
            self.cv.notify_all();
        }
    }

    /// Writes one piece to the value file, publishes the written length,
    /// then punches whole stage pages below it (readers that read a punched
    /// page see the record fail its check and retry from the value file).
    fn write_piece(&self, piece: &mut Piece) -> Result<()> {
        let (start, end) = (piece.start, piece.end());
        self.file.write_all_at(start, piece.padded())?;
        self.view.written.fetch_max(end, Ordering::AcqRel);
        let upto = end / ALIGN as u64 * ALIGN as u64;
        if self.view.ring > 0 {
            // The mark first, then the leader may reuse the ring below it
            // (invariant 2 of docs/format-blob.md section 6.1).
            if upto > self.ring_free.load(Ordering::Relaxed) {
                let mark = encode_mark(self.number, upto);
                self.view.stage.write_all_at(MARK_AT, &mark)?;
                self.ring_free.store(upto, Ordering::Release);
            }
            return Ok(());
        }
        let punched = self.punched.load(Ordering::Relaxed);
        if upto >= punched + PUNCH_MIN {
            self.view
                .stage
                .punch_hole(STAGE_HEADER + punched, upto - punched)?;
            self.punched.store(upto, Ordering::Relaxed);
        }
        Ok(())
    }

    fn sticky(&self) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match &self.state.lock().error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Queues `piece` and returns an empty one starting at `start`,
    /// waiting while [`QUEUED_MAX`] pieces are queued.
    fn exchange(&self, piece: Piece, start: u64) -> Result<Piece> {
        let mut st = self.state.lock();
        while st.queue.len() >= QUEUED_MAX && st.error.is_none() {
            self.cv.wait(&mut st);
        }
        if let Some(e) = &st.error {
            return Err(e.clone());
        }
        st.queue.push_back(piece);
        let mut next = st.free.pop().unwrap_or_else(|| Piece::new(start));
        drop(st);
        self.cv.notify_all();
        next.start = start;
        next.len = 0;
        Ok(next)
    }

    /// Format 2: waits until the ring may take value-file bytes up to
    /// `end` (every byte below `end - ring` is in the value file and
    /// marked). The caller queued every full piece, and appends at most
    /// half a ring at a time, so the queued pieces suffice.
    fn wait_ring(&self, end: u64) -> Result<()> {
        let room = |this: &IoShared| this.ring_free.load(Ordering::Acquire) + this.view.ring;
        if end <= room(self) {
            return Ok(());
        }
        let mut st = self.state.lock();
        while end > room(self) && st.error.is_none() {
            self.cv.wait(&mut st);
        }
        match &st.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Waits until the writer thread has written every queued piece.
    fn wait_idle(&self) -> Result<()> {
        let mut st = self.state.lock();
        while (!st.queue.is_empty() || st.busy) && st.error.is_none() {
            self.cv.wait(&mut st);
        }
        match &st.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

/// The active value file, written through its stage file (the module doc).
pub(crate) struct StagedWriter {
    io: Arc<IoShared>,
    cur: Piece,
    /// `cur` holds bytes not yet queued (else a sync queues nothing).
    cur_dirty: bool,
    len: u64,
    stage_path: PathBuf,
    fs: Arc<dyn FileSystem>,
    thread: Option<JoinHandle<()>>,
    /// The stage file was removed: the value file holds everything.
    completed: bool,
    /// Format 2: where a completed file leaves its ring.
    spare: Option<SpareRing>,
    /// Format 2: the ring mapped shared (`env/region.rs`), where the file
    /// system allows: a ring store is then a copy, not a `pwrite`.
    #[cfg(target_os = "linux")]
    ring_map: Option<crate::env::region::MappedRegion>,
}

impl StagedWriter {
    /// Creates value file `number` (empty: its header is the first append)
    /// and its stage file with a synced header, fsyncs the directory, and
    /// starts the writer thread. `ring`: stage format 2 with a ring of that
    /// many bytes, renaming the kept ring of `spare` if there is one
    /// (docs/format-blob.md section 6.1); `None`: format 1.
    pub fn create(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        number: u64,
        ring: Option<(u64, SpareRing)>,
    ) -> Result<StagedWriter> {
        let file = fs.create_direct_extent(&format::blob_path(dir, number))?;
        let stage_path = stage_path(dir, number);
        let kept = ring.as_ref().and_then(|(_, spare)| spare.lock().take());
        let stage = match kept {
            // The old content stays: recovery checks every value against
            // its key-log checksum, so stale bytes are never taken.
            Some(old) if fs.rename(&old, &stage_path).is_ok() => {
                fs.open_extent_file(&stage_path)?
            }
            _ => {
                let s = fs.open_extent_file(&stage_path)?;
                fs.truncate(&stage_path, 0)?;
                s
            }
        };
        let (size, spare) = match ring {
            Some((size, spare)) => (size, Some(spare)),
            None => (0, None),
        };
        let header = if size > 0 {
            encode_ring_header(number, size)
        } else {
            encode_stage_header(number)
        };
        stage.write_all_at(0, &header)?;
        stage.sync()?;
        fs.sync_dir(dir)?;
        #[cfg(target_os = "linux")]
        let ring_map = match size {
            0 => None,
            _ => fs.map_region(&stage_path, STAGE_HEADER, size)?,
        };
        let io = Arc::new(IoShared {
            file,
            view: Arc::new(StageView {
                stage,
                written: AtomicU64::new(0),
                ring: size,
            }),
            state: Mutex::new(IoState {
                queue: VecDeque::new(),
                free: Vec::new(),
                busy: false,
                error: None,
                stop: false,
            }),
            cv: Condvar::new(),
            punched: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            number,
            ring_free: AtomicU64::new(0),
        });
        let worker = Arc::clone(&io);
        let thread = std::thread::Builder::new()
            .name("shale-blobw".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::io("spawn", stage_path.clone(), e))?;
        Ok(StagedWriter {
            io,
            cur: Piece::new(0),
            cur_dirty: false,
            len: 0,
            stage_path,
            fs: Arc::clone(fs),
            thread: Some(thread),
            completed: false,
            spare,
            #[cfg(target_os = "linux")]
            ring_map,
        })
    }

    /// What readers of this file need while it is written.
    pub fn view(&self) -> Arc<StageView> {
        Arc::clone(&self.io.view)
    }

    /// Queues the current piece; the next starts at the last partial block.
    fn queue_current(&mut self) -> Result<()> {
        let end = self.cur.end();
        let start = end / ALIGN as u64 * ALIGN as u64;
        let carry = usize::try_from(end - start).unwrap_or(0);
        let tail = self.cur.tail(carry).to_vec();
        let full = std::mem::replace(&mut self.cur, Piece::empty());
        self.cur = self.io.exchange(full, start)?;
        self.cur.push(&tail);
        self.cur_dirty = false;
        Ok(())
    }

    /// Copies `data` into pieces, queueing each full one, and advances the
    /// logical length (the caller staged the bytes first).
    fn push(&mut self, data: &[u8]) -> Result<()> {
        let mut rest = data;
        while !rest.is_empty() {
            let n = self.cur.push(rest);
            rest = rest.get(n..).unwrap_or_default();
            self.cur_dirty = true;
            if self.cur.len == PIECE {
                self.queue_current()?;
            }
        }
        self.len += data.len() as u64;
        Ok(())
    }

    /// Format 2: writes ring bytes at stage offset `at`, through the
    /// mapping if there is one (same effect as the `pwrite`: the bytes are
    /// in the stage file's page cache when this returns).
    fn ring_store(&self, at: u64, data: &[u8]) -> Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(m) = &self.ring_map {
            return m.write_at(at, data);
        }
        self.io.view.stage.write_all_at(at, data)
    }

    fn stop_thread(&mut self) {
        self.io.state.lock().stop = true;
        self.io.cv.notify_all();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::warn!("value-file writer thread panicked");
            }
        }
    }
}

impl WritableFile for StagedWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.completed {
            return Err(Error::InvalidArgument(
                "append to a completed value file".into(),
            ));
        }
        self.io.sticky()?;
        let ring = self.io.view.ring;
        if ring == 0 {
            self.io
                .view
                .stage
                .write_all_at(STAGE_HEADER + self.len, data)?;
            return self.push(data);
        }
        // Half a ring at a time: the pieces queued before each wait hold
        // what the writer thread must write for the wait to end.
        let half = usize::try_from(ring / 2).unwrap_or(usize::MAX);
        for chunk in data.chunks(half) {
            self.io.wait_ring(self.len + chunk.len() as u64)?;
            let [(at0, len0), (at1, _)] = ring_spans(self.len, chunk.len(), ring);
            let (first, wrapped) = chunk.split_at(len0.min(chunk.len()));
            self.ring_store(at0, first)?;
            if !wrapped.is_empty() {
                self.ring_store(at1, wrapped)?;
            }
            self.push(chunk)?;
        }
        Ok(())
    }

    /// Free: the stage write in `append` handed the bytes to the OS.
    fn flush(&mut self) -> Result<()> {
        self.io.sticky()
    }

    fn sync(&mut self) -> Result<()> {
        if self.cur_dirty {
            self.queue_current()?;
        }
        self.io.wait_idle()?;
        self.io.file.sync()
    }

    fn len(&self) -> u64 {
        self.len
    }

    /// Writes everything to the value file, stops the writer thread and
    /// removes the stage file, or with format 2 keeps it as the spare ring
    /// (the value file then holds every byte; it is not fsynced here).
    fn complete(&mut self) -> Result<()> {
        if self.completed {
            return Ok(());
        }
        if self.cur_dirty {
            self.queue_current()?;
        }
        self.io.wait_idle()?;
        self.stop_thread();
        // Unmapped before the ring is kept or removed.
        #[cfg(target_os = "linux")]
        {
            self.ring_map = None;
        }
        // A sealed file waits for its fsync without its 1 MiB pieces.
        self.io.state.lock().free.clear();
        self.cur = Piece::empty();
        // Format 2 keeps the ring for the next active file (section 6.1):
        // the value file holds every byte now, so the ring is not needed
        // for this file's recovery.
        let keep = self.spare.as_ref().is_some_and(|s| {
            s.lock().get_or_insert_with(|| self.stage_path.clone()) == &self.stage_path
        });
        if !keep {
            self.fs.remove_file(&self.stage_path)?;
        }
        self.completed = true;
        Ok(())
    }
}

impl Drop for StagedWriter {
    /// Without `complete` (an error, or the database dropped without
    /// close) the stage file stays and the next open merges it.
    fn drop(&mut self) {
        self.stop_thread();
    }
}
