//! Stage format version 2: the stage as a ring reused in place
//! (docs/format-blob.md, section 6.1). Value-file byte `o` lives at ring
//! offset `STAGE_HEADER + (o mod R)`; the header carries the ring size and
//! the writer thread's **mark** (value-file bytes below it are in the value
//! file). Recovery reads the value file below `max(mark, F)` (`F`: the end
//! of the value file's own good prefix) and the ring from there, through a
//! [`RingView`], and keeps only values that pass their key-log checksums.
//!
//! Worked example (R = 64 MiB): value-file byte 70 MiB + 5 is at stage
//! offset 4,096 + 6 MiB + 5. With mark = 40 MiB, F = 39 MiB and a logical
//! length of 90 MiB at a kill -9, the view reads `[0, 40 MiB)` from the
//! value file and `[40 MiB, 104 MiB)` from the ring; the leader never wrote
//! past mark + R = 104 MiB, and every slot of `[40, 90 MiB)` still holds
//! its byte (the next lap could only have overwritten slots below 40 MiB).

use super::format;
use super::reader::{self, Values};
use super::staged::{self, ALIGN, STAGE_HEADER};
use crate::env::{FileSystem, RandomAccessFile};
use crate::error::{Error, Result};
use crate::util::coding::mask_crc;
use std::path::Path;
use std::sync::Arc;

/// Bytes of the ring (a multiple of [`ALIGN`], at least two pieces).
pub(crate) const RING_SIZE: u64 = 64 << 20;
/// The stage format version of a ring stage.
pub(crate) const STAGE_VERSION_RING: u32 = 2;
/// Bytes of a ring header covered by its checksum, plus that checksum.
pub(crate) const RING_HEADER_USED: usize = 32;
/// Offset of the mark (u64) and its checksum (u32) in the header.
pub(crate) const MARK_AT: u64 = 32;
/// Bytes of a ring header that carry data (the header and the mark).
pub(crate) const RING_HEADER_ALL: usize = 44;

/// The ring header of value file `number` with mark 0, padded to
/// [`STAGE_HEADER`] (the mark's bytes included, so a reused ring starts
/// with a valid mark of 0).
pub(crate) fn encode_ring_header(number: u64, ring: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(ALIGN);
    h.extend_from_slice(staged::STAGE_MAGIC);
    h.extend_from_slice(&STAGE_VERSION_RING.to_le_bytes());
    h.extend_from_slice(&number.to_le_bytes());
    h.extend_from_slice(&ring.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&h));
    h.extend_from_slice(&crc.to_le_bytes());
    h.extend_from_slice(&encode_mark(number, 0));
    h.resize(ALIGN, 0);
    h
}

/// The 12 bytes at [`MARK_AT`]: the mark and the masked crc32c of the
/// file number followed by the mark (a mark is never read as another
/// file's).
pub(crate) fn encode_mark(number: u64, mark: u64) -> [u8; 12] {
    let mut body = [0u8; 16];
    body[..8].copy_from_slice(&number.to_le_bytes());
    body[8..].copy_from_slice(&mark.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&body));
    let mut out = [0u8; 12];
    out[..8].copy_from_slice(&mark.to_le_bytes());
    out[8..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The mark in `bytes` (the 12 bytes at [`MARK_AT`]); 0 if short or if it
/// fails its checksum (the value file's own scan then decides alone).
pub(crate) fn decode_mark(number: u64, bytes: &[u8]) -> u64 {
    let mark = match bytes.get(..8).map(<[u8; 8]>::try_from) {
        Some(Ok(m)) => u64::from_le_bytes(m),
        _ => return 0,
    };
    if bytes.get(..12) == Some(encode_mark(number, mark).as_slice()) {
        mark
    } else {
        0
    }
}

/// Where value-file bytes `[at, at + len)` lie in a ring of `ring` bytes:
/// up to two (stage offset, length) pieces (two when the range wraps).
/// `len` must not exceed `ring`.
pub(crate) fn ring_spans(at: u64, len: usize, ring: u64) -> [(u64, usize); 2] {
    let slot = at % ring;
    let first = usize::try_from(ring - slot).map_or(len, |room| room.min(len));
    [(STAGE_HEADER + slot, first), (STAGE_HEADER, len - first)]
}

/// Reads `buf.len()` bytes of `file` (`size` bytes long) at `at`; bytes
/// past its end read as zeros.
fn read_or_zeros(file: &dyn RandomAccessFile, size: u64, at: u64, buf: &mut [u8]) -> Result<()> {
    buf.fill(0);
    let have = usize::try_from(size.saturating_sub(at)).map_or(buf.len(), |h| h.min(buf.len()));
    match buf.get_mut(..have) {
        Some(dst) if !dst.is_empty() => file.read_exact_at(at, dst),
        _ => Ok(()),
    }
}

/// The value file as recovery sees it: byte `o` from the value file for
/// `o < split`, from the ring for `split <= o < split + ring`, zeros past
/// that (and past either file's end).
pub(crate) struct RingView<'a> {
    pub value: &'a dyn RandomAccessFile,
    pub value_size: u64,
    pub stage: &'a dyn RandomAccessFile,
    pub stage_size: u64,
    pub ring: u64,
    pub split: u64,
}

impl RandomAccessFile for RingView<'_> {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let n = buf.len() as u64;
        let front = usize::try_from(self.split.saturating_sub(offset).min(n)).unwrap_or(0);
        let (head, rest) = buf.split_at_mut(front);
        read_or_zeros(self.value, self.value_size, offset, head)?;
        // From here on `at >= split`, so at most `ring` bytes remain in the
        // window: one pass over at most two spans.
        let at = offset + front as u64;
        let take = usize::try_from((self.split + self.ring).saturating_sub(at))
            .map_or(rest.len(), |r| r.min(rest.len()));
        let (now, past) = rest.split_at_mut(take);
        past.fill(0); // past the window: never written in this lap
        let [(s0, l0), (s1, _)] = ring_spans(at, now.len(), self.ring);
        let (a, b) = now.split_at_mut(l0);
        read_or_zeros(self.stage, self.stage_size, s0, a)?;
        read_or_zeros(self.stage, self.stage_size, s1, b)
    }

    fn len(&self) -> Result<u64> {
        Ok(self.split + self.ring)
    }
}

/// What a ring header says (bytes 0..[`RING_HEADER_ALL`], checked by the
/// caller up to the version).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RingHeader {
    pub number: u64,
    pub ring: u64,
    pub mark: u64,
}

/// Decodes a version-2 stage header whose magic and version were checked.
/// `None`: shorter than its checked part (created, never acknowledged).
pub(crate) fn decode_ring_header(path: &Path, bytes: &[u8]) -> Result<Option<RingHeader>> {
    let Some(body) = bytes.get(..RING_HEADER_USED - 4) else {
        return Ok(None);
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let stored = bytes
        .get(RING_HEADER_USED - 4..RING_HEADER_USED)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes);
    if stored != Some(mask_crc(crc32c::crc32c(body))) {
        return Err(Error::corruption(
            path,
            0,
            "stage header fails its checksum",
        ));
    }
    let (number, ring) = (u64_at(12), u64_at(20));
    if ring < 2 * staged::PIECE as u64 || !ring.is_multiple_of(ALIGN as u64) {
        return Err(Error::corruption(path, 20, format!("bad ring size {ring}")));
    }
    let mark_at = MARK_AT as usize;
    let mark = decode_mark(number, bytes.get(mark_at..).unwrap_or_default());
    Ok(Some(RingHeader { number, ring, mark }))
}

/// Recovers value file `number` from its ring stage (docs/format-blob.md,
/// section 6.1): the value file's own good prefix ends at `F`; the pair is
/// scanned again through a [`RingView`] split at `max(mark, F)`, and each
/// value it yields past the split is written into the value file, which is
/// then fsynced. The caller removes the stage; the torn-tail cut follows.
pub(crate) fn recover_ring(
    fs: &Arc<dyn FileSystem>,
    vpath: &Path,
    stage: &dyn RandomAccessFile,
    header: &RingHeader,
) -> Result<()> {
    let value = fs.open_random(vpath)?;
    let value_size = value.len()?;
    let own = match reader::scan(fs, value.as_ref(), vpath, Values::Skip, |_| Ok(())) {
        // Entries only: is there a footer, and is the file version 2?
        Ok(end) if end.footer => return Ok(()), // complete: the ring adds nothing
        Ok(end) if end.version != 0 && end.version != format::VERSION_2 => {
            return Err(Error::corruption(
                vpath,
                0,
                "a ring stage for a value file of format version 1",
            ))
        }
        Ok(_) => match reader::scan(fs, value.as_ref(), vpath, Values::Read, |_| Ok(())) {
            Ok(end) => end.value_end,
            Err(Error::Corruption { .. }) => 0,
            Err(e) => return Err(e),
        },
        Err(Error::Corruption { .. }) => 0, // header (or key-log header) not fully written
        Err(e) => return Err(e),
    };
    let split = header.mark.max(own);
    let view = RingView {
        value: value.as_ref(),
        value_size,
        stage,
        stage_size: stage.len()?,
        ring: header.ring,
        split,
    };
    let out = fs.open_extent_file(vpath)?;
    let mut wrote = false;
    let scanned = reader::scan(fs, &view, vpath, Values::Read, |rec| {
        let Some(v) = rec.value.as_ref() else {
            return Ok(());
        };
        if rec.offset + v.len() as u64 > split {
            out.write_all_at(rec.offset, v)?;
            wrote = true;
        }
        Ok(())
    });
    match scanned {
        Ok(_) | Err(Error::Corruption { .. }) => {}
        Err(e) => return Err(e),
    }
    if wrote {
        if split < format::HEADER_LEN as u64 {
            // The value file's header was still only in the ring.
            let mut h = [0u8; format::HEADER_LEN];
            view.read_exact_at(0, &mut h)?;
            out.write_all_at(0, &h)?;
        }
        out.sync()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::blob::keylog::{self, GroupEncoder};
    use crate::blob::stage_recovery;
    use crate::env::mem::MemFs;
    use std::path::PathBuf;

    const RING: u64 = 2 << 20;
    /// 12 KiB values: a written length inside a value puts the value
    /// file's good prefix `F` below the mark.
    const VLEN: usize = 3 * ALIGN;
    const N: usize = 400;

    fn value(i: usize) -> Vec<u8> {
        let mut v = format!("value {i} ").into_bytes();
        v.resize(VLEN, (i % 251) as u8);
        v
    }

    /// The logical value file and key log of `N` values of key `k{i}`.
    fn pair() -> (Vec<u8>, Vec<u8>, Vec<u64>) {
        let mut g = GroupEncoder::new(7, format::HEADER_LEN as u64, 0);
        let offsets = (0..N)
            .map(|i| {
                g.push(0, format!("k{i}").as_bytes(), &value(i))
                    .unwrap()
                    .offset
            })
            .collect();
        let mut bytes = format::encode_header(format::VERSION_2).to_vec();
        bytes.extend_from_slice(&g.values);
        let mut keys = keylog::encode_keylog_header(7).to_vec();
        keys.extend_from_slice(&g.keys);
        (bytes, keys, offsets)
    }

    /// The ring after value-file bytes `[0, bytes.len())` were staged in order.
    fn ring_of(bytes: &[u8]) -> Vec<u8> {
        let mut ring = vec![0u8; RING as usize];
        for (o, b) in bytes.iter().enumerate() {
            ring[o % RING as usize] = *b;
        }
        ring
    }

    /// A killed staged file: the value file holds `[0, written)` zero-padded
    /// to a block, the stage `ring` with `mark`, the key log every entry.
    fn setup(
        bytes: &[u8],
        keys: &[u8],
        written: usize,
        ring: &[u8],
        mark: u64,
    ) -> (Arc<dyn FileSystem>, PathBuf) {
        let fs = MemFs::new().arc();
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        let mut v = bytes[..written].to_vec();
        v.resize(written.div_ceil(ALIGN) * ALIGN, 0);
        let vf = fs.open_extent_file(&format::blob_path(&dir, 7)).unwrap();
        vf.write_all_at(0, &v).unwrap();
        let kf = fs.open_extent_file(&keylog::keylog_path(&dir, 7)).unwrap();
        kf.write_all_at(0, keys).unwrap();
        let s = fs.open_extent_file(&staged::stage_path(&dir, 7)).unwrap();
        s.write_all_at(0, &encode_ring_header(7, RING)).unwrap();
        s.write_all_at(MARK_AT, &encode_mark(7, mark)).unwrap();
        s.write_all_at(STAGE_HEADER, ring).unwrap();
        (fs, dir)
    }

    /// Recovers, cuts, and returns how many values survive; every survivor
    /// must be its key's true value (never a wrong one).
    fn recover_and_count(fs: &Arc<dyn FileSystem>, dir: &Path) -> usize {
        assert!(stage_recovery::recover(fs, dir, 7).unwrap());
        assert!(!fs.exists(&staged::stage_path(dir, 7)));
        reader::cut_torn_tail(fs, dir, 7).unwrap();
        let path = format::blob_path(dir, 7);
        let f = fs.open_random(&path).unwrap();
        let mut n = 0;
        reader::scan(fs, f.as_ref(), &path, Values::Read, |rec| {
            assert_eq!(rec.key, format!("k{n}").into_bytes());
            assert_eq!(rec.value.unwrap(), value(n));
            n += 1;
            Ok(())
        })
        .unwrap();
        n
    }

    /// kill -9 after the ring wrapped twice: the value file holds the bytes
    /// below a written length inside a value, the ring exactly the last `R`
    /// bytes, starting at the mark. Splitting at the value file's own
    /// prefix `F` (below the mark) would read overwritten ring bytes; the
    /// split at `max(mark, F)` gives back every value.
    #[test]
    fn a_wrapped_ring_gives_back_every_value() {
        let (bytes, keys, _) = pair();
        let len = bytes.len();
        let mark = len - RING as usize;
        assert!(mark.is_multiple_of(ALIGN) && !(mark - ALIGN).is_multiple_of(VLEN));
        let (fs, dir) = setup(&bytes, &keys, mark + 100, &ring_of(&bytes), mark as u64);
        assert_eq!(recover_and_count(&fs, &dir), N);
    }

    /// A lost ring page (zeros), a ring byte that fails the value's
    /// checksum, and a page of an older lap (power loss): the key log and
    /// the value file are cut after the last good value before it.
    #[test]
    fn a_damaged_ring_cuts_at_the_last_good_value() {
        let (bytes, keys, offsets) = pair();
        let mark = bytes.len() - RING as usize;
        let j = N - 20;
        let slot = offsets[j] as usize % RING as usize + 5000;
        for damage in 0..3 {
            let mut ring = ring_of(&bytes);
            match damage {
                0 => ring[slot / ALIGN * ALIGN..][..ALIGN].fill(0),
                1 => ring[slot] ^= 1,
                _ => {
                    let old = offsets[j] as usize + 5000 - RING as usize;
                    ring[slot..slot + 64].copy_from_slice(&bytes[old..old + 64]);
                }
            }
            let (fs, dir) = setup(&bytes, &keys, mark + 100, &ring, mark as u64);
            assert_eq!(recover_and_count(&fs, &dir), j, "damage {damage}");
            let klen = fs.file_size(&keylog::keylog_path(&dir, 7)).unwrap();
            let entries: usize = (0..j)
                .map(|i| keylog::ENTRY_OVERHEAD + format!("k{i}").len())
                .sum();
            assert_eq!(klen as usize, keylog::KEYLOG_HEADER_LEN + entries);
            let vlen = fs.file_size(&format::blob_path(&dir, 7)).unwrap();
            assert_eq!(vlen, offsets[j - 1] + VLEN as u64);
        }
    }

    /// Killed before the writer thread wrote anything: the value file is
    /// empty and its header too comes from the ring. A mark that fails its
    /// checksum reads as 0.
    #[test]
    fn an_empty_value_file_is_rebuilt_from_the_ring() {
        let (bytes, keys, _) = pair();
        let part = &bytes[..RING as usize - 1000];
        let (fs, dir) = setup(part, &keys, 0, &ring_of(part), 0);
        let s = fs.open_extent_file(&staged::stage_path(&dir, 7)).unwrap();
        s.write_all_at(MARK_AT, &[0xFF; 12]).unwrap();
        assert_eq!(recover_and_count(&fs, &dir), (part.len() - ALIGN) / VLEN);
    }

    /// A reused ring whose header still names the value file it served
    /// before (the rename survived, the header rewrite did not): nothing of
    /// this file was acknowledged; the stage is removed, the file untouched.
    #[test]
    fn a_ring_naming_another_file_is_removed() {
        let (bytes, keys, _) = pair();
        let written = 100 * VLEN;
        // One lap (no wrap): a recovery that trusted this ring would find
        // ~170 values in it.
        let lap = &bytes[..RING as usize];
        let (fs, dir) = setup(&bytes, &keys, written, &ring_of(lap), 0);
        let s = fs.open_extent_file(&staged::stage_path(&dir, 7)).unwrap();
        s.write_all_at(0, &encode_ring_header(6, RING)).unwrap();
        assert_eq!(recover_and_count(&fs, &dir), (written - ALIGN) / VLEN);
    }

    #[test]
    fn marks_spans_and_views() {
        assert_eq!(decode_mark(7, &encode_mark(7, 8192)), 8192);
        assert_eq!(decode_mark(8, &encode_mark(7, 8192)), 0);
        let mut m = encode_mark(7, 8192);
        m[1] ^= 1;
        assert_eq!(decode_mark(7, &m), 0);
        assert_eq!(decode_mark(7, &m[..5]), 0);
        assert_eq!(
            ring_spans(10, 5, 16),
            [(STAGE_HEADER + 10, 5), (STAGE_HEADER, 0)]
        );
        assert_eq!(
            ring_spans(30, 5, 16),
            [(STAGE_HEADER + 14, 2), (STAGE_HEADER, 3)]
        );
        let h = encode_ring_header(7, RING);
        let p = Path::new("/x.stage");
        let got = decode_ring_header(p, &h[..RING_HEADER_ALL])
            .unwrap()
            .unwrap();
        assert_eq!(
            got,
            RingHeader {
                number: 7,
                ring: RING,
                mark: 0
            }
        );
        assert!(decode_ring_header(p, &h[..20]).unwrap().is_none());
        let mut bad = h.clone();
        bad[21] ^= 1;
        assert!(decode_ring_header(p, &bad[..RING_HEADER_ALL]).is_err());
        // A view split at 8 over a 2 MiB ring: bytes 0..8 from the value
        // file, 8.. from the ring (wrapping), zeros past split + ring.
        let fs = MemFs::new().arc();
        let vf = fs.open_extent_file(Path::new("/v")).unwrap();
        vf.write_all_at(0, &[1u8; 16]).unwrap();
        let sf = fs.open_extent_file(Path::new("/s")).unwrap();
        sf.write_all_at(STAGE_HEADER, &vec![2u8; RING as usize])
            .unwrap();
        sf.write_all_at(STAGE_HEADER, &[3u8; 8]).unwrap();
        let view = RingView {
            value: vf.as_ref(),
            value_size: 16,
            stage: sf.as_ref(),
            stage_size: sf.len().unwrap(),
            ring: RING,
            split: 8,
        };
        let mut buf = vec![9u8; 12];
        view.read_exact_at(4, &mut buf).unwrap();
        assert_eq!(buf, [1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2]);
        // Wrapping at RING, and the window ends at split + RING.
        view.read_exact_at(RING - 2, &mut buf).unwrap();
        assert_eq!(buf, [2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0]);
    }
}
