//! Error types of the harness.
//!
//! Two layers: [`EngineError`] wraps whatever error type a backend's engine uses (ShaleDB's
//! `shaledb::Error`, fjall's `fjall::Error`, an I/O error) without the harness knowing it, and
//! [`Error`] is what the harness itself returns: a bad flag, an engine failure, or output I/O.

use std::fmt;

/// An error reported by a storage engine behind [`crate::KvEngine`], kept as the engine's own
/// typed error (boxed) so its `source()` chain survives.
#[derive(Debug)]
pub struct EngineError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl EngineError {
    /// Wraps an engine's error.
    pub fn new<E: std::error::Error + Send + Sync + 'static>(e: E) -> Self {
        EngineError(Box::new(e))
    }

    /// The engine's own error.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.0.as_ref()
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref())
    }
}

/// A flag value an engine cannot honour; the message names the flag and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnsupportedFlag(pub &'static str);

impl fmt::Display for UnsupportedFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsupported flag value {}", self.0)
    }
}

impl std::error::Error for UnsupportedFlag {}

impl From<std::io::Error> for EngineError {
    fn from(e: std::io::Error) -> Self {
        EngineError::new(e)
    }
}

/// What went wrong in a flag, found while parsing the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlagProblem {
    /// The flag is not one the harness knows (gflags: "unknown command line flag").
    Unknown,
    /// The flag needs a value and none was given.
    MissingValue,
    /// The value does not parse as the flag's type or is out of its range.
    BadValue(String),
    /// A benchmark name in `--benchmarks` that the harness does not implement.
    UnknownBenchmark(String),
}

/// Errors of the harness.
#[derive(Debug)]
pub enum Error {
    /// A command-line flag is wrong.
    Flag {
        /// The flag's name, without dashes.
        name: String,
        /// What is wrong with it.
        problem: FlagProblem,
    },
    /// `--engine` names no backend compiled into this binary.
    UnknownEngine(String),
    /// The engine failed an operation; `op` says which.
    Engine {
        /// The harness operation that failed ("put", "get", "open", ...).
        op: &'static str,
        /// The engine's error.
        source: EngineError,
    },
    /// A benchmark thread panicked (a bug in a backend or the harness).
    ThreadPanicked,
    /// Writing the report (or removing the DB directory) failed.
    Io(std::io::Error),
    /// The flags give `contest` / `recover` an unusable key space.
    KeySpace(crate::contest::data::KeySpaceError),
    /// A read returned something other than what was written: the engine lost or damaged data.
    Verify(crate::contest::verify::VerifyFailure),
    /// The writer child process of `contest` / `recover` misbehaved.
    Child(crate::contest::child::ChildProblem),
    /// `txnmix` failed its check (lost updates) or cannot run (no transactions).
    Txn(crate::txn::TxnProblem),
    /// The `--device_limits` file is unreadable or malformed.
    DeviceLimits {
        /// The file.
        path: String,
        /// What is wrong with it.
        problem: crate::device::LimitsProblem,
    },
}

impl Error {
    /// Shorthand used by the benchmark loops: tag an engine error with the failing operation.
    pub fn engine(op: &'static str) -> impl FnOnce(EngineError) -> Error {
        move |source| Error::Engine { op, source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Flag { name, problem } => match problem {
                FlagProblem::Unknown => write!(f, "unknown command line flag '{name}'"),
                FlagProblem::MissingValue => write!(f, "flag '{name}' is missing its argument"),
                FlagProblem::BadValue(v) => write!(f, "illegal value '{v}' for flag '{name}'"),
                FlagProblem::UnknownBenchmark(b) => write!(f, "unknown benchmark '{b}'"),
            },
            Error::UnknownEngine(e) => write!(f, "unknown engine '{e}'"),
            Error::Engine { op, source } => write!(f, "{op} error: {source}"),
            Error::ThreadPanicked => write!(f, "a benchmark thread panicked"),
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::KeySpace(e) => write!(f, "{e}"),
            Error::Verify(e) => write!(f, "verification failed: {e}"),
            Error::Child(e) => write!(f, "writer child process: {e}"),
            Error::Txn(e) => write!(f, "{e}"),
            Error::DeviceLimits { path, problem } => {
                write!(f, "--device_limits={path}: {problem}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Engine { source, .. } => Some(source),
            Error::Io(e) => Some(e),
            Error::KeySpace(e) => Some(e),
            Error::Txn(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<crate::contest::data::KeySpaceError> for Error {
    fn from(e: crate::contest::data::KeySpaceError) -> Self {
        Error::KeySpace(e)
    }
}

impl From<crate::contest::verify::VerifyFailure> for Error {
    fn from(e: crate::contest::verify::VerifyFailure) -> Self {
        Error::Verify(e)
    }
}

impl From<crate::contest::child::ChildProblem> for Error {
    fn from(e: crate::contest::child::ChildProblem) -> Self {
        Error::Child(e)
    }
}

/// Result of the harness.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_flag_and_keep_the_source() {
        let e = Error::Flag {
            name: "num".into(),
            problem: FlagProblem::BadValue("x".into()),
        };
        assert_eq!(e.to_string(), "illegal value 'x' for flag 'num'");
        let io = std::io::Error::other("disk gone");
        let e = Error::engine("put")(EngineError::from(io));
        assert_eq!(e.to_string(), "put error: disk gone");
        assert!(std::error::Error::source(&e).is_some());
    }
}
