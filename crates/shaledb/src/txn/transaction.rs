//! Pessimistic transactions: [`Db::begin`] and [`Txn`].
//!
//! The X-Engine model (docs/isolation.md): every read is a snapshot read and
//! takes no lock; every write (and [`Txn::get_for_update`]) takes an exclusive
//! row lock in the [`LockManager`](super::lock_manager::LockManager), held until
//! commit or rollback (strict two-phase locking). Writes are buffered in the
//! transaction and applied at commit as one [`WriteBatch`] through
//! [`Db::write`], so they become visible atomically, at consecutive sequences.
//!
//! * **Read Committed**: each read sees the latest committed state (a fresh
//!   snapshot per read); no write-conflict check, so a write may overwrite a
//!   value committed after this transaction read it (lost update is possible).
//! * **Snapshot Isolation** (alias Repeatable Read): one snapshot taken at
//!   [`Db::begin`]. After a row lock is granted, if the key's newest committed
//!   version is newer than the snapshot, the operation fails with
//!   [`Error::WriteConflict`] (first committer wins), so lost update cannot
//!   happen. Write skew can. A transaction that has read nothing without a
//!   lock moves its snapshot past the newer version instead
//!   (`transaction/advance.rs`).
//!
//! Worked example (SI): T1 begins at snapshot 10, reads `x`; T2 updates `x`
//! and commits at sequence 11. T1 now calls `put(x)`: it gets the lock (T2
//! released it), finds the newest version of `x` at 11 > 10 and fails with
//! `WriteConflict` instead of overwriting T2's update.
//!
//! ```
//! use shaledb::txn::TxnOptions;
//! use shaledb::{env::mem::MemFs, Db, Options};
//! let opts = Options { fs: std::sync::Arc::new(MemFs::new()), ..Options::default() };
//! let db = Db::open("/db", opts)?;
//! let mut t = db.begin(TxnOptions::default());
//! t.put(b"k", b"v")?;
//! assert_eq!(t.get(b"k")?, Some(b"v".to_vec())); // own write
//! assert_eq!(db.get(b"k")?, None);                // not yet committed
//! t.commit()?;
//! assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
//! # Ok::<(), shaledb::Error>(())
//! ```
//!
//! Concurrency: a [`Txn`] is used by one thread at a time (`&mut self` for
//! everything that locks or writes); the lock table and the database are the
//! shared parts. The write buffer and the set of held locks are private.

use super::lock_manager::{LockMode, TxnId};
use super::serializable::{check_read_only, ReadCheck};
use crate::db::{CfId, Db, ReadOptions, Snapshot, WriteOptions};
use crate::error::{Error, Result};
use crate::version::DEFAULT_CF_ID;
use crate::write_batch::WriteBatch;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Isolation level of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Each read sees the latest committed data; no write-conflict check.
    ReadCommitted,
    /// One snapshot for the whole transaction (moved forward only while
    /// every read was locked); first-committer-wins on writes.
    #[default]
    SnapshotIsolation,
    /// Snapshot Isolation plus validation of everything read, at commit
    /// (`crate::txn::serializable`): prevents write skew and phantoms;
    /// failures are [`Error::SerializationFailure`].
    Serializable,
}

impl Isolation {
    /// MySQL's name for what this engine provides as Snapshot Isolation
    /// (unlike InnoDB's RR, it also prevents lost updates).
    pub const REPEATABLE_READ: Isolation = Isolation::SnapshotIsolation;
}

/// Options of [`Db::begin`].
#[derive(Clone, Debug)]
pub struct TxnOptions {
    /// Isolation level.
    pub isolation: Isolation,
    /// How long a row-lock request waits before [`Error::LockTimeout`].
    pub lock_wait_timeout: Duration,
    /// Options of the commit write (e.g. `sync`).
    pub write_options: WriteOptions,
}

impl Default for TxnOptions {
    fn default() -> Self {
        TxnOptions {
            isolation: Isolation::SnapshotIsolation,
            lock_wait_timeout: Duration::from_secs(1),
            write_options: WriteOptions::default(),
        }
    }
}

/// A buffered write: `Some(value)` = put, `None` = delete.
type Buffer = BTreeMap<(CfId, Vec<u8>), Option<Vec<u8>>>;

/// A key and what the write buffer held for it before a write (`None`:
/// nothing).
type UndoEntry = ((CfId, Vec<u8>), Option<Option<Vec<u8>>>);

/// A pessimistic transaction. Dropping it without [`Txn::commit`] rolls it back.
pub struct Txn {
    /// A handle of its own: the transaction can outlive the caller's borrow
    /// (a server session keeps it across statements and threads).
    db: Db,
    id: TxnId,
    opts: TxnOptions,
    /// The read snapshot (Snapshot Isolation only).
    snapshot: Option<Snapshot>,
    /// Own writes, applied at commit. Reads look here first.
    buffer: Buffer,
    /// Every row lock granted to this transaction (released at the end).
    /// Invariant: under SI/Serializable a key here was checked for write
    /// conflicts after its lock was granted; unless it is in `unverified`,
    /// the check passed, and it cannot fail later (every writer of the key
    /// needs this lock first), so writes to it skip the check.
    locked: BTreeSet<(CfId, Vec<u8>)>,
    /// Locked keys whose check under the lock did not pass (a version newer
    /// than the snapshot, or an error): checked again on every write.
    unverified: BTreeSet<(CfId, Vec<u8>)>,
    /// Open savepoints, oldest first: the length of `undo` when each was set.
    savepoints: Vec<usize>,
    /// While a savepoint is open: each buffered write's key and what the
    /// buffer held for it before (`None`: nothing), oldest first. Undoing
    /// back to a savepoint costs the writes since it, not the whole buffer.
    undo: Vec<UndoEntry>,
    /// Locks released (committed or rolled back), or handed to the
    /// prepared-transaction registry.
    finished: bool,
    /// Everything read, at Serializable only (see `txn/read_set.rs`). A `RefCell`
    /// because reads take `&self`; no borrow outlives one call.
    reads: std::cell::RefCell<super::read_set::ReadSet>,
    /// Serializable: the lock sets of the transactions that were prepared
    /// when the snapshot was taken (see `txn/serializable.rs`).
    prepared_at_begin: Vec<super::prepared::LockSet>,
    /// Prepared under this XID: only `Db::commit_prepared` /
    /// `Db::rollback_prepared` can end it now.
    prepared_as: Option<Vec<u8>>,
    /// Keys locked in shared mode (`get_for_share`); after an upgrade by a
    /// write a key is in `locked` too. Released with `locked`.
    shared: BTreeSet<(CfId, Vec<u8>)>,
    /// SI: nothing was read so far without a lock on the key, so the
    /// snapshot may move forward instead of a write conflict (see
    /// `transaction/advance.rs`). Cleared by the first read without a lock;
    /// a `Cell` because reads take `&self`.
    only_locked_reads: std::cell::Cell<bool>,
}

impl Db {
    /// Starts a pessimistic transaction (see [`crate::txn`]).
    pub fn begin(&self, opts: TxnOptions) -> Txn {
        let (snapshot, prepared_at_begin) = match opts.isolation {
            Isolation::SnapshotIsolation => (Some(self.snapshot()), Vec::new()),
            Isolation::ReadCommitted => (None, Vec::new()),
            Isolation::Serializable => {
                let (snap, sets) = self.inner().prepared.capture(|| self.snapshot());
                (Some(snap), sets)
            }
        };
        Txn {
            db: self.clone(),
            id: self.next_txn_id(),
            opts,
            snapshot,
            buffer: BTreeMap::new(),
            locked: BTreeSet::new(),
            unverified: BTreeSet::new(),
            savepoints: Vec::new(),
            undo: Vec::new(),
            finished: false,
            prepared_as: None,
            reads: Default::default(),
            prepared_at_begin,
            shared: BTreeSet::new(),
            only_locked_reads: std::cell::Cell::new(true),
        }
    }
}

impl Txn {
    /// This transaction's id in the lock table.
    pub fn id(&self) -> TxnId {
        self.id
    }

    /// The isolation level.
    pub fn isolation(&self) -> Isolation {
        self.opts.isolation
    }

    /// The sequence reads see (SI: it moves forward only while every read
    /// was locked, `transaction/advance.rs`), or `None` (RC: the latest
    /// state per read).
    pub fn snapshot_sequence(&self) -> Option<u64> {
        self.snapshot.as_ref().map(Snapshot::sequence)
    }

    /// Reads `key` from the default column family (snapshot read, no lock).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_cf(DEFAULT_CF_ID, key)
    }

    /// Reads `key` from `cf`: own writes first, then the database at the read
    /// snapshot (SI: the one taken at begin; RC: the latest committed state).
    pub fn get_cf(&self, cf: CfId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut value = Vec::new();
        Ok(self.get_cf_into(cf, key, &mut value)?.then_some(value))
    }

    /// [`Txn::get_cf`] into the caller's buffer (cleared first): `Ok(true)`
    /// with the value in `value`, `Ok(false)` if absent. A caller reusing
    /// `value` saves the allocation per found key.
    pub fn get_cf_into(&self, cf: CfId, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        self.only_locked_reads.set(false);
        self.read_into(cf, key, value)
    }

    /// [`Txn::get_cf_into`] for a read that may or may not be under this
    /// transaction's lock: the callers say which (`only_locked_reads`).
    fn read_into(&self, cf: CfId, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        if self.records_reads() {
            self.reads.borrow_mut().add_point(cf, key);
        }
        // Most reads come from transactions that wrote nothing (yet): no
        // probe, and no owned copy of the key to probe with.
        if !self.buffer.is_empty() {
            if let Some(v) = self.buffer.get(&(cf, key.to_vec())) {
                value.clear();
                return Ok(match v {
                    Some(v) => {
                        value.extend_from_slice(v);
                        true
                    }
                    None => false,
                });
            }
        }
        // `self.snapshot` stays registered while this reads at its sequence.
        crate::db::read::get_into_at(self.db.inner(), self.snapshot_sequence(), cf, key, value)
    }

    /// Locks `key` exclusively, then reads it (`SELECT ... FOR UPDATE`).
    pub fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_for_update_cf(DEFAULT_CF_ID, key)
    }

    /// [`Txn::get_for_update`] in column family `cf`. Under SI a key changed
    /// after the snapshot fails with [`Error::WriteConflict`] (unless the
    /// snapshot may move past the change: `transaction/advance.rs`), so the
    /// value returned is also the latest committed one.
    pub fn get_for_update_cf(&mut self, cf: CfId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(value) = self.lock_and_check(cf, key, true)? {
            // Freshly locked: nothing of ours is buffered for the key yet
            // (a buffered write locked it before).
            if self.records_reads() {
                self.reads.borrow_mut().add_point(cf, key);
            }
            return Ok(value);
        }
        // Locked and checked before: a read under our lock.
        let mut value = Vec::new();
        Ok(self.read_into(cf, key, &mut value)?.then_some(value))
    }

    /// Takes `key`'s exclusive lock if it is free right now, without
    /// waiting and without looking the key up: for a key the caller knows
    /// no committed or in-flight write holds yet (a freshly generated
    /// auto-increment value whose claim it confirms next, shale-sql's
    /// `catalog/autoinc.rs`). True if the lock was free and is now held;
    /// false if another transaction holds it, or this one already did
    /// (then nothing changed: lock and read as usual). Once held, a later
    /// [`Txn::put_cf`] of the key takes no lock and makes no check, so a
    /// key that was not fresh would be written over: first-committer-wins
    /// is the caller's argument here, not this call's.
    pub fn try_lock_fresh_cf(&mut self, cf: CfId, key: &[u8]) -> Result<bool> {
        self.check_active()?;
        let entry = (cf, key.to_vec());
        if self.locked.contains(&entry) {
            return Ok(false);
        }
        match self
            .db
            .lock_manager()
            .lock(self.id, cf, key, LockMode::Exclusive, Duration::ZERO)
        {
            Ok(()) => {
                self.locked.insert(entry);
                Ok(true)
            }
            Err(Error::LockTimeout { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Buffers `key = value` in the default column family (after locking it).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf(DEFAULT_CF_ID, key, value)
    }

    /// Buffers `key = value` in `cf` (after locking it).
    pub fn put_cf(&mut self, cf: CfId, key: &[u8], value: &[u8]) -> Result<()> {
        self.lock_for_write(cf, key)?;
        self.buffer_write(cf, key, Some(value.to_vec()));
        Ok(())
    }

    /// Buffers a delete of `key` in the default column family (after locking it).
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.delete_cf(DEFAULT_CF_ID, key)
    }

    /// Buffers a delete of `key` in `cf` (after locking it).
    pub fn delete_cf(&mut self, cf: CfId, key: &[u8]) -> Result<()> {
        self.lock_for_write(cf, key)?;
        self.buffer_write(cf, key, None);
        Ok(())
    }

    /// Buffers `key = value` in `cf` without locking `key`, for a key that
    /// only the holder of another lock of this transaction may write: a
    /// non-unique secondary index entry embeds its row's primary key and is
    /// written under the row's lock. That lock's first-committer-wins check
    /// covers the entry too, so it costs no lock and no lookup. Writing an
    /// uncovered key this way loses the protection of both.
    pub fn put_cf_covered(&mut self, cf: CfId, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_active()?;
        self.buffer_write(cf, key, Some(value.to_vec()));
        Ok(())
    }

    /// Buffers a delete of `key` in `cf` without locking it; see
    /// [`Self::put_cf_covered`].
    pub fn delete_cf_covered(&mut self, cf: CfId, key: &[u8]) -> Result<()> {
        self.check_active()?;
        self.buffer_write(cf, key, None);
        Ok(())
    }

    /// Buffers one write, logging what it replaced while a savepoint is open.
    fn buffer_write(&mut self, cf: CfId, key: &[u8], value: Option<Vec<u8>>) {
        let k = (cf, key.to_vec());
        if self.savepoints.is_empty() {
            self.buffer.insert(k, value);
        } else {
            let before = self.buffer.insert(k.clone(), value);
            self.undo.push((k, before));
        }
    }

    /// Marks a savepoint: [`Txn::rollback_to_savepoint`] undoes the writes
    /// buffered after it. Row locks taken since stay held (as in InnoDB and
    /// RocksDB): releasing them early would break two-phase locking.
    pub fn set_savepoint(&mut self) {
        self.savepoints.push(self.undo.len());
    }

    /// Removes the newest savepoint, keeping the writes made since it (a
    /// statement that succeeded); `InvalidArgument` if there is none. With
    /// no savepoint left, the undo log is dropped.
    pub fn release_savepoint(&mut self) -> Result<()> {
        self.savepoints
            .pop()
            .ok_or_else(|| Error::InvalidArgument("no savepoint to release".into()))?;
        if self.savepoints.is_empty() {
            self.undo.clear();
        }
        Ok(())
    }

    /// Undoes the writes since the newest savepoint and removes it;
    /// `InvalidArgument` if there is none.
    pub fn rollback_to_savepoint(&mut self) -> Result<()> {
        let mark = self
            .savepoints
            .pop()
            .ok_or_else(|| Error::InvalidArgument("no savepoint to roll back to".into()))?;
        // Newest first, so a key written twice ends as it was at the mark.
        while self.undo.len() > mark {
            let Some((k, before)) = self.undo.pop() else {
                break;
            };
            match before {
                Some(v) => {
                    self.buffer.insert(k, v);
                }
                None => {
                    self.buffer.remove(&k);
                }
            }
        }
        Ok(())
    }

    /// Number of buffered writes.
    pub fn num_writes(&self) -> usize {
        self.buffer.len()
    }

    /// Applies every buffered write atomically, then releases the locks. On
    /// error nothing was applied and the locks are released too.
    pub fn commit(mut self) -> Result<()> {
        self.check_active()?;
        let result = if self.buffer.is_empty() {
            match self.opts.isolation {
                Isolation::Serializable => {
                    check_read_only(&self.reads.borrow(), &self.prepared_at_begin)
                }
                _ => Ok(()),
            }
        } else {
            match self.read_check() {
                Some(check) => crate::db::write::write_checked(
                    self.db.inner(),
                    &self.opts.write_options,
                    self.write_batch(),
                    check,
                ),
                None => self.db.write(&self.opts.write_options, self.write_batch()),
            }
        };
        self.release();
        result
    }

    /// Only Serializable validates reads, so only it pays for recording them.
    fn records_reads(&self) -> bool {
        self.opts.isolation == Isolation::Serializable
    }

    /// Serializable: what the commit leader must validate (the read set is
    /// handed over; the transaction ends with this commit or prepare).
    fn read_check(&self) -> Option<ReadCheck> {
        if self.opts.isolation != Isolation::Serializable {
            return None;
        }
        Some(ReadCheck {
            txn_id: self.id,
            snapshot: self.snapshot_sequence().unwrap_or(0),
            reads: self.reads.take(),
        })
    }

    /// Two-phase commit, phase one: logs this transaction's writes under
    /// `xid` and keeps its row locks; from now on only
    /// [`Db::commit_prepared`] or [`Db::rollback_prepared`] with the same
    /// XID ends it, also after a crash ([`Db::prepared`] lists it). On error
    /// nothing was logged and the transaction is still active (for example
    /// [`Error::XidInUse`]: the XID names another transaction still prepared).
    pub fn prepare(&mut self, xid: &[u8]) -> Result<()> {
        self.check_active()?;
        crate::txn::prepared::check_xid(xid)?;
        // Shared locks go with the exclusive ones: all are released when the
        // XID is resolved (after a restart only the write locks come back).
        let locked: Vec<(CfId, Vec<u8>)> = self.locked.union(&self.shared).cloned().collect();
        let reads = self.reads.borrow().clone();
        let logged = self.db.log_prepare(
            &self.opts.write_options,
            xid,
            self.id,
            locked,
            self.write_batch(),
            self.read_check(),
        );
        if let Err(e) = logged {
            // Still active: keep what it read for a later commit or prepare.
            *self.reads.borrow_mut() = reads;
            return Err(e);
        }
        // The registry owns the locks now.
        self.finished = true;
        self.locked.clear();
        self.unverified.clear();
        self.shared.clear();
        self.buffer.clear();
        self.savepoints.clear();
        self.undo.clear();
        self.prepared_as = Some(xid.to_vec());
        Ok(())
    }

    /// The XID this transaction was prepared under, if it was.
    pub fn prepared_xid(&self) -> Option<&[u8]> {
        self.prepared_as.as_deref()
    }

    /// The buffered writes as one batch.
    fn write_batch(&self) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for ((cf, key), value) in &self.buffer {
            match value {
                Some(v) => batch.put_cf(*cf, key, v),
                None => batch.delete_cf(*cf, key),
            }
        }
        batch
    }

    /// Refuses use of a transaction that was prepared (its outcome belongs
    /// to the XID now).
    fn check_active(&self) -> Result<()> {
        if self.prepared_as.is_some() {
            return Err(Error::InvalidArgument(
                "transaction is prepared; end it with Db::commit_prepared or Db::rollback_prepared"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Discards the buffered writes and releases the locks.
    pub fn rollback(mut self) {
        self.release();
    }

    /// Takes the exclusive row lock on `(cf, key)` and, under SI, checks that
    /// nobody committed the key after the snapshot (first committer wins). On
    /// a conflict the lock stays held until the transaction ends.
    ///
    /// One lookup of the key's newest version in the common case: the lock
    /// is tried without waiting first, and once granted and checked, later
    /// writes of the key check nothing (see `locked`). Only a lock that must
    /// be waited for is checked before the wait as well: a version newer
    /// than the snapshot can only stay newer, so fail now rather than after
    /// queueing behind the lock's holder (who would commit past our snapshot
    /// anyway on a hot row).
    fn lock_for_write(&mut self, cf: CfId, key: &[u8]) -> Result<()> {
        self.lock_and_check(cf, key, false).map(|_| ())
    }

    /// [`Self::lock_for_write`]; with `read`, also the key's value at the
    /// snapshot when the check under a freshly granted lock looked it up
    /// (`Some(None)`: no value), so the caller need not read it again.
    fn lock_and_check(
        &mut self,
        cf: CfId,
        key: &[u8],
        read: bool,
    ) -> Result<Option<Option<Vec<u8>>>> {
        self.check_active()?;
        let entry = (cf, key.to_vec());
        if self.locked.contains(&entry) {
            if self.unverified.contains(&entry) {
                self.check_write_conflict(cf, key)?;
                self.unverified.remove(&entry);
            }
            return Ok(None);
        }
        let locks = self.db.lock_manager();
        match locks.lock(self.id, cf, key, LockMode::Exclusive, Duration::ZERO) {
            Ok(()) => {}
            Err(Error::LockTimeout { .. }) => {
                // A snapshot that may move forward waits for the lock
                // instead (the holder's commit is what it will move past).
                if !self.may_advance() {
                    self.check_write_conflict(cf, key)?;
                }
                locks.lock(
                    self.id,
                    cf,
                    key,
                    LockMode::Exclusive,
                    self.opts.lock_wait_timeout,
                )?;
            }
            Err(e) => return Err(e),
        }
        self.locked.insert(entry);
        // Under the lock: a commit may have landed before it was granted.
        let Some(snap) = self.snapshot.as_ref().map(Snapshot::sequence) else {
            return Ok(None);
        };
        let mut value = Vec::new();
        let checked = match self.db.get_newest(cf, key, snap, &mut value) {
            // Newer than the snapshot, which may still move: move it past
            // that version and look again (transaction/advance.rs).
            Ok((newest, _)) if newest > snap && self.may_advance() => self
                .advance_past(key, newest)
                .and_then(|snap| Ok((snap, self.db.get_newest(cf, key, snap, &mut value)?))),
            other => other.map(|found| (snap, found)),
        };
        match checked {
            Ok((snap, (newest, found))) if newest <= snap => {
                Ok(read.then(|| found.then_some(value)))
            }
            Ok(_) => {
                self.unverified.insert((cf, key.to_vec()));
                Err(Error::WriteConflict { key: key.to_vec() })
            }
            Err(e) => {
                self.unverified.insert((cf, key.to_vec()));
                Err(e)
            }
        }
    }

    /// First committer wins (SI and Serializable): `WriteConflict` if `key`
    /// has a version newer than the snapshot.
    fn check_write_conflict(&self, cf: CfId, key: &[u8]) -> Result<()> {
        if let Some(snap) = &self.snapshot {
            if let Some(latest) = self.db.latest_seq_of(cf, key)? {
                if latest > snap.sequence() {
                    return Err(Error::WriteConflict { key: key.to_vec() });
                }
            }
        }
        Ok(())
    }

    fn release(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        // A read-only statement's transaction (the common case) holds
        // nothing: even clearing an empty map walks its iterator.
        if !self.buffer.is_empty() {
            self.buffer.clear();
        }
        self.savepoints.clear();
        self.undo.clear();
        if !self.unverified.is_empty() {
            self.unverified.clear();
        }
        if self.locked.is_empty() && self.shared.is_empty() {
            return;
        }
        let mut held = std::mem::take(&mut self.locked);
        held.append(&mut self.shared);
        let keys: Vec<(CfId, Vec<u8>)> = held.into_iter().collect();
        self.db.lock_manager().unlock_all(self.id, &keys);
    }

    // ---- Iterators, shared locking reads, read set (txn/txn_iter.rs) ----

    /// An iterator over the default column family within `[lower, upper)`
    /// that sees this transaction's own writes (see [`Txn::iter_cf`]).
    pub fn iter(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<super::txn_iter::TxnIterator<'_>> {
        self.iter_cf(DEFAULT_CF_ID, lower, upper)
    }

    /// An iterator over `cf` within `[lower, upper)` (`None`: unbounded),
    /// merging the database at the read view — SI: the transaction's
    /// snapshot; RC: a snapshot taken now, kept for the iterator's life —
    /// with the transaction's buffered writes (own puts shadow or insert,
    /// own deletes hide). Takes no lock; the range it walks is recorded in
    /// the read set. Unpositioned until a seek.
    pub fn iter_cf(
        &self,
        cf: CfId,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<super::txn_iter::TxnIterator<'_>> {
        self.iter_cf_with(cf, lower, upper, crate::CachePriority::High)
    }

    /// [`Self::iter_cf`] caching the blocks it reads at `priority`
    /// (`Low` for a bulk scan: see [`crate::CachePriority`]).
    pub fn iter_cf_with(
        &self,
        cf: CfId,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        priority: crate::CachePriority,
    ) -> Result<super::txn_iter::TxnIterator<'_>> {
        self.only_locked_reads.set(false);
        let snapshot = match &self.snapshot {
            Some(s) => s.clone(),
            None => self.db.snapshot(),
        };
        let ro = ReadOptions {
            snapshot: Some(snapshot),
            lower_bound: lower.map(<[u8]>::to_vec),
            upper_bound: upper.map(<[u8]>::to_vec),
            cache_priority: priority,
        };
        let base = self.db.iter_cf(&ro, cf)?;
        Ok(super::txn_iter::TxnIterator::new(
            base,
            cf,
            &self.buffer,
            lower,
            upper,
            self.records_reads().then_some(&self.reads),
        ))
    }

    /// [`Txn::scan_cf`] in the default column family.
    pub fn scan(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_cf(DEFAULT_CF_ID, lower, upper, limit)
    }

    /// The first `limit` pairs of `cf` within `[lower, upper)`, as
    /// [`Txn::iter_cf`] sees them. The range recorded as read ends just after
    /// the last pair returned, or at `upper` if the range was exhausted.
    pub fn scan_cf(
        &self,
        cf: CfId,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let mut it = self.iter_cf(cf, lower, upper)?;
        it.seek_to_first()?;
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            if out.len() >= limit {
                break;
            }
            it.next()?;
        }
        Ok(out)
    }

    /// Locks `key` in shared mode, then reads it (`SELECT ... FOR SHARE`).
    pub fn get_for_share(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_for_share_cf(DEFAULT_CF_ID, key)
    }

    /// [`Txn::get_for_share`] in `cf`. The shared lock is held to the end of
    /// the transaction: other sharers coexist, writers wait; a later write by
    /// this transaction upgrades it. Under SI a key changed after the
    /// snapshot fails with [`Error::WriteConflict`] (the lock stays held), so
    /// the value returned is the latest committed one, as for
    /// [`Txn::get_for_update_cf`].
    pub fn get_for_share_cf(&mut self, cf: CfId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let entry = (cf, key.to_vec());
        if !self.locked.contains(&entry) && !self.shared.contains(&entry) {
            self.db.lock_manager().lock(
                self.id,
                cf,
                key,
                LockMode::Shared,
                self.opts.lock_wait_timeout,
            )?;
            self.shared.insert(entry);
        }
        if let Some(snap) = self.snapshot.as_ref().map(Snapshot::sequence) {
            if let Some(latest) = self.db.latest_seq_of(cf, key)? {
                if latest > snap {
                    if !self.may_advance() {
                        return Err(Error::WriteConflict { key: key.to_vec() });
                    }
                    self.advance_past(key, latest)?;
                }
            }
        }
        // A read under our lock.
        let mut value = Vec::new();
        Ok(self.read_into(cf, key, &mut value)?.then_some(value))
    }

    /// Every key and range read so far (for Serializable validation at
    /// commit). `&mut self` guarantees no iterator of this transaction is
    /// alive, so every iterator has flushed its range: the set is complete.
    #[cfg_attr(not(test), allow(dead_code))] // consumer: Serializable commit validation
    pub(crate) fn read_set(&mut self) -> &super::read_set::ReadSet {
        self.reads.get_mut()
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        self.release();
    }
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("id", &self.id)
            .field("isolation", &self.opts.isolation)
            .field("snapshot", &self.snapshot_sequence())
            .field("writes", &self.buffer.len())
            .field("locks", &self.locked.len())
            .finish()
    }
}

mod advance;

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests;
