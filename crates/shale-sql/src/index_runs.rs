//! Sorted runs of index entries spilled by a bulk index build
//! (docs/tables.md, "CREATE INDEX"), and the merge that reads them back
//! by key range.
//!
//! ```text
//! header   8 bytes magic "SHLIXRUN", u32 LE version (1)
//! block    u32 LE payload length (> 0), u32 LE CRC32C of the payload,
//!          payload: entries, each u32 LE key length + key bytes, ascending
//! trailer  u32 LE 0 (no block is empty), u64 LE entry count,
//!          u32 LE CRC32C of the count's 8 bytes
//! ```
//!
//! Blocks are about [`BLOCK_BYTES`]; the writer keeps each block's first
//! key and file offset in memory ([`SpilledRun::blocks`]), a sparse index
//! with two uses: the build picks its partition splitters from these keys,
//! and a partition's reader seeks to the block where its range starts. A
//! damaged block fails its checksum and a truncated file ends without the
//! trailer (a reader that reads to the end checks the count); the build
//! also compares the entries ingested with the entries scanned. Files are
//! named like the other spill files (`shale-<pid>-ix<n>.spill`), so the
//! next open's `spill::clean_dir` removes those of a killed process.

use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"SHLIXRUN";
const VERSION: u32 = 1;
const HEADER: u64 = 12;
/// Target payload of a block: the sparse index holds one key per block.
pub const BLOCK_BYTES: usize = 64 << 10;
/// A longer block or key is taken as damage (a bad length must not
/// allocate GiBs).
const MAX_BLOCK: u32 = 1 << 30;

static NEXT_FILE: AtomicU64 = AtomicU64::new(0);

fn err(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::TempFile {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// One block of a spilled run: its first key and where it starts.
pub struct BlockIndex {
    pub first: Vec<u8>,
    offset: u64,
}

/// A spilled sorted run on disk, removed when dropped.
pub struct SpilledRun {
    path: PathBuf,
    pub blocks: Vec<BlockIndex>,
    pub entries: u64,
}

impl Drop for SpilledRun {
    fn drop(&mut self) {
        // A failure leaves the file for the next open's `clean_dir`.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes `keys` (strictly ascending) to a new run file in `dir`.
pub fn spill<K: AsRef<[u8]>>(dir: &Path, keys: impl Iterator<Item = K>) -> Result<SpilledRun> {
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    let n = NEXT_FILE.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("shale-{}-ix{n}.spill", std::process::id()));
    let f = File::create(&path).map_err(|e| err(&path, e))?;
    // From here on the run's drop removes the file whatever happens.
    let mut run = SpilledRun {
        path,
        blocks: Vec::new(),
        entries: 0,
    };
    let mut out = BufWriter::with_capacity(1 << 20, f);
    let path = run.path.clone();
    let io = |e: std::io::Error| err(&path, e);
    out.write_all(MAGIC).map_err(io)?;
    out.write_all(&VERSION.to_le_bytes()).map_err(io)?;
    let mut offset = HEADER;
    let mut block: Vec<u8> = Vec::with_capacity(BLOCK_BYTES + 4096);
    let mut first: Option<Vec<u8>> = None;
    let mut flush =
        |block: &mut Vec<u8>, first: &mut Option<Vec<u8>>, out: &mut BufWriter<File>| {
            let Some(key) = first.take() else {
                return Ok(());
            };
            let len = u32::try_from(block.len())
                .ok()
                .filter(|l| *l <= MAX_BLOCK)
                .ok_or_else(|| err(&path, "index run block too large"))?;
            out.write_all(&len.to_le_bytes())
                .and_then(|()| out.write_all(&crc32c::crc32c(block).to_le_bytes()))
                .and_then(|()| out.write_all(block))
                .map_err(io)?;
            run.blocks.push(BlockIndex { first: key, offset });
            offset += 8 + u64::from(len);
            block.clear();
            Ok::<(), Error>(())
        };
    for key in keys {
        let key = key.as_ref();
        let len = u32::try_from(key.len())
            .ok()
            .filter(|l| *l <= MAX_BLOCK)
            .ok_or_else(|| err(&path, "index entry too large"))?;
        if first.is_none() {
            first = Some(key.to_vec());
        }
        block.extend_from_slice(&len.to_le_bytes());
        block.extend_from_slice(key);
        run.entries += 1;
        if block.len() >= BLOCK_BYTES {
            flush(&mut block, &mut first, &mut out)?;
        }
    }
    flush(&mut block, &mut first, &mut out)?;
    let count = run.entries.to_le_bytes();
    out.write_all(&0u32.to_le_bytes())
        .and_then(|()| out.write_all(&count))
        .and_then(|()| out.write_all(&crc32c::crc32c(&count).to_le_bytes()))
        .and_then(|()| out.flush())
        .map_err(io)?;
    Ok(run)
}

/// Reads the keys of a spilled run in `[lo, hi)` (unbounded where `None`).
struct RangeReader {
    input: BufReader<File>,
    path: PathBuf,
    block: Vec<u8>,
    pos: usize,
    hi: Option<Vec<u8>>,
    lo: Option<Vec<u8>>,
    /// Entries read from the first block on, and whether reading started
    /// at the first block (then the trailer's count is checked).
    seen: u64,
    from_start: bool,
    done: bool,
}

impl RangeReader {
    fn open(run: &SpilledRun, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<RangeReader> {
        let path = run.path.clone();
        let mut f = File::open(&path).map_err(|e| err(&path, e))?;
        let mut head = [0u8; 12];
        f.read_exact(&mut head).map_err(|e| err(&path, e))?;
        let (magic, version) = head.split_at(8);
        if magic != MAGIC || version != VERSION.to_le_bytes() {
            return Err(err(&path, "not a ShaleDB index run file (bad header)"));
        }
        // The last block whose first key is <= lo holds lo's position.
        let start = lo.map_or(0, |lo| {
            run.blocks
                .partition_point(|b| b.first.as_slice() <= lo)
                .saturating_sub(1)
        });
        let offset = run.blocks.get(start).map_or(HEADER, |b| b.offset);
        f.seek(SeekFrom::Start(offset)).map_err(|e| err(&path, e))?;
        Ok(RangeReader {
            input: BufReader::with_capacity(BLOCK_BYTES, f),
            path,
            block: Vec::new(),
            pos: 0,
            hi: hi.map(<[u8]>::to_vec),
            lo: lo.map(<[u8]>::to_vec),
            seen: 0,
            from_start: start == 0,
            done: false,
        })
    }

    fn read_u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.input
            .read_exact(&mut b)
            .map_err(|e| err(&self.path, format!("truncated: {e}")))?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads the next block into `self.block`; `false` at the trailer.
    fn read_block(&mut self) -> Result<bool> {
        let len = self.read_u32()?;
        if len == 0 {
            let mut count = [0u8; 8];
            self.input
                .read_exact(&mut count)
                .map_err(|e| err(&self.path, format!("truncated trailer: {e}")))?;
            if crc32c::crc32c(&count) != self.read_u32()? {
                return Err(err(&self.path, "trailer checksum mismatch"));
            }
            if self.from_start && u64::from_le_bytes(count) != self.seen {
                return Err(err(&self.path, "entry count does not match the trailer"));
            }
            return Ok(false);
        }
        let crc = self.read_u32()?;
        let len = usize::try_from(len)
            .ok()
            .filter(|_| len <= MAX_BLOCK)
            .ok_or_else(|| err(&self.path, "block length out of range"))?;
        self.block.resize(len, 0);
        self.input
            .read_exact(&mut self.block)
            .map_err(|e| err(&self.path, format!("truncated block: {e}")))?;
        if crc32c::crc32c(&self.block) != crc {
            return Err(err(&self.path, "block checksum mismatch"));
        }
        self.pos = 0;
        Ok(true)
    }

    /// The next key in range, or `None` past the range's end.
    fn next_key(&mut self) -> Result<Option<Vec<u8>>> {
        loop {
            if self.done {
                return Ok(None);
            }
            if self.pos >= self.block.len() && !self.read_block()? {
                self.done = true;
                return Ok(None);
            }
            let path = &self.path;
            let len = self
                .block
                .get(self.pos..self.pos + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| err(path, "truncated entry"))?;
            let key = self
                .block
                .get(self.pos + 4..self.pos + 4 + len)
                .ok_or_else(|| err(path, "truncated entry"))?;
            self.pos += 4 + len;
            self.seen += 1;
            if self.lo.as_deref().is_some_and(|lo| key < lo) {
                continue;
            }
            if self.hi.as_deref().is_some_and(|hi| key >= hi) {
                self.done = true;
                return Ok(None);
            }
            return Ok(Some(key.to_vec()));
        }
    }
}

/// Sorted keys in memory, already cut to the merge's range.
pub type MemKeys<'a> = Box<dyn Iterator<Item = &'a [u8]> + 'a>;

/// A source of the merge: a spilled run's reader or sorted keys in memory.
enum Source<'a> {
    File(RangeReader),
    Mem(MemKeys<'a>),
}

impl Source<'_> {
    fn next_key(&mut self) -> Result<Option<Vec<u8>>> {
        match self {
            Source::File(r) => r.next_key(),
            Source::Mem(it) => Ok(it.next().map(|k| k.to_vec())),
        }
    }
}

/// Merges the keys in `[lo, hi)` of spilled runs and of `mem` (sorted keys
/// already cut to the range) in ascending order. An error ends the stream
/// and is kept in `error`: the caller checks it after consuming.
pub struct Merge<'a> {
    sources: Vec<Source<'a>>,
    heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
    pub error: Option<Error>,
}

impl<'a> Merge<'a> {
    pub fn new(
        runs: &[SpilledRun],
        mem: MemKeys<'a>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<Merge<'a>> {
        let mut sources = Vec::with_capacity(runs.len() + 1);
        for r in runs {
            sources.push(Source::File(RangeReader::open(r, lo, hi)?));
        }
        sources.push(Source::Mem(mem));
        let mut heap = BinaryHeap::with_capacity(sources.len());
        for (i, s) in sources.iter_mut().enumerate() {
            if let Some(k) = s.next_key()? {
                heap.push(Reverse((k, i)));
            }
        }
        Ok(Merge {
            sources,
            heap,
            error: None,
        })
    }
}

impl Iterator for Merge<'_> {
    type Item = (Vec<u8>, [u8; 0]);

    fn next(&mut self) -> Option<Self::Item> {
        let Reverse((key, i)) = self.heap.pop()?;
        match self.sources.get_mut(i).map(Source::next_key) {
            Some(Ok(Some(k))) => self.heap.push(Reverse((k, i))),
            Some(Ok(None)) | None => {}
            Some(Err(e)) => {
                self.error = Some(e);
                self.heap.clear();
                return None;
            }
        }
        Some((key, []))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn keys(n: usize, step: usize, off: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("k{:08}", i * step + off).into_bytes())
            .collect()
    }

    #[test]
    fn merge_of_runs_by_range_is_sorted_and_complete() {
        let dir = tempfile::tempdir().unwrap();
        let a = keys(20_000, 3, 0);
        let b = keys(20_000, 3, 1);
        let c = keys(20_000, 3, 2);
        let runs = vec![
            spill(dir.path(), a.iter().map(Vec::as_slice)).unwrap(),
            spill(dir.path(), b.iter().map(Vec::as_slice)).unwrap(),
        ];
        assert!(runs[0].blocks.len() > 3, "several blocks");
        let mem: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
        let mut all: Vec<Vec<u8>> = a.iter().chain(&b).chain(&c).cloned().collect();
        all.sort();
        let split = all[31_234].clone();
        let cut = mem.partition_point(|k| *k < split.as_slice());
        let mut got = Vec::new();
        let mut m = Merge::new(
            &runs,
            Box::new(mem[..cut].iter().copied()),
            None,
            Some(&split),
        )
        .unwrap();
        got.extend(m.by_ref().map(|(k, _)| k));
        assert!(m.error.is_none());
        let mut m = Merge::new(
            &runs,
            Box::new(mem[cut..].iter().copied()),
            Some(&split),
            None,
        )
        .unwrap();
        got.extend(m.by_ref().map(|(k, _)| k));
        assert!(m.error.is_none());
        assert_eq!(got, all);
    }

    #[test]
    fn damaged_and_truncated_runs_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let a = keys(30_000, 1, 0);
        let run = spill(dir.path(), a.iter().map(Vec::as_slice)).unwrap();
        assert!(run.blocks.len() >= 4);
        let bytes = std::fs::read(&run.path).unwrap();
        // A flipped bit in a later block: the merge starts, then fails.
        let mut bad = bytes.clone();
        let mid = bytes.len() * 3 / 4;
        bad[mid] ^= 0x40;
        std::fs::write(&run.path, &bad).unwrap();
        let mut m = Merge::new(
            std::slice::from_ref(&run),
            Box::new(std::iter::empty()),
            None,
            None,
        )
        .unwrap();
        assert!(m.by_ref().count() < a.len());
        assert!(matches!(m.error, Some(Error::TempFile { .. })));
        std::fs::write(&run.path, &bytes[..bytes.len() - 30]).unwrap();
        let mut m = Merge::new(
            std::slice::from_ref(&run),
            Box::new(std::iter::empty()),
            None,
            None,
        )
        .unwrap();
        let _ = m.by_ref().count();
        assert!(matches!(m.error, Some(Error::TempFile { .. })));
        // In the first block: the merge cannot even start.
        let mut bad = bytes.clone();
        bad[30] ^= 0x40;
        std::fs::write(&run.path, &bad).unwrap();
        assert!(matches!(
            Merge::new(
                std::slice::from_ref(&run),
                Box::new(std::iter::empty()),
                None,
                None
            ),
            Err(Error::TempFile { .. })
        ));
        let path = run.path.clone();
        drop(run);
        assert!(!path.exists(), "dropping the run removes its file");
    }
}
