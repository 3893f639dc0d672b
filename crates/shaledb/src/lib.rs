//! # ShaleDB
//!
//! A transactional LSM-tree storage engine following Alibaba's X-Engine
//! design: a WAL with group commit, a concurrent skiplist memtable, data files
//! made of 2 MB extents of 16 KB blocks, frozen memtables merged straight into
//! L1 (L0 only under pressure), hot L1 / cold L2 compaction that reuses
//! extents it does not need to rewrite, a sharded block cache and bloom filters.
//!
//! The public API is what this page lists: [`Db`] (open, read, write,
//! snapshots, iterators, column families, properties), [`Options`],
//! [`WriteBatch`], [`Error`], the [`txn`] module (transactions, 2PC) and the
//! [`env`](mod@env) module (the [`env::FileSystem`] trait with the real, in-memory and
//! fault-injecting file systems, for tests of your own). Everything else is
//! private to the crate.
//!
//! ```
//! use shaledb::{env::mem::MemFs, Db, Options};
//! let db = Db::open("/db", Options { fs: std::sync::Arc::new(MemFs::new()), ..Options::default() })?;
//! db.put(b"k", b"v")?;
//! let db2 = db.clone();                              // a cheap handle to the same database
//! std::thread::spawn(move || db2.put(b"k2", b"v2")).join().expect("thread")?;
//! assert_eq!(db.get(b"k2")?, Some(b"v2".to_vec()));
//! # Ok::<(), shaledb::Error>(())
//! ```
//!
//! Layers, bottom up (one folder each; see docs/architecture.md):
//!
//! | folder | layer |
//! |---|---|
//! | `env` | file-system abstraction (real, in-memory, fault-injecting) |
//! | `util` | encoding helpers |
//! | `wal` | log record format, writer, reader (WAL and manifest) |
//! | `memtable` | arena, concurrent skiplist, memtable |
//! | `extent` | blocks, filters, extent builder and reader |
//! | `cache` | sharded block cache |
//! | `version` | extent metadata, versions, manifest, extent space |
//! | `iter` | iterator trait, merging iterator |
//! | `compaction` | flush-merge and level compaction |
//! | `blob` | key-value separation: value files, BlobIndex, value GC |
//! | `db` | the public `Db`: write path, read path, recovery |
//! | `txn` | row locks, transactions, read sets, two-phase commit |

// The public API (what `include/` is to LevelDB): everything a user names is
// re-exported below; the layers themselves are private to the crate, so they
// can change without breaking users.
mod blob;
mod cache;
mod compaction;
mod db;
pub mod env;
mod error;
mod extent;
mod iter;
mod memtable;
pub mod txn;
mod types;
mod util;
mod version;
mod wal;
mod write_batch;

pub use blob::BlobGcStats;
pub use cache::CachePriority;
pub use compaction::filter::{CompactionFilter, CompactionFilterFactory};
pub use db::{
    CfId, Db, DbIterator, IngestBuilder, IngestStats, Options, ReadOptions, RewriteStats, Snapshot,
    WalMark, WriteOptions,
};
pub use error::{Error, Result};
pub use extent::CompressionType;
pub use version::{DEFAULT_CF_ID, DEFAULT_CF_NAME};
pub use write_batch::WriteBatch;

/// The README's Rust examples, compiled and run as doc-tests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// Test and benchmark hooks: the internal layers that `tests/` and
/// `benches/components.rs` drive directly. Compiled only with the
/// `test-hooks` feature (this crate's own tests turn it on through a
/// dev-dependency on itself). Not API: anything here may change.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod test_hooks {
    pub use crate::cache::{BlockCache, CacheKey};
    pub use crate::extent::block::BlockIter;
    pub use crate::extent::block_builder::BlockBuilder;
    pub use crate::extent::filter;
    pub use crate::extent::{Block, ExtentBuilder, ExtentBuilderOptions, ExtentReader};
    pub use crate::iter::InternalIterator;
    pub use crate::memtable::MemTable;
    pub use crate::txn::lock_manager::{LockManager, LockMode};
    pub use crate::txn::read_set::ReadSet;
    pub use crate::types::{
        compare_internal_keys, make_internal_key, parse_internal_key, ValueKind, KIND_FOR_SEEK,
        MAX_SEQUENCE,
    };
    pub use crate::wal::LogWriter;
}
