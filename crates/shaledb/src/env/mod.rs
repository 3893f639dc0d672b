//! All file access goes through [`FileSystem`], so tests can swap in an
//! in-memory file system that simulates power loss ([`mem::MemFs`]) or one that
//! fails chosen operations ([`fault::FaultFs`]).
//!
//! Durability model every implementation follows (and the engine relies on):
//! - bytes written are visible to readers at once, but survive power loss only
//!   after `sync` on that file;
//! - a created, removed or renamed name survives power loss only after
//!   `sync_dir` on its directory;
//! - `rename` is atomic: after a crash a name points to the old or the new file.
//!
//! Error policy: an I/O error from `sync` is sticky in the engine (the file's
//! state is unknown after a failed fsync), so callers never retry a sync.

#[cfg(target_os = "linux")]
pub mod direct;
pub mod fault;
#[cfg(target_os = "linux")]
pub mod mapped;
pub mod mem;
pub mod posix;
#[cfg(target_os = "linux")]
pub mod region;

use crate::error::Result;
use std::path::Path;
use std::sync::Arc;

/// A file written front to back (WAL segments, manifest, temporary files).
pub trait WritableFile: Send + Sync {
    /// Appends bytes to the file's buffer.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the OS: after this they survive kill -9 of the process.
    fn flush(&mut self) -> Result<()>;
    /// Makes everything appended durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far (including buffered ones).
    fn len(&self) -> u64;
    /// Writes everything appended to the file itself, so that the file
    /// holds every byte (not necessarily durably); no append follows. A
    /// staged value file (`blob/staged.rs`) waits for its writer thread
    /// and removes its stage file here. Default: `flush`.
    fn complete(&mut self) -> Result<()> {
        self.flush()
    }
    /// True if nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A second handle that fsyncs this file from any thread while the
    /// writer goes on appending: the WAL's group commit fsyncs one group
    /// through it while the next group is written (docs/architecture.md,
    /// "Pipelined group commit"). Default: none, and the caller syncs
    /// through [`WritableFile::sync`] instead.
    fn sync_handle(&self) -> Result<Option<Arc<dyn FileSync>>> {
        Ok(None)
    }
}

/// Fsyncs one file without the writer's `&mut` (see
/// [`WritableFile::sync_handle`]).
pub trait FileSync: Send + Sync {
    /// Makes durable at least every byte flushed to the OS before this call
    /// began (fdatasync). Bytes still in the writer's own buffer are not
    /// covered: the caller flushes first.
    fn sync_data(&self) -> Result<()>;
}

/// A file read at offsets; the data files read by many threads at once.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` from `offset`; a short file is an `UnexpectedEof` I/O error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Reads exactly `len` bytes at `offset` into a new vector. The default
    /// zero-fills it and calls `read_exact_at`; the POSIX file reads into
    /// uninitialised capacity instead (a block read on a cache miss then
    /// saves a memset of the block).
    fn read_vec_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read_exact_at(offset, &mut v)?;
        Ok(v)
    }
    /// Current size in bytes.
    fn len(&self) -> Result<u64>;
    /// True if the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// A data file of extent slots: written at offsets, read concurrently.
pub trait ExtentFile: RandomAccessFile {
    /// Writes all of `data` at `offset` (the file grows as needed).
    fn write_all_at(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// Makes all writes so far durable.
    fn sync(&self) -> Result<()>;
    /// Gives the storage of `[offset, offset + len)` back to the file
    /// system; the range then reads as zeros and the file keeps its size.
    /// Called for freed extent slots, which nothing reads until they are
    /// written again. Default: nothing (the bytes stay allocated).
    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        let _ = (offset, len);
        Ok(())
    }
}

/// Sequential reader (WAL and manifest replay).
pub trait SequentialFile: Send {
    /// Reads up to `buf.len()` bytes; returns 0 at end of file.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize>;
}

/// A held advisory lock; released on drop.
pub trait FileLock: Send + Sync {}

/// The file system the engine runs on.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates (or truncates) a file for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates (or truncates) a file for appending that bypasses the page
    /// cache where the file system supports it (value files with
    /// `Options::blob_direct_io`). The file may hold up to 4 KiB of zeros
    /// past [`WritableFile::len`] until it is truncated. Default: `create`.
    fn create_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    /// Creates (or truncates) a file for appending whose appends reach the
    /// OS without a system call where the platform allows it (a shared
    /// memory map over preallocated space, `env/mapped.rs`): WAL segments
    /// with `Options::wal_mapped_writes`. [`WritableFile::flush`] is then
    /// free. While the file is open, and after a crash, it may hold up to
    /// 4 MiB of zeros past [`WritableFile::len`]; dropping the handle
    /// truncates them. Default: `create`.
    fn create_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    /// Opens an existing file for appending at its end (WAL segment reuse).
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens a file for sequential reading.
    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>>;
    /// Opens a file for reads at offsets.
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Opens a file for reads at offsets that bypass the page cache where
    /// the file system supports it (value files with
    /// `Options::blob_direct_reads`). Default: `open_random`.
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random(path)
    }
    /// Opens (creating if missing) a data file for offset writes and reads.
    fn open_extent_file(&self, path: &Path) -> Result<Arc<dyn ExtentFile>>;
    /// Creates (or truncates) a file for positioned writes that bypass the
    /// page cache where the file system supports it (the active value file
    /// with `Options::blob_direct_io`, written by `blob/staged.rs`). Every
    /// write's offset, length and buffer address must then be multiples of
    /// 4 KiB; reads through this handle are not used. Default: an extent
    /// file truncated to zero.
    fn create_direct_extent(&self, path: &Path) -> Result<Arc<dyn ExtentFile>> {
        let f = self.open_extent_file(path)?;
        self.truncate(path, 0)?;
        Ok(f)
    }
    /// Maps `[base, base + len)` of the existing file `path` shared for
    /// positioned stores (`region.rs`; the staged value file's ring), or
    /// `None` where stores must go through `ExtentFile::write_all_at`
    /// (the default: the in-memory and fault-injecting file systems, whose
    /// writes must stay visible to them).
    #[cfg(target_os = "linux")]
    fn map_region(&self, path: &Path, base: u64, len: u64) -> Result<Option<region::MappedRegion>> {
        let _ = (path, base, len);
        Ok(None)
    }
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Names (not paths) of the entries of a directory.
    fn list_dir(&self, path: &Path) -> Result<Vec<String>>;
    /// True if the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Size of a file in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Makes the directory's entries (creates, removes, renames) durable.
    fn sync_dir(&self, path: &Path) -> Result<()>;
    /// Takes an exclusive lock on `path` (created if missing); `Error::Locked` if held elsewhere.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Truncates a file to `len` bytes (torn WAL tails).
    fn truncate(&self, path: &Path, len: u64) -> Result<()>;
}

/// Reads a whole small file (CURRENT, OPTIONS).
pub fn read_to_vec(fs: &dyn FileSystem, path: &Path) -> Result<Vec<u8>> {
    let mut f = fs.open_sequential(path)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
}

/// Writes `data` to `path` atomically and durably: write a temp file, fsync
/// it, rename over `path`, fsync the directory. After a crash `path` holds
/// either its old content or `data`, never a mix.
pub fn write_file_atomic(fs: &dyn FileSystem, dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = fs.create(&tmp)?;
    f.append(data)?;
    f.sync()?;
    drop(f);
    fs.rename(&tmp, &dir.join(name))?;
    fs.sync_dir(dir)
}
