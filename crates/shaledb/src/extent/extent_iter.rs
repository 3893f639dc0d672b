//! The two-level iterator over an extent: an index-block cursor picks the
//! data block, a data-block cursor walks its entries.
//!
//! Example: with index `[c@MAX -> blk0, k@MAX -> blk1, z@MAX -> blk2]`,
//! `seek(f@5)` positions the index on `k@MAX` (first separator >= target),
//! loads blk1 and seeks in it; if every entry of blk1 were < `f@5` the
//! iterator would move on to the first entry of blk2. `prev` from the first
//! entry of blk1 moves the index back and lands on the last entry of blk0.
//!
//! The index block is fetched at the first positioning (through the reader:
//! pinned, cached or read), data blocks through the block cache; the
//! iterator holds `Arc`s of the blocks it is on, so an evicted block stays
//! alive while in use. The iterator reuses its key buffer across blocks.
//!
//! After an error the iterator is invalid (`valid() == false`) until the
//! next successful positioning call.

use super::block::BlockIter;
use super::reader::{BlockKind, ExtentReader};
use super::BlockHandle;
use crate::cache::CachePriority;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::types::compare_internal_keys;
use std::cmp::Ordering;
use std::sync::Arc;

/// A bidirectional iterator over the point entries of one extent.
pub struct ExtentIterator {
    reader: Arc<ExtentReader>,
    /// Cursor over the index block; `None` until first positioned.
    index: Option<BlockIter>,
    /// Cursor over the current data block; `None` when invalid.
    data: Option<BlockIter>,
    /// Handle of the block `data` walks (meaningful when `data` is `Some`).
    data_handle: BlockHandle,
    /// Key buffer kept from the last data cursor, for the next one.
    spare_key: Vec<u8>,
    /// How data blocks read on a miss enter the cache.
    priority: CachePriority,
}

impl ExtentIterator {
    pub(crate) fn new(reader: Arc<ExtentReader>, priority: CachePriority) -> Self {
        ExtentIterator {
            reader,
            index: None,
            data: None,
            data_handle: BlockHandle::default(),
            spare_key: Vec::new(),
            priority,
        }
    }

    /// The reader iterated.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn reader(&self) -> &Arc<ExtentReader> {
        &self.reader
    }

    fn drop_data(&mut self) {
        if let Some(d) = self.data.take() {
            self.spare_key = d.into_key_buffer();
        }
    }

    fn ensure_index(&mut self) -> Result<&mut BlockIter> {
        let index = match self.index.take() {
            Some(i) => i,
            None => BlockIter::new(
                self.reader.index_block()?,
                self.reader.path().clone(),
                self.reader.abs(self.reader.index_handle().offset),
            ),
        };
        Ok(self.index.insert(index))
    }

    /// Points `data` at the block the index is on (or `None` if the index is
    /// exhausted), keeping the current cursor if it is the same block.
    fn init_data_block(&mut self) -> Result<()> {
        let Some(index) = self.index.as_ref().filter(|i| i.valid()) else {
            self.drop_data();
            return Ok(());
        };
        let h = self.reader.data_handle(index.value())?;
        if self.data.is_some() && self.data_handle == h {
            return Ok(());
        }
        let block = self
            .reader
            .load_block_with(h, BlockKind::Entries, self.priority)?;
        self.drop_data();
        self.data = Some(BlockIter::with_key_buffer(
            block,
            self.reader.path().clone(),
            self.reader.abs(h.offset),
            std::mem::take(&mut self.spare_key),
        ));
        self.data_handle = h;
        Ok(())
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    /// Moves forward over exhausted (or empty) data blocks.
    fn skip_forward(&mut self) -> Result<()> {
        while !self.data_valid() {
            match self.index.as_mut() {
                Some(i) if i.valid() => i.next()?,
                _ => {
                    self.drop_data();
                    return Ok(());
                }
            }
            self.init_data_block()?;
            match self.data.as_mut() {
                Some(d) => d.seek_to_first()?,
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// Moves backward over exhausted (or empty) data blocks.
    fn skip_backward(&mut self) -> Result<()> {
        while !self.data_valid() {
            match self.index.as_mut() {
                Some(i) if i.valid() => i.prev()?,
                _ => {
                    self.drop_data();
                    return Ok(());
                }
            }
            self.init_data_block()?;
            match self.data.as_mut() {
                Some(d) => d.seek_to_last()?,
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// Runs a positioning step; on error leaves the iterator invalid.
    fn guarded(&mut self, step: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = step(self);
        if r.is_err() {
            self.drop_data();
        }
        r
    }
}

impl InternalIterator for ExtentIterator {
    fn valid(&self) -> bool {
        self.data_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guarded(|it| {
            it.ensure_index()?.seek_to_first()?;
            it.init_data_block()?;
            if let Some(d) = it.data.as_mut() {
                d.seek_to_first()?;
            }
            it.skip_forward()
        })
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guarded(|it| {
            it.ensure_index()?.seek_to_last()?;
            it.init_data_block()?;
            if let Some(d) = it.data.as_mut() {
                d.seek_to_last()?;
            }
            it.skip_backward()
        })
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|it| {
            it.ensure_index()?.seek(target)?;
            it.init_data_block()?;
            if let Some(d) = it.data.as_mut() {
                d.seek(target)?;
            }
            it.skip_forward()
        })
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        while self.valid() && compare_internal_keys(self.key(), target) == Ordering::Greater {
            self.prev()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.guarded(|it| {
            if let Some(d) = it.data.as_mut() {
                d.next()?;
            }
            it.skip_forward()
        })
    }

    fn prev(&mut self) -> Result<()> {
        self.guarded(|it| {
            if let Some(d) = it.data.as_mut() {
                d.prev()?;
            }
            it.skip_backward()
        })
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map(|d| d.key()).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map(|d| d.value()).unwrap_or_default()
    }

    fn location(&self) -> Option<(&std::path::Path, u64)> {
        self.data.as_ref().filter(|d| d.valid())?.location()
    }
}
