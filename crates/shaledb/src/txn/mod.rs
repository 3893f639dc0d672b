//! Transactions: the pieces the transaction layer is built from.
//!
//! ShaleDB follows X-Engine's concurrency model: row-level MVCC where every
//! read is a snapshot read (a read sequence number), and writes take exclusive
//! row locks held until commit or rollback (strict two-phase locking), with
//! first-committer-wins checked after the lock is granted. For example, under
//! Snapshot Isolation T1 (snapshot 10) locks row `x` and finds its newest
//! version at sequence 12 > 10: somebody committed `x` after T1's snapshot, so
//! T1 fails instead of losing that update.
//!
//! * [`lock_manager`]: the row lock table with FIFO queues and deadlock
//!   detection (see docs/locking.md).
//! * [`transaction`]: [`Db::begin`](crate::Db::begin) and [`Txn`], Read
//!   Committed and Snapshot Isolation (see docs/isolation.md).
//! * [`txn_iter`]: [`TxnIterator`], iteration that merges own writes and
//!   records the ranges read.
//! * [`read_set`]: [`ReadSet`], the keys and ranges a transaction read (for
//!   Serializable validation).

pub mod lock_manager;
pub mod marker;
pub mod prepared;
pub mod read_set;
pub(crate) mod serializable;
pub mod transaction;
pub mod txn_iter;

pub use prepared::PreparedInfo;
#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod share_lock_tests;

pub use read_set::ReadSet;
pub use transaction::{Isolation, Txn, TxnOptions};
pub use txn_iter::TxnIterator;
