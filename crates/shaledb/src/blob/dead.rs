//! Dead bytes per value file, counted by compaction and persisted in the
//! `BLOBDEAD` sidecar (docs/format-blob.md, section 4).
//!
//! The count only ever errs high ("over-count only"): a count that is too
//! high costs one GC pass over a file that turns out to be mostly live, and
//! that pass replaces the count by the measured one; a count that is too
//! low would hide garbage forever. Hence the orderings:
//! - a merge's dead bytes are persisted *before* its version edit (a crash
//!   in between re-runs the merge, which counts them again: high, not low);
//! - a GC output file is persisted as [`UNREFERENCED`] (all dead) *before*
//!   it is created, and gets its real count only after its re-point write is
//!   durable (a crash in between leaves it counted dead: the next GC pass
//!   scans it, finds what is live, and collects it).

use super::format::BlobIndex;
use super::format::{FOOTER_LEN, HEADER_LEN};
use super::BlobStore;
use crate::env::{read_to_vec, write_file_atomic, FileSystem};
use crate::error::{Error, Result};
use crate::util::coding::{mask_crc, unmask_crc, Reader};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// File name of the sidecar, in the database directory.
pub const DEAD_FILE: &str = "BLOBDEAD";
/// Magic at the start of the sidecar.
pub const DEAD_MAGIC: &[u8; 8] = b"SHALEBDC";
/// The one sidecar version this code writes and reads.
pub const DEAD_VERSION: u32 = 1;
/// Dead-byte count of a GC output not yet re-pointed to: all of it.
pub const UNREFERENCED: u64 = u64::MAX;

/// Dead record bytes by value-file number.
pub(crate) type DeadCounts = BTreeMap<u64, u64>;

/// Why a sidecar does not decode.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DeadError {
    /// Bad magic, length or checksum.
    Bad(&'static str),
    /// A version this code does not read.
    Version(u32),
}

/// The sidecar bytes: magic, version, count, (file, dead) pairs, crc.
pub(crate) fn encode(counts: &DeadCounts) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + 16 * counts.len());
    out.extend_from_slice(DEAD_MAGIC);
    out.extend_from_slice(&DEAD_VERSION.to_le_bytes());
    // More than u32::MAX value files cannot exist (each is >= 16 bytes of a
    // u64-addressed disk, but the count is bounded by file numbers in use);
    // saturate rather than truncate, and the decoder's length check fails.
    let n = u32::try_from(counts.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_le_bytes());
    for (file, dead) in counts {
        out.extend_from_slice(&file.to_le_bytes());
        out.extend_from_slice(&dead.to_le_bytes());
    }
    let crc = mask_crc(crc32c::crc32c(&out));
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a sidecar (the checksum is checked before the version).
pub(crate) fn decode(bytes: &[u8]) -> Result<DeadCounts, DeadError> {
    let body_len = bytes
        .len()
        .checked_sub(4)
        .ok_or(DeadError::Bad("short file"))?;
    let (body, crc) = bytes.split_at(body_len);
    let crc = Reader::new(crc).u32().ok_or(DeadError::Bad("short file"))?;
    if unmask_crc(crc) != crc32c::crc32c(body) {
        return Err(DeadError::Bad("checksum mismatch"));
    }
    let mut r = Reader::new(body);
    if r.bytes(8) != Some(DEAD_MAGIC.as_slice()) {
        return Err(DeadError::Bad("bad magic"));
    }
    let version = r.u32().ok_or(DeadError::Bad("short file"))?;
    if version != DEAD_VERSION {
        return Err(DeadError::Version(version));
    }
    let n = r.u32().ok_or(DeadError::Bad("short file"))?;
    if r.remaining().len() as u64 != u64::from(n) * 16 {
        return Err(DeadError::Bad("length differs from the entry count"));
    }
    let mut counts = DeadCounts::new();
    while let (Some(file), Some(dead)) = (r.u64(), r.u64()) {
        counts.insert(file, dead);
    }
    Ok(counts)
}

/// Adds the record bytes of a dropped BlobIndex entry (user key of
/// `key_len` bytes, LSM value `index`) to `counts`. A malformed index is
/// not counted (a read of it reports the damage).
pub(crate) fn count_dropped(counts: &mut DeadCounts, key_len: usize, index: &[u8]) {
    if let Some(idx) = BlobIndex::decode(index) {
        let rec = idx.counted_len(key_len);
        let c = counts.entry(idx.file).or_insert(0);
        *c = c.saturating_add(rec);
    }
}

/// Record bytes of a value file of format `version` whose value file and
/// key log (version 2) hold `bytes` bytes together: headers and, if sealed
/// with one, the footer excluded (a file cut at open may have no footer,
/// which makes this 36 bytes low: an estimate; a version-2 file's key-log
/// entries are 12 bytes per value above the `16 + key + value` unit, so
/// its live ratio errs slightly high).
pub(crate) fn record_bytes(bytes: u64, sealed: bool, version: u32) -> u64 {
    let headers = if version == super::format::VERSION_2 {
        (HEADER_LEN + super::keylog::KEYLOG_HEADER_LEN) as u64
    } else {
        HEADER_LEN as u64
    };
    let overhead = headers + if sealed { FOOTER_LEN as u64 } else { 0 };
    bytes.saturating_sub(overhead)
}

/// Estimated live share of a file's record bytes (0.0 for a file without
/// records, which GC removes).
pub(crate) fn live_ratio(record_bytes: u64, dead: u64) -> f64 {
    if record_bytes == 0 {
        return 0.0;
    }
    record_bytes.saturating_sub(dead) as f64 / record_bytes as f64
}

/// One value file's figures, for properties and GC candidate choice.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FileEstimate {
    pub number: u64,
    pub bytes: u64,
    pub record_bytes: u64,
    /// Counted dead record bytes ([`UNREFERENCED`]: a GC output not yet
    /// re-pointed to).
    pub dead: u64,
    pub live_ratio: f64,
    pub sealed: bool,
}

impl BlobStore {
    /// Reads the sidecar at open, keeping the entries of `on_disk` files. A
    /// damaged sidecar counts every file as unreferenced (over-count: the
    /// next GC passes measure them); another version is an error.
    pub(crate) fn load_dead(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        on_disk: &[u64],
    ) -> Result<DeadCounts> {
        let path = dir.join(DEAD_FILE);
        if !fs.exists(&path) {
            return Ok(DeadCounts::new());
        }
        let mut counts = match decode(&read_to_vec(fs.as_ref(), &path)?) {
            Ok(c) => c,
            Err(DeadError::Version(version)) => {
                return Err(Error::UnsupportedVersion {
                    file: path,
                    version,
                })
            }
            Err(DeadError::Bad(why)) => {
                tracing::warn!(
                    "{}: {why}; every value file will be re-measured",
                    path.display()
                );
                on_disk.iter().map(|&n| (n, UNREFERENCED)).collect()
            }
        };
        counts.retain(|n, _| on_disk.binary_search(n).is_ok());
        Ok(counts)
    }

    /// Adds the dead bytes a merge found (before its version edit is
    /// logged; files no longer in the set are ignored) and persists.
    pub(crate) fn add_dead<'a>(&self, deltas: impl Iterator<Item = &'a DeadCounts>) -> Result<()> {
        let files = self.current();
        let mut dead = self.dead.lock();
        let mut changed = false;
        for (file, bytes) in deltas.flat_map(|d| d.iter()) {
            if files.contains_key(file) && *bytes > 0 {
                let c = dead.entry(*file).or_insert(0);
                *c = c.saturating_add(*bytes);
                changed = true;
            }
        }
        if changed {
            self.persist(&dead)?;
        }
        Ok(())
    }

    /// Sets (or with `None` forgets) the count of `file` and persists.
    pub(crate) fn set_dead(&self, file: u64, count: Option<u64>) -> Result<()> {
        let mut dead = self.dead.lock();
        match count {
            Some(c) => dead.insert(file, c),
            None => dead.remove(&file),
        };
        self.persist(&dead)
    }

    /// The count of `file` now (0 if none).
    pub(crate) fn dead_of(&self, file: u64) -> u64 {
        self.dead.lock().get(&file).copied().unwrap_or(0)
    }

    /// Replaces the count of `file` by what a pass measured, plus what
    /// merges added since the pass began with the count at `base` (they may
    /// have dropped records the pass saw live; one it saw dead is then
    /// counted twice, which errs high). Adds to an [`UNREFERENCED`] count
    /// saturate and are lost; only a file counted so at the start of the
    /// pass (after a crash) can miss them.
    pub(crate) fn set_measured(&self, file: u64, measured: u64, base: u64) -> Result<()> {
        let mut dead = self.dead.lock();
        let now = dead.get(&file).copied().unwrap_or(0);
        let extra = if now == UNREFERENCED {
            0
        } else {
            now.saturating_sub(base)
        };
        dead.insert(file, measured.saturating_add(extra));
        self.persist(&dead)
    }

    /// Settles the count of a GC output after its re-point write:
    /// `count` runs with the counts locked, so a merge that drops one of
    /// its records meanwhile waits and then adds to the settled count
    /// (while it is [`UNREFERENCED`] an add is lost in the saturation).
    pub(crate) fn settle_output(
        &self,
        file: u64,
        count: impl FnOnce() -> Result<u64>,
    ) -> Result<()> {
        let mut dead = self.dead.lock();
        let c = count()?;
        dead.insert(file, c);
        self.persist(&dead)
    }

    /// Forgets the counts of files neither in the current set nor on disk
    /// (unlinked after GC). Called at the start of a GC pass, when no GC
    /// output is in progress (an output is counted before it is created).
    pub(crate) fn prune_dead(&self) {
        let files = self.current();
        let mut dead = self.dead.lock();
        dead.retain(|n, _| {
            files.contains_key(n) || self.fs.exists(&super::format::blob_path(&self.dir, *n))
        });
    }

    /// Writes the sidecar atomically and durably (temp file, fsync, rename,
    /// directory fsync). Called with the counts locked, so writes are ordered.
    fn persist(&self, counts: &DeadCounts) -> Result<()> {
        write_file_atomic(self.fs.as_ref(), &self.dir, DEAD_FILE, &encode(counts))
    }

    /// Figures of every file of the current set, by number.
    pub(crate) fn estimates(&self) -> Vec<FileEstimate> {
        let files = self.current();
        let dead = self.dead.lock();
        files
            .values()
            .map(|f| {
                let bytes = f.disk_bytes();
                let sealed = f.sealed.load(Ordering::Acquire);
                let records = record_bytes(bytes, sealed, f.version);
                let d = dead.get(&f.number).copied().unwrap_or(0);
                FileEstimate {
                    number: f.number,
                    bytes,
                    record_bytes: records,
                    dead: d,
                    live_ratio: live_ratio(records, d),
                    sealed,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut c = DeadCounts::new();
        c.insert(7, 4112);
        c.insert(9, UNREFERENCED);
        let b = encode(&c);
        assert_eq!(b.len(), 16 + 2 * 16 + 4);
        assert_eq!(&b[..8], b"SHALEBDC");
        assert_eq!(decode(&b).unwrap(), c);
        let mut bad = b.clone();
        bad[20] ^= 1;
        assert_eq!(decode(&bad), Err(DeadError::Bad("checksum mismatch")));
        assert!(decode(&b[..b.len() - 1]).is_err());
        assert_eq!(
            decode(&encode(&DeadCounts::new())).unwrap(),
            c.clone().into_iter().take(0).collect()
        );
        // Another version with a valid checksum: typed, not "bad".
        let mut v2 = b[..b.len() - 4].to_vec();
        v2[8] = 2;
        let crc = mask_crc(crc32c::crc32c(&v2));
        v2.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&v2), Err(DeadError::Version(2)));
    }

    #[test]
    fn counts_record_bytes_of_dropped_entries() {
        let mut c = DeadCounts::new();
        let idx = BlobIndex {
            file: 3,
            offset: 16,
            value_len: 4096,
            crc: None,
        };
        count_dropped(&mut c, 8, idx.encode().as_slice());
        // A version-2 index counts the same unit.
        let v2 = BlobIndex {
            crc: Some(1),
            ..idx
        };
        count_dropped(&mut c, 8, v2.encode().as_slice());
        count_dropped(&mut c, 8, b"short");
        assert_eq!(c.get(&3), Some(&(2 * (16 + 8 + 4096))));
        assert_eq!(live_ratio(100, 25), 0.75);
        assert_eq!(live_ratio(100, UNREFERENCED), 0.0);
        assert_eq!(live_ratio(0, 0), 0.0);
        assert_eq!(record_bytes(16 + 36 + 100, true, 1), 100);
        assert_eq!(record_bytes(16 + 24 + 36 + 100, true, 2), 100);
        assert_eq!(record_bytes(16 + 24 + 100, false, 2), 100);
    }
}
