//! Compaction filters: a layer above the engine rewrites values as merges
//! copy them (docs/architecture.md, "Compaction filters").
//!
//! The engine calls a column family's [`CompactionFilterFactory`] once per
//! merge job that writes entries of that column family (flush, compaction,
//! ingest, [`crate::Db::rewrite_range`]). The [`CompactionFilter`] it returns
//! sees every put value the job writes and may replace it; it is dropped
//! only after the job's output is installed (or abandoned), so the layer
//! above can tell when values it produced became readable.
//!
//! Example (the SQL layer, `shale-sql/src/schema_upgrade.rs`): a row stored
//! under schema version 1 of a table that is now at version 3 is decoded and
//! re-encoded under version 3 as compaction copies it; readers see the same
//! row either way, and once no row of version 1 is left the dictionary can
//! forget version 1.
//!
//! Contract (the engine cannot check it): a replacement must mean the same
//! to every reader as the value it replaces. The filter is called for
//! every version a merge keeps, including versions only an old snapshot
//! still reads, and the replacement is written with the same key and
//! sequence number. Extents a merge moves by reference are not rewritten
//! and so not filtered; deletes, range deletes and values in value files
//! are never shown to a filter.

use std::fmt;

/// Creates one filter per merge job (see the module docs).
pub trait CompactionFilterFactory: Send + Sync {
    /// Called when a merge job of the column family starts.
    fn create(&self) -> Box<dyn CompactionFilter>;
}

/// Sees the put values of one merge job, in key order.
pub trait CompactionFilter: Send {
    /// `Some(new)` replaces `value` (same key, same sequence); `None`
    /// keeps it. Must not fail: a value the filter does not understand is
    /// kept as it is.
    fn change_value(&mut self, user_key: &[u8], value: &[u8]) -> Option<Vec<u8>>;

    /// `true` drops the entry (a put, or a pointer into a value file) of
    /// `user_key` at sequence `seq` that the merge would otherwise keep;
    /// asked before [`CompactionFilter::change_value`]. The default keeps
    /// everything.
    ///
    /// Contract (the engine cannot check it): only for an entry that no
    /// reader can need, now or later, including every live snapshot at or
    /// above `seq` (see [`crate::Db::oldest_snapshot_sequence`]). A merge
    /// does not hold every version of a key, so dropping the newest one it
    /// holds may uncover an older version in a level below: the filter must
    /// drop only keys whose every version is unreadable (the Redis
    /// endpoint drops sub-records of a key version that is gone for good).
    fn drop_entry(&mut self, user_key: &[u8], seq: u64) -> bool {
        let _ = (user_key, seq);
        false
    }
}

/// Holds a job's filter until the job's edit is installed (a field of
/// `MergeResult`): dropping it tells the filter's owner the job is over.
#[derive(Default)]
pub struct FilterGuard(pub(crate) Option<Box<dyn CompactionFilter>>);

impl fmt::Debug for FilterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "FilterGuard(Some)"
        } else {
            "FilterGuard(None)"
        })
    }
}
