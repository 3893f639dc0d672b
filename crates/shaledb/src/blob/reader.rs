//! Reads of value files: one positioned read per value, record scans for GC
//! and for cutting a torn tail at open.

use super::format::{self, BlobIndex, RecordHeader, FOOTER_LEN, HEADER_LEN, RECORD_HEADER_LEN};
use super::{BlobFile, FileSet, FileView};
use crate::env::{FileSystem, RandomAccessFile};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Resolves the BlobIndex in `value` (the LSM value) of `key` in column
/// family `cf`: on return `value` holds the value. The buffer is reused, so
/// a get into a buffer with room allocates nothing for the value on a cache
/// hit, and (without a value cache) reads a version-2 value straight into
/// it. Damage of any kind is `Error::Corruption` naming the file and
/// offset; `value` is then empty.
pub(crate) fn read_value_into(
    files: &FileView,
    dir: &Path,
    cf: u32,
    key: &[u8],
    value: &mut Vec<u8>,
    sharing: Sharing,
) -> Result<()> {
    let idx = BlobIndex::decode(value).ok_or_else(|| {
        Error::corruption(
            dir,
            0,
            format!("malformed BlobIndex of {} bytes", value.len()),
        )
    })?;
    let Some(file) = files.get(idx.file) else {
        return Err(Error::corruption(
            format::blob_path(dir, idx.file),
            idx.offset,
            "value file missing",
        ));
    };
    let read = read_in_file(file, (cf, key), &idx, value, sharing);
    if read.is_err() {
        // An uncached read fills `value` before checking it: a caller's
        // buffer must not be left holding damaged bytes.
        value.clear();
    }
    read
}

/// How a read that misses the value cache meets other readers of the
/// same record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// A point read reads the record itself. Two point reads of one record
    /// at the same moment are rare, and single flight costs every miss an
    /// allocation and two trips through one store-wide lock (reading
    /// alone cut the CPU per get of the contest's read phase, 16 threads of
    /// random gets, by 12 %: docs/benchmarks.md, 2026-11-28 evening).
    Alone,
    /// A scan waits for a concurrent read of the record
    /// ([`super::cache::ValueCache::get_or_read`]): threads scanning the
    /// same keys miss the same values at the same moment.
    Flight,
}

/// False if the record (version 1) or value (version 2) a BlobIndex of
/// `key` points at extends past the end of its value file (recovery's
/// check; lengths only). A missing file is not a torn tail: a file's name
/// is durable before any record in it can be referenced, so a missing file
/// was deleted by GC after the keys it held were re-pointed or overwritten
/// by later writes.
pub(crate) fn record_in_bounds(files: &FileSet, key: &[u8], index: &[u8]) -> bool {
    let Some(idx) = BlobIndex::decode(index) else {
        return true; // not a length question: a read reports the damage
    };
    let Some(file) = files.get(&idx.file) else {
        return true;
    };
    let Some(len) = idx.record_len(key.len()) else {
        return true;
    };
    idx.offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= file.bytes.load(std::sync::atomic::Ordering::Acquire))
}

/// With the value cache, the entry of a record is `key || value` of a
/// record that passed its checks, under (file number, offset): value files
/// are immutable and their numbers never reused, so an entry is never
/// stale; the key and length are compared again on every use, so a
/// BlobIndex pointing at another key's record still fails. The value is
/// copied from the entry into `out` (its capacity reused).
fn read_in_file(
    file: &BlobFile,
    (cf, key): (u32, &[u8]),
    idx: &BlobIndex,
    out: &mut Vec<u8>,
    sharing: Sharing,
) -> Result<()> {
    let Some(cache) = &file.cache else {
        return read_uncached(file, cf, key, idx, out);
    };
    let read = || read_record(file, cf, key, idx);
    let entry = match sharing {
        Sharing::Alone => cache.get_or_read_alone(file.number, idx.offset, read)?,
        Sharing::Flight => cache.get_or_read(file.number, idx.offset, read)?,
    };
    let c = entry.contents();
    if c.len() as u64 != key.len() as u64 + idx.value_len || !c.starts_with(key) {
        return Err(Error::corruption(
            &file.path,
            idx.offset,
            "record holds another key",
        ));
    }
    out.clear();
    out.extend_from_slice(c.get(key.len()..).unwrap_or_default());
    Ok(())
}

/// Without a value cache: a version-2 value of a file not being staged is
/// read straight into `out` and checked there (no `key || value` buffer,
/// no copy); the rest goes through [`read_record`]. On an error `out` may
/// hold anything ([`read_value_into`] empties it).
fn read_uncached(
    file: &BlobFile,
    cf: u32,
    key: &[u8],
    idx: &BlobIndex,
    out: &mut Vec<u8>,
) -> Result<()> {
    let bad = |reason: &str| Error::corruption(&file.path, idx.offset, reason.to_string());
    let (Some(crc), None) = (idx.crc, file.stage_view()) else {
        let kv = read_record(file, cf, key, idx)?;
        out.clear();
        out.extend_from_slice(kv.get(key.len()..).unwrap_or_default());
        return Ok(());
    };
    if file.version != format::VERSION_2 {
        return Err(bad("BlobIndex version differs from its value file's"));
    }
    let len = usize::try_from(idx.value_len).map_err(|_| bad("BlobIndex length overflows"))?;
    out.clear();
    out.resize(len, 0);
    file.file
        .read_exact_at(idx.offset, out)
        .map_err(|e| eof_is_damage(e, bad))?;
    if format::value_crc(cf, key, out) != crc {
        return Err(bad(
            "value fails the BlobIndex checksum (damaged, or another key's value)",
        ));
    }
    Ok(())
}

/// A read that ran past the end of a value file is damage (the index
/// points beyond what was written), not an I/O error.
fn eof_is_damage(e: Error, bad: impl Fn(&str) -> Error) -> Error {
    match e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
            bad("record extends past the end of the value file")
        }
        other => other,
    }
}

/// Reads and checks the value `idx` of `key` in `cf`: returns `key || value`.
/// Version 1 reads the whole record; version 2 reads the value's bytes
/// alone (one aligned page for a 4 KiB value) and checks the index's
/// checksum.
pub(super) fn read_record(
    file: &BlobFile,
    cf: u32,
    key: &[u8],
    idx: &BlobIndex,
) -> Result<Vec<u8>> {
    let bad = |reason: &str| Error::corruption(&file.path, idx.offset, reason.to_string());
    if idx.version() != file.version {
        return Err(bad("BlobIndex version differs from its value file's"));
    }
    let len = idx
        .record_len(key.len())
        .ok_or_else(|| bad("BlobIndex length overflows"))?;
    if let Some(view) = file.stage_view() {
        if let Some(kv) = read_staged(file, &view, (cf, key), idx, len) {
            return Ok(kv);
        }
    }
    // Version 2 reads the value straight behind the key it returns.
    let head = if idx.crc.is_some() { key.len() } else { 0 };
    let mut buf = vec![0u8; head + len];
    file.file
        .read_exact_at(idx.offset, buf.get_mut(head..).unwrap_or_default())
        .map_err(|e| eof_is_damage(e, bad))?;
    check_read(file, (cf, key), idx, buf)
}

/// Reads record `idx` of a file being written through its stage
/// (docs/format-blob.md section 6): the bytes below the written length
/// from the value file, the rest from the stage. The writer thread punches
/// only stage bytes below the written length, after it grew, so a read
/// that raced with it fails its checks and is tried again with the new
/// length. `None`: the value file holds the whole record by now (or the
/// tries ran out), read it from there.
fn read_staged(
    file: &BlobFile,
    view: &super::staged::StageView,
    (cf, key): (u32, &[u8]),
    idx: &BlobIndex,
    len: usize,
) -> Option<Vec<u8>> {
    let end = idx.offset.checked_add(len as u64)?;
    let head = if idx.crc.is_some() { key.len() } else { 0 };
    for _ in 0..4 {
        let written = view.written();
        if written >= end {
            return None;
        }
        let mut buf = vec![0u8; head + len];
        let split = usize::try_from(written.saturating_sub(idx.offset)).ok()?;
        let (front, tail) = buf.get_mut(head..)?.split_at_mut(split.min(len));
        if !front.is_empty() {
            file.file.read_exact_at(idx.offset, front).ok()?;
        }
        let tail_from = idx.offset + split as u64;
        if view.ring == 0 {
            let tail_at = super::staged::STAGE_HEADER + tail_from;
            view.stage.read_exact_at(tail_at, tail).ok()?;
        } else {
            // The ring holds at most `ring` bytes past the written length.
            if tail.len() as u64 > view.ring {
                return None;
            }
            let [(at0, len0), (at1, _)] =
                super::stage_ring::ring_spans(tail_from, tail.len(), view.ring);
            let (first, wrapped) = tail.split_at_mut(len0);
            view.stage.read_exact_at(at0, first).ok()?;
            if !wrapped.is_empty() {
                view.stage.read_exact_at(at1, wrapped).ok()?;
            }
        }
        if let Ok(kv) = check_read(file, (cf, key), idx, buf) {
            return Some(kv);
        }
    }
    None
}

/// Checks a read of `idx`: version 1, `buf` is the record; version 2,
/// `buf` is `key.len()` bytes of room followed by the value. Returns
/// `key || value`.
fn check_read(
    file: &BlobFile,
    (cf, key): (u32, &[u8]),
    idx: &BlobIndex,
    mut buf: Vec<u8>,
) -> Result<Vec<u8>> {
    let Some(crc) = idx.crc else {
        return check_record(file, key, idx, buf);
    };
    let value = buf.get(key.len()..).unwrap_or_default();
    if format::value_crc(cf, key, value) != crc {
        return Err(Error::corruption(
            &file.path,
            idx.offset,
            "value fails the BlobIndex checksum (damaged, or another key's value)",
        ));
    }
    if let Some(room) = buf.get_mut(..key.len()) {
        room.copy_from_slice(key);
    }
    Ok(buf)
}

/// Checks that `buf` is the version-1 record `idx` of `key`; returns `key || value`.
fn check_record(file: &BlobFile, key: &[u8], idx: &BlobIndex, mut buf: Vec<u8>) -> Result<Vec<u8>> {
    let bad = |reason: &str| Error::corruption(&file.path, idx.offset, reason.to_string());
    let h = RecordHeader::decode(&buf).ok_or_else(|| bad("short record"))?;
    if h.key_len as usize != key.len() || u64::from(h.value_len) != idx.value_len {
        return Err(bad("record lengths differ from the BlobIndex"));
    }
    let rec = format::decode_record(&buf).map_err(bad)?;
    if rec.key != key {
        return Err(bad("record holds another key"));
    }
    let end = RECORD_HEADER_LEN + key.len() + rec.value.len();
    buf.truncate(end);
    buf.drain(..RECORD_HEADER_LEN);
    Ok(buf)
}

/// One record found by a scan.
pub(crate) struct ScannedRecord {
    /// Offset of the record (version 1) or of the value (version 2).
    pub offset: u64,
    pub cf: u32,
    pub key: Vec<u8>,
    /// The index that points at this record (version 2: with its checksum).
    pub index: BlobIndex,
    /// The value: always for version 1; for version 2 only if the scan
    /// read values ([`Values::Read`]).
    pub value: Option<Vec<u8>>,
}

/// Whether a version-2 scan reads and checks each value (version 1 reads
/// every record whole anyway).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Values {
    /// Read each value and check it against its key-log entry.
    Read,
    /// Key-log entries only (GC's liveness pass reads no value).
    Skip,
}

/// How a scan ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ScanEnd {
    /// Format version of the file (0: empty).
    pub version: u32,
    /// The scan ended at a valid footer.
    pub footer: bool,
    /// Value-file offset where the good prefix ends (version 1: the
    /// footer or the first bad record; version 2: the end of the last good
    /// value, the header's end if none).
    pub value_end: u64,
    /// Version 2: key-log offset where the good entries end (the footer's
    /// offset, or the first bad entry's); 0 for version 1.
    pub key_end: u64,
    /// Set if the scan stopped before the end of its file (version 1: the
    /// value file; version 2: the key log): the file and offset of what
    /// failed, and why. At open that is a torn tail; in a sealed file, damage.
    pub damage: Option<(PathBuf, u64, &'static str)>,
}

/// Checks the header of `file` at `path`; returns its version.
pub(crate) fn check_header(file: &dyn RandomAccessFile, path: &Path) -> Result<u32> {
    let mut h = [0u8; HEADER_LEN];
    file.read_exact_at(0, &mut h)
        .map_err(|_| Error::corruption(path, 0, "value file shorter than its header"))?;
    format::check_header(&h).map_err(|e| e.into_error(path))
}

/// Calls `f` for each valid record of a value file, front to back, until
/// the footer or the first record that does not check. A version-2 file
/// is scanned through its key log (`fs` opens it; scan2.rs).
pub(crate) fn scan(
    fs: &Arc<dyn FileSystem>,
    file: &dyn RandomAccessFile,
    path: &Path,
    values: Values,
    f: impl FnMut(ScannedRecord) -> Result<()>,
) -> Result<ScanEnd> {
    let size = file.len()?;
    if size == 0 {
        // Created, nothing survived a crash.
        return Ok(ScanEnd {
            version: 0,
            footer: false,
            value_end: 0,
            key_end: 0,
            damage: None,
        });
    }
    match check_header(file, path)? {
        format::VERSION_2 => super::scan2::scan(fs, file, path, values, f),
        _ => scan_v1(file, path, size, f),
    }
}

/// [`scan`] of a version-1 file (records of key and value back to back).
fn scan_v1(
    file: &dyn RandomAccessFile,
    path: &Path,
    size: u64,
    mut f: impl FnMut(ScannedRecord) -> Result<()>,
) -> Result<ScanEnd> {
    let number = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(format::parse_blob_name)
        .unwrap_or(0);
    let torn = |pos: u64, why: &'static str| ScanEnd {
        version: format::VERSION,
        footer: false,
        value_end: pos,
        key_end: 0,
        damage: (pos < size).then(|| (path.to_path_buf(), pos, why)),
    };
    let mut pos = HEADER_LEN as u64;
    loop {
        let mut hb = [0u8; RECORD_HEADER_LEN];
        if pos + RECORD_HEADER_LEN as u64 > size || file.read_exact_at(pos, &mut hb).is_err() {
            return Ok(torn(pos, "short value record"));
        }
        let Some(h) = RecordHeader::decode(&hb) else {
            return Ok(torn(pos, "short value record"));
        };
        if h.key_len == format::FOOTER_MARK {
            let mut fb = [0u8; FOOTER_LEN];
            let ok = pos + FOOTER_LEN as u64 <= size && file.read_exact_at(pos, &mut fb).is_ok();
            if ok && format::decode_footer(&fb).is_some_and(|(_, end)| end == pos) {
                return Ok(ScanEnd {
                    version: format::VERSION,
                    footer: true,
                    value_end: pos,
                    key_end: 0,
                    damage: None,
                });
            }
            return Ok(torn(pos, "bad value-file footer"));
        }
        let len = h.record_len() as u64;
        if pos + len > size {
            return Ok(torn(pos, "value record fails its check"));
        }
        let mut buf = vec![0u8; h.record_len()];
        if file.read_exact_at(pos, &mut buf).is_err() {
            return Ok(torn(pos, "value record fails its check"));
        }
        let Ok(rec) = format::decode_record(&buf) else {
            return Ok(torn(pos, "value record fails its check"));
        };
        f(ScannedRecord {
            offset: pos,
            cf: rec.cf,
            key: rec.key.to_vec(),
            index: BlobIndex {
                file: number,
                offset: pos,
                value_len: u64::from(h.value_len),
                crc: None,
            },
            value: Some(rec.value.to_vec()),
        })?;
        pos += len;
    }
}

/// At open: if a value file has no valid footer (the active file at a
/// crash, or a sealed file whose unsynced footer was lost), cut it after
/// its last whole record (version 2: cut the key log and the value file
/// after the last good entry and value, scan2.rs). Its torn tail can only
/// be referenced by WAL records that were never acknowledged
/// (docs/architecture.md, crash argument); a file too short for its header
/// is emptied (removed later). Returns the file's version (0: emptied).
pub(crate) fn cut_torn_tail(fs: &Arc<dyn FileSystem>, dir: &Path, number: u64) -> Result<u32> {
    let path = format::blob_path(dir, number);
    let size = fs.file_size(&path)?;
    let version = if size < HEADER_LEN as u64 {
        Err(Error::corruption(
            &path,
            0,
            "value file shorter than its header",
        ))
    } else {
        check_header(fs.open_random(&path)?.as_ref(), &path)
    };
    match version {
        Ok(format::VERSION_2) => return super::scan2::cut_torn_tail(fs, dir, number, size),
        Ok(_) => {}
        Err(Error::Corruption { .. }) => {
            // A torn header: nothing was acknowledged in the file.
            super::scan2::remove_keylog(fs, dir, number)?;
            fs.truncate(&path, 0)?;
            return Ok(0);
        }
        Err(e) => return Err(e),
    }
    let file = fs.open_random(&path)?;
    if size >= (HEADER_LEN + FOOTER_LEN) as u64 {
        let mut fb = [0u8; FOOTER_LEN];
        file.read_exact_at(size - FOOTER_LEN as u64, &mut fb)?;
        if format::decode_footer(&fb).is_some_and(|(_, end)| end == size - FOOTER_LEN as u64) {
            return Ok(format::VERSION);
        }
    }
    let end = scan_v1(file.as_ref(), &path, size, |_| Ok(()))?;
    let end = if end.footer {
        end.value_end + FOOTER_LEN as u64
    } else {
        end.value_end
    };
    drop(file);
    if end < size {
        tracing::warn!(
            "cutting torn tail of {}: {} -> {} bytes",
            path.display(),
            size,
            end
        );
        fs.truncate(&path, end)?;
    }
    Ok(format::VERSION)
}

/// Checks every record of every sealed value file (`Db::verify_checksums`):
/// a record (version 2: a key-log entry or a value) that fails before the
/// end of its file is `Error::Corruption` naming the file and offset.
/// Returns the files checked.
pub(crate) fn verify_files(store: &super::BlobStore) -> Result<u64> {
    let mut n = 0;
    for f in store.current().values() {
        if !f.sealed.load(std::sync::atomic::Ordering::Acquire) {
            continue; // the active file takes appends
        }
        let file = store.fs.open_random(&f.path)?;
        let end = scan(&store.fs, file.as_ref(), &f.path, Values::Read, |_| Ok(()))?;
        if let Some((path, at, why)) = end.damage {
            return Err(Error::corruption(path, at, why));
        }
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::staged::{StageView, ALIGN, STAGE_HEADER};
    use crate::env::mem::MemFs;
    use std::path::PathBuf;

    /// A record straddling the written length whose head the writer thread
    /// already punched from the stage: the head comes from the value file,
    /// the tail from the stage (reading either copy alone fails).
    #[test]
    fn a_staged_read_joins_the_value_file_head_and_the_stage_tail() {
        let fs = MemFs::new().arc();
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        let mut bytes = format::encode_header(format::VERSION).to_vec();
        format::encode_record(&mut bytes, 0, b"k0", &vec![b'x'; ALIGN]).unwrap();
        let offset = bytes.len() as u64;
        format::encode_record(&mut bytes, 0, b"k1", &vec![b'y'; ALIGN]).unwrap();
        // Written (and punched) up to 2 blocks: record k1 starts before and ends after.
        let written = 2 * ALIGN;
        assert!(offset < written as u64 && bytes.len() > written);
        let value = fs.open_extent_file(&format::blob_path(&dir, 1)).unwrap();
        value.write_all_at(0, &bytes[..written]).unwrap();
        let stage = fs.open_extent_file(&dir.join("000001.stage")).unwrap();
        let mut staged = bytes.clone();
        staged[..written].fill(0);
        stage.write_all_at(STAGE_HEADER, &staged).unwrap();
        let sizes = (format::VERSION, written as u64, 0, false);
        let file = BlobFile::new(&fs, &dir, 1, sizes, (false, &None)).unwrap();
        let view = StageView::fixed(stage, written as u64);
        let idx = BlobIndex {
            file: 1,
            offset,
            value_len: ALIGN as u64,
            crc: None,
        };
        let len = idx.record_len(2).unwrap();
        let kv = read_staged(&file, &view, (0, b"k1"), &idx, len).unwrap();
        assert_eq!(&kv[..2], b"k1");
        assert_eq!(&kv[2..], vec![b'y'; ALIGN].as_slice());
        // Record k0 is below the written length: read from the value file.
        let idx0 = BlobIndex {
            file: 1,
            offset: format::HEADER_LEN as u64,
            value_len: ALIGN as u64,
            crc: None,
        };
        let len0 = idx0.record_len(2).unwrap();
        assert!(read_staged(&file, &view, (0, b"k0"), &idx0, len0).is_none());
    }
}
