//! The real file system (Linux/Unix), using positional I/O and `flock`.

use super::{
    ExtentFile, FileLock, FileSync, FileSystem, RandomAccessFile, SequentialFile, WritableFile,
};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Size of the user-space write buffer of a [`PosixWritable`].
const WRITE_BUFFER: usize = 64 * 1024;

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

impl PosixFs {
    /// Returns the shared instance as a trait object.
    pub fn arc() -> Arc<dyn FileSystem> {
        Arc::new(PosixFs)
    }
}

struct PosixWritable {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    len: u64,
}

impl WritableFile for PosixWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.flush()?;
            if data.len() > WRITE_BUFFER {
                return self
                    .file
                    .write_all(data)
                    .map_err(|e| Error::io("write", &self.path, e));
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(|e| Error::io("write", &self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn sync_handle(&self) -> Result<Option<Arc<dyn FileSync>>> {
        sync_handle_of(&self.file, &self.path).map(Some)
    }
}

/// The fsync side of a [`PosixWritable`] (and of a mapped file).
struct PosixSync {
    file: File,
    path: PathBuf,
}

/// A handle that fdatasyncs `file` from any thread: a duplicated descriptor
/// of the same open file, so a sync through it covers every write made
/// through `file` (by `write(2)` or through a shared mapping) before it.
pub(super) fn sync_handle_of(file: &File, path: &Path) -> Result<Arc<dyn FileSync>> {
    let file = file.try_clone().map_err(|e| Error::io("dup", path, e))?;
    Ok(Arc::new(PosixSync {
        file,
        path: path.to_owned(),
    }))
}

impl FileSync for PosixSync {
    fn sync_data(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }
}

struct PosixRandom {
    file: File,
    path: PathBuf,
}

impl RandomAccessFile for PosixRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("pread", &self.path, e))
    }
    fn read_vec_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let err = |e| Error::io("pread", &self.path, e);
        let mut v: Vec<u8> = Vec::with_capacity(len);
        while v.len() < len {
            let at = offset
                .checked_add(v.len() as u64)
                .and_then(|o| libc::off_t::try_from(o).ok())
                .ok_or_else(|| err(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
            let want = len - v.len();
            let spare = v.spare_capacity_mut();
            // SAFETY: `spare` is writable memory owned by `v` of at least
            // `want` bytes (capacity >= len); pread writes at most `want`
            // bytes there and nothing reads them before it returns.
            let n =
                unsafe { libc::pread(self.file.as_raw_fd(), spare.as_mut_ptr().cast(), want, at) };
            match usize::try_from(n) {
                Ok(0) => return Err(err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof))),
                Ok(n) => {
                    let new_len = v.len() + n.min(want);
                    // SAFETY: pread initialised the first `n` (<= `want`)
                    // bytes after the old length.
                    unsafe { v.set_len(new_len) };
                }
                Err(_) => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(err(e));
                    }
                }
            }
        }
        Ok(v)
    }
    fn len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| Error::io("fstat", &self.path, e))?
            .len())
    }
}

impl ExtentFile for PosixRandom {
    fn write_all_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, offset)
            .map_err(|e| Error::io("pwrite", &self.path, e))
    }
    fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }
    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        let bad = || {
            Error::io(
                "fallocate",
                &self.path,
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            )
        };
        let off = libc::off_t::try_from(offset).map_err(|_| bad())?;
        let len = libc::off_t::try_from(len).map_err(|_| bad())?;
        // SAFETY: fallocate takes a file descriptor this struct owns (open
        // for its lifetime) and plain integers; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                len,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            // A file system without hole punching keeps the bytes: only space is lost.
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
            _ => Err(Error::io("fallocate", &self.path, e)),
        }
    }
}

struct PosixSequential {
    file: File,
    path: PathBuf,
}

impl SequentialFile for PosixSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        self.file
            .read(buf)
            .map_err(|e| Error::io("read", &self.path, e))
    }
}

struct PosixLock {
    _file: File,
}
impl FileLock for PosixLock {}

impl FileSystem for PosixFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(PosixWritable {
            file,
            path: path.to_owned(),
            buf: Vec::with_capacity(WRITE_BUFFER),
            len: 0,
        }))
    }

    #[cfg(target_os = "linux")]
    fn create_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        match super::direct::DirectWritable::create(path)? {
            Some(w) => Ok(Box::new(w)),
            None => self.create(path),
        }
    }

    #[cfg(target_os = "linux")]
    fn map_region(
        &self,
        path: &Path,
        base: u64,
        len: u64,
    ) -> Result<Option<super::region::MappedRegion>> {
        super::region::MappedRegion::map(path, base, len)
    }

    #[cfg(target_os = "linux")]
    fn create_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        match super::mapped::MappedWritable::create(path)? {
            Some(w) => Ok(Box::new(w)),
            None => self.create(path),
        }
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("fstat", path, e))?
            .len();
        Ok(Box::new(PosixWritable {
            file,
            path: path.to_owned(),
            buf: Vec::with_capacity(WRITE_BUFFER),
            len,
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        Ok(Box::new(PosixSequential {
            file,
            path: path.to_owned(),
        }))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        Ok(Arc::new(PosixRandom {
            file,
            path: path.to_owned(),
        }))
    }

    #[cfg(target_os = "linux")]
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        match super::direct::DirectRandom::open(path)? {
            Some(r) => Ok(Arc::new(r)),
            None => self.open_random(path),
        }
    }

    #[cfg(target_os = "linux")]
    fn create_direct_extent(&self, path: &Path) -> Result<Arc<dyn ExtentFile>> {
        match super::direct::create_direct_file(path)? {
            Some(file) => Ok(Arc::new(PosixRandom {
                file,
                path: path.to_owned(),
            })),
            // A file system without O_DIRECT (tmpfs): the page cache then.
            None => {
                let f = self.open_extent_file(path)?;
                self.truncate(path, 0)?;
                Ok(f)
            }
        }
    }

    fn open_extent_file(&self, path: &Path) -> Result<Arc<dyn ExtentFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        Ok(Arc::new(PosixRandom {
            file,
            path: path.to_owned(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io("unlink", path, e))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| Error::io("mkdir", path, e))
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| Error::io("readdir", path, e))? {
            let entry = entry.map_err(|e| Error::io("readdir", path, e))?;
            if let Some(name) = entry.file_name().to_str() {
                out.push(name.to_owned());
            }
        }
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path)
            .map_err(|e| Error::io("stat", path, e))?
            .len())
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        File::open(path)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("fsync dir", path, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        // SAFETY: flock is called on a file descriptor owned by `file`, which
        // stays open for as long as the returned lock (the lock dies with it).
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Locked(path.to_owned()));
            }
            return Err(Error::io("flock", path, err));
        }
        Ok(Box::new(PosixLock { _file: file }))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        f.set_len(len)
            .map_err(|e| Error::io("ftruncate", path, e))?;
        f.sync_all().map_err(|e| Error::io("fsync", path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_vec_at_matches_read_exact_at_and_reports_eof() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).expect("write");
        let f = PosixRandom {
            file: File::open(&p).expect("open"),
            path: p.clone(),
        };
        for (off, len) in [(0usize, 0usize), (0, 10_000), (123, 4096), (9_999, 1)] {
            let v = f.read_vec_at(off as u64, len).expect("read");
            assert_eq!(v, data[off..off + len]);
            let mut b = vec![0u8; len];
            f.read_exact_at(off as u64, &mut b).expect("read");
            assert_eq!(v, b);
        }
        let e = f.read_vec_at(9_000, 2_000).expect_err("past the end");
        assert!(e.to_string().contains("pread"), "{e}");
    }

    #[test]
    fn second_lock_on_same_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("LOCK");
        let fs = PosixFs;
        let held = fs.lock(&p).expect("first lock");
        assert!(matches!(fs.lock(&p), Err(Error::Locked(_))));
        drop(held);
        fs.lock(&p).expect("lock after release");
    }

    #[test]
    fn writes_reads_and_atomic_replace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = PosixFs;
        super::super::write_file_atomic(&fs, dir.path(), "CURRENT", b"one").expect("write");
        super::super::write_file_atomic(&fs, dir.path(), "CURRENT", b"two").expect("write");
        let got = super::super::read_to_vec(&fs, &dir.path().join("CURRENT")).expect("read");
        assert_eq!(got, b"two");
        let ef = fs.open_extent_file(&dir.path().join("d")).expect("open");
        ef.write_all_at(4096, b"xyz").expect("pwrite");
        let mut b = [0u8; 3];
        ef.read_exact_at(4096, &mut b).expect("pread");
        assert_eq!(&b, b"xyz");
        assert!(ef.read_exact_at(5000, &mut b).is_err());
    }
}
