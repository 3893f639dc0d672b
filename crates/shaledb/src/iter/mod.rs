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
use crate::extent::block::cmp_internal;
use std::cmp::Ordering;
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
    /// Positions on the first entry `>= target`, like [`Self::seek`], for a
    /// forward scan that usually finds `target` close ahead (a merging
    /// iterator's child leaving a row's older versions): a source may start
    /// from its current entry instead of searching from the top. The
    /// default steps forward twice before it seeks; the memtable jumps over
    /// a row's versions ([`crate::memtable::skiplist::Cursor::seek_forward`]).
    ///
    /// Requires that every entry before the current position is `< target`
    /// (a forward scan that has not passed the target; an iterator that
    /// scanned off the end has nothing `>= target`), so the first entry at
    /// or after the position that is `>= target` is the answer.
    fn seek_forward(&mut self, target: &[u8]) -> Result<()> {
        for _ in 0..2 {
            if !self.valid() || cmp_internal(self.key(), target) != Ordering::Less {
                return Ok(());
            }
            self.next()?;
        }
        if self.valid() && cmp_internal(self.key(), target) == Ordering::Less {
            self.seek(target)?;
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::vec_iter::VecIterator;
    use super::InternalIterator;
    use crate::types::{compare_internal_keys, make_internal_key, ValueKind};
    use std::cmp::Ordering;

    /// The default `seek_forward` (two steps, then a seek) ends where `seek`
    /// does from every position before the target, near and far.
    #[test]
    fn default_seek_forward_matches_seek() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..40u32)
            .flat_map(|k| {
                (1..=(k % 4) + 1).map(move |seq| {
                    let key = make_internal_key(&k.to_be_bytes(), u64::from(seq), ValueKind::Put);
                    (key, vec![seq as u8])
                })
            })
            .collect();
        let mut sorted = VecIterator::new(entries.clone());
        sorted.seek_to_first().unwrap();
        let mut keys = Vec::new();
        while sorted.valid() {
            keys.push(sorted.key().to_vec());
            sorted.next().unwrap();
        }
        for (i, start) in keys.iter().enumerate() {
            for k in 0..42u32 {
                let target = make_internal_key(&k.to_be_bytes(), 0, ValueKind::Delete);
                if compare_internal_keys(&target, start) != Ordering::Greater {
                    continue; // not ahead of the position
                }
                let mut want = VecIterator::new(entries.clone());
                want.seek(&target).unwrap();
                let mut got = VecIterator::new(entries.clone());
                got.seek(start).unwrap();
                got.seek_forward(&target).unwrap();
                assert_eq!(got.valid(), want.valid(), "from {i} to {k}");
                if want.valid() {
                    assert_eq!(got.key(), want.key(), "from {i} to {k}");
                }
            }
        }
    }
}
