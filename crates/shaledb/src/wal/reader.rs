//! [`LogReader`]: reads the records of one log file back, tolerating a torn
//! tail and nothing else.
//!
//! ## Policy
//!
//! The log ends at the first position where no good fragment of this log
//! can be read: end of file, a damaged fragment (bad checksum, length past
//! its block, unknown type), a file that ends inside a fragment, a zero-filled
//! header (preallocated space), or a good fragment of *another* log number
//! (the previous life of a recycled file). What happens next depends on the
//! rest of the file, which is scanned (block by block, every byte offset a
//! fragment header could start at) for a good fragment of *this* log number:
//!
//! - one is found: the damage is in the middle of the log, which no crash
//!   can produce, so [`LogReader::read_record`] fails with
//!   `Error::Corruption` at the offset of the damaged fragment;
//! - none is found: it is a torn tail; `read_record` returns `Ok(None)`,
//!   [`LogReader::valid_end`] is where the file should be truncated, and
//!   [`LogReader::hit_torn_tail`] is true unless the log simply ended or only
//!   zeros follow it.
//!
//! Worked example: records A (offset 31), B (offset 60), C (offset 95) of
//! log 5, and the file was cut in the middle of C by a crash. The reader
//! returns `(31, A)`, `(60, B)`, then `None` with `valid_end() == 95` and
//! `hit_torn_tail()`. If instead a byte in B flipped, the scan from B finds C
//! and the second call fails with `Corruption { offset: 60 }`.
//!
//! The file is read in 256 KiB chunks of whole blocks; a fragment never
//! crosses a block boundary, so a fragment is always inside the buffer.

use super::format::{
    decode_file_header, log_tag, parse_fragment, Parsed, RecordType, BLOCK_SIZE, FORMAT_VERSION,
    HEADER_SIZE,
};
use crate::env::SequentialFile;
use crate::error::{Error, Result};
use std::path::PathBuf;

/// Bytes read from the file at a time: eight whole blocks.
const READ_CHUNK: usize = 8 * BLOCK_SIZE;

/// Block size as a file offset.
const BLOCK: u64 = BLOCK_SIZE as u64;

/// Why the readable part of the log ended.
#[derive(Debug, Clone, Copy)]
enum End {
    /// End of file.
    Eof,
    /// An all-zero header: preallocated or never-written space.
    Zero,
    /// The file ends inside a fragment.
    Truncated,
    /// A good fragment of another log number: a recycled file's old life.
    Stale,
    /// A damaged fragment.
    Damaged(&'static str),
}

impl End {
    fn reason(self) -> &'static str {
        match self {
            End::Eof => "end of file",
            End::Zero => "zero-filled space",
            End::Truncated => "fragment cut short by end of file",
            End::Stale => "fragment of another log number",
            End::Damaged(why) => why,
        }
    }
}

/// What to do with the bytes at the current position.
enum Step {
    /// A fragment of a record that continues; skip this many bytes.
    More(usize),
    /// The record is complete after skipping this many bytes.
    Done(usize),
    /// The readable log ends here.
    End(End),
    /// A good fragment of this log that cannot be where it is.
    Corrupt(&'static str),
}

enum State {
    Reading,
    Ended,
    Failed(Error),
}

/// Reads the records of one log file (a WAL segment or a manifest).
pub struct LogReader {
    file: Box<dyn SequentialFile>,
    path: PathBuf,
    log_number: u64,
    /// Low 32 bits of `log_number`, as stored in fragment headers.
    tag: u32,
    /// Bytes `[buf_start, buf_start + buf.len())` of the file. Invariant:
    /// `buf_start` is a multiple of the block size and `buf` holds whole
    /// blocks unless the file ends inside the last one.
    buf: Vec<u8>,
    buf_start: u64,
    /// The file returned 0 bytes: `buf` reaches the end of the file.
    eof: bool,
    /// Offset of the next fragment (or of the next scan position).
    pos: u64,
    valid_end: u64,
    torn: bool,
    state: State,
}

impl LogReader {
    /// Opens a log and checks its file header. An empty file, or one whose
    /// header is torn, zero or left from a recycled file's previous life,
    /// is an empty log (no error) unless good records of `log_number`
    /// follow. A file of an unknown format version is
    /// `Error::UnsupportedVersion`.
    pub fn new(file: Box<dyn SequentialFile>, path: PathBuf, log_number: u64) -> Result<Self> {
        let mut r = LogReader {
            file,
            path,
            log_number,
            tag: log_tag(log_number),
            buf: Vec::new(),
            buf_start: 0,
            eof: false,
            pos: 0,
            valid_end: 0,
            torn: false,
            state: State::Reading,
        };
        r.read_file_header()?;
        Ok(r)
    }

    /// The next whole record as (offset of its first fragment, payload);
    /// `Ok(None)` at the end of the log. After an error, returns it again.
    pub fn read_record(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        match &self.state {
            State::Reading => {}
            State::Ended => return Ok(None),
            State::Failed(e) => return Err(e.clone()),
        }
        let r = self.read_next();
        if let Err(e) = &r {
            self.state = State::Failed(e.clone());
        }
        r
    }

    /// Byte offset just past the last good record (or the file header);
    /// where the file should be truncated after a torn tail.
    pub fn valid_end(&self) -> u64 {
        self.valid_end
    }

    /// True if the log ended in a partial or damaged record, or in stale
    /// bytes of a recycled file, rather than at end of file or in zeros.
    pub fn hit_torn_tail(&self) -> bool {
        self.torn
    }

    fn read_file_header(&mut self) -> Result<()> {
        if !self.fill()? {
            self.state = State::Ended; // empty file: empty log
            return Ok(());
        }
        let (step, version) = {
            let avail = self.avail(BLOCK_SIZE);
            match parse_fragment(avail, BLOCK_SIZE) {
                Parsed::Fragment(f) if f.tag != self.tag => (Step::End(End::Stale), None),
                Parsed::Fragment(f) if f.rtype != RecordType::FileHeader => {
                    (Step::Corrupt("log does not start with a file header"), None)
                }
                Parsed::Fragment(f) => match decode_file_header(f.payload) {
                    Err(why) => (Step::Corrupt(why), None),
                    Ok(h) if h.version != FORMAT_VERSION => (Step::Done(0), Some(h.version)),
                    Ok(h) if h.log_number != self.log_number => {
                        (Step::Corrupt("file header names another log number"), None)
                    }
                    Ok(_) => (Step::Done(f.encoded_len()), None),
                },
                Parsed::Zero => (Step::End(End::Zero), None),
                Parsed::Truncated => (Step::End(End::Truncated), None),
                Parsed::Damaged(why) => (Step::End(End::Damaged(why)), None),
            }
        };
        if let Some(version) = version {
            return Err(Error::UnsupportedVersion {
                file: self.path.clone(),
                version,
            });
        }
        match step {
            Step::Done(n) | Step::More(n) => {
                self.pos += n as u64;
                self.valid_end = self.pos;
                Ok(())
            }
            Step::End(end) => self.end(0, false, end),
            Step::Corrupt(why) => Err(Error::corruption(&self.path, 0, why)),
        }
    }

    fn read_next(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        let mut record = Vec::new();
        // Offset of the first fragment of a record still missing its LAST.
        let mut start: Option<u64> = None;
        loop {
            if !self.fill()? {
                self.end(self.pos, start.is_some(), End::Eof)?;
                return Ok(None);
            }
            let block_left = block_left(self.pos);
            if block_left < HEADER_SIZE {
                // Zero padding written because no header fits.
                self.pos += block_left as u64;
                continue;
            }
            let frag_off = self.pos;
            let step = match parse_fragment(self.avail(block_left), block_left) {
                Parsed::Fragment(f) if f.tag != self.tag => Step::End(End::Stale),
                Parsed::Fragment(f) => match (f.rtype, start.is_some()) {
                    (RecordType::Full, false) | (RecordType::Last, true) => {
                        record.extend_from_slice(f.payload);
                        Step::Done(f.encoded_len())
                    }
                    (RecordType::First, false) | (RecordType::Middle, true) => {
                        record.extend_from_slice(f.payload);
                        Step::More(f.encoded_len())
                    }
                    (RecordType::Full | RecordType::First, true) => {
                        Step::Corrupt("new record starts before the previous one ended")
                    }
                    (RecordType::Middle | RecordType::Last, false) => {
                        Step::Corrupt("continuation fragment without a first fragment")
                    }
                    (RecordType::FileHeader | RecordType::Zero, _) => {
                        Step::Corrupt("file header record inside the log")
                    }
                },
                Parsed::Zero => Step::End(End::Zero),
                Parsed::Truncated => Step::End(End::Truncated),
                Parsed::Damaged(why) => Step::End(End::Damaged(why)),
            };
            if let (Step::More(_), None) = (&step, start) {
                start = Some(frag_off);
            }
            match step {
                Step::More(n) => self.pos += n as u64,
                Step::Done(n) => {
                    self.pos += n as u64;
                    self.valid_end = self.pos;
                    return Ok(Some((start.unwrap_or(frag_off), record)));
                }
                Step::End(end) => {
                    self.end(frag_off, start.is_some(), end)?;
                    return Ok(None);
                }
                Step::Corrupt(why) => {
                    let msg = format!("{why} (log {})", self.log_number);
                    return Err(Error::corruption(&self.path, frag_off, msg));
                }
            }
        }
    }

    /// The readable log ended at `damage` (with a record started but not
    /// finished if `pending`): torn tail or corruption, decided by scanning
    /// the rest of the file for a good fragment of this log.
    fn end(&mut self, damage: u64, pending: bool, end: End) -> Result<()> {
        self.state = State::Ended;
        let (found, nonzero_after) = self.scan_from(damage + 1)?;
        if let Some(at) = found {
            let msg = format!(
                "{} inside log {}: a good fragment of this log follows at offset {at}",
                end.reason(),
                self.log_number
            );
            return Err(Error::corruption(&self.path, damage, msg));
        }
        self.torn = pending || nonzero_after || !matches!(end, End::Eof | End::Zero);
        Ok(())
    }

    /// Looks for a good fragment of this log at any offset `>= from` where a
    /// header fits in its block. Returns its offset, and whether any byte
    /// scanned was non-zero.
    fn scan_from(&mut self, from: u64) -> Result<(Option<u64>, bool)> {
        self.pos = from;
        let mut nonzero = false;
        let tag = self.tag.to_le_bytes();
        while self.fill()? {
            let block_start = self.pos - self.pos % BLOCK;
            let first = usize::try_from(self.pos % BLOCK).unwrap_or(BLOCK_SIZE);
            let block = self.block_bytes(block_start);
            let tail = block.get(first..).unwrap_or_default();
            nonzero = nonzero || tail.iter().any(|&b| b != 0);
            for o in first..block.len() {
                let left = BLOCK_SIZE - o;
                if left < HEADER_SIZE {
                    break;
                }
                let Some(rest) = block.get(o..) else { break };
                // Cheap filters before the checksum: type and log number.
                let plausible = matches!(rest.get(6), Some(1..=4)) && rest.get(7..11) == Some(&tag);
                if plausible {
                    if let Parsed::Fragment(f) = parse_fragment(rest, left) {
                        if f.tag == self.tag {
                            return Ok((Some(block_start + o as u64), nonzero));
                        }
                    }
                }
            }
            self.pos = block_start + BLOCK;
        }
        Ok((None, nonzero))
    }

    /// Makes the buffer hold `pos`; false if `pos` is at or past end of file.
    fn fill(&mut self) -> Result<bool> {
        loop {
            let buf_end = self.buf_start + self.buf.len() as u64;
            if self.pos < buf_end {
                return Ok(true);
            }
            if self.eof {
                return Ok(false);
            }
            // `buf_end` is block aligned here: a short buffer means EOF.
            self.buf_start = buf_end;
            self.buf.clear();
            self.buf.resize(READ_CHUNK, 0);
            let mut filled = 0;
            while filled < READ_CHUNK {
                let Some(dst) = self.buf.get_mut(filled..) else {
                    break;
                };
                let n = self.file.read(dst)?;
                if n == 0 {
                    self.eof = true;
                    break;
                }
                filled += n.min(READ_CHUNK - filled);
            }
            self.buf.truncate(filled);
        }
    }

    /// Bytes from `pos` to the end of its block or of the buffer. Requires
    /// `fill()` to have returned true for the current `pos`.
    fn avail(&self, block_left: usize) -> &[u8] {
        let from = self.buf_index(self.pos);
        let to = from.saturating_add(block_left).min(self.buf.len());
        self.buf.get(from..to).unwrap_or_default()
    }

    /// The buffered bytes of the block starting at `block_start`.
    fn block_bytes(&self, block_start: u64) -> &[u8] {
        let from = self.buf_index(block_start);
        let to = from.saturating_add(BLOCK_SIZE).min(self.buf.len());
        self.buf.get(from..to).unwrap_or_default()
    }

    /// Index of file offset `off` in `buf`; `off` is at least `buf_start`
    /// and less than a chunk past it, so the difference fits a usize.
    fn buf_index(&self, off: u64) -> usize {
        usize::try_from(off.saturating_sub(self.buf_start)).unwrap_or(usize::MAX)
    }
}

/// Bytes from `pos` to the end of its block.
fn block_left(pos: u64) -> usize {
    // `pos % BLOCK < BLOCK_SIZE`, so the cast cannot truncate.
    BLOCK_SIZE - (pos % BLOCK) as usize
}
