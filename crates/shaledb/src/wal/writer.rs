//! [`LogWriter`]: appends records to a log file, fragmenting them over
//! 32 KiB blocks (layout in `docs/format-wal.md`).
//!
//! Worked example (log number 3): `new` writes the 31-byte file header
//! record at offset 0; `add_record(&[0xAB; 40_000])` then writes a FIRST
//! fragment of 32 726 payload bytes (31 + 11 + 32 726 = 32 768, the first
//! block is exactly full) and a LAST fragment of the remaining 7 274 bytes at
//! offset 32 768; the file is then 40 053 bytes long. A block with fewer than 11 bytes left is padded with zeros,
//! since not even an empty fragment header fits.
//!
//! Error policy: after any failed append, flush or sync, the file's content
//! is unknown (a record may be half written), so the writer keeps the error
//! and returns it from every later call. The caller switches to a new log.

use super::format::{
    encode_file_header, encode_header, log_tag, RecordType, BLOCK_SIZE, HEADER_SIZE,
};
use crate::env::WritableFile;
use crate::error::{Error, Result};

/// Zeros used to pad a block trailer that cannot hold a header.
const PADDING: [u8; HEADER_SIZE] = [0; HEADER_SIZE];

/// Appends records to one log file (a WAL segment or a manifest).
///
/// Not synchronised: the owner serialises calls (the WAL's group-commit
/// leader, or the manifest writer under the version lock).
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    #[cfg(any(test, feature = "test-hooks"))]
    log_number: u64,
    /// Low 32 bits of `log_number`, stored in every fragment header.
    tag: u32,
    /// Bytes written so far (header record, fragments, padding).
    size: u64,
    /// Bytes used in the current block; always `< BLOCK_SIZE`.
    block_offset: usize,
    /// Sticky failure: set by the first failed file operation.
    failed: Option<Error>,
}

impl LogWriter {
    /// Starts a log on an empty file (a new file, or a recycled one that is
    /// overwritten from offset 0) and writes the file header record. The
    /// header is buffered like any record; call [`Self::flush`] or
    /// [`Self::sync`] to persist it.
    pub fn new(file: Box<dyn WritableFile>, log_number: u64) -> Result<Self> {
        if !file.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "log writer for log {log_number} needs an empty file, got {} bytes",
                file.len()
            )));
        }
        let mut w = LogWriter {
            file,
            #[cfg(any(test, feature = "test-hooks"))]
            log_number,
            tag: log_tag(log_number),
            size: 0,
            block_offset: 0,
            failed: None,
        };
        w.emit(RecordType::FileHeader, &encode_file_header(log_number))?;
        Ok(w)
    }

    /// Appends one record (any length, also empty). Buffered: it survives
    /// a process crash only after [`Self::flush`], power loss only after
    /// [`Self::sync`].
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check_failed()?;
        let mut left = payload;
        let mut first = true;
        loop {
            let block_left = BLOCK_SIZE - self.block_offset;
            if block_left < HEADER_SIZE {
                // Too small for a header: pad the trailer with zeros.
                let pad = PADDING.get(..block_left).unwrap_or(&PADDING);
                self.append(pad)?;
                self.block_offset = 0;
                continue;
            }
            let room = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let n = left.len().min(room);
            let (chunk, rest) = left.split_at(n);
            let last = rest.is_empty();
            let rtype = match (first, last) {
                (true, true) => RecordType::Full,
                (true, false) => RecordType::First,
                (false, true) => RecordType::Last,
                (false, false) => RecordType::Middle,
            };
            self.emit(rtype, chunk)?;
            if last {
                return Ok(());
            }
            left = rest;
            first = false;
        }
    }

    /// Hands buffered bytes to the OS: they survive `kill -9`.
    pub fn flush(&mut self) -> Result<()> {
        self.check_failed()?;
        let r = self.file.flush();
        self.note(r)
    }

    /// Makes everything written durable (fdatasync).
    pub fn sync(&mut self) -> Result<()> {
        self.check_failed()?;
        let r = self.file.sync();
        self.note(r)
    }

    /// A handle that fsyncs this log from another thread while records are
    /// appended here (`crate::env::WritableFile::sync_handle`).
    pub fn sync_handle(&self) -> Result<Option<std::sync::Arc<dyn crate::env::FileSync>>> {
        self.file.sync_handle()
    }

    /// Bytes written to the file so far, buffered ones included.
    pub fn file_size(&self) -> u64 {
        self.size
    }

    /// The log number this file was started with.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Writes one fragment into the current block. The caller guarantees it
    /// fits (`HEADER_SIZE + payload.len() <= BLOCK_SIZE - block_offset`).
    fn emit(&mut self, rtype: RecordType, payload: &[u8]) -> Result<()> {
        debug_assert!(self.block_offset + HEADER_SIZE + payload.len() <= BLOCK_SIZE);
        let header = encode_header(rtype, self.tag, payload);
        self.append(&header)?;
        self.append(payload)?;
        self.block_offset += HEADER_SIZE + payload.len();
        if self.block_offset == BLOCK_SIZE {
            self.block_offset = 0;
        }
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        let r = self.file.append(bytes);
        self.note(r)?;
        self.size += bytes.len() as u64;
        Ok(())
    }

    fn check_failed(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Records a failure so that it sticks.
    fn note(&mut self, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index buffers they just built
mod tests {
    use super::super::format::FILE_HEADER_RECORD_LEN;
    use super::super::test_util::{FailingFile, MemFile};
    use super::*;

    #[test]
    fn header_then_fragments_fill_blocks_exactly() {
        let file = MemFile::default();
        let mut w = LogWriter::new(Box::new(file.clone()), 3).expect("new");
        assert_eq!(w.file_size(), FILE_HEADER_RECORD_LEN as u64);
        w.add_record(&[0xAB; 40_000]).expect("add");
        let bytes = file.bytes();
        assert_eq!(bytes.len() as u64, w.file_size());
        assert_eq!(
            bytes.len(),
            FILE_HEADER_RECORD_LEN + 2 * HEADER_SIZE + 40_000
        );
        // FIRST right after the header, LAST at the start of block 1.
        assert_eq!(bytes[FILE_HEADER_RECORD_LEN + 6], RecordType::First as u8);
        assert_eq!(bytes[BLOCK_SIZE + 6], RecordType::Last as u8);
        // The numbers of the module docs' worked example.
        let at = FILE_HEADER_RECORD_LEN;
        assert_eq!(&bytes[at + 4..at + 6], &32_726u16.to_le_bytes());
        assert_eq!(
            &bytes[BLOCK_SIZE + 4..BLOCK_SIZE + 6],
            &7_274u16.to_le_bytes()
        );
        assert_eq!(bytes.len(), 40_053);
        assert_eq!(w.log_number(), 3);
    }

    #[test]
    fn short_trailer_is_zero_padded() {
        let file = MemFile::default();
        let mut w = LogWriter::new(Box::new(file.clone()), 1).expect("new");
        // Leave 5 bytes in block 0, then write a small record.
        let fill = BLOCK_SIZE - FILE_HEADER_RECORD_LEN - HEADER_SIZE - 5;
        w.add_record(&vec![1; fill]).expect("add");
        w.add_record(b"x").expect("add");
        let bytes = file.bytes();
        assert_eq!(&bytes[BLOCK_SIZE - 5..BLOCK_SIZE], &[0; 5]);
        assert_eq!(bytes[BLOCK_SIZE + 6], RecordType::Full as u8);
        assert_eq!(bytes.len(), BLOCK_SIZE + HEADER_SIZE + 1);
    }

    #[test]
    fn exactly_a_header_left_gives_an_empty_first_fragment() {
        let file = MemFile::default();
        let mut w = LogWriter::new(Box::new(file.clone()), 1).expect("new");
        let fill = BLOCK_SIZE - FILE_HEADER_RECORD_LEN - 2 * HEADER_SIZE;
        w.add_record(&vec![1; fill]).expect("add");
        w.add_record(b"yz").expect("add");
        let bytes = file.bytes();
        let at = BLOCK_SIZE - HEADER_SIZE;
        assert_eq!(&bytes[at + 4..at + 7], &[0, 0, RecordType::First as u8]);
        assert_eq!(bytes[BLOCK_SIZE + 6], RecordType::Last as u8);
    }

    #[test]
    fn non_empty_file_is_refused() {
        let file = MemFile::default();
        file.set_bytes(vec![1, 2, 3]);
        assert!(matches!(
            LogWriter::new(Box::new(file), 1),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn a_failed_append_is_sticky() {
        let file = FailingFile::new(100);
        let mut w = LogWriter::new(Box::new(file), 1).expect("header fits");
        assert!(w.add_record(&[0; 200]).is_err());
        // Even a small record that would fit is refused now.
        assert!(w.add_record(b"").is_err());
        assert!(w.flush().is_err());
        assert!(w.sync().is_err());
    }
}
