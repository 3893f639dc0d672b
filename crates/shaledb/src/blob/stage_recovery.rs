//! Recovery of a value file from its stage file at open (docs/format-blob.md,
//! section 6): every block of the value file and every page of the stage
//! holds a prefix of the block's one true content followed by zeros, so the
//! copy whose last non-zero byte is later contains the other. The merge
//! writes that copy to the value file, block by block, from the end of the
//! value file's valid records; the torn-tail cut that follows finds the
//! last whole record.
//!
//! Worked example (blocks of 8 bytes for brevity): the value file's block 5
//! is `ab000000` (written zero-padded before a kill -9), the stage's page 5
//! is `abcdef00` (filled later, not yet written by the writer thread): the
//! stage's last non-zero byte (index 5) is later, so the block becomes
//! `abcdef00`. Had the writer thread written the block whole and punched the
//! page, the stage would be `00000000` and the value file's copy would win.

use super::format;
use super::reader::{self, Values};
use super::stage_ring::{self, RingHeader, RING_HEADER_ALL, STAGE_VERSION_RING};
use super::staged::{self, ALIGN, STAGE_HEADER, STAGE_HEADER_USED};
use crate::env::FileSystem;
use crate::error::{Error, Result};
use crate::util::coding::mask_crc;
use std::path::Path;
use std::sync::Arc;

/// Bytes merged per read of each copy.
const WINDOW: usize = 1 << 20;

/// What a stage file's header says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StageHeader {
    /// Short or all zeros: the file was created but never held an
    /// acknowledged byte (its header is synced before the first append).
    Unfinished,
    /// A valid format-1 header naming this value file.
    Valid(u64),
    /// A valid format-2 (ring) header (docs/format-blob.md, section 6.1).
    Ring(RingHeader),
}

/// Checks a stage header (`bytes` = the first [`RING_HEADER_ALL`] bytes of
/// the file, or all of it if shorter).
pub(crate) fn decode_stage_header(path: &Path, bytes: &[u8]) -> Result<StageHeader> {
    if bytes.len() < STAGE_HEADER_USED || bytes.iter().all(|&b| b == 0) {
        return Ok(StageHeader::Unfinished);
    }
    let field = |at: usize, n: usize| bytes.get(at..at + n).unwrap_or_default();
    if field(0, 8) != staged::STAGE_MAGIC {
        return Err(Error::corruption(path, 0, "not a stage file (bad magic)"));
    }
    let version = field(8, 4).try_into().map_or(0, u32::from_le_bytes);
    match version {
        staged::STAGE_VERSION => {}
        STAGE_VERSION_RING => {
            return Ok(match stage_ring::decode_ring_header(path, bytes)? {
                Some(h) => StageHeader::Ring(h),
                None => StageHeader::Unfinished,
            })
        }
        _ => {
            return Err(Error::UnsupportedVersion {
                file: path.to_path_buf(),
                version,
            })
        }
    }
    let crc_ok = field(20, 4)
        .try_into()
        .map(u32::from_le_bytes)
        .is_ok_and(|c| c == mask_crc(crc32c::crc32c(field(0, 20))));
    if !crc_ok {
        return Err(Error::corruption(
            path,
            0,
            "stage header fails its checksum",
        ));
    }
    Ok(StageHeader::Valid(
        field(12, 8).try_into().map_or(0, u64::from_le_bytes),
    ))
}

/// Index one past the last non-zero byte of `block` (0 if all zeros).
fn filled(block: &[u8]) -> usize {
    block.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

/// Reads `len` bytes of `file` at `at`; bytes past its end read as zeros.
fn read_or_zeros(
    file: &dyn crate::env::RandomAccessFile,
    size: u64,
    at: u64,
    len: usize,
) -> Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    let have = usize::try_from(size.saturating_sub(at)).map_or(len, |h| h.min(len));
    if have > 0 {
        if let Some(dst) = out.get_mut(..have) {
            file.read_exact_at(at, dst)?;
        }
    }
    Ok(out)
}

/// Merges stage file `NNNNNN.stage` into value file `number` and removes
/// it (section 6 of docs/format-blob.md). Returns true if a stage file
/// was found.
pub(crate) fn recover(fs: &Arc<dyn FileSystem>, dir: &Path, number: u64) -> Result<bool> {
    let spath = staged::stage_path(dir, number);
    if !fs.exists(&spath) {
        return Ok(false);
    }
    let stage = fs.open_random(&spath)?;
    let ssize = stage.len()?;
    let have = usize::try_from(ssize).map_or(RING_HEADER_ALL, |n| n.min(RING_HEADER_ALL));
    let head = read_or_zeros(stage.as_ref(), ssize, 0, have)?;
    let vpath = format::blob_path(dir, number);
    match decode_stage_header(&spath, &head)? {
        StageHeader::Unfinished => {}
        StageHeader::Valid(n) if n != number => {
            return Err(Error::corruption(
                &spath,
                12,
                format!("stage file names value file {n}"),
            ));
        }
        StageHeader::Valid(_) if fs.exists(&vpath) => merge(fs, &vpath, stage.as_ref(), ssize)?,
        StageHeader::Valid(_) => {} // the value file was never created
        // A reused ring renamed to this file's name whose header rewrite was
        // lost: nothing of this file was acknowledged (section 6.1).
        StageHeader::Ring(h) if h.number != number => {}
        StageHeader::Ring(h) if fs.exists(&vpath) => {
            stage_ring::recover_ring(fs, &vpath, stage.as_ref(), &h)?
        }
        StageHeader::Ring(_) => {}
    }
    drop(stage);
    fs.remove_file(&spath)?;
    fs.sync_dir(dir)?;
    Ok(true)
}

fn merge(
    fs: &Arc<dyn FileSystem>,
    vpath: &Path,
    stage: &dyn crate::env::RandomAccessFile,
    ssize: u64,
) -> Result<()> {
    let value = fs.open_random(vpath)?;
    let vsize = value.len()?;
    // Version 2 scans through the key log, reading each value: the good
    // prefix ends at the first value the value file lacks.
    let end = match reader::scan(fs, value.as_ref(), vpath, Values::Read, |_| Ok(())) {
        Ok(end) if end.footer => return Ok(()), // complete: nothing staged is missing
        Ok(end) => end.value_end,
        Err(Error::Corruption { .. }) => 0, // header (or key-log header) not fully written
        Err(e) => return Err(e),
    };
    let align = ALIGN as u64;
    let from = end / align * align;
    let staged_len = ssize.saturating_sub(STAGE_HEADER);
    let to = vsize.max(staged_len).div_ceil(align) * align;
    let out = fs.open_extent_file(vpath)?;
    let mut at = from;
    while at < to {
        let len = usize::try_from(to - at).map_or(WINDOW, |n| n.min(WINDOW));
        let mut v = read_or_zeros(value.as_ref(), vsize, at, len)?;
        let s = read_or_zeros(stage, ssize, STAGE_HEADER + at, len)?;
        for (vb, sb) in v.chunks_mut(ALIGN).zip(s.chunks(ALIGN)) {
            if filled(sb) > filled(vb) {
                vb.copy_from_slice(sb);
            }
        }
        out.write_all_at(at, &v)?;
        at += len as u64;
    }
    out.sync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::mem::MemFs;
    use std::path::PathBuf;

    fn setup(value: &[u8], stage_body: &[u8]) -> (Arc<dyn FileSystem>, PathBuf) {
        let fs = MemFs::new().arc();
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        let v = fs.open_extent_file(&format::blob_path(&dir, 7)).unwrap();
        v.write_all_at(0, value).unwrap();
        let s = fs.open_extent_file(&staged::stage_path(&dir, 7)).unwrap();
        s.write_all_at(0, &staged::encode_stage_header(7)).unwrap();
        s.write_all_at(STAGE_HEADER, stage_body).unwrap();
        (fs, dir)
    }

    /// Header + `n` records of key `k{i}` and a 3000-byte value.
    fn records(n: usize) -> Vec<u8> {
        let mut out = format::encode_header(format::VERSION).to_vec();
        for i in 0..n {
            let value = vec![b'a' + (i % 26) as u8; 3000];
            format::encode_record(&mut out, 0, format!("k{i}").as_bytes(), &value).unwrap();
        }
        out
    }

    fn whole_records(fs: &Arc<dyn FileSystem>, dir: &Path) -> usize {
        reader::cut_torn_tail(fs, dir, 7).unwrap();
        let f = fs.open_random(&format::blob_path(dir, 7)).unwrap();
        let mut n = 0;
        reader::scan(
            fs,
            f.as_ref(),
            &format::blob_path(dir, 7),
            Values::Read,
            |_| {
                n += 1;
                Ok(())
            },
        )
        .unwrap();
        n
    }

    /// The value file has blocks 0-1 whole and block 2 zero-padded; the
    /// stage has blocks 0-1 punched and the rest: all 5 records come back.
    #[test]
    fn merge_takes_the_fuller_copy_of_each_block() {
        let all = records(5);
        let mut value = all[..2 * ALIGN + 100].to_vec();
        value.resize(3 * ALIGN, 0);
        let mut stage = all.clone();
        stage[..2 * ALIGN].fill(0);
        let (fs, dir) = setup(&value, &stage);
        assert!(recover(&fs, &dir, 7).unwrap());
        assert!(!fs.exists(&staged::stage_path(&dir, 7)));
        assert_eq!(whole_records(&fs, &dir), 5);
        let f = fs.open_random(&format::blob_path(&dir, 7)).unwrap();
        let mut got = vec![0u8; all.len()];
        f.read_exact_at(0, &mut got).unwrap();
        assert_eq!(got, all);
    }

    /// An empty value file (killed before the first piece was written):
    /// everything comes from the stage.
    #[test]
    fn empty_value_file_is_rebuilt_from_the_stage() {
        let all = records(3);
        let (fs, dir) = setup(&[], &all);
        recover(&fs, &dir, 7).unwrap();
        assert_eq!(whole_records(&fs, &dir), 3);
    }

    /// A stage that lost a page (power loss) cuts the file at the first
    /// record that is whole in neither copy; no wrong record survives.
    #[test]
    fn a_block_missing_from_both_copies_cuts_there() {
        let all = records(5);
        let mut stage = all.clone();
        stage[ALIGN..2 * ALIGN].fill(0);
        let (fs, dir) = setup(&all[..ALIGN], &stage);
        recover(&fs, &dir, 7).unwrap();
        // Record 0 is bytes 16..3,034; record 1 (3,034..6,052) crosses the
        // lost block 1.
        assert_eq!(whole_records(&fs, &dir), 1);
    }

    #[test]
    fn headers_are_checked() {
        let p = Path::new("/x.stage");
        let h = staged::encode_stage_header(9);
        assert_eq!(
            decode_stage_header(p, &h[..24]).unwrap(),
            StageHeader::Valid(9)
        );
        assert_eq!(
            decode_stage_header(p, &[0; 24]).unwrap(),
            StageHeader::Unfinished
        );
        assert_eq!(
            decode_stage_header(p, &h[..10]).unwrap(),
            StageHeader::Unfinished
        );
        let mut bad = h[..24].to_vec();
        bad[13] ^= 1;
        assert!(matches!(
            decode_stage_header(p, &bad),
            Err(Error::Corruption { .. })
        ));
        let mut v2 = h[..24].to_vec();
        v2[8] = 3;
        let crc = mask_crc(crc32c::crc32c(&v2[..20]));
        v2[20..24].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            decode_stage_header(p, &v2),
            Err(Error::UnsupportedVersion { version: 3, .. })
        ));
    }
}
