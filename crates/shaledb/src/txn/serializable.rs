//! Serializable: Snapshot Isolation plus validation of everything the
//! transaction read, at its commit point (docs/isolation.md, "Serializable").
//!
//! A Serializable transaction reads at its snapshot S like SI and records
//! its read set (points and the key ranges its iterators covered). Its
//! writes take row locks with first-committer-wins, like SI. At commit (or
//! prepare) its batch goes to the group-commit leader with a [`ReadCheck`];
//! the leader, holding the WAL lock so that nothing else commits meanwhile,
//! fails it with `SerializationFailure` if
//!
//! 1. a batch earlier in the same group writes something it read,
//! 2. a prepared transaction (other than itself) will write something it
//!    read (its writes are logged but not yet visible), or
//! 3. anything it read has a version newer than S: a point via
//!    `latest_seq_of`, a range via `db::validate::range_changed_since`.
//!
//! Otherwise it commits with every read still current: its reads equal the
//! state at its commit sequence, so the commit order is a serial order
//! (backward validation, as in optimistic concurrency control; the writes
//! were already protected by row locks). A prepared transaction is placed
//! at its prepare; rule 2 keeps anyone committing after that point from
//! missing its writes.
//!
//! Read-only transactions need no validation: they see a prefix of the
//! commit order. The exception is a transaction prepared before their
//! snapshot but committed after it: its writes belong before the snapshot
//! and are not seen. So a Serializable transaction captures, with its
//! snapshot, the write sets of the transactions prepared at that moment, and
//! a read-only commit fails if it read any of those keys.
//!
//! Worked example (write skew, G2-item): x = y = 50, constraint x + y >= 0.
//! T1 and T2 both read x and y at S = 10. T1 sets x = -40 and commits at 11
//! (its reads are unchanged). T2 sets y = -40; at its commit the leader
//! finds x changed at 11 > 10 and fails T2: the constraint holds.

use super::lock_manager::TxnId;
use super::read_set::ReadSet;
use crate::db::{CfId, DbInner};
use crate::error::{Error, Result};
use crate::types::SequenceNumber;
use crate::write_batch::{BatchOp, WriteBatch};
use std::collections::BTreeSet;
use std::sync::Arc;

/// What the leader validates for a Serializable transaction.
pub(crate) struct ReadCheck {
    /// Its lock-table id (its own prepared entry is not a conflict).
    pub txn_id: TxnId,
    /// The sequence its reads saw.
    pub snapshot: SequenceNumber,
    /// What it read.
    pub reads: ReadSet,
}

/// Writes of the batches earlier in the group being validated.
#[derive(Default)]
pub(crate) struct GroupWrites {
    keys: BTreeSet<(CfId, Vec<u8>)>,
    /// Column families with a range delete: any read there conflicts
    /// (conservative; range deletes in a group with a Serializable commit
    /// are rare).
    range_deleted: BTreeSet<CfId>,
}

impl GroupWrites {
    /// Adds the writes of a batch that passed (or needed no) validation.
    /// Prepare and rollback records write nothing visible.
    pub(crate) fn add(&mut self, batch: &WriteBatch) {
        if !batch.applies_data() {
            return;
        }
        for op in batch.iter().map_while(|op| op.ok()) {
            match op {
                BatchOp::Put { cf, key, .. }
                | BatchOp::BlobIndex { cf, key, .. }
                | BatchOp::Delete { cf, key } => {
                    self.keys.insert((cf, key.to_vec()));
                }
                BatchOp::RangeDelete { cf, .. } => {
                    self.range_deleted.insert(cf);
                }
            }
        }
    }
}

fn failure(key: &[u8]) -> Error {
    Error::SerializationFailure { key: key.to_vec() }
}

/// The leader's check (module docs, rules 1 to 3).
pub(crate) fn validate(
    inner: &Arc<DbInner>,
    check: &ReadCheck,
    earlier: &GroupWrites,
) -> Result<()> {
    let reads = &check.reads;
    for (cf, key) in &earlier.keys {
        if reads.covers(*cf, key) {
            return Err(failure(key));
        }
    }
    for cf in &earlier.range_deleted {
        if reads.points().any(|(c, _)| c == *cf) || reads.ranges().any(|(c, _, _)| c == *cf) {
            return Err(failure(b""));
        }
    }
    if let Some(key) = inner.prepared.first_read_conflict(check.txn_id, reads) {
        return Err(failure(&key));
    }
    for (cf, key) in reads.points() {
        let newest = crate::db::latest_seq_of_key(inner, cf, key)?;
        if newest.is_some_and(|s| s > check.snapshot) {
            return Err(failure(key));
        }
    }
    for (cf, lo, hi) in reads.ranges() {
        if let Some(key) = crate::db::range_changed_since(inner, cf, lo, hi, check.snapshot)? {
            return Err(failure(&key));
        }
    }
    Ok(())
}

/// A read-only Serializable commit: fails if it read a key written by a
/// transaction that was prepared when its snapshot was taken (module docs).
pub(crate) fn check_read_only(
    reads: &ReadSet,
    prepared_at_begin: &[super::prepared::LockSet],
) -> Result<()> {
    for writes in prepared_at_begin {
        for (cf, key) in writes.iter() {
            if reads.covers(*cf, key) {
                return Err(failure(key));
            }
        }
    }
    Ok(())
}
