//! Iterator over one sorted run of extents (a level, or an L0 run): opens the
//! extent iterator under the cursor lazily, so a seek reads one extent only.
//!
//! The run is either a list the caller owns (compaction inputs) or a run of
//! a pinned [`CfVersion`] ([`Run::L0`], [`Run::Level`]): a user iterator
//! borrows the version's list through one `Arc` instead of copying it, which
//! cost an allocation and a reference-count increment and decrement per
//! extent (about 70 in the default benchmark's L1) on every iterator built,
//! all on counts shared with every other reader.

use super::InternalIterator;
use crate::cache::CachePriority;
use crate::error::Result;
use crate::extent::ExtentIterator;
use crate::types::user_key;
use crate::version::{CfVersion, Extent};
use std::sync::Arc;

/// The sorted run a [`LevelIterator`] walks.
pub enum Run {
    /// Extents the caller owns.
    Owned(Vec<Arc<Extent>>),
    /// L0 run number `.1` (an index into [`CfVersion::l0`]) of a version.
    L0(Arc<CfVersion>, usize),
    /// Level `.1 + 1` (an index into [`CfVersion::levels`]) of a version.
    Level(Arc<CfVersion>, usize),
}

impl Run {
    /// The run's extents (empty if the index names no run).
    pub fn extents(&self) -> &[Arc<Extent>] {
        match self {
            Run::Owned(v) => v,
            Run::L0(v, i) => v.l0.get(*i).map_or(&[], |r| r.extents.as_slice()),
            Run::Level(v, i) => v.levels.get(*i).map_or(&[], Vec::as_slice),
        }
    }
}

/// Concatenation of the extents of a sorted run.
pub struct LevelIterator {
    run: Run,
    pin: bool,
    /// How the extents' data blocks enter the block cache.
    priority: CachePriority,
    index: usize,
    current: Option<ExtentIterator>,
}

impl LevelIterator {
    /// Iterates `extents` (sorted, non-overlapping except at a shared boundary key).
    pub fn new(extents: Vec<Arc<Extent>>, pin: bool) -> Self {
        Self::over(Run::Owned(extents), pin)
    }

    /// Iterates `run`; `pin` keeps the extents' index and filter in memory.
    pub fn over(run: Run, pin: bool) -> Self {
        LevelIterator {
            run,
            pin,
            priority: CachePriority::High,
            index: 0,
            current: None,
        }
    }

    /// Caches the data blocks read at `priority` (default `High`).
    pub fn with_cache_priority(mut self, priority: CachePriority) -> Self {
        self.priority = priority;
        self
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.index = index;
        self.current = match self.run.extents().get(index) {
            Some(e) => Some(e.reader(self.pin)?.iter_with(self.priority)),
            None => None,
        };
        Ok(())
    }

    fn skip_forward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index + 1 >= self.run.extents().len() {
                self.current = None;
                return Ok(());
            }
            self.open(self.index + 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index == 0 {
                self.current = None;
                return Ok(());
            }
            self.open(self.index - 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        match self.run.extents().len().checked_sub(1) {
            Some(last) => self.open(last)?,
            None => self.current = None,
        }
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let uk = user_key(target);
        let i = self
            .run
            .extents()
            .partition_point(|e| e.meta.largest.as_slice() < uk);
        self.open(i)?;
        if let Some(c) = self.current.as_mut() {
            c.seek(target)?;
        }
        self.skip_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let uk = user_key(target);
        // Last extent whose smallest key is <= the target's user key.
        let i = self
            .run
            .extents()
            .partition_point(|e| e.meta.smallest.as_slice() <= uk);
        match i.checked_sub(1) {
            Some(i) => {
                self.open(i)?;
                if let Some(c) = self.current.as_mut() {
                    c.seek_for_prev(target)?;
                }
                self.skip_backward()
            }
            None => {
                self.current = None;
                Ok(())
            }
        }
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn location(&self) -> Option<(&std::path::Path, u64)> {
        self.current.as_ref().and_then(|c| c.location())
    }
}
