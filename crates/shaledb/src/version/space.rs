//! The extent space: data files cut into fixed-size slots, one extent per slot
//! (X-Engine's extent space manager, seed 000).
//!
//! ```text
//! 000012.sdt:  | slot 0 (2 MiB) | slot 1 (2 MiB) | slot 2 ... | slot N-1 |
//!                 extent #41       free            extent #97
//! ```
//!
//! Invariants (guarded by `ExtentSpace::inner`):
//! - a slot is *used* iff an extent of some live [`super::Version`] (or of a
//!   job that has written it but not yet installed it) lives there;
//! - a slot is released only after the manifest durably stops referencing its
//!   extent ([`super::Extent`] releases on drop, and only when marked obsolete
//!   by an installed edit), so a crash never finds a reused slot still named
//!   by the manifest;
//! - a data file with no used slot is deleted.
//!
//! The used/free state is not persisted: at open it is rebuilt from the
//! manifest, and everything else is free.

use crate::cache::BlockCache;
use crate::env::{ExtentFile, FileSystem};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// File-name suffix of data files.
pub const DATA_FILE_SUFFIX: &str = "sdt";

/// Path of data file `number` in `dir`.
pub fn data_file_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.{DATA_FILE_SUFFIX}"))
}

struct DataFile {
    file: Arc<dyn ExtentFile>,
    used: Vec<bool>,
    used_count: u32,
}

#[derive(Default)]
struct SpaceInner {
    files: BTreeMap<u64, DataFile>,
    /// Data files created since the last directory sync.
    dir_dirty: bool,
}

/// Slot usage figures for stats.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpaceStats {
    /// Data files.
    pub files: u64,
    /// Slots holding an extent.
    pub used_slots: u64,
    /// Slots in all data files.
    pub total_slots: u64,
}

/// Owner of the data files.
pub struct ExtentSpace {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    extent_size: u64,
    slots_per_file: u32,
    next_file_number: Arc<AtomicU64>,
    cache: Option<Arc<BlockCache>>,
    pin_all: bool,
    inner: Mutex<SpaceInner>,
}

impl ExtentSpace {
    /// A space over `dir`; file numbers come from the shared counter.
    /// `pin_all` keeps every extent's index and filter in its reader
    /// (`Options::pin_index_and_filter_all_levels`).
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        extent_size: u64,
        slots_per_file: u32,
        next_file_number: Arc<AtomicU64>,
        cache: Option<Arc<BlockCache>>,
        pin_all: bool,
    ) -> Arc<Self> {
        Arc::new(ExtentSpace {
            fs,
            dir,
            extent_size,
            slots_per_file,
            next_file_number,
            cache,
            pin_all,
            inner: Mutex::new(SpaceInner::default()),
        })
    }

    /// Whether every extent pins its index and filter, whichever level it
    /// is on and whoever opens its reader first.
    pub fn pins_all(&self) -> bool {
        self.pin_all
    }

    /// The block cache extents read through.
    pub fn cache(&self) -> Option<&Arc<BlockCache>> {
        self.cache.as_ref()
    }

    /// Byte size of one slot.
    pub fn extent_size(&self) -> u64 {
        self.extent_size
    }

    /// Path of a data file.
    pub fn path(&self, file_number: u64) -> PathBuf {
        data_file_path(&self.dir, file_number)
    }

    fn open_file(&self, inner: &mut SpaceInner, number: u64) -> Result<()> {
        if inner.files.contains_key(&number) {
            return Ok(());
        }
        let file = self.fs.open_extent_file(&self.path(number))?;
        let slots = usize::try_from(self.slots_per_file).unwrap_or(usize::MAX);
        inner.files.insert(
            number,
            DataFile {
                file,
                used: vec![false; slots],
                used_count: 0,
            },
        );
        Ok(())
    }

    /// Recovery: records that the manifest places an extent at `(file, slot)`.
    pub fn mark_used(&self, file_number: u64, slot: u32) -> Result<()> {
        let mut inner = self.inner.lock();
        self.open_file(&mut inner, file_number)?;
        let df = inner
            .files
            .get_mut(&file_number)
            .ok_or_else(|| Error::InvalidArgument(format!("data file {file_number} missing")))?;
        let used = usize::try_from(slot)
            .ok()
            .and_then(|s| df.used.get_mut(s))
            .ok_or_else(|| {
                Error::corruption(
                    self.path(file_number),
                    0,
                    format!("slot {slot} out of range"),
                )
            })?;
        if *used {
            return Err(Error::corruption(
                self.path(file_number),
                u64::from(slot) * self.extent_size,
                "two extents in one slot",
            ));
        }
        *used = true;
        df.used_count += 1;
        Ok(())
    }

    /// Recovery: deletes data files that hold no used slot, and any `*.sdt`
    /// file the manifest does not know. Returns the numbers deleted.
    pub fn remove_unused_files(&self) -> Result<Vec<u64>> {
        let mut inner = self.inner.lock();
        let mut removed = Vec::new();
        for name in self.fs.list_dir(&self.dir)? {
            let Some(stem) = name.strip_suffix(&format!(".{DATA_FILE_SUFFIX}")) else {
                continue;
            };
            let Ok(number) = stem.parse::<u64>() else {
                continue;
            };
            let in_use = inner.files.get(&number).is_some_and(|f| f.used_count > 0);
            if !in_use {
                inner.files.remove(&number);
                self.fs.remove_file(&self.path(number))?;
                removed.push(number);
            }
        }
        if !removed.is_empty() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(removed)
    }

    /// Writes one finished extent into a free slot (creating a data file if
    /// none has room). Not yet durable: call [`ExtentSpace::sync_files`].
    pub fn write_extent(&self, data: &[u8]) -> Result<(u64, u32)> {
        if data.len() as u64 > self.extent_size {
            return Err(Error::InvalidArgument(format!(
                "extent of {} bytes exceeds the extent size {}",
                data.len(),
                self.extent_size
            )));
        }
        let (number, slot, file) = self.allocate()?;
        let offset = u64::from(slot) * self.extent_size;
        if let Err(e) = file.write_all_at(offset, data) {
            self.release(number, slot);
            return Err(e);
        }
        Ok((number, slot))
    }

    fn allocate(&self) -> Result<(u64, u32, Arc<dyn ExtentFile>)> {
        let mut inner = self.inner.lock();
        for (&number, df) in inner.files.iter_mut() {
            if df.used_count < self.slots_per_file {
                if let Some(pos) = df.used.iter().position(|u| !*u) {
                    if let Some(u) = df.used.get_mut(pos) {
                        *u = true;
                    }
                    df.used_count += 1;
                    let slot = u32::try_from(pos).unwrap_or(u32::MAX);
                    return Ok((number, slot, df.file.clone()));
                }
            }
        }
        let number = self.next_file_number.fetch_add(1, Ordering::SeqCst);
        self.open_file(&mut inner, number)?;
        inner.dir_dirty = true;
        let df = inner
            .files
            .get_mut(&number)
            .ok_or_else(|| Error::InvalidArgument("data file vanished".into()))?;
        if let Some(u) = df.used.first_mut() {
            *u = true;
        }
        df.used_count = 1;
        Ok((number, 0, df.file.clone()))
    }

    /// Makes the named data files (and new directory entries) durable.
    pub fn sync_files(&self, numbers: &[u64]) -> Result<()> {
        let (files, dir_dirty) = {
            let mut inner = self.inner.lock();
            let files: Vec<_> = numbers
                .iter()
                .filter_map(|n| inner.files.get(n).map(|f| f.file.clone()))
                .collect();
            (files, std::mem::take(&mut inner.dir_dirty))
        };
        for f in files {
            f.sync()?;
        }
        if dir_dirty {
            if let Err(e) = self.fs.sync_dir(&self.dir) {
                self.inner.lock().dir_dirty = true;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Frees a slot; deletes the file when its last slot is freed, else
    /// punches a hole over the slot so the file system gets the space back
    /// (the file keeps its size; a later extent is written into the hole).
    /// Nothing reads a freed slot: invariant 5 of docs/architecture.md.
    pub fn release(&self, file_number: u64, slot: u32) {
        let mut inner = self.inner.lock();
        let mut now_empty = false;
        if let Some(df) = inner.files.get_mut(&file_number) {
            if let Some(u) = usize::try_from(slot).ok().and_then(|s| df.used.get_mut(s)) {
                if *u {
                    *u = false;
                    df.used_count -= 1;
                    now_empty = df.used_count == 0;
                    if !now_empty {
                        let at = u64::from(slot) * self.extent_size;
                        // A failed punch only keeps the space allocated.
                        if let Err(e) = df.file.punch_hole(at, self.extent_size) {
                            tracing::warn!("could not punch a hole over a freed slot: {e}");
                        }
                    }
                }
            }
        }
        if now_empty {
            inner.files.remove(&file_number);
            // A failed unlink only leaves an orphan, which the next open removes.
            if let Err(e) = self.fs.remove_file(&self.path(file_number)) {
                tracing::warn!("could not delete empty data file: {e}");
            }
        }
    }

    /// The open handle of a data file.
    pub fn file(&self, file_number: u64) -> Result<Arc<dyn ExtentFile>> {
        let mut inner = self.inner.lock();
        self.open_file(&mut inner, file_number)?;
        inner
            .files
            .get(&file_number)
            .map(|f| f.file.clone())
            .ok_or_else(|| Error::InvalidArgument(format!("data file {file_number} missing")))
    }

    /// Slot usage.
    pub fn stats(&self) -> SpaceStats {
        let inner = self.inner.lock();
        SpaceStats {
            files: inner.files.len() as u64,
            used_slots: inner.files.values().map(|f| u64::from(f.used_count)).sum(),
            total_slots: inner.files.len() as u64 * u64::from(self.slots_per_file),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::posix::PosixFs;

    #[test]
    fn slots_are_reused_and_empty_files_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let counter = Arc::new(AtomicU64::new(10));
        let space = ExtentSpace::new(
            PosixFs::arc(),
            dir.path().to_owned(),
            4096,
            2,
            counter,
            None,
            false,
        );
        let a = space.write_extent(b"aaaa").expect("a");
        let b = space.write_extent(b"bbbb").expect("b");
        let c = space.write_extent(b"cccc").expect("c");
        assert_eq!((a, b, c), ((10, 0), (10, 1), (11, 0)));
        space.sync_files(&[10, 11]).expect("sync");
        space.release(10, 0);
        assert_eq!(space.write_extent(b"dddd").expect("d"), (10, 0));
        space.release(11, 0);
        assert!(!data_file_path(dir.path(), 11).exists());
        assert!(space.write_extent(&[0u8; 5000]).is_err());
        assert_eq!(space.stats().used_slots, 2);
    }

    /// A freed slot gives its blocks back and reads as zeros; the file
    /// keeps its size and the slot is written again on reuse.
    #[test]
    fn a_freed_slot_is_punched_out() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let slot = 1 << 20;
        let space = ExtentSpace::new(
            PosixFs::arc(),
            dir.path().to_owned(),
            slot,
            4,
            Arc::new(AtomicU64::new(1)),
            None,
            false,
        );
        let full = vec![0xABu8; usize::try_from(slot).expect("small")];
        for _ in 0..3 {
            space.write_extent(&full).expect("write");
        }
        space.sync_files(&[1]).expect("sync");
        let path = data_file_path(dir.path(), 1);
        let before = std::fs::metadata(&path).expect("stat");
        space.release(1, 1);
        let after = std::fs::metadata(&path).expect("stat");
        assert_eq!(after.len(), before.len());
        // ext4, xfs and tmpfs punch holes; elsewhere the bytes just stay.
        if after.blocks() < before.blocks() {
            assert!(before.blocks() - after.blocks() >= slot / 512);
            let mut buf = vec![1u8; 4096];
            space
                .file(1)
                .expect("file")
                .read_exact_at(slot, &mut buf)
                .expect("read");
            assert!(buf.iter().all(|b| *b == 0));
        }
        assert_eq!(space.write_extent(&full).expect("reuse"), (1, 1));
    }
}
