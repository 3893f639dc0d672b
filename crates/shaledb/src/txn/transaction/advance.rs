//! Moving a Snapshot Isolation transaction's snapshot forward instead of
//! failing it with a write conflict, while it has read nothing without a
//! lock (docs/isolation.md, "The snapshot moves while every read was
//! locked").
//!
//! First-committer-wins exists to stop a transaction from acting on what it
//! read at its snapshot after someone changed it (lost update). A
//! transaction whose every read so far was of a key it held locked (a
//! write, [`Txn::get_for_update_cf`], [`Txn::get_for_share_cf`]) has nothing
//! of that kind: each such key had no version newer than the snapshot when
//! its lock was granted (the check under the lock), and nobody can commit
//! one while the lock is held. So every value it has seen is also the value
//! at any later snapshot, and moving the snapshot to now changes nothing it
//! has seen: the transaction is one that began now. That is what it does
//! when the check under a new lock finds a newer version, instead of
//! [`Error::WriteConflict`]:
//!
//! ```text
//! T1 begins (snapshot 10)          T2 updates x, holds its lock
//! T1 UPDATE x  -> waits for x      T2 commits x at 11, unlocks
//! T1 granted x: newest 11 > 10 -> snapshot moves to 11, reads x at 11
//! ```
//!
//! This is what a MySQL user expects of `UPDATE ... WHERE id = ?` at
//! REPEATABLE READ (InnoDB reads the latest version under the lock): a
//! write-only transaction (sysbench `oltp_write_only`) never fails on a hot
//! row, and the snapshot stays one consistent point in time. Once the
//! transaction reads without a lock ([`Txn::get_cf`], an iterator), it keeps
//! its snapshot, and a newer version is a write conflict as before.
//! Serializable never moves: its read set is validated against the
//! snapshot it began with.

use super::{Isolation, Txn};
use crate::db::Snapshot;
use crate::error::{Error, Result};

impl Txn {
    /// Whether a newer version found under a new lock moves the snapshot
    /// instead of failing (see the module comment).
    pub(super) fn may_advance(&self) -> bool {
        self.opts.isolation == Isolation::SnapshotIsolation && self.only_locked_reads.get()
    }

    /// Replaces the snapshot with one taken now, which must see `newest`
    /// (the version of `key` found under its lock); returns its sequence. A version
    /// not yet published (a write group still being applied by a writer
    /// that took no lock) is not seen by a new snapshot either: that is a
    /// write conflict, as before.
    pub(super) fn advance_past(&mut self, key: &[u8], newest: u64) -> Result<u64> {
        let now: Snapshot = self.db.snapshot();
        let seq = now.sequence();
        if seq < newest {
            return Err(Error::WriteConflict { key: key.to_vec() });
        }
        // The old snapshot is released by the drop: compaction may now
        // drop the versions only it could see.
        self.snapshot = Some(now);
        Ok(seq)
    }
}
