//! Read-ahead for a batch that walks one collection record by record.
//!
//! A pipelined queue consumer (`RPOP q` sixteen times, or fifty clients'
//! `RPOP q` in one event-loop turn) reads one element record per command.
//! Each is a point lookup in the engine (memtable, then the extents of L1
//! and L2: a bloom probe, an index seek and a block search per level), and
//! the records are neighbours in key order. From the second pop of a list
//! in one batch on, the batch reads the next [`WINDOW`] elements with one
//! iterator into its read cache ([`Tx::get`] then finds them there).
//!
//! Why this is safe: the batch holds the list's lock stripe, so nobody else
//! writes its records until the batch commits; the batch's own writes are
//! in `writes`, which [`Tx::get`] consults before the cache. The values read
//! are therefore the records' latest, exactly what point reads would find.

use super::Tx;
use crate::store::{Result, StoreError};
use shaledb::ReadOptions;

/// Records read ahead at a time: enough to serve a 16-deep pipeline from
/// three or four clients with one seek, small enough that a batch that
/// stops popping wastes little.
pub const WINDOW: i64 = 64;

impl Tx<'_> {
    /// How many times in a row (this one included) the batch has asked
    /// about `id` (a collection's record prefix); 1 outside a batch, so
    /// a lone command never reads ahead.
    pub fn repeat_count(&mut self, id: &[u8]) -> u32 {
        if !self.batch {
            return 1;
        }
        match &mut self.repeats {
            Some((last, n)) if last.as_slice() == id => {
                *n = n.saturating_add(1);
                *n
            }
            slot => {
                *slot = Some((id.to_vec(), 1));
                1
            }
        }
    }

    /// Whether [`Tx::get`] of `key` is answered without the engine.
    pub fn is_cached(&self, key: &[u8]) -> bool {
        self.writes.contains_key(key) || self.read_cache.borrow().contains_key(key)
    }

    /// Batch only: reads the engine's records from `lo` to `hi` (both
    /// inclusive, one user key's records) into the read cache with one
    /// iterator. Nothing when this is not a batch or it does not hold the
    /// owner's stripe (the values could then change before they are used).
    pub fn prefetch(&self, lo: &[u8], hi: &[u8]) -> Result<()> {
        if !self.batch || !self.holds_owner_of(lo) {
            return Ok(());
        }
        let mut upper = hi.to_vec();
        upper.push(0);
        let opts = ReadOptions {
            lower_bound: Some(lo.to_vec()),
            upper_bound: Some(upper),
            ..ReadOptions::default()
        };
        let mut it = self.st.engine().iter_cf(&opts, self.st.cf())?;
        it.seek(lo)?;
        let mut cache = self.read_cache.borrow_mut();
        while it.valid() {
            if !cache.contains_key(it.key()) {
                cache.insert(it.key().to_vec(), Some(it.value().to_vec()));
            }
            it.next()?;
        }
        match it.status() {
            Some(e) => Err(StoreError::Engine(e.clone())),
            None => Ok(()),
        }
    }
}
