//! Immutable versions of the extent set (copy-on-write, X-Engine's
//! multi-version extent metadata).
//!
//! A [`Version`] maps column families to [`CfVersion`]s; both are shared by
//! `Arc`, so a new version copies only what an edit changes. Readers pin a
//! version by holding its `Arc`; an extent's slot is freed only when its last
//! holder lets go *and* an installed edit removed it ([`Extent::mark_obsolete`]).

use super::extent_meta::ExtentMeta;
use super::space::ExtentSpace;
use crate::error::Result;
use crate::extent::ExtentReader;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// A live extent: its metadata plus a lazily opened reader.
pub struct Extent {
    /// What the manifest says.
    pub meta: ExtentMeta,
    space: Arc<ExtentSpace>,
    reader: OnceLock<Arc<ExtentReader>>,
    obsolete: AtomicBool,
}

impl std::fmt::Debug for Extent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extent").field("meta", &self.meta).finish()
    }
}

impl Extent {
    /// Wraps metadata of an extent already written to its slot.
    pub fn new(meta: ExtentMeta, space: Arc<ExtentSpace>) -> Arc<Extent> {
        Arc::new(Extent {
            meta,
            space,
            reader: OnceLock::new(),
            obsolete: AtomicBool::new(false),
        })
    }

    /// The reader, opened on first use. `pin` keeps index and filter in memory
    /// (L0/L1, or every level if the space pins all); otherwise they are read
    /// through the block cache.
    pub fn reader(&self, pin: bool) -> Result<Arc<ExtentReader>> {
        self.reader_ref(pin).cloned()
    }

    /// Like [`Extent::reader`], borrowed: point reads use it so that they
    /// touch no reference count shared with other readers.
    pub fn reader_ref(&self, pin: bool) -> Result<&Arc<ExtentReader>> {
        if let Some(r) = self.reader.get() {
            return Ok(r);
        }
        let m = &self.meta;
        let file = self.space.file(m.file_number)?;
        let r = ExtentReader::open(
            file,
            self.space.path(m.file_number),
            u64::from(m.slot) * self.space.extent_size(),
            u64::from(m.size),
            m.id,
            self.space.cache().cloned(),
            pin || self.space.pins_all(),
        )?;
        // Two threads may race to open; either reader is equivalent.
        Ok(self.reader.get_or_init(|| r))
    }

    /// Called once an installed edit removed this extent: its slot is freed
    /// when the last reference goes.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for Extent {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            self.space.release(self.meta.file_number, self.meta.slot);
        }
    }
}

/// One L0 run: a sorted, non-overlapping list of extents written by one flush.
#[derive(Debug, Clone)]
pub struct L0Run {
    /// Run number; newer runs have larger numbers.
    pub run: u64,
    /// Extents sorted by smallest key.
    pub extents: Vec<Arc<Extent>>,
}

/// The extents of one column family.
#[derive(Debug, Clone)]
pub struct CfVersion {
    /// Column-family id.
    pub id: u32,
    /// Column-family name.
    pub name: String,
    /// L0 runs, newest first.
    pub l0: Vec<L0Run>,
    /// `levels[i]` is level `i + 1`: sorted, non-overlapping extents.
    pub levels: Vec<Vec<Arc<Extent>>>,
}

impl CfVersion {
    /// An empty column family with `num_levels` levels (L0 included).
    pub fn empty(id: u32, name: String, num_levels: usize) -> CfVersion {
        CfVersion {
            id,
            name,
            l0: Vec::new(),
            levels: vec![Vec::new(); num_levels.saturating_sub(1)],
        }
    }

    /// Extents of level `level >= 1` (empty if out of range).
    pub fn level(&self, level: usize) -> &[Arc<Extent>] {
        level
            .checked_sub(1)
            .and_then(|i| self.levels.get(i))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Bytes in level `level` (0 = all L0 runs).
    pub fn level_bytes(&self, level: usize) -> u64 {
        if level == 0 {
            return self
                .l0
                .iter()
                .flat_map(|r| r.extents.iter())
                .map(|e| u64::from(e.meta.size))
                .sum();
        }
        self.level(level)
            .iter()
            .map(|e| u64::from(e.meta.size))
            .sum()
    }

    /// Number of extents in level `level`.
    pub fn level_extents(&self, level: usize) -> usize {
        if level == 0 {
            return self.l0.iter().map(|r| r.extents.len()).sum();
        }
        self.level(level).len()
    }

    /// Every extent, for iteration over all of them.
    pub fn all_extents(&self) -> impl Iterator<Item = (usize, &Arc<Extent>)> {
        self.l0
            .iter()
            .flat_map(|r| r.extents.iter().map(|e| (0usize, e)))
            .chain(
                self.levels
                    .iter()
                    .enumerate()
                    .flat_map(|(i, l)| l.iter().map(move |e| (i + 1, e))),
            )
    }

    /// The extents of a sorted level overlapping `[lo, hi]`.
    pub fn overlapping(&self, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<Extent>> {
        let exts = self.level(level);
        let start = exts.partition_point(|e| e.meta.largest.as_slice() < lo);
        exts.get(start..)
            .unwrap_or(&[])
            .iter()
            .take_while(|e| e.meta.smallest.as_slice() <= hi)
            .cloned()
            .collect()
    }
}

/// The extent set of every column family.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// By column-family id.
    pub cfs: BTreeMap<u32, Arc<CfVersion>>,
}
