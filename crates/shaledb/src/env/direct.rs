//! A [`WritableFile`] with `O_DIRECT` (Linux): appends bypass the page
//! cache, so a value file is written at device speed instead of at the
//! speed of the kernel's dirty-page writeback.
//!
//! `O_DIRECT` needs the buffer address, the length and the file offset
//! aligned to the logical block size; [`ALIGN`] (4 KiB) covers the devices
//! in use. Appends collect in an aligned buffer; `flush` writes it from the
//! last aligned file offset, padded with zeros to a whole block, and keeps
//! the partial last block in the buffer to be written again (with more
//! data) by the next flush. So the file on disk may end in up to 4 KiB of
//! zeros past [`WritableFile::len`]; the value-file format reads them as a
//! torn tail, and a sealed file is truncated to its logical length.

use super::WritableFile;
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Alignment of buffer, length and offset of every direct write.
pub const ALIGN: usize = 4096;

/// A byte buffer whose usable region starts at an `ALIGN`-aligned address.
struct AlignedBuf {
    store: Vec<u8>,
    /// Offset in `store` of the aligned start.
    off: usize,
    /// Logical bytes held.
    len: usize,
}

impl AlignedBuf {
    fn with_capacity(cap: usize) -> Self {
        let cap = cap.div_ceil(ALIGN) * ALIGN;
        let store = vec![0u8; cap + ALIGN];
        let off = store.as_ptr().align_offset(ALIGN).min(ALIGN);
        AlignedBuf { store, off, len: 0 }
    }

    fn capacity(&self) -> usize {
        self.store.len() - ALIGN
    }

    fn extend(&mut self, data: &[u8]) {
        if self.len + data.len() > self.capacity() {
            let mut bigger = AlignedBuf::with_capacity((self.len + data.len()) * 2);
            bigger.extend(self.bytes());
            *self = bigger;
        }
        let at = self.off + self.len;
        if let Some(dst) = self.store.get_mut(at..at + data.len()) {
            dst.copy_from_slice(data);
            self.len += data.len();
        }
    }

    fn bytes(&self) -> &[u8] {
        self.store
            .get(self.off..self.off + self.len)
            .unwrap_or_default()
    }

    /// The held bytes zero-padded to a whole number of blocks.
    fn padded(&mut self) -> &[u8] {
        let end = self.len.div_ceil(ALIGN) * ALIGN;
        if let Some(pad) = self.store.get_mut(self.off + self.len..self.off + end) {
            pad.fill(0);
        }
        self.store.get(self.off..self.off + end).unwrap_or_default()
    }

    /// Drops the first `n` bytes (`n` a multiple of `ALIGN`), keeping the rest aligned.
    fn consume(&mut self, n: usize) {
        let (start, end) = (self.off + n, self.off + self.len);
        self.store.copy_within(start..end, self.off);
        self.len -= n;
    }
}

/// An append-only file written with `O_DIRECT`.
pub struct DirectWritable {
    file: File,
    path: PathBuf,
    /// File offset of the first byte of `buf` (a multiple of `ALIGN`).
    written: u64,
    buf: AlignedBuf,
    /// Bytes appended since the last flush (else flush writes nothing, so
    /// a file truncated to its logical length stays so).
    dirty: bool,
}

impl DirectWritable {
    /// Creates (truncating) `path` with `O_DIRECT`; `None` if the file
    /// system refuses `O_DIRECT` (tmpfs, some overlay file systems).
    pub fn create(path: &Path) -> Result<Option<DirectWritable>> {
        Ok(create_direct_file(path)?.map(|file| DirectWritable {
            file,
            path: path.to_owned(),
            written: 0,
            buf: AlignedBuf::with_capacity(2 << 20),
            dirty: false,
        }))
    }
}

/// Creates (truncating) `path` for reads and writes with `O_DIRECT`;
/// `None` if the file system refuses `O_DIRECT` (tmpfs, some overlay file
/// systems).
pub fn create_direct_file(path: &Path) -> Result<Option<File>> {
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path);
    match opened {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(Error::io("create", path, e)),
    }
}

impl WritableFile for DirectWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.buf.extend(data);
        self.dirty |= !data.is_empty();
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        self.dirty = false;
        let at = self.written;
        let path = &self.path;
        let data = self.buf.padded();
        self.file
            .write_all_at(data, at)
            .map_err(|e| Error::io("pwrite", path, e))?;
        let full = self.buf.len / ALIGN * ALIGN;
        self.buf.consume(full);
        self.written += full as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.written + self.buf.len as u64
    }
}

/// A file read with `O_DIRECT` (values read past the page cache, so the
/// cache neither hides the device nor fills with values). Each read covers
/// the aligned blocks around the requested bytes, into an aligned buffer,
/// and copies the requested bytes out.
pub struct DirectRandom {
    file: File,
    path: PathBuf,
}

impl DirectRandom {
    /// Opens `path` read-only with `O_DIRECT`; `None` if the file system
    /// refuses it.
    pub fn open(path: &Path) -> Result<Option<DirectRandom>> {
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        match opened {
            Ok(file) => Ok(Some(DirectRandom {
                file,
                path: path.to_owned(),
            })),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
            Err(e) => Err(Error::io("open", path, e)),
        }
    }
}

/// Largest read span served from the reading thread's reused aligned
/// buffer; larger reads (GC, recovery scans) allocate their own, so no
/// thread keeps more than this much memory after one large read.
const BOUNCE_MAX: usize = 256 * 1024;

thread_local! {
    /// The aligned buffer of this thread's direct reads: a point read of a
    /// 4 KiB value would otherwise allocate and zero 8 KiB per read.
    static BOUNCE: std::cell::RefCell<Option<AlignedBuf>> =
        const { std::cell::RefCell::new(None) };
}

impl DirectRandom {
    /// Reads the `span` bytes at the aligned `start` into `aligned` and
    /// copies the `buf.len()` bytes at `head` of them into `buf`.
    fn read_via(
        &self,
        aligned: &mut AlignedBuf,
        (start, head, span): (u64, usize, usize),
        buf: &mut [u8],
    ) -> Result<()> {
        let Some(dst) = aligned.store.get_mut(aligned.off..aligned.off + span) else {
            return Err(Error::io(
                "pread",
                &self.path,
                std::io::Error::other("aligned buffer too small"),
            ));
        };
        // The last block may extend past the end of the file: read what is
        // there and check that the requested bytes were covered.
        let mut got = 0;
        while got < head + buf.len() {
            let n = self
                .file
                .read_at(dst.get_mut(got..).unwrap_or_default(), start + got as u64)
                .map_err(|e| Error::io("pread", &self.path, e))?;
            if n == 0 {
                return Err(Error::io(
                    "pread",
                    &self.path,
                    std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                ));
            }
            got += n;
        }
        let src = dst.get(head..head + buf.len()).unwrap_or_default();
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl super::RandomAccessFile for DirectRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let start = offset / ALIGN as u64 * ALIGN as u64;
        let head = (offset - start) as usize;
        let span = (head + buf.len()).div_ceil(ALIGN) * ALIGN;
        let at = (start, head, span);
        if span > BOUNCE_MAX {
            return self.read_via(&mut AlignedBuf::with_capacity(span), at, buf);
        }
        BOUNCE.with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return self.read_via(&mut AlignedBuf::with_capacity(span), at, buf);
            };
            let aligned = match slot.take() {
                Some(a) if a.capacity() >= span => a,
                _ => AlignedBuf::with_capacity(span),
            };
            let aligned = slot.insert(aligned);
            self.read_via(aligned, at, buf)
        })
    }

    fn len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| Error::io("fstat", &self.path, e))?
            .len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_read_back_and_the_tail_is_rewritten() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("d");
        let Some(mut w) = DirectWritable::create(&path).expect("create") else {
            return; // no O_DIRECT on this file system
        };
        let mut want = Vec::new();
        for i in 0..300u32 {
            let chunk = vec![(i % 251) as u8; 1000 + (i as usize * 13) % 9000];
            w.append(&chunk).expect("append");
            want.extend_from_slice(&chunk);
            if i % 7 == 0 {
                w.flush().expect("flush");
            }
        }
        w.sync().expect("sync");
        assert_eq!(w.len(), want.len() as u64);
        let got = std::fs::read(&path).expect("read");
        assert!(got.len() >= want.len() && got.len() - want.len() < ALIGN);
        assert_eq!(got.get(..want.len()), Some(want.as_slice()));
        assert!(got
            .get(want.len()..)
            .unwrap_or_default()
            .iter()
            .all(|&b| b == 0));
    }

    /// Reads of every shape through the reused per-thread buffer: within a
    /// page, across pages, a span larger than the buffer held (it must
    /// grow, not fail or read short), one past `BOUNCE_MAX` (a buffer of
    /// its own), the file's last partial page, and past the end (an
    /// `UnexpectedEof` error, as a buffered read gives).
    #[test]
    fn direct_reads_of_any_offset_and_length_return_the_file_bytes() {
        use crate::env::RandomAccessFile;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("r");
        let want: Vec<u8> = (0..BOUNCE_MAX + 3 * ALIGN + 123)
            .map(|i| (i % 251) as u8 ^ (i / 4096) as u8)
            .collect();
        std::fs::write(&path, &want).expect("write");
        let Some(r) = DirectRandom::open(&path).expect("open") else {
            return; // no O_DIRECT on this file system
        };
        let n = want.len();
        for (offset, len) in [
            (0, 10),
            (4090, 12),
            (5000, 4096),
            (3, 3 * ALIGN),
            (0, ALIGN),
            (7, BOUNCE_MAX + 100),
            (8192, 4096),
            (n - 200, 200),
        ] {
            let mut got = vec![0u8; len];
            r.read_exact_at(offset as u64, &mut got).expect("read");
            assert_eq!(
                got.as_slice(),
                &want[offset..offset + len],
                "at {offset}+{len}"
            );
        }
        let mut past = vec![0u8; 300];
        match r.read_exact_at((n - 200) as u64, &mut past) {
            Err(Error::Io { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::UnexpectedEof)
            }
            other => panic!("read past the end: {other:?}"),
        }
    }
}
