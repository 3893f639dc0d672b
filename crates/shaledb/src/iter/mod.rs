//! The one iterator trait every internal source implements (memtable, block,
//! extent, level, merge), in the style of LevelDB's `Iterator`.
//!
//! Keys are *internal keys* (see [`crate::types`]). A positioned iterator is
//! `valid()`; moving past either end makes it invalid. Movement returns a
//! `Result` because it may read (and checksum) a block.

pub mod level_iter;
pub mod merge;
pub mod range_del;
#[cfg(test)]
pub mod vec_iter;

use crate::error::{Error, Result};
use std::path::Path;

/// A bidirectional cursor over internal entries, sorted by
/// [`crate::types::compare_internal_keys`].
pub trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions on the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions on the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions on the first entry `>= target` (an internal key).
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions on the last entry `<= target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    /// Advances; requires `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Steps back; requires `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key; requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value; requires `valid()`.
    fn value(&self) -> &[u8];
    /// Where the current entry is stored: the data file and the absolute
    /// offset of its block. `None` for in-memory sources (and when invalid).
    /// Consumers that find an entry malformed (see [`corruption_at`]) use it
    /// to name the damaged bytes.
    fn location(&self) -> Option<(&Path, u64)> {
        None
    }
}

/// The corruption error for the current entry of `it`, which its consumer
/// found malformed (e.g. a key that does not parse although its block's
/// checksum matched): names the file and block offset the entry came from,
/// or `<memtable>` at 0 for an in-memory source.
pub(crate) fn corruption_at<I: InternalIterator + ?Sized>(it: &I, reason: &str) -> Error {
    match it.location() {
        Some((file, offset)) => Error::corruption(file, offset, reason),
        None => Error::corruption("<memtable>", 0, reason),
    }
}

/// Boxed iterator, the form merged by the merging iterator.
pub type BoxedIterator<'a> = Box<dyn InternalIterator + 'a>;
