//! Two-phase commit: [`Txn::prepare`](super::Txn::prepare), then
//! [`Db::commit_prepared`] or [`Db::rollback_prepared`] by XID;
//! [`Db::prepared`] lists the in-doubt transactions (also after a restart).
//!
//! Protocol (docs/isolation.md, "Two-phase commit"; record layout in
//! docs/format-wal.md, 2.3):
//!
//! 1. `prepare(xid)` reserves the XID in the [`PreparedRegistry`] (a second
//!    live use fails with [`Error::XidInUse`]), then logs a *prepare record*:
//!    the transaction's writes behind a prepare marker. The group-commit
//!    leader gives it one sequence (the *prepare sequence*) and, once the
//!    record is in the WAL, marks the entry prepared with that sequence and
//!    the WAL segment that holds it. Nothing is applied to the memtables;
//!    the row locks stay held.
//! 2. `commit_prepared(xid)` logs a *commit record* (commit marker naming
//!    XID + prepare sequence, followed by the writes again), which is applied
//!    like any batch, so the writes become visible atomically at the commit's
//!    sequences. `rollback_prepared(xid)` logs a rollback marker. Then the
//!    entry is removed and the locks are released: the XID may be used again.
//!
//! Crash argument: a prepare acknowledged to the caller is in the WAL; its
//! segment is not deleted while the entry exists (the flush's segment
//! cleanup stops at [`PreparedRegistry::min_segment`]), and every later
//! segment is kept too, so recovery sees the prepare and any commit or
//! rollback of it in log order. Recovery rebuilds the registry from the
//! prepares left unresolved and re-takes their row locks before the
//! database accepts any transaction. A commit record carries the writes, so
//! once it is flushed the prepare record is no longer needed.
//!
//! Worked example: T1 prepares `x1` (prepare sequence 40, segment 7). The
//! process dies. At open, recovery reads segment 7, finds the prepare and no
//! commit: `db.prepared()` is `[x1 @ 40]`, and `x1`'s rows are locked, so a
//! new transaction writing them waits. `db.commit_prepared(b"x1")` makes the
//! writes visible and frees the rows; `x1` can be prepared again (with a new
//! prepare sequence, so an old commit record can never be taken for it).
//!
//! Locking: the registry's mutex guards the map; it is never held while
//! waiting for I/O or a row lock.

use super::lock_manager::TxnId;
use crate::db::{CfId, Db, WriteOptions};
use crate::error::{Error, Result};
use crate::txn::marker::{TxnMarker, MAX_XID_LEN};
use crate::write_batch::{BatchOp, WriteBatch};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// What [`Db::prepared`] reports of an in-doubt transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedInfo {
    /// The external transaction id.
    pub xid: Vec<u8>,
    /// Sequence of its prepare record.
    pub prepare_seq: u64,
    /// Number of writes it will apply if committed.
    pub num_writes: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The prepare record is being logged.
    Preparing,
    /// Logged; waiting for commit or rollback.
    Prepared,
    /// A commit or rollback record is being logged.
    Resolving,
}

/// One transaction between prepare and its resolution.
struct Entry {
    state: State,
    /// Valid once `Prepared`.
    prepare_seq: u64,
    /// WAL segment holding the prepare record (valid once `Prepared`).
    segment: u64,
    /// The lock-table owner of its row locks.
    txn_id: TxnId,
    /// Its row locks, sorted (the keys it writes, plus any it read with a
    /// lock); shared with Serializable transactions that captured them.
    locked: LockSet,
    /// Its writes (data ops only).
    writes: WriteBatch,
}

/// The sorted row locks of a prepared transaction, shared with the
/// Serializable transactions that captured them.
pub(crate) type LockSet = Arc<Vec<(CfId, Vec<u8>)>>;

/// A lock owner and the row locks it holds.
type HeldLocks = (TxnId, Vec<(CfId, Vec<u8>)>);

/// A prepared transaction recovered from the WAL.
pub(crate) struct RecoveredPrepare {
    pub prepare_seq: u64,
    pub segment: u64,
    pub writes: WriteBatch,
}

/// The XIDs between prepare and resolution. Guarded by its own mutex.
#[derive(Default)]
pub(crate) struct PreparedRegistry {
    map: Mutex<HashMap<Vec<u8>, Entry>>,
    /// Entries removed so far; changed only while `map` is locked.
    removals: Mutex<u64>,
}

/// Refuses an XID the WAL format cannot carry.
pub(crate) fn check_xid(xid: &[u8]) -> Result<()> {
    if xid.is_empty() || xid.len() > MAX_XID_LEN {
        return Err(Error::InvalidArgument(format!(
            "an XID has 1 to {MAX_XID_LEN} bytes, not {}",
            xid.len()
        )));
    }
    Ok(())
}

impl PreparedRegistry {
    /// Claims `xid` for a transaction about to log its prepare record.
    pub(crate) fn reserve(
        &self,
        xid: &[u8],
        txn_id: TxnId,
        mut locked: Vec<(CfId, Vec<u8>)>,
        writes: WriteBatch,
    ) -> Result<()> {
        locked.sort();
        let locked = Arc::new(locked);
        let mut map = self.map.lock();
        if map.contains_key(xid) {
            return Err(Error::XidInUse(xid.to_vec()));
        }
        map.insert(
            xid.to_vec(),
            Entry {
                state: State::Preparing,
                prepare_seq: 0,
                segment: 0,
                txn_id,
                locked,
                writes,
            },
        );
        Ok(())
    }

    /// Called by the group-commit leader once the prepare record with
    /// sequence `seq` is in WAL segment `segment`.
    pub(crate) fn mark_prepared(&self, xid: &[u8], seq: u64, segment: u64) {
        if let Some(e) = self.map.lock().get_mut(xid) {
            e.state = State::Prepared;
            e.prepare_seq = seq;
            e.segment = segment;
        }
    }

    /// Drops a reservation whose prepare record was not logged.
    fn cancel(&self, xid: &[u8]) {
        let mut map = self.map.lock();
        if map.get(xid).is_some_and(|e| e.state == State::Preparing) {
            *self.removals.lock() += 1;
            map.remove(xid);
        }
    }

    /// Registers a prepared transaction found by recovery.
    pub(crate) fn insert_recovered(
        &self,
        xid: Vec<u8>,
        rec: RecoveredPrepare,
        txn_id: TxnId,
        locked: Vec<(CfId, Vec<u8>)>,
    ) {
        let locked = Arc::new(locked);
        self.map.lock().insert(
            xid,
            Entry {
                state: State::Prepared,
                prepare_seq: rec.prepare_seq,
                segment: rec.segment,
                txn_id,
                locked,
                writes: rec.writes,
            },
        );
    }

    /// Oldest WAL segment a prepared transaction needs, if any. Segments from
    /// here on must not be deleted. A reservation still being logged counts
    /// as needing everything (its segment is not known yet).
    pub(crate) fn min_segment(&self) -> Option<u64> {
        self.map
            .lock()
            .values()
            .map(|e| match e.state {
                State::Preparing => 0,
                State::Prepared | State::Resolving => e.segment,
            })
            .min()
    }

    /// A key that both `reads` covers and a prepared transaction other
    /// than `own` will write (Serializable validation, rule 2).
    pub(crate) fn first_read_conflict(
        &self,
        own: TxnId,
        reads: &crate::txn::read_set::ReadSet,
    ) -> Option<Vec<u8>> {
        let map = self.map.lock();
        map.values()
            .filter(|e| e.txn_id != own)
            .flat_map(|e| e.locked.iter())
            .find(|(cf, key)| reads.covers(*cf, key))
            .map(|(_, key)| key.clone())
    }

    /// Runs `take_snapshot` and returns its result with the lock sets of
    /// every transaction prepared (or being prepared or resolved) at that
    /// instant. A transaction leaves the registry only after its commit is
    /// visible, so one missing from the capture is in the snapshot. The
    /// registry's mutex is not held while the snapshot is taken (that takes
    /// `wal`, and the commit leader takes the registry under `wal`):
    /// instead, if any entry left the registry meanwhile, the capture is
    /// retried.
    pub(crate) fn capture<T>(&self, take_snapshot: impl Fn() -> T) -> (T, Vec<LockSet>) {
        loop {
            let before = *self.removals.lock();
            let snap = take_snapshot();
            let map = self.map.lock();
            if *self.removals.lock() == before {
                let sets = map.values().map(|e| e.locked.clone()).collect();
                return (snap, sets);
            }
        }
    }

    fn list(&self) -> Vec<PreparedInfo> {
        let mut v: Vec<PreparedInfo> = self
            .map
            .lock()
            .iter()
            .filter(|(_, e)| e.state != State::Preparing)
            .map(|(xid, e)| PreparedInfo {
                xid: xid.clone(),
                prepare_seq: e.prepare_seq,
                num_writes: e.writes.count(),
            })
            .collect();
        v.sort_by_key(|p| p.prepare_seq);
        v
    }

    /// Starts resolving `xid`: returns (prepare_seq, writes).
    fn begin_resolve(&self, xid: &[u8]) -> Result<(u64, WriteBatch)> {
        let mut map = self.map.lock();
        match map.get_mut(xid) {
            Some(e) if e.state == State::Prepared => {
                e.state = State::Resolving;
                Ok((e.prepare_seq, e.writes.clone()))
            }
            Some(_) => Err(Error::XidInUse(xid.to_vec())),
            None => Err(Error::UnknownXid(xid.to_vec())),
        }
    }

    /// Ends a resolution: on success removes the entry and returns its locks;
    /// on failure the transaction stays prepared.
    fn end_resolve(&self, xid: &[u8], ok: bool) -> Option<HeldLocks> {
        let mut map = self.map.lock();
        if ok {
            *self.removals.lock() += 1;
            map.remove(xid)
                .map(|e| (e.txn_id, Arc::unwrap_or_clone(e.locked)))
        } else {
            if let Some(e) = map.get_mut(xid) {
                e.state = State::Prepared;
            }
            None
        }
    }
}

/// The row locks a prepared transaction's writes need (one per written key;
/// a range delete inside a transaction is not offered, so none here).
pub(crate) fn write_locks(writes: &WriteBatch) -> Result<Vec<(CfId, Vec<u8>)>> {
    let mut keys = Vec::with_capacity(writes.count() as usize);
    for op in writes.iter() {
        let op = op.map_err(|e| Error::InvalidArgument(format!("malformed batch: {e}")))?;
        if let BatchOp::Put { cf, key, .. }
        | BatchOp::BlobIndex { cf, key, .. }
        | BatchOp::Delete { cf, key } = op
        {
            keys.push((cf, key.to_vec()));
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

impl Db {
    /// The in-doubt transactions: prepared and neither committed nor rolled
    /// back, oldest prepare first. After a restart these are exactly the
    /// prepares the WAL holds without a resolution.
    pub fn prepared(&self) -> Vec<PreparedInfo> {
        self.inner().prepared.list()
    }

    /// Commits the prepared transaction `xid`: its writes become visible
    /// atomically and its row locks are released. [`Error::UnknownXid`] if
    /// no such transaction is prepared.
    pub fn commit_prepared(&self, xid: &[u8]) -> Result<()> {
        self.commit_prepared_opt(&WriteOptions::default(), xid)
    }

    /// [`Db::commit_prepared`] with write options (e.g. `sync`).
    pub fn commit_prepared_opt(&self, wo: &WriteOptions, xid: &[u8]) -> Result<()> {
        self.resolve_prepared(wo, xid, true)
    }

    /// Rolls back the prepared transaction `xid`: its writes are discarded
    /// and its row locks released.
    pub fn rollback_prepared(&self, xid: &[u8]) -> Result<()> {
        self.rollback_prepared_opt(&WriteOptions::default(), xid)
    }

    /// [`Db::rollback_prepared`] with write options (e.g. `sync`).
    pub fn rollback_prepared_opt(&self, wo: &WriteOptions, xid: &[u8]) -> Result<()> {
        self.resolve_prepared(wo, xid, false)
    }

    fn resolve_prepared(&self, wo: &WriteOptions, xid: &[u8], commit: bool) -> Result<()> {
        check_xid(xid)?;
        let registry = &self.inner().prepared;
        let (prepare_seq, writes) = registry.begin_resolve(xid)?;
        let xid_v = xid.to_vec();
        let record = if commit {
            let marker = TxnMarker::Commit {
                xid: xid_v,
                prepare_seq,
            };
            WriteBatch::with_txn_marker(&marker, &writes)
        } else {
            let marker = TxnMarker::Rollback {
                xid: xid_v,
                prepare_seq,
            };
            WriteBatch::with_txn_marker(&marker, &WriteBatch::new())
        };
        let wo = WriteOptions {
            disable_wal: false,
            ..*wo
        };
        let result = crate::db::write::write_txn_record(self.inner(), &wo, record, None);
        if let Some((id, locked)) = registry.end_resolve(xid, result.is_ok()) {
            self.lock_manager().unlock_all(id, &locked);
        }
        result
    }

    /// Logs the prepare record of transaction `txn_id` (see [`Txn::prepare`](super::Txn::prepare)).
    /// On success the locks belong to the registry; on failure they are
    /// still the caller's.
    pub(crate) fn log_prepare(
        &self,
        wo: &WriteOptions,
        xid: &[u8],
        txn_id: TxnId,
        locked: Vec<(CfId, Vec<u8>)>,
        writes: WriteBatch,
        check: Option<crate::txn::serializable::ReadCheck>,
    ) -> Result<()> {
        let registry = &self.inner().prepared;
        let record =
            WriteBatch::with_txn_marker(&TxnMarker::Prepare { xid: xid.to_vec() }, &writes);
        registry.reserve(xid, txn_id, locked.clone(), writes)?;
        let wo = WriteOptions {
            disable_wal: false,
            ..*wo
        };
        let result = crate::db::write::write_txn_record(self.inner(), &wo, record, check);
        if result.is_err() {
            registry.cancel(xid);
        }
        result
    }

    /// Re-registers the prepared transactions recovery found, taking their
    /// row locks (nobody else holds any lock yet).
    pub(crate) fn restore_prepared(
        &self,
        recovered: impl IntoIterator<Item = (Vec<u8>, RecoveredPrepare)>,
    ) -> Result<()> {
        for (xid, rec) in recovered {
            let id = self.next_txn_id();
            let locked = write_locks(&rec.writes)?;
            for (cf, key) in &locked {
                self.lock_manager().lock(
                    id,
                    *cf,
                    key,
                    super::lock_manager::LockMode::Exclusive,
                    std::time::Duration::ZERO,
                )?;
            }
            self.inner().prepared.insert_recovered(xid, rec, id, locked);
        }
        Ok(())
    }
}
