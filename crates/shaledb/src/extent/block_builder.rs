//! Builds one block: prefix-compressed entries plus a restart array.
//!
//! Entry encoding (LevelDB style, see `docs/format-extent.md` §4):
//!
//! ```text
//! shared: varint32 | unshared: varint32 | value_len: varint32 | key[shared..] | value
//! ```
//!
//! Every `restart_interval`-th entry is a restart point: it stores its whole
//! key (`shared = 0`) and its offset is recorded in the restart array, which
//! ends the block as `u32 LE` offsets followed by the `u32 LE` count.
//!
//! Example with interval 2: keys `apple, apply, banana` encode as
//! `[0,5,v]apple.. [4,1,v]y.. [0,6,v]banana..` and restarts `[0, off(banana)]`, 2.
//!
//! The builder trusts its caller for ordering (the extent builder checks it).

use crate::error::{Error, Result};
use crate::util::coding::put_varint32;

/// Accumulates the entries of one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    /// Entries since the last restart point.
    counter: usize,
    num_entries: usize,
    last_key: Vec<u8>,
    finished: bool,
}

impl BlockBuilder {
    /// A builder with a restart point every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            num_entries: 0,
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Appends an entry. Keys must be added in increasing order. Fails only
    /// if the block would outgrow u32 offsets.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        debug_assert!(!self.finished, "add after finish");
        let too_big = || Error::InvalidArgument("block exceeds 4 GiB".into());
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            let off = u32::try_from(self.buf.len()).map_err(|_| too_big())?;
            self.restarts.push(off);
            self.counter = 0;
            0
        };
        let unshared = key.get(shared..).unwrap_or_default();
        put_varint32(&mut self.buf, u32::try_from(shared).map_err(|_| too_big())?);
        put_varint32(
            &mut self.buf,
            u32::try_from(unshared.len()).map_err(|_| too_big())?,
        );
        put_varint32(
            &mut self.buf,
            u32::try_from(value.len()).map_err(|_| too_big())?,
        );
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.counter += 1;
        self.num_entries += 1;
        Ok(())
    }

    /// Size of the block if finished now (entries + restart array + count).
    pub fn current_size_estimate(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }

    /// Number of entries added.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn num_entries(&self) -> usize {
        self.num_entries
    }

    /// True if no entry was added.
    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// The last key added (empty if none).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array and returns the block contents. Call
    /// [`BlockBuilder::reset`] before adding again.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for r in &self.restarts {
                self.buf.extend_from_slice(&r.to_le_bytes());
            }
            // At most one restart per entry and entries are >= 3 bytes, so
            // the count is below the u32 offsets already checked in `add`.
            let n = u32::try_from(self.restarts.len()).unwrap_or(u32::MAX);
            self.buf.extend_from_slice(&n.to_le_bytes());
            self.finished = true;
        }
        &self.buf
    }

    /// Clears the builder for the next block, keeping its allocations.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.num_entries = 0;
        self.last_key.clear();
        self.finished = false;
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests index fixtures they built
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_documented_example() {
        let mut b = BlockBuilder::new(2);
        b.add(b"apple", b"1").expect("add");
        b.add(b"apply", b"2").expect("add");
        b.add(b"banana", b"3").expect("add");
        let est = b.current_size_estimate();
        let data = b.finish().to_vec();
        assert_eq!(data.len(), est);
        let mut expect = vec![0, 5, 1];
        expect.extend_from_slice(b"apple1");
        expect.extend_from_slice(&[4, 1, 1]);
        expect.extend_from_slice(b"y2");
        let second_restart = expect.len() as u32;
        expect.extend_from_slice(&[0, 6, 1]);
        expect.extend_from_slice(b"banana3");
        expect.extend_from_slice(&0u32.to_le_bytes());
        expect.extend_from_slice(&second_restart.to_le_bytes());
        expect.extend_from_slice(&2u32.to_le_bytes());
        assert_eq!(data, expect);
    }

    #[test]
    fn empty_block_and_reset() {
        let mut b = BlockBuilder::new(16);
        assert!(b.is_empty());
        assert_eq!(b.finish(), &[0, 0, 0, 0, 1, 0, 0, 0]);
        b.reset();
        b.add(b"k", b"").expect("add");
        assert_eq!(b.num_entries(), 1);
        assert_eq!(b.last_key(), b"k");
        b.reset();
        assert!(b.is_empty());
        assert_eq!(b.current_size_estimate(), 8);
    }
}
