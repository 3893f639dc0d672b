//! Scans of version-2 value files (docs/format-blob.md, section 7): the
//! key log is read front to back; each entry names a value of the value
//! file, which a scan with [`Values::Read`] reads and checks. Used by GC,
//! `Db::verify_checksums`, the stage merge and the torn-tail cut at open.
//!
//! The good entries are a prefix (entries are appended in value-offset
//! order, in the same round as their values), so a scan stops at the first
//! entry that fails its own checksum, names a value out of place or past
//! the end of the value file, or (reading values) whose value fails the
//! entry's checksum.

use super::format::{self, value_crc, FOOTER_MARK, HEADER_LEN};
use super::keylog::{self, Decoded, ENTRY_OVERHEAD, KEYLOG_FOOTER_LEN};
use super::reader::{ScanEnd, ScannedRecord, Values};
use crate::env::{FileSystem, RandomAccessFile};
use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// Bytes of the key log read at a time.
const WINDOW: usize = 1 << 20;

/// Positioned reads of a key log through a window buffer (entries are
/// small: one read per window, not two per entry).
struct Window<'a> {
    file: &'a dyn RandomAccessFile,
    size: u64,
    buf: Vec<u8>,
    start: u64,
}

impl Window<'_> {
    /// Bytes `[at, at + n)`, `None` past the end of the file or on a read error.
    fn read(&mut self, at: u64, n: usize) -> Option<&[u8]> {
        let end = at.checked_add(n as u64)?;
        if end > self.size {
            return None;
        }
        if at < self.start || end > self.start + self.buf.len() as u64 {
            let len = usize::try_from(self.size - at).map_or(WINDOW, |r| r.min(WINDOW.max(n)));
            self.buf.resize(len, 0);
            self.file.read_exact_at(at, &mut self.buf).ok()?;
            self.start = at;
        }
        let off = usize::try_from(at - self.start).ok()?;
        self.buf.get(off..off + n)
    }
}

/// The value-file number of `path` (`000007.blob` -> 7).
fn number_of(path: &Path) -> Option<u64> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(format::parse_blob_name)
}

/// Scans version-2 value file `vfile` at `vpath` through its key log
/// (reader.rs's `scan` checked the value file's header). A key log that is
/// missing or fails its header check is `Error::Corruption` naming it.
pub(crate) fn scan(
    fs: &Arc<dyn FileSystem>,
    vfile: &dyn RandomAccessFile,
    vpath: &Path,
    values: Values,
    mut f: impl FnMut(ScannedRecord) -> Result<()>,
) -> Result<ScanEnd> {
    let kpath = vpath.with_extension(keylog::KEYLOG_SUFFIX);
    let number = number_of(vpath).unwrap_or(0);
    if !fs.exists(&kpath) {
        return Err(Error::corruption(&kpath, 0, "key log missing"));
    }
    let kfile = fs.open_random(&kpath)?;
    let ksize = kfile.len()?;
    let vsize = vfile.len()?;
    let mut win = Window {
        file: kfile.as_ref(),
        size: ksize,
        buf: Vec::new(),
        start: 0,
    };
    let header = win.read(0, keylog::KEYLOG_HEADER_LEN).unwrap_or_default();
    keylog::check_keylog_header(header, number).map_err(|e| e.into_error(&kpath))?;
    let mut pos = keylog::KEYLOG_HEADER_LEN as u64;
    let mut vend = HEADER_LEN as u64;
    // Where the scan stops: an entry problem names the key log, a value
    // problem the value file.
    let stop = |pos: u64, vend: u64, at: Option<(&Path, u64)>, why: &'static str| ScanEnd {
        version: format::VERSION_2,
        footer: false,
        value_end: vend,
        key_end: pos,
        damage: match at {
            Some((p, o)) => Some((p.to_path_buf(), o, why)),
            None => (pos < ksize).then(|| (kpath.clone(), pos, why)),
        },
    };
    loop {
        let Some(k) = win.read(pos, 4).and_then(keylog::entry_key_len) else {
            return Ok(stop(pos, vend, None, "short key-log entry"));
        };
        if k == FOOTER_MARK {
            let footer = win
                .read(pos, KEYLOG_FOOTER_LEN)
                .and_then(keylog::decode_keylog_footer);
            // A mapped key log may end in zeros after a crash (its trim
            // happens when the writer is dropped).
            let after = pos + KEYLOG_FOOTER_LEN as u64;
            let at_end = after == ksize || zeros_from(&mut win, after, ksize);
            if at_end && footer.is_some_and(|(_, end)| end == vend && end <= vsize) {
                return Ok(ScanEnd {
                    version: format::VERSION_2,
                    footer: true,
                    value_end: vend,
                    key_end: pos,
                    damage: None,
                });
            }
            return Ok(stop(pos, vend, None, "bad key-log footer"));
        }
        let n = ENTRY_OVERHEAD.saturating_add(k as usize);
        let entry = match win.read(pos, n).map(keylog::decode_entry) {
            Some(Ok(Decoded::Entry(e))) => e,
            _ => return Ok(stop(pos, vend, None, "key-log entry fails its check")),
        };
        let len = u64::from(entry.value_len);
        if entry.offset != keylog::place(vend, len) {
            return Ok(stop(
                pos,
                vend,
                None,
                "key-log entry names a value out of place",
            ));
        }
        let at = Some((vpath, entry.offset));
        let value_end = entry.offset + len;
        if value_end > vsize {
            return Ok(stop(
                pos,
                vend,
                at,
                "value extends past the end of the value file",
            ));
        }
        let index = entry.index(number);
        let mut rec = ScannedRecord {
            offset: entry.offset,
            cf: entry.cf,
            key: entry.key,
            index,
            value: None,
        };
        if values == Values::Read {
            match load_value(vfile, &rec) {
                Some(v) => rec.value = Some(v),
                None => return Ok(stop(pos, vend, at, "value fails its key-log checksum")),
            }
        }
        f(rec)?;
        pos += n as u64;
        vend = value_end;
    }
}

/// True if key-log bytes `[at, size)` are all zeros (unreadable: false).
fn zeros_from(win: &mut Window<'_>, mut at: u64, size: u64) -> bool {
    while at < size {
        let n = usize::try_from(size - at).map_or(WINDOW, |r| r.min(WINDOW));
        match win.read(at, n) {
            Some(b) if b.iter().all(|&x| x == 0) => at += n as u64,
            _ => return false,
        }
    }
    true
}

/// Where a key log's footer ends if it is followed by zeros only (a mapped
/// key log whose trim a crash lost): its last non-zero byte is the low
/// byte of the footer's trailing version field. `None` if the bytes do not
/// end that way.
fn footer_end_before_zeros(kfile: &dyn RandomAccessFile, ksize: u64) -> Result<Option<u64>> {
    // A mapped window (4 MiB, `env/mapped.rs`) of zeros at most, and the footer.
    let span = ksize.min((4 << 20) + KEYLOG_FOOTER_LEN as u64);
    let mut tail = vec![0u8; usize::try_from(span).unwrap_or(0)];
    kfile.read_exact_at(ksize - span, &mut tail)?;
    let Some(last) = tail.iter().rposition(|&b| b != 0) else {
        return Ok(None);
    };
    // The footer ends with the version u32 (little-endian, < 256).
    let end = ksize - span + last as u64 + 4;
    Ok((end <= ksize && end >= KEYLOG_FOOTER_LEN as u64).then_some(end))
}

/// Reads the value of a scanned version-2 record and checks it against
/// its entry's checksum; `None` if it fails (damage) or cannot be read.
pub(crate) fn load_value(vfile: &dyn RandomAccessFile, r: &ScannedRecord) -> Option<Vec<u8>> {
    let mut v = vec![0u8; usize::try_from(r.index.value_len).ok()?];
    vfile.read_exact_at(r.offset, &mut v).ok()?;
    (Some(value_crc(r.cf, &r.key, &v)) == r.index.crc).then_some(v)
}

/// Removes the key log of value file `number` if there is one (the value
/// file was emptied: nothing in the pair was acknowledged).
pub(crate) fn remove_keylog(fs: &Arc<dyn FileSystem>, dir: &Path, number: u64) -> Result<()> {
    let kpath = keylog::keylog_path(dir, number);
    if fs.exists(&kpath) {
        fs.remove_file(&kpath)?;
    }
    Ok(())
}

/// At open, for a version-2 value file of `size` bytes (reader.rs's
/// `cut_torn_tail` checked its header): a key log with a valid footer at
/// its end that names a value-file length within the file seals the pair
/// (a longer value file, whose trim of the direct-I/O padding was lost, is
/// cut to it). Otherwise the pair is scanned with values and both files
/// are cut after the last good entry; a missing or torn key-log header
/// empties the value file (docs/format-blob.md, section 7.4). Returns the
/// version, 0 if emptied.
pub(crate) fn cut_torn_tail(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    number: u64,
    size: u64,
) -> Result<u32> {
    let vpath = format::blob_path(dir, number);
    let kpath = keylog::keylog_path(dir, number);
    if fs.exists(&kpath) {
        let ksize = fs.file_size(&kpath)?;
        let min = (keylog::KEYLOG_HEADER_LEN + KEYLOG_FOOTER_LEN) as u64;
        if ksize >= min {
            let kfile = fs.open_random(&kpath)?;
            let mut fb = [0u8; KEYLOG_FOOTER_LEN];
            let mut kend = ksize;
            kfile.read_exact_at(ksize - KEYLOG_FOOTER_LEN as u64, &mut fb)?;
            if keylog::decode_keylog_footer(&fb).is_none() {
                if let Some(e) = footer_end_before_zeros(kfile.as_ref(), ksize)? {
                    kend = e;
                    kfile.read_exact_at(e - KEYLOG_FOOTER_LEN as u64, &mut fb)?;
                }
            }
            if let Some((_, end)) = keylog::decode_keylog_footer(&fb) {
                if end >= HEADER_LEN as u64 && end <= size {
                    if end < size {
                        fs.truncate(&vpath, end)?;
                    }
                    if kend < ksize {
                        fs.truncate(&kpath, kend)?;
                    }
                    return Ok(format::VERSION_2);
                }
            }
        }
    }
    let vfile = fs.open_random(&vpath)?;
    let end = match scan(fs, vfile.as_ref(), &vpath, Values::Read, |_| Ok(())) {
        Ok(end) => end,
        Err(Error::Corruption { .. }) => {
            drop(vfile);
            tracing::warn!(
                "emptying {}: its key log is missing or torn",
                vpath.display()
            );
            remove_keylog(fs, dir, number)?;
            fs.truncate(&vpath, 0)?;
            return Ok(0);
        }
        Err(e) => return Err(e),
    };
    drop(vfile);
    let key_end = if end.footer {
        end.key_end + KEYLOG_FOOTER_LEN as u64
    } else {
        end.key_end
    };
    if key_end < fs.file_size(&kpath)? {
        tracing::warn!("cutting torn tail of {} at {key_end}", kpath.display());
        fs.truncate(&kpath, key_end)?;
    }
    if end.value_end < size {
        tracing::warn!(
            "cutting torn tail of {}: {size} -> {} bytes",
            vpath.display(),
            end.value_end
        );
        fs.truncate(&vpath, end.value_end)?;
    }
    Ok(format::VERSION_2)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::blob::format::{BlobIndex, VERSION_2};
    use crate::blob::keylog::{encode_keylog_footer, encode_keylog_header, GroupEncoder};
    use crate::blob::BlobFile;
    use crate::env::mem::MemFs;
    use std::path::PathBuf;

    /// Value `i`: 4 KiB (page-aligned) for even `i`, 1,000 bytes (packed) for odd.
    fn value(i: u8) -> Vec<u8> {
        vec![i + 1; if i.is_multiple_of(2) { 4096 } else { 1000 }]
    }

    /// (file system, directory, value-file bytes, key-log bytes, indexes).
    type Pair = (
        Arc<dyn FileSystem>,
        PathBuf,
        Vec<u8>,
        Vec<u8>,
        Vec<BlobIndex>,
    );

    /// Value file 7 and its key log holding `n` values (keys `k0`..),
    /// with a footer if `sealed`; returns (fs, dir, value bytes, key-log bytes, indexes).
    fn pair(n: u8, sealed: bool) -> Pair {
        let fs = MemFs::new().arc();
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        let mut enc = GroupEncoder::new(7, HEADER_LEN as u64, 0);
        let idx: Vec<_> = (0..n)
            .map(|i| enc.push(0, format!("k{i}").as_bytes(), &value(i)).unwrap())
            .collect();
        let mut v = format::encode_header(VERSION_2).to_vec();
        v.extend_from_slice(&enc.values);
        let mut k = encode_keylog_header(7).to_vec();
        k.extend_from_slice(&enc.keys);
        if sealed {
            k.extend_from_slice(&encode_keylog_footer(u64::from(n), v.len() as u64));
        }
        write(&fs, &dir, &v, &k);
        (fs, dir, v, k, idx)
    }

    fn write(fs: &Arc<dyn FileSystem>, dir: &Path, v: &[u8], k: &[u8]) {
        let vp = format::blob_path(dir, 7);
        let kp = keylog::keylog_path(dir, 7);
        for (p, b) in [(&vp, v), (&kp, k)] {
            if fs.exists(p) {
                fs.truncate(p, 0).unwrap();
            }
            fs.open_extent_file(p).unwrap().write_all_at(0, b).unwrap();
        }
    }

    /// Keys of the records a full scan (values read) finds after the cut.
    fn survivors(fs: &Arc<dyn FileSystem>, dir: &Path) -> (u32, Vec<Vec<u8>>) {
        let version = crate::blob::reader::cut_torn_tail(fs, dir, 7).unwrap();
        let vp = format::blob_path(dir, 7);
        if fs.file_size(&vp).unwrap() == 0 {
            return (version, Vec::new());
        }
        let f = fs.open_random(&vp).unwrap();
        let mut keys = Vec::new();
        let end = crate::blob::reader::scan(fs, f.as_ref(), &vp, Values::Read, |r| {
            keys.push(r.key);
            Ok(())
        })
        .unwrap();
        assert_eq!(end.damage, None, "a cut pair scans clean");
        (version, keys)
    }

    #[test]
    fn a_sealed_pair_is_kept_and_its_lost_trim_is_redone() {
        let (fs, dir, mut v, k, _) = pair(5, true);
        let len = v.len() as u64;
        v.resize(v.len() + 3000, 0); // the direct-I/O padding a lost trim leaves
        write(&fs, &dir, &v, &k);
        assert_eq!(survivors(&fs, &dir).1.len(), 5);
        assert_eq!(fs.file_size(&format::blob_path(&dir, 7)).unwrap(), len);
    }

    /// A mapped key log keeps the zeros of its last window after a crash.
    /// A footer followed by zeros still seals the pair without reading a
    /// value (a damaged value is not noticed: the pair is trusted as a
    /// sealed one) and the zeros are cut; the scan accepts such a footer;
    /// an unsealed log is cut after its last entry.
    #[test]
    fn a_key_log_ending_in_mapped_zeros() {
        let (fs, dir, mut v, mut k, idx) = pair(5, true);
        let klen = k.len() as u64;
        k.resize(k.len() + 100_000, 0);
        let at = usize::try_from(idx[4].offset).unwrap();
        v[at] ^= 1;
        write(&fs, &dir, &v, &k);
        let kp = keylog::keylog_path(&dir, 7);
        let vp = format::blob_path(&dir, 7);
        let cut = crate::blob::reader::cut_torn_tail(&fs, &dir, 7).unwrap();
        assert_eq!(cut, VERSION_2);
        assert_eq!(fs.file_size(&kp).unwrap(), klen);
        assert_eq!(fs.file_size(&vp).unwrap(), v.len() as u64);
        let (fs, dir, v, mut k, _) = pair(5, true);
        k.resize(k.len() + 5000, 0);
        write(&fs, &dir, &v, &k);
        let f = fs.open_random(&vp).unwrap();
        let end =
            crate::blob::reader::scan(&fs, f.as_ref(), &vp, Values::Skip, |_| Ok(())).unwrap();
        assert!(end.footer);
        let (fs, dir, v, mut k, _) = pair(5, false);
        let klen = k.len() as u64;
        k.resize(k.len() + 100_000, 0);
        write(&fs, &dir, &v, &k);
        assert_eq!(survivors(&fs, &dir).1.len(), 5);
        assert_eq!(fs.file_size(&kp).unwrap(), klen);
    }

    #[test]
    fn a_torn_key_log_entry_cuts_both_files_after_the_last_good_one() {
        let (fs, dir, v, k, idx) = pair(5, false);
        // Half of the last entry ("k4", 30 bytes) reached the disk.
        write(&fs, &dir, &v, &k[..k.len() - 15]);
        let (version, keys) = survivors(&fs, &dir);
        assert_eq!(version, VERSION_2);
        assert_eq!(keys.len(), 4);
        let end = idx[3].offset + idx[3].value_len;
        assert_eq!(fs.file_size(&format::blob_path(&dir, 7)).unwrap(), end);
        assert_eq!(
            fs.file_size(&keylog::keylog_path(&dir, 7)).unwrap(),
            k.len() as u64 - 30
        );
    }

    #[test]
    fn a_value_page_that_never_reached_the_disk_cuts_at_its_entry() {
        let (fs, dir, mut v, k, idx) = pair(5, false);
        // Value 2 (4 KiB, page-aligned) is zeros: its entry and all after go.
        let at = usize::try_from(idx[2].offset).unwrap();
        v[at..at + 4096].fill(0);
        write(&fs, &dir, &v, &k);
        let (_, keys) = survivors(&fs, &dir);
        assert_eq!(keys, vec![b"k0".to_vec(), b"k1".to_vec()]);
        assert_eq!(
            fs.file_size(&format::blob_path(&dir, 7)).unwrap(),
            idx[1].offset + idx[1].value_len
        );
    }

    #[test]
    fn a_value_file_without_its_key_log_is_emptied_and_an_orphan_key_log_removed() {
        let (fs, dir, _, _, _) = pair(3, false);
        fs.remove_file(&keylog::keylog_path(&dir, 7)).unwrap();
        assert_eq!(survivors(&fs, &dir), (0, Vec::new()));
        let (fs, dir, _, _, _) = pair(3, false);
        let mut k = encode_keylog_header(7);
        k[14] ^= 1; // a torn header: names another file
        write(&fs, &dir, &fs_read(&fs, &format::blob_path(&dir, 7)), &k);
        assert_eq!(survivors(&fs, &dir), (0, Vec::new()));
        assert!(!fs.exists(&keylog::keylog_path(&dir, 7)));
        // Through the store: a key log whose value file is gone is removed.
        let (fs, dir, _, _, _) = pair(3, true);
        fs.remove_file(&format::blob_path(&dir, 7)).unwrap();
        let store = crate::blob::BlobStore::open(
            fs.clone(),
            &dir,
            100,
            1 << 20,
            false,
            (false, false, 0),
            (0, 0),
        )
        .unwrap();
        assert_eq!(store.usage().0, 0);
        assert!(!fs.exists(&keylog::keylog_path(&dir, 7)));
    }

    fn fs_read(fs: &Arc<dyn FileSystem>, p: &Path) -> Vec<u8> {
        let f = fs.open_random(p).unwrap();
        let mut b = vec![0u8; usize::try_from(f.len().unwrap()).unwrap()];
        f.read_exact_at(0, &mut b).unwrap();
        b
    }

    /// A point read checks the value against the index's checksum over cf,
    /// key and value: another key's index, another column family, a
    /// version-1 index into a version-2 file and a damaged byte are all
    /// Corruption naming the value file and the value's offset.
    #[test]
    fn a_read_returns_the_value_or_corruption_never_a_wrong_value() {
        let (fs, dir, mut v, k, idx) = pair(3, true);
        let sizes = (VERSION_2, v.len() as u64, k.len() as u64, true);
        let file = BlobFile::new(&fs, &dir, 7, sizes, (false, &None)).unwrap();
        let read = |cf: u32, key: &[u8], i: &BlobIndex| {
            crate::blob::reader::read_record(&file, cf, key, i)
        };
        let kv = read(0, b"k0", &idx[0]).unwrap();
        assert_eq!((&kv[..2], &kv[2..]), (&b"k0"[..], value(0).as_slice()));
        // Aligned: the 4 KiB value 2 starts on a page.
        assert_eq!(idx[2].offset % 4096, 0);
        let corrupt_at = |r: Result<Vec<u8>>, at: u64| match r {
            Err(Error::Corruption {
                file: f, offset, ..
            }) => {
                assert_eq!((f, offset), (format::blob_path(&dir, 7), at));
            }
            other => panic!("expected corruption, got {other:?}"),
        };
        corrupt_at(read(0, b"k1", &idx[0]), idx[0].offset);
        corrupt_at(read(1, b"k0", &idx[0]), idx[0].offset);
        let v1 = BlobIndex {
            crc: None,
            ..idx[0]
        };
        corrupt_at(read(0, b"k0", &v1), idx[0].offset);
        let at = usize::try_from(idx[2].offset).unwrap();
        v[at + 4000] ^= 0x10;
        write(&fs, &dir, &v, &k);
        let file = BlobFile::new(&fs, &dir, 7, sizes, (false, &None)).unwrap();
        let r = crate::blob::reader::read_record(&file, 0, b"k2", &idx[2]);
        corrupt_at(r, idx[2].offset);
    }
}
