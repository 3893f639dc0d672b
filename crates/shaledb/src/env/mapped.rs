//! A [`WritableFile`] whose appends are stores into a shared memory map of
//! the file (Linux): the WAL's writer hands each record to the OS without a
//! system call.
//!
//! Why: with one writer every put is one WAL record, and with a buffered
//! file every record is one `write(2)`, which cost ~30% of the writer
//! thread's CPU in `fillrandom` (docs/benchmarks.md, "Mapped WAL"). A store
//! into a `MAP_SHARED` mapping lands in the file's page cache at once, so a
//! record survives `kill -9` of the process as soon as it is copied, which
//! is all [`WritableFile::flush`] promises. Seed 001's contest winners wrote
//! their key logs the same way.
//!
//! How: the file is mapped one [`WINDOW`] (4 MiB) at a time. Before a
//! window is mapped its range is allocated with `fallocate` (mode 0, which
//! also extends the file), so a store never needs a block the file system
//! cannot give: without it, a full disk would surface as `SIGBUS` on a
//! store instead of an error. A file system without `fallocate` (or with a
//! page size that does not divide the window) gets the buffered
//! [`super::posix`] file instead ([`MappedWritable::create`] returns
//! `None`).
//!
//! Worked example: appending 3 MiB, then 2 MiB: `create` allocates and maps
//! `[0, 4 MiB)`; the first append copies 3 MiB into it; the second copies
//! 1 MiB, unmaps the window, allocates and maps `[4, 8 MiB)` and copies the
//! last 1 MiB there. `len()` is 5 MiB, the file is 8 MiB long. Dropping
//! the writer unmaps and truncates the file to 5 MiB. After a crash instead
//! the file keeps the zeros of `[5, 8 MiB)`: the WAL reader ends the log
//! at an all-zero header without calling it torn (`wal/reader.rs`).
//!
//! Durability: `sync` is `fdatasync` on the descriptor. On Linux the page
//! cache is one: a page dirtied through a shared mapping is marked dirty at
//! the first store after each writeback (the kernel write-protects clean
//! mapped pages of a file system with `page_mkwrite`, ext4 and xfs among
//! them), so `fdatasync` writes it like a page dirtied by `write(2)`. The
//! sync handle is a duplicate descriptor, as for the buffered file.
//!
//! Invariant: `window` is `Some` and maps `[window_start, window_start +
//! WINDOW)` of the file, and `window_start <= len <= window_start +
//! WINDOW`. Only the owner (`&mut self`) maps, unmaps or stores.

use super::{FileSync, WritableFile};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes mapped at a time: large enough that the map/unmap syscalls are
/// rare (one per ~30,000 small records), small enough that a crash leaves
/// at most 4 MiB of zeros behind.
pub const WINDOW: usize = 4 << 20;

/// [`WINDOW`] as a file offset.
const WINDOW_U64: u64 = WINDOW as u64;

/// One mapped window; unmapped on drop.
struct Window {
    ptr: NonNull<u8>,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to
// another thread is as safe as moving a `Vec<u8>`.
unsafe impl Send for Window {}
// SAFETY: `&Window` gives no access to the memory (stores go through
// `&mut MappedWritable`), so sharing references is harmless.
unsafe impl Sync for Window {}

impl Window {
    /// Maps `[offset, offset + WINDOW)` of `file` shared, read and write.
    fn map(file: &File, path: &Path, offset: u64) -> Result<Window> {
        let off = libc::off_t::try_from(offset).map_err(|_| {
            Error::io(
                "mmap",
                path,
                std::io::Error::other("offset past off_t::MAX"),
            )
        })?;
        // The offset is a multiple of WINDOW and so of the page size
        // (checked in `create`). The range [offset, offset + WINDOW) is
        // inside the file: `fallocate` extended it first, and nothing
        // truncates the file while it is mapped (only `Drop` does, after
        // unmapping).
        map_shared(file, path, off, WINDOW).map(|ptr| Window { ptr })
    }
}

/// Maps `[off, off + len)` of `file` shared, read and write. The caller
/// keeps the range inside the file for as long as the mapping lives (a
/// store past the end of the file would raise SIGBUS) and unmaps it.
pub(super) fn map_shared(
    file: &File,
    path: &Path,
    off: libc::off_t,
    len: usize,
) -> Result<NonNull<u8>> {
    // SAFETY: a fresh mapping (null hint) of an open descriptor the
    // caller borrows to us; mmap(2) itself refuses an unaligned offset or
    // a zero length (EINVAL), and the result is checked for MAP_FAILED.
    // The mapping outlives the descriptor if the caller closes it, as
    // mmap(2) allows.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::io("mmap", path, std::io::Error::last_os_error()));
    }
    NonNull::new(p.cast::<u8>())
        .ok_or_else(|| Error::io("mmap", path, std::io::Error::other("null mapping")))
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: `ptr` is the start of a live WINDOW-byte mapping made by
        // `Window::map`, unmapped only here. Nothing borrows it: stores copy
        // into it through `&mut MappedWritable` and keep no pointer.
        // Unmapping a dirty shared mapping keeps its pages in the page cache
        // (it does not write them out or drop them).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), WINDOW);
        }
    }
}

/// An append-only file written through a shared memory map (see the
/// module docs).
pub struct MappedWritable {
    file: File,
    path: PathBuf,
    /// The mapped window; `None` only after a failed remap (every later
    /// append then fails).
    window: Option<Window>,
    /// File offset of the window's first byte (a multiple of WINDOW).
    window_start: u64,
    /// Logical length: bytes appended.
    len: u64,
}

/// Allocates `[offset, offset + len)` of the file (extending it).
fn allocate(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::other("range past off_t::MAX"));
    };
    // SAFETY: plain syscall on a descriptor we own; no memory is passed.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, off, n) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// [`allocate`] for a first mapping: `Ok(false)` if the file system cannot
/// preallocate (`EOPNOTSUPP`, `ENOSYS`, `EINVAL`: some network and FUSE
/// file systems), so the caller falls back to `write(2)`; any other error
/// is an I/O error.
pub(super) fn allocate_if_supported(
    file: &File,
    path: &Path,
    offset: u64,
    len: u64,
) -> Result<bool> {
    match allocate(file, offset, len) {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL)
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::io("fallocate", path, e)),
    }
}

impl MappedWritable {
    /// Creates (truncating) `path` and maps its first window; `None` if the
    /// file system cannot preallocate (`fallocate` answers `EOPNOTSUPP`,
    /// as some network and FUSE file systems do) or the page size does not
    /// divide [`WINDOW`]: the caller then uses a buffered file.
    pub fn create(path: &Path) -> Result<Option<MappedWritable>> {
        // SAFETY: sysconf has no memory arguments.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page_ok = usize::try_from(page).is_ok_and(|p| p > 0 && WINDOW.is_multiple_of(p));
        if !page_ok {
            return Ok(None);
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        if !allocate_if_supported(&file, path, 0, WINDOW_U64)? {
            return Ok(None);
        }
        let window = Window::map(&file, path, 0)?;
        Ok(Some(MappedWritable {
            file,
            path: path.to_owned(),
            window: Some(window),
            window_start: 0,
            len: 0,
        }))
    }

    /// Unmaps the full window and maps the next one.
    fn advance(&mut self) -> Result<()> {
        self.window = None;
        let next = self.window_start + WINDOW_U64;
        allocate(&self.file, next, WINDOW_U64)
            .map_err(|e| Error::io("fallocate", &self.path, e))?;
        self.window = Some(Window::map(&self.file, &self.path, next)?);
        self.window_start = next;
        Ok(())
    }
}

impl WritableFile for MappedWritable {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            // The invariant gives 0 <= used <= WINDOW.
            let used = usize::try_from(self.len - self.window_start).unwrap_or(WINDOW);
            if used >= WINDOW {
                self.advance()?;
                continue;
            }
            let Some(window) = &self.window else {
                return Err(Error::io(
                    "mmap",
                    &self.path,
                    std::io::Error::other("no mapped window after a failed remap"),
                ));
            };
            let n = data.len().min(WINDOW - used);
            let (chunk, rest) = data.split_at(n);
            // SAFETY: the window maps WINDOW writable bytes and
            // `used + n <= WINDOW`; `chunk` is ordinary memory that cannot
            // overlap a mapping only this writer knows of.
            unsafe {
                std::ptr::copy_nonoverlapping(chunk.as_ptr(), window.ptr.as_ptr().add(used), n);
            }
            self.len += n as u64;
            data = rest;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // Every appended byte is already in the page cache.
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn sync_handle(&self) -> Result<Option<Arc<dyn FileSync>>> {
        super::posix::sync_handle_of(&self.file, &self.path).map(Some)
    }
}

impl Drop for MappedWritable {
    fn drop(&mut self) {
        self.window = None;
        // Give back the preallocated tail. A failure leaves zeros past the
        // last record, which the WAL reader reads as the log's end.
        if let Err(e) = self.file.set_len(self.len) {
            tracing::warn!(
                "truncating {} to {} bytes: {e}",
                self.path.display(),
                self.len
            );
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index buffers they just built
mod tests {
    use super::*;

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn appends_across_windows_read_back_and_drop_truncates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let mut w = MappedWritable::create(&path)
            .expect("create")
            .expect("the test directory's file system (ext4, tmpfs) preallocates");
        let a = pattern(3 << 20, 1);
        let b = pattern((2 << 20) + 17, 2);
        let c = pattern(WINDOW * 2 + 5, 3); // one append spanning three windows
        w.append(&a).expect("a");
        w.append(&b).expect("b");
        w.append(&c).expect("c");
        w.append(&[]).expect("empty");
        w.flush().expect("flush");
        w.sync().expect("sync");
        let total = (a.len() + b.len() + c.len()) as u64;
        assert_eq!(w.len(), total);
        // While open the file is whole windows long, and the bytes are
        // visible to ordinary reads (the page cache is shared).
        let on_disk = std::fs::read(&path).expect("read");
        assert_eq!(on_disk.len() as u64 % WINDOW_U64, 0);
        assert!(on_disk.len() as u64 >= total);
        let mut want = a.clone();
        want.extend_from_slice(&b);
        want.extend_from_slice(&c);
        assert_eq!(&on_disk[..want.len()], &want[..]);
        assert!(on_disk[want.len()..].iter().all(|&x| x == 0));
        drop(w);
        assert_eq!(std::fs::read(&path).expect("read"), want);
    }

    #[test]
    fn a_window_filled_exactly_maps_the_next_only_when_needed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let mut w = MappedWritable::create(&path)
            .expect("create")
            .expect("the test directory's file system (ext4, tmpfs) preallocates");
        w.append(&vec![7; WINDOW]).expect("fill");
        assert_eq!(w.window_start, 0);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), WINDOW_U64);
        w.append(b"x").expect("one more");
        assert_eq!(w.window_start, WINDOW_U64);
        assert_eq!(w.len(), WINDOW_U64 + 1);
        drop(w);
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(bytes.len(), WINDOW + 1);
        assert_eq!(bytes[WINDOW], b'x');
    }

    #[test]
    fn the_sync_handle_syncs_from_another_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let mut w = MappedWritable::create(&path)
            .expect("create")
            .expect("the test directory's file system (ext4, tmpfs) preallocates");
        let handle = w.sync_handle().expect("handle").expect("some");
        w.append(b"record").expect("append");
        std::thread::spawn(move || handle.sync_data())
            .join()
            .expect("join")
            .expect("sync");
        drop(w);
        assert_eq!(std::fs::read(&path).expect("read"), b"record");
    }

    #[test]
    fn a_log_left_without_drop_reads_back_to_its_last_record() {
        // What a crash leaves: the writer is never dropped, so the file
        // keeps its preallocated zeros; the WAL reader must end the log at
        // the zeros, return every record and not call the tail torn.
        use crate::env::{posix::PosixFs, FileSystem};
        use crate::wal::{LogReader, LogWriter};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("000007.log");
        let fs = PosixFs;
        let file = fs.create_mapped(&path).expect("create");
        let mut w = LogWriter::new(file, 7).expect("writer");
        let records: Vec<Vec<u8>> = (0..2_000u32)
            .map(|i| pattern(100 + (i as usize * 37) % 5_000, i as u8))
            .collect();
        for r in &records {
            w.add_record(r).expect("add");
        }
        w.flush().expect("flush");
        let end = w.file_size();
        std::mem::forget(w); // no unmap, no truncate: as after kill -9
        let size = std::fs::metadata(&path).expect("stat").len();
        assert!(
            size > end && size.is_multiple_of(WINDOW_U64),
            "size {size}, end {end}"
        );
        let mut r = LogReader::new(fs.open_sequential(&path).expect("open"), path.clone(), 7)
            .expect("reader");
        let mut got = Vec::new();
        while let Some((_, rec)) = r.read_record().expect("read") {
            got.push(rec);
        }
        assert_eq!(got, records);
        assert_eq!(r.valid_end(), end);
        assert!(!r.hit_torn_tail());
    }
}
