//! Temporary run files (docs/tables.md, "Memory-bounded sorts, groups and
//! joins"): what a sort writes when its rows outgrow `sort_buffer_size`.
//!
//! ```text
//! header   8 bytes magic "SHLSPILL", u32 LE version (1)
//! record   u32 LE payload length (> 0), u32 LE CRC32C of the payload, payload:
//!            u32 LE key count, u32 LE value count, then each datum:
//!            tag u8: 0 NULL | 1 INT i64 LE | 2 UINT u64 LE | 3 DOUBLE f64 LE
//!                  | 4 DECIMAL i128 LE + scale u8 | 5 BYTES u32 LE length + bytes
//!                  | 6 DATE u64 LE packed | 7 DATETIME u64 LE packed
//! trailer  u32 LE 0 (no record is empty), u64 LE record count,
//!          u32 LE CRC32C of the count's 8 bytes
//! ```
//!
//! A reader checks every record's checksum and the trailer's count, so a
//! damaged or truncated file is an error (`Error::TempFile`), never fewer
//! or different rows. Files are named `shale-<pid>-<n>.spill` in the
//! temporary directory and removed when their [`TempFile`] drops: when the
//! statement ends, fails or is killed; files of a process killed outright
//! are removed when the database next opens ([`clean_dir`]).

use crate::error::{Error, Result};
use crate::types::{DateTime, Datum, Decimal};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"SHLSPILL";
const VERSION: u32 = 1;
/// Buffer of each open run file (a merge holds one per input run).
const IO_BUFFER: usize = 32 << 10;
/// A record longer than this is taken as damage (rows are at most a few
/// max_allowed_packet-sized values; a bad length must not allocate GiBs).
const MAX_RECORD: u32 = 1 << 30;
/// What file names start with; [`clean_dir`] removes only these.
const PREFIX: &str = "shale-";
const SUFFIX: &str = ".spill";

static NEXT_FILE: AtomicU64 = AtomicU64::new(0);

fn err(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::TempFile {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Removes the run files a killed process left in `dir` (if it exists).
pub fn clean_dir(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(err(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| err(dir, e))?;
        let name = entry.file_name();
        let ours = name
            .to_str()
            .is_some_and(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX));
        if ours {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(|e| err(&path, e))?;
        }
    }
    Ok(())
}

/// A run file on disk, removed when dropped.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    records: u64,
}

impl TempFile {
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the file for reading its records from the start.
    pub fn reader(&self) -> Result<RunReader> {
        let f = File::open(&self.path).map_err(|e| err(&self.path, e))?;
        let mut r = RunReader {
            input: BufReader::with_capacity(IO_BUFFER, f),
            path: self.path.clone(),
            seen: 0,
            done: false,
        };
        let mut head = [0u8; 12];
        r.read_exact(&mut head)?;
        let (magic, version) = head.split_at(8);
        if magic != MAGIC {
            return Err(err(&self.path, "not a ShaleDB spill file (bad magic)"));
        }
        let version =
            u32::from_le_bytes(version.try_into().map_err(|_| err(&self.path, "header"))?);
        if version != VERSION {
            return Err(err(
                &self.path,
                format!("unknown spill file version {version}"),
            ));
        }
        Ok(r)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // Nothing to do if it is already gone; a failure leaves the file
        // for the next open's `clean_dir`.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes records to a new run file.
pub struct RunWriter {
    out: BufWriter<File>,
    file: TempFile,
    payload: Vec<u8>,
}

impl RunWriter {
    /// Creates a run file in `dir` (creating the directory if needed).
    pub fn create(dir: &Path) -> Result<RunWriter> {
        std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
        let n = NEXT_FILE.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{PREFIX}{}-{n}{SUFFIX}", std::process::id()));
        let f = File::create(&path).map_err(|e| err(&path, e))?;
        // From here on the guard removes the file whatever happens.
        let file = TempFile { path, records: 0 };
        let mut out = BufWriter::with_capacity(IO_BUFFER, f);
        out.write_all(MAGIC).map_err(|e| err(&file.path, e))?;
        out.write_all(&VERSION.to_le_bytes())
            .map_err(|e| err(&file.path, e))?;
        Ok(RunWriter {
            out,
            file,
            payload: Vec::new(),
        })
    }

    /// Appends one row: its sort keys and its values.
    pub fn write(&mut self, keys: &[Datum], vals: &[Datum]) -> Result<()> {
        let path = &self.file.path;
        self.payload.clear();
        put_count(&mut self.payload, keys.len(), path)?;
        put_count(&mut self.payload, vals.len(), path)?;
        for d in keys.iter().chain(vals) {
            encode(&mut self.payload, d, path)?;
        }
        let len = u32::try_from(self.payload.len())
            .ok()
            .filter(|l| *l <= MAX_RECORD)
            .ok_or_else(|| err(path, "row too large for a spill record"))?;
        let crc = crc32c::crc32c(&self.payload);
        let w = &mut self.out;
        w.write_all(&len.to_le_bytes())
            .and_then(|()| w.write_all(&crc.to_le_bytes()))
            .and_then(|()| w.write_all(&self.payload))
            .map_err(|e| err(path, e))?;
        self.file.records += 1;
        Ok(())
    }

    /// Writes the trailer and closes the file for reading.
    pub fn finish(mut self) -> Result<TempFile> {
        let count = self.file.records.to_le_bytes();
        let path = &self.file.path;
        let w = &mut self.out;
        w.write_all(&0u32.to_le_bytes())
            .and_then(|()| w.write_all(&count))
            .and_then(|()| w.write_all(&crc32c::crc32c(&count).to_le_bytes()))
            .and_then(|()| w.flush())
            .map_err(|e| err(path, e))?;
        Ok(self.file)
    }
}

fn put_count(out: &mut Vec<u8>, n: usize, path: &Path) -> Result<()> {
    let n = u32::try_from(n).map_err(|_| err(path, "too many columns"))?;
    out.extend_from_slice(&n.to_le_bytes());
    Ok(())
}

fn encode(out: &mut Vec<u8>, d: &Datum, path: &Path) -> Result<()> {
    match d {
        Datum::Null => out.push(0),
        Datum::Int(n) => {
            out.push(1);
            out.extend_from_slice(&n.to_le_bytes());
        }
        Datum::UInt(n) => {
            out.push(2);
            out.extend_from_slice(&n.to_le_bytes());
        }
        Datum::Double(f) => {
            out.push(3);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Datum::Decimal(x) => {
            out.push(4);
            out.extend_from_slice(&x.value.to_le_bytes());
            out.push(x.scale);
        }
        Datum::Bytes(b) => {
            out.push(5);
            let len = u32::try_from(b.len()).map_err(|_| err(path, "value too long"))?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(b);
        }
        Datum::Date(t) => {
            out.push(6);
            out.extend_from_slice(&t.pack().to_le_bytes());
        }
        Datum::DateTime(t) => {
            out.push(7);
            out.extend_from_slice(&t.pack().to_le_bytes());
        }
    }
    Ok(())
}

/// Reads the records of a run file in order.
pub struct RunReader {
    input: BufReader<File>,
    path: PathBuf,
    seen: u64,
    done: bool,
}

/// One row of a run: sort keys and values.
pub type Record = (Vec<Datum>, Vec<Datum>);

impl RunReader {
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.input.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                err(&self.path, "truncated spill file")
            } else {
                err(&self.path, e)
            }
        })
    }

    fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read_exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// The next record, or `None` after the last one (the trailer checked).
    pub fn next_record(&mut self) -> Result<Option<Record>> {
        if self.done {
            return Ok(None);
        }
        let len = self.u32()?;
        if len == 0 {
            let mut count = [0u8; 8];
            self.read_exact(&mut count)?;
            let crc = self.u32()?;
            if crc != crc32c::crc32c(&count) || u64::from_le_bytes(count) != self.seen {
                return Err(err(&self.path, "bad trailer (records lost or damaged)"));
            }
            self.done = true;
            return Ok(None);
        }
        if len > MAX_RECORD {
            return Err(err(&self.path, format!("bad record length {len}")));
        }
        let crc = self.u32()?;
        let mut payload = Vec::with_capacity(usize::try_from(len.min(1 << 16)).unwrap_or(0));
        (&mut self.input)
            .take(u64::from(len))
            .read_to_end(&mut payload)
            .map_err(|e| err(&self.path, e))?;
        if payload.len() != usize::try_from(len).unwrap_or(usize::MAX) {
            return Err(err(&self.path, "truncated spill file"));
        }
        if crc32c::crc32c(&payload) != crc {
            return Err(err(&self.path, "record checksum mismatch"));
        }
        let rec = decode_record(&payload).ok_or_else(|| err(&self.path, "malformed record"))?;
        self.seen += 1;
        Ok(Some(rec))
    }
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if buf.len() < n {
        return None;
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Some(head)
}

fn take_array<const N: usize>(buf: &mut &[u8]) -> Option<[u8; N]> {
    take(buf, N)?.try_into().ok()
}

fn decode_record(mut buf: &[u8]) -> Option<Record> {
    let nk = usize::try_from(u32::from_le_bytes(take_array(&mut buf)?)).ok()?;
    let nv = usize::try_from(u32::from_le_bytes(take_array(&mut buf)?)).ok()?;
    // Every datum takes at least its tag byte: bounds the allocation.
    if nk.saturating_add(nv) > buf.len() {
        return None;
    }
    let mut keys = Vec::with_capacity(nk);
    for _ in 0..nk {
        keys.push(decode(&mut buf)?);
    }
    let mut vals = Vec::with_capacity(nv);
    for _ in 0..nv {
        vals.push(decode(&mut buf)?);
    }
    buf.is_empty().then_some((keys, vals))
}

fn decode(buf: &mut &[u8]) -> Option<Datum> {
    let tag = *take(buf, 1)?.first()?;
    Some(match tag {
        0 => Datum::Null,
        1 => Datum::Int(i64::from_le_bytes(take_array(buf)?)),
        2 => Datum::UInt(u64::from_le_bytes(take_array(buf)?)),
        3 => Datum::Double(f64::from_le_bytes(take_array(buf)?)),
        4 => {
            let value = i128::from_le_bytes(take_array(buf)?);
            let scale = *take(buf, 1)?.first()?;
            Datum::Decimal(Decimal { value, scale })
        }
        5 => {
            let len = usize::try_from(u32::from_le_bytes(take_array(buf)?)).ok()?;
            Datum::Bytes(take(buf, len)?.to_vec())
        }
        6 => Datum::Date(DateTime::unpack(u64::from_le_bytes(take_array(buf)?))?),
        7 => Datum::DateTime(DateTime::unpack(u64::from_le_bytes(take_array(buf)?))?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure
    use super::*;

    fn sample() -> Vec<Record> {
        let dt = DateTime::parse("2026-11-25 23:45:01.5").unwrap();
        vec![
            (vec![Datum::Int(-5)], vec![Datum::Null, Datum::text("abc")]),
            (
                vec![Datum::UInt(u64::MAX), Datum::Double(-0.5)],
                vec![
                    Datum::Decimal(Decimal {
                        value: -12345,
                        scale: 2,
                    }),
                    Datum::Date(dt),
                    Datum::DateTime(dt),
                    Datum::Bytes(vec![0, 255, 7]),
                ],
            ),
            (Vec::new(), Vec::new()),
        ]
    }

    fn write(dir: &Path, rows: &[Record]) -> TempFile {
        let mut w = RunWriter::create(dir).unwrap();
        for (k, v) in rows {
            w.write(k, v).unwrap();
        }
        w.finish().unwrap()
    }

    fn read_all(f: &TempFile) -> Result<Vec<Record>> {
        let mut r = f.reader()?;
        let mut out = Vec::new();
        while let Some(rec) = r.next_record()? {
            out.push(rec);
        }
        Ok(out)
    }

    #[test]
    fn records_read_back_as_written_and_the_file_goes_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), &sample());
        assert_eq!(read_all(&f).unwrap(), sample());
        let path = f.path().to_owned();
        assert!(path.exists());
        drop(f);
        assert!(!path.exists());
    }

    #[test]
    fn every_damaged_byte_and_every_truncation_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), &sample());
        let good = std::fs::read(f.path()).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x41;
            std::fs::write(f.path(), &bad).unwrap();
            assert!(
                matches!(read_all(&f), Err(Error::TempFile { .. })),
                "flipped byte {i}"
            );
        }
        for len in 0..good.len() {
            std::fs::write(f.path(), &good[..len]).unwrap();
            assert!(
                matches!(read_all(&f), Err(Error::TempFile { .. })),
                "truncated to {len}"
            );
        }
    }

    #[test]
    fn clean_dir_removes_only_spill_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), &sample());
        let kept = dir.path().join("other.txt");
        std::fs::write(&kept, b"x").unwrap();
        // As a killed process would leave it: on disk, no guard.
        let path = f.path().to_owned();
        std::mem::forget(f);
        clean_dir(dir.path()).unwrap();
        assert!(!path.exists());
        assert!(kept.exists());
        clean_dir(&dir.path().join("missing")).unwrap();
    }
}
