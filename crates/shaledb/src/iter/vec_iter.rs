//! [`VecIterator`]: an [`InternalIterator`] over an owned vector of entries.
//!
//! Used wherever a small sorted source is handy: tests across the crate, and
//! as a child of the merging iterator. [`VecIterator::new`] sorts its input by
//! [`compare_internal_keys`], so callers may pass entries in any order.
//!
//! Example: entries `[(b@3, "x"), (a@7, "y")]` iterate as `a@7, b@3`;
//! `seek(a@9)` lands on `a@7` (first entry `>=` the target, newer sorts first).
//!
//! Invariant: `pos < entries.len()` exactly when the iterator is valid;
//! `pos == entries.len()` encodes "invalid".

use super::InternalIterator;
use crate::error::Result;
use crate::types::compare_internal_keys;
use std::cmp::Ordering;

/// An iterator over owned `(internal key, value)` pairs.
#[derive(Debug, Clone, Default)]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

impl VecIterator {
    /// Builds an (unpositioned) iterator; sorts `entries` by internal key.
    pub fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        let pos = entries.len();
        VecIterator { entries, pos }
    }

    /// True if there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn invalidate(&mut self) {
        self.pos = self.entries.len();
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        // Empty: `pos` stays at `len`, i.e. invalid.
        self.pos = self
            .entries
            .len()
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| compare_internal_keys(k, target) == Ordering::Less);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let after = self
            .entries
            .partition_point(|(k, _)| compare_internal_keys(k, target) != Ordering::Greater);
        match after.checked_sub(1) {
            Some(p) => self.pos = p,
            None => self.invalidate(),
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.pos = (self.pos + 1).min(self.entries.len());
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        match self.pos.checked_sub(1) {
            Some(p) => self.pos = p,
            None => self.invalidate(),
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[], |(k, _)| k)
    }

    fn value(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[], |(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{make_internal_key, ValueKind, KIND_FOR_SEEK};

    fn ik(k: &str, s: u64) -> Vec<u8> {
        make_internal_key(k.as_bytes(), s, ValueKind::Put)
    }

    fn it() -> VecIterator {
        VecIterator::new(vec![
            (ik("b", 3), b"b3".to_vec()),
            (ik("a", 7), b"a7".to_vec()),
            (ik("a", 2), b"a2".to_vec()),
        ])
    }

    #[test]
    fn sorts_and_walks_both_ways() {
        let mut i = it();
        assert!(!i.valid());
        i.seek_to_first().expect("seek");
        let mut fwd = Vec::new();
        while i.valid() {
            fwd.push(i.value().to_vec());
            i.next().expect("next");
        }
        assert_eq!(fwd, vec![b"a7".to_vec(), b"a2".to_vec(), b"b3".to_vec()]);
        i.seek_to_last().expect("seek");
        let mut back = Vec::new();
        while i.valid() {
            back.push(i.value().to_vec());
            i.prev().expect("prev");
        }
        fwd.reverse();
        assert_eq!(back, fwd);
        assert_eq!(i.key(), b"", "invalid iterator yields empty slices");
    }

    #[test]
    fn seeks_respect_sequence_order() {
        let mut i = it();
        i.seek(&make_internal_key(b"a", 9, KIND_FOR_SEEK))
            .expect("seek");
        assert_eq!(i.value(), b"a7");
        i.seek(&make_internal_key(b"a", 5, KIND_FOR_SEEK))
            .expect("seek");
        assert_eq!(i.value(), b"a2");
        i.seek(&ik("c", 1)).expect("seek");
        assert!(!i.valid());
        i.seek_for_prev(&make_internal_key(b"a", 5, KIND_FOR_SEEK))
            .expect("seek");
        assert_eq!(i.value(), b"a7");
        i.seek_for_prev(&ik("b", 3)).expect("seek");
        assert_eq!(i.value(), b"b3");
        i.seek_for_prev(&ik("a", 8)).expect("seek");
        assert!(!i.valid());
    }

    #[test]
    fn empty_iterator_is_never_valid() {
        let mut i = VecIterator::new(Vec::new());
        assert!(i.is_empty());
        i.seek_to_first().expect("seek");
        assert!(!i.valid());
        i.seek_to_last().expect("seek");
        assert!(!i.valid());
        i.seek_for_prev(&ik("z", 1)).expect("seek");
        assert!(!i.valid());
    }
}
