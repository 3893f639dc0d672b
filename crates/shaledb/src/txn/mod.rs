//! Transactions: [`Db::begin`](crate::Db::begin) returns a [`Txn`].
//!
//! ShaleDB follows X-Engine's concurrency model: row-level MVCC where every
//! read is a snapshot read (a read sequence number), and writes take exclusive
//! row locks held until commit or rollback (strict two-phase locking), with
//! first-committer-wins checked after the lock is granted. For example, under
//! Snapshot Isolation T1 (snapshot 10) locks row `x` and finds its newest
//! version at sequence 12 > 10: somebody committed `x` after T1's snapshot, so
//! T1 fails with [`Error::WriteConflict`](crate::Error::WriteConflict) instead
//! of losing that update, unless T1 has read nothing without a lock so far:
//! then nothing it saw can be stale, and its snapshot moves to 12 instead
//! (`transaction/advance.rs`).
//!
//! * Levels ([`Isolation`]): Read Committed (a fresh snapshot per read),
//!   Snapshot Isolation (one snapshot at `begin`; MySQL's REPEATABLE READ
//!   maps here) and Serializable (SI plus validation of everything read, at
//!   commit). The anomaly table is in docs/isolation.md.
//! * Locks: [`Txn::get_for_update`] / [`Txn::get_for_share`] and every write
//!   lock rows in FIFO queues with deadlock detection (docs/locking.md);
//!   a wait longer than [`TxnOptions::lock_wait_timeout`] is
//!   [`Error::LockTimeout`](crate::Error::LockTimeout).
//! * Reads see the transaction's own writes; [`TxnIterator`] merges them
//!   with the database.
//! * Two-phase commit: [`Txn::prepare`] with an XID, then
//!   [`Db::commit_prepared`](crate::Db::commit_prepared) or
//!   [`Db::rollback_prepared`](crate::Db::rollback_prepared), from any
//!   handle, also after a crash ([`Db::prepared`](crate::Db::prepared) lists
//!   them as [`PreparedInfo`]).
//!
//! A [`Txn`] owns a database handle: it is `Send + 'static`, so a server
//! session can keep it across requests and threads.
//!
//! ```
//! use shaledb::txn::{Isolation, TxnOptions};
//! use shaledb::{env::mem::MemFs, Db, Options};
//! let db = Db::open("/db", Options { fs: std::sync::Arc::new(MemFs::new()), ..Options::default() })?;
//! let mut t = db.begin(TxnOptions { isolation: Isolation::Serializable, ..Default::default() });
//! let n = t.get_for_update(b"counter")?;        // exclusive row lock, then read
//! assert_eq!(n, None);
//! t.put(b"counter", b"1")?;
//! t.commit()?;
//! let mut t = db.begin(TxnOptions::default());
//! t.put(b"k", b"v")?;
//! t.prepare(b"xid-1")?;                          // durable; survives a crash
//! db.commit_prepared(b"xid-1")?;
//! assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
//! # Ok::<(), shaledb::Error>(())
//! ```

pub(crate) mod lock_manager;
pub(crate) mod marker;
pub(crate) mod prepared;
pub(crate) mod read_set;
pub(crate) mod serializable;
pub(crate) mod transaction;
pub(crate) mod txn_iter;

pub use prepared::PreparedInfo;
#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod share_lock_tests;

pub use lock_manager::TxnId;
pub use transaction::{Isolation, Txn, TxnOptions};
pub use txn_iter::TxnIterator;
