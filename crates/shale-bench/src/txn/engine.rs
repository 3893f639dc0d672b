//! The transaction interface of the harness: what `txnmix` needs from an engine.
//!
//! A backend whose [`KvEngine`](crate::KvEngine) supports transactions returns itself from
//! [`KvEngine::txn`](crate::KvEngine::txn) as a [`TxnEngine`]. Each transaction is a boxed
//! [`KvTxn`] used by one thread; it borrows the engine, so it cannot outlive it.
//!
//! Errors are split in two: an [`TxnError::Abort`] is a failure the workload expects under
//! contention and answers by rolling back and retrying ([`AbortKind`] says which kind: the
//! report breaks the abort rate down by it), anything else ([`TxnError::Failed`]) ends the
//! benchmark. Example, one read-modify-write:
//!
//! ```text
//! let mut t = engine.begin(&opts)?;                 // Box<dyn KvTxn + '_>
//! let old = t.get_for_update(b"k")?;                // locks k (pessimistic engines)
//! t.put(b"k", &(counter(old) + 1).to_le_bytes())?;
//! t.commit()?;                                      // Err(Abort(WriteConflict)) => retry
//! ```

use crate::engine::WriteOpts;
use crate::error::EngineError;
use std::fmt;
use std::time::Duration;

/// Isolation level requested by `--isolation`. Each backend maps it to its own notion (see
/// the backend's docs) or refuses it with an error from [`TxnEngine::begin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnIsolation {
    /// `rc`: every read sees the latest committed data.
    ReadCommitted,
    /// `si`: one snapshot per transaction, first committer wins on writes.
    Snapshot,
    /// `serializable`.
    Serializable,
}

impl TxnIsolation {
    /// Parses a `--isolation` value: `rc` / `read_committed`, `si` / `snapshot` / `rr` /
    /// `repeatable_read`, `serializable` / `ser`.
    pub fn parse(v: &str) -> Option<TxnIsolation> {
        match v.to_ascii_lowercase().as_str() {
            "rc" | "read_committed" => Some(TxnIsolation::ReadCommitted),
            "si" | "snapshot" | "rr" | "repeatable_read" => Some(TxnIsolation::Snapshot),
            "serializable" | "ser" => Some(TxnIsolation::Serializable),
            _ => None,
        }
    }

    /// The short name used in reports (`rc`, `si`, `serializable`).
    pub fn name(self) -> &'static str {
        match self {
            TxnIsolation::ReadCommitted => "rc",
            TxnIsolation::Snapshot => "si",
            TxnIsolation::Serializable => "serializable",
        }
    }
}

/// Options of one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnOpts {
    /// Isolation level.
    pub isolation: TxnIsolation,
    /// How long a row-lock request may wait (pessimistic engines).
    pub lock_timeout: Duration,
    /// Options of the commit write.
    pub wo: WriteOpts,
}

/// Why a transaction was aborted; the workload rolls back and retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortKind {
    /// Another transaction committed a key this one read for update or wrote (first
    /// committer wins; RocksDB's `Busy`).
    WriteConflict,
    /// Waiting for a lock would have closed a cycle; this transaction is the victim.
    Deadlock,
    /// A lock was not granted within the timeout.
    LockTimeout,
    /// Serializable validation failed (a read was overwritten by a concurrent commit).
    SerializationFailure,
}

impl AbortKind {
    /// Every kind, in report order.
    pub const ALL: [AbortKind; 4] = [
        AbortKind::WriteConflict,
        AbortKind::Deadlock,
        AbortKind::LockTimeout,
        AbortKind::SerializationFailure,
    ];

    /// The name printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            AbortKind::WriteConflict => "write_conflict",
            AbortKind::Deadlock => "deadlock",
            AbortKind::LockTimeout => "lock_timeout",
            AbortKind::SerializationFailure => "serialization_failure",
        }
    }

    /// Index into per-kind counters (the position in [`AbortKind::ALL`]).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// An error of a transaction operation.
#[derive(Debug)]
pub enum TxnError {
    /// An expected, retryable failure under contention.
    Abort(AbortKind),
    /// Anything else: the benchmark stops.
    Failed(EngineError),
}

impl From<EngineError> for TxnError {
    fn from(e: EngineError) -> Self {
        TxnError::Failed(e)
    }
}

impl fmt::Display for TxnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnError::Abort(k) => write!(f, "transaction aborted ({})", k.name()),
            TxnError::Failed(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for TxnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TxnError::Abort(_) => None,
            TxnError::Failed(e) => Some(e),
        }
    }
}

/// A backend's refusal of an option it does not implement (e.g. `serializable` on an engine
/// without that level), reported as an [`EngineError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub &'static str);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Unsupported {}

/// One open transaction, used by one thread.
pub trait KvTxn {
    /// Reads `key` at the transaction's read view (no lock).
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError>;
    /// Reads `key` and claims it for writing (`SELECT ... FOR UPDATE`): an exclusive lock in
    /// pessimistic engines, a tracked read validated at commit in optimistic ones.
    fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError>;
    /// Buffers `key = value`.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), TxnError>;
    /// Makes the writes visible atomically, or fails (nothing applied).
    fn commit(self: Box<Self>) -> Result<(), TxnError>;
    /// Discards the writes and releases what the transaction holds.
    fn rollback(self: Box<Self>) -> Result<(), TxnError>;
}

/// An engine that runs transactions.
pub trait TxnEngine: Sync {
    /// Starts a transaction, or refuses `opts` (e.g. an isolation level it lacks).
    fn begin(&self, opts: &TxnOpts) -> Result<Box<dyn KvTxn + '_>, EngineError>;
    /// One line saying how `opts` map to the engine's transactions (printed by `txnmix`).
    fn describe_txn(&self, opts: &TxnOpts) -> String;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_names_round_trip() {
        for i in [
            TxnIsolation::ReadCommitted,
            TxnIsolation::Snapshot,
            TxnIsolation::Serializable,
        ] {
            assert_eq!(TxnIsolation::parse(i.name()), Some(i));
        }
        assert_eq!(TxnIsolation::parse("RR"), Some(TxnIsolation::Snapshot));
        assert_eq!(TxnIsolation::parse("read_uncommitted"), None);
    }

    #[test]
    fn abort_kinds_index_their_position() {
        for (i, k) in AbortKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
        assert_eq!(
            TxnError::Abort(AbortKind::Deadlock).to_string(),
            "transaction aborted (deadlock)"
        );
    }
}
