//! The one error type of the engine.
//!
//! Every fallible operation returns [`Result<T>`]. Errors are `Clone` so that a
//! background failure can be kept ("sticky") and returned to every later writer.

use std::path::PathBuf;
use std::sync::Arc;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong. New variants may be added: match with a `_` arm.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("I/O error during {op} on {}: {source}", path.display())]
    Io {
        /// The operation (`"open"`, `"pwrite"`, `"fsync"`, ...).
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The OS error.
        source: Arc<std::io::Error>,
    },
    /// Stored bytes failed a check (checksum, magic, bounds). Never returned as data.
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        /// File that holds the damaged bytes.
        file: PathBuf,
        /// Byte offset of the damaged unit (record, block, footer) in that file.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// The caller passed something the engine cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Options failed validation.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// Option name as spelled in [`crate::Options`].
        name: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// Another process (or another `Db` in this process) holds the directory lock.
    #[error("database directory {} is locked by another process", .0.display())]
    Locked(PathBuf),
    /// The database does not exist and `create_if_missing` is false.
    #[error("database {} does not exist", .0.display())]
    NotFound(PathBuf),
    /// The database exists and `error_if_exists` is true.
    #[error("database {} already exists", .0.display())]
    AlreadyExists(PathBuf),
    /// A column family name that is not (or no longer) present.
    #[error("column family not found: {0}")]
    ColumnFamilyNotFound(String),
    /// A column family name that is already present.
    #[error("column family already exists: {0}")]
    ColumnFamilyExists(String),
    /// A background flush or compaction failed; the database accepts no more writes.
    #[error("background error, database is read-only until reopened: {0}")]
    Background(Arc<Error>),
    /// The database has been closed.
    #[error("database is closed")]
    Closed,
    /// A file has an unknown format version.
    #[error("unsupported format version {version} in {}", file.display())]
    UnsupportedVersion {
        /// The file.
        file: PathBuf,
        /// The version found.
        version: u32,
    },
    /// A row lock was not granted within the caller's timeout.
    #[error("lock wait timeout exceeded")]
    LockTimeout {
        /// The user key whose lock was requested.
        key: Vec<u8>,
    },
    /// Waiting for a row lock would have closed a cycle in the wait-for graph;
    /// the requesting transaction is the victim and should roll back.
    #[error("deadlock detected; transaction chosen as victim")]
    Deadlock {
        /// The user key whose lock was requested.
        key: Vec<u8>,
    },
    /// Snapshot Isolation, first-committer-wins: another transaction committed
    /// a newer version of this key after this transaction's snapshot. The
    /// transaction should roll back and may be retried.
    #[error("write conflict: key was changed after the transaction's snapshot")]
    WriteConflict {
        /// The user key that was written concurrently.
        key: Vec<u8>,
    },
    /// Serializable: committing would break serializability (a key or range
    /// this transaction read was changed by a transaction serialized before
    /// it). The transaction was rolled back and may be retried.
    #[error("serialization failure: a read of this transaction was invalidated")]
    SerializationFailure {
        /// A key (or the start of a range) whose read was invalidated.
        key: Vec<u8>,
    },
    /// Two-phase commit: this XID names a transaction that is still
    /// prepared (or being prepared or resolved); it can be reused only once
    /// that transaction has committed or rolled back.
    #[error("XID is in use by a prepared transaction")]
    XidInUse(Vec<u8>),
    /// Two-phase commit: no prepared transaction has this XID.
    #[error("no prepared transaction has this XID")]
    UnknownXid(Vec<u8>),
}

impl Error {
    /// Builds an [`Error::Io`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for [`Error::Corruption`], also when wrapped as a background error.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::Background(inner) => inner.is_corruption(),
            _ => false,
        }
    }
}
