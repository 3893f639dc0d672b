//! Reads of value files: one positioned read per value, record scans for GC
//! and for cutting a torn tail at open.

use super::format::{self, BlobIndex, RecordHeader, FOOTER_LEN, HEADER_LEN, RECORD_HEADER_LEN};
use super::{BlobFile, FileSet, FileView};
use crate::env::{FileSystem, RandomAccessFile};
use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// Resolves the BlobIndex `index` (the LSM value) of `key` to the value.
/// Damage of any kind is `Error::Corruption` naming the file and offset.
pub(crate) fn read_value(
    files: &FileView,
    dir: &Path,
    key: &[u8],
    index: &[u8],
) -> Result<Vec<u8>> {
    let idx = BlobIndex::decode(index).ok_or_else(|| {
        Error::corruption(
            dir,
            0,
            format!("malformed BlobIndex of {} bytes", index.len()),
        )
    })?;
    let Some(file) = files.get(idx.file) else {
        return Err(Error::corruption(
            format::blob_path(dir, idx.file),
            idx.offset,
            "value file missing",
        ));
    };
    read_in_file(file, key, &idx)
}

/// False if the record a BlobIndex of `key` points at extends past the end
/// of its value file (recovery's check; lengths only). A missing file is
/// not a torn tail: a file's name is durable before any record in it can
/// be referenced, so a missing file was deleted by GC after the keys it
/// held were re-pointed or overwritten by later writes.
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
/// record that passed its checks, under (file number, record offset): value
/// files are immutable and their numbers never reused, so an entry is never
/// stale; the key and length are compared again on every use, so a
/// BlobIndex pointing at another key's record still fails.
fn read_in_file(file: &BlobFile, key: &[u8], idx: &BlobIndex) -> Result<Vec<u8>> {
    let Some(cache) = &file.cache else {
        return read_record(file, key, idx).map(|mut kv| {
            kv.drain(..key.len());
            kv
        });
    };
    let entry = cache.get_or_read(file.number, idx.offset, || read_record(file, key, idx))?;
    let c = entry.contents();
    if c.len() as u64 != key.len() as u64 + idx.value_len || !c.starts_with(key) {
        return Err(Error::corruption(
            &file.path,
            idx.offset,
            "record holds another key",
        ));
    }
    Ok(c.get(key.len()..).unwrap_or_default().to_vec())
}

/// Reads and checks the record `idx` of `key`: returns `key || value`.
pub(super) fn read_record(file: &BlobFile, key: &[u8], idx: &BlobIndex) -> Result<Vec<u8>> {
    let bad = |reason: &str| Error::corruption(&file.path, idx.offset, reason.to_string());
    let len = idx
        .record_len(key.len())
        .ok_or_else(|| bad("BlobIndex length overflows"))?;
    if let Some(view) = file.stage_view() {
        if let Some(kv) = read_staged(file, &view, key, idx, len) {
            return Ok(kv);
        }
    }
    let mut buf = vec![0u8; len];
    file.file
        .read_exact_at(idx.offset, &mut buf)
        .map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                bad("record extends past the end of the value file")
            }
            other => other,
        })?;
    check_record(file, key, idx, buf)
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
    key: &[u8],
    idx: &BlobIndex,
    len: usize,
) -> Option<Vec<u8>> {
    let end = idx.offset.checked_add(len as u64)?;
    for _ in 0..4 {
        let written = view.written();
        if written >= end {
            return None;
        }
        let mut buf = vec![0u8; len];
        let split = usize::try_from(written.saturating_sub(idx.offset)).ok()?;
        let (head, tail) = buf.split_at_mut(split.min(len));
        if !head.is_empty() {
            file.file.read_exact_at(idx.offset, head).ok()?;
        }
        let tail_at = super::staged::STAGE_HEADER + idx.offset + split as u64;
        view.stage.read_exact_at(tail_at, tail).ok()?;
        if let Ok(kv) = check_record(file, key, idx, buf) {
            return Some(kv);
        }
    }
    None
}

/// Checks that `buf` is the record `idx` of `key`; returns `key || value`.
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
    pub offset: u64,
    pub cf: u32,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// How a scan ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// A valid footer at this offset.
    Footer(u64),
    /// End of file, or a record that does not check, at this offset.
    Torn(u64),
}

/// Checks the header of `file` at `path`.
fn check_header(file: &dyn RandomAccessFile, path: &Path) -> Result<()> {
    let mut h = [0u8; HEADER_LEN];
    file.read_exact_at(0, &mut h)
        .map_err(|_| Error::corruption(path, 0, "value file shorter than its header"))?;
    match format::check_header(&h) {
        Ok(()) => Ok(()),
        Err(format::HeaderError::Version(version)) => Err(Error::UnsupportedVersion {
            file: path.to_path_buf(),
            version,
        }),
        Err(format::HeaderError::Bad(why)) => Err(Error::corruption(path, 0, why)),
    }
}

/// Calls `f` for each valid record of a value file, front to back, until
/// the footer or the first record that does not check.
pub(crate) fn scan(
    file: &dyn RandomAccessFile,
    path: &Path,
    mut f: impl FnMut(ScannedRecord) -> Result<()>,
) -> Result<ScanEnd> {
    let size = file.len()?;
    if size == 0 {
        return Ok(ScanEnd::Torn(0)); // created, nothing survived a crash
    }
    check_header(file, path)?;
    let mut pos = HEADER_LEN as u64;
    loop {
        let mut hb = [0u8; RECORD_HEADER_LEN];
        if pos + RECORD_HEADER_LEN as u64 > size || file.read_exact_at(pos, &mut hb).is_err() {
            return Ok(ScanEnd::Torn(pos));
        }
        let Some(h) = RecordHeader::decode(&hb) else {
            return Ok(ScanEnd::Torn(pos));
        };
        if h.key_len == format::FOOTER_MARK {
            let mut fb = [0u8; FOOTER_LEN];
            let ok = pos + FOOTER_LEN as u64 <= size && file.read_exact_at(pos, &mut fb).is_ok();
            if ok && format::decode_footer(&fb).is_some_and(|(_, end)| end == pos) {
                return Ok(ScanEnd::Footer(pos));
            }
            return Ok(ScanEnd::Torn(pos));
        }
        let len = h.record_len() as u64;
        if pos + len > size {
            return Ok(ScanEnd::Torn(pos));
        }
        let mut buf = vec![0u8; h.record_len()];
        if file.read_exact_at(pos, &mut buf).is_err() {
            return Ok(ScanEnd::Torn(pos));
        }
        let Ok(rec) = format::decode_record(&buf) else {
            return Ok(ScanEnd::Torn(pos));
        };
        f(ScannedRecord {
            offset: pos,
            cf: rec.cf,
            key: rec.key.to_vec(),
            value: rec.value.to_vec(),
        })?;
        pos += len;
    }
}

/// At open: if a value file has no valid footer (the active file at a
/// crash, or a sealed file whose unsynced footer was lost), cut it after
/// its last whole record. Its torn tail can only be referenced by WAL
/// records that were never acknowledged (docs/architecture.md, crash
/// argument); a file too short for its header is emptied (removed later).
pub(crate) fn cut_torn_tail(fs: &Arc<dyn FileSystem>, dir: &Path, number: u64) -> Result<()> {
    let path = format::blob_path(dir, number);
    let size = fs.file_size(&path)?;
    if size < HEADER_LEN as u64 {
        return fs.truncate(&path, 0);
    }
    let file = fs.open_random(&path)?;
    if size >= (HEADER_LEN + FOOTER_LEN) as u64 {
        let mut fb = [0u8; FOOTER_LEN];
        file.read_exact_at(size - FOOTER_LEN as u64, &mut fb)?;
        if format::decode_footer(&fb).is_some_and(|(_, end)| end == size - FOOTER_LEN as u64) {
            return Ok(());
        }
    }
    let end = match scan(file.as_ref(), &path, |_| Ok(())) {
        Ok(ScanEnd::Torn(end)) => end,
        Ok(ScanEnd::Footer(at)) => at + FOOTER_LEN as u64,
        Err(Error::Corruption { .. }) => 0, // torn header: nothing was acknowledged in it
        Err(e) => return Err(e),
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
    Ok(())
}

/// Checks every record of every sealed value file (`Db::verify_checksums`):
/// a record that fails before the end of its file is `Error::Corruption`
/// naming the file and the record offset. Returns the files checked.
pub(crate) fn verify_files(store: &super::BlobStore) -> Result<u64> {
    let mut n = 0;
    for f in store.current().values() {
        if !f.sealed.load(std::sync::atomic::Ordering::Acquire) {
            continue; // the active file takes appends
        }
        let file = store.fs.open_random(&f.path)?;
        if let ScanEnd::Torn(at) = scan(file.as_ref(), &f.path, |_| Ok(()))? {
            if at < file.len()? {
                return Err(Error::corruption(
                    &f.path,
                    at,
                    "value record fails its check",
                ));
            }
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
        let mut bytes = format::encode_header().to_vec();
        format::encode_record(&mut bytes, 0, b"k0", &vec![b'x'; ALIGN]);
        let offset = bytes.len() as u64;
        format::encode_record(&mut bytes, 0, b"k1", &vec![b'y'; ALIGN]);
        // Written (and punched) up to 2 blocks: record k1 starts before and ends after.
        let written = 2 * ALIGN;
        assert!(offset < written as u64 && bytes.len() > written);
        let value = fs.open_extent_file(&format::blob_path(&dir, 1)).unwrap();
        value.write_all_at(0, &bytes[..written]).unwrap();
        let stage = fs.open_extent_file(&dir.join("000001.stage")).unwrap();
        let mut staged = bytes.clone();
        staged[..written].fill(0);
        stage.write_all_at(STAGE_HEADER, &staged).unwrap();
        let file = BlobFile::new(&fs, &dir, 1, (written as u64, false), (false, &None)).unwrap();
        let view = StageView::fixed(stage, written as u64);
        let idx = BlobIndex {
            file: 1,
            offset,
            value_len: ALIGN as u64,
        };
        let len = idx.record_len(2).unwrap();
        let kv = read_staged(&file, &view, b"k1", &idx, len).unwrap();
        assert_eq!(&kv[..2], b"k1");
        assert_eq!(&kv[2..], vec![b'y'; ALIGN].as_slice());
        // Record k0 is below the written length: read from the value file.
        let idx0 = BlobIndex {
            file: 1,
            offset: format::HEADER_LEN as u64,
            value_len: ALIGN as u64,
        };
        assert!(read_staged(&file, &view, b"k0", &idx0, idx0.record_len(2).unwrap()).is_none());
    }
}
