//! The log file format shared by WAL segments and the manifest: records
//! fragmented over 32 KiB blocks, LevelDB style, with RocksDB's "recyclable"
//! fragment header that carries the log number. Byte-level specification:
//! `docs/format-wal.md`.
//!
//! ```text
//! block 0                                   block 1
//! +-----------+-------+-------+-------+---+ +-------+--------------------+
//! |file header| FULL  | FULL  | FIRST |pad| | LAST  | FULL  ...          |
//! |  record   |  r1   |  r2   |  r3   |   | |  r3   |  r4                |
//! +-----------+-------+-------+-------+---+ +-------+--------------------+
//! ```
//!
//! - [`LogWriter`] appends records; the file begins with a file-header
//!   record (magic `SHALEWAL`, format version, log number).
//! - [`LogReader`] returns them back, with the byte offset of each record.
//!   It tolerates a torn tail (a crash in the middle of an append) and
//!   reports any other damage as `Error::Corruption`.
//!
//! Why the log number is in every fragment: a WAL file can be *recycled*
//! (renamed to a new log number and overwritten from offset 0 instead of
//! being deleted and created again). After a crash, the bytes past the new
//! log's last record are still the old log's records, with good checksums.
//! Because the checksum covers the log number, the reader sees them as
//! another log's fragments and stops there.
//!
//! Worked example: log 1 wrote records A, B, C, D; its file was recycled as
//! log 2, which wrote E, F and crashed. The file holds `hdr(2) E F` followed
//! by the rest of `hdr(1) A B C D`. Reading with log number 2 returns E and F,
//! then `None` with `hit_torn_tail()` and `valid_end()` just past F.

pub mod format;
mod reader;
pub(crate) mod sync_point;
mod writer;

pub use reader::LogReader;
pub use writer::LogWriter;

#[cfg(test)]
mod tests;

/// In-memory files for the log tests.
#[cfg(test)]
#[allow(clippy::indexing_slicing)] // `n` is bounded by both lengths
pub(crate) mod test_util {
    use crate::env::{SequentialFile, WritableFile};
    use crate::error::{Error, Result};
    use parking_lot::Mutex;
    use std::sync::Arc;

    /// A writable file whose bytes the test can inspect and edit.
    #[derive(Clone, Default)]
    pub struct MemFile(Arc<Mutex<Vec<u8>>>);

    impl MemFile {
        pub fn bytes(&self) -> Vec<u8> {
            self.0.lock().clone()
        }
        pub fn set_bytes(&self, bytes: Vec<u8>) {
            *self.0.lock() = bytes;
        }
    }

    impl WritableFile for MemFile {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            self.0.lock().extend_from_slice(data);
            Ok(())
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> Result<()> {
            Ok(())
        }
        fn len(&self) -> u64 {
            self.0.lock().len() as u64
        }
    }

    /// A writable file that fails once it would exceed `cap` bytes.
    pub struct FailingFile {
        cap: usize,
        len: usize,
        failed: bool,
    }

    impl FailingFile {
        pub fn new(cap: usize) -> Self {
            FailingFile {
                cap,
                len: 0,
                failed: false,
            }
        }
        fn err() -> Error {
            Error::io("write", "failing", std::io::Error::other("disk full"))
        }
    }

    impl WritableFile for FailingFile {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            if self.failed || self.len + data.len() > self.cap {
                self.failed = true;
                return Err(Self::err());
            }
            self.len += data.len();
            Ok(())
        }
        fn flush(&mut self) -> Result<()> {
            if self.failed {
                return Err(Self::err());
            }
            Ok(())
        }
        fn sync(&mut self) -> Result<()> {
            self.flush()
        }
        fn len(&self) -> u64 {
            self.len as u64
        }
    }

    /// A sequential file over bytes that returns at most `max_read` bytes
    /// per call, to exercise the reader's short-read handling.
    pub struct SliceFile {
        data: Vec<u8>,
        pos: usize,
        max_read: usize,
    }

    impl SliceFile {
        pub fn new(data: Vec<u8>, max_read: usize) -> Self {
            SliceFile {
                data,
                pos: 0,
                max_read: max_read.max(1),
            }
        }
    }

    impl SequentialFile for SliceFile {
        fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
            let rest = self.data.get(self.pos..).unwrap_or_default();
            let n = rest.len().min(buf.len()).min(self.max_read);
            buf[..n].copy_from_slice(&rest[..n]);
            self.pos += n;
            Ok(n)
        }
    }
}
