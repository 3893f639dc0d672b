//! Tables and SQL on the ShaleDB engine.
//!
//! The layers, each in its own module (docs/tables.md has the formats):
//!
//! ```text
//! session   statements, transactions, prepared statements, SET/SHOW
//! select    planning (access paths, joins) and execution of SELECT
//! dml       INSERT / REPLACE / UPDATE / DELETE, index maintenance
//! ddl       CREATE / ALTER / DROP: instant column changes, index builds
//! catalog   the data dictionary in the engine's `sql_dict` column family
//! index     index entries; keycodec: memcomparable keys; rowcodec: rows
//! expr      bound expressions; functions: scalar functions; types: values
//! ```
//!
//! Embedded use:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
//! let sql = shale_sql::Database::open(db)?;
//! let mut s = sql.session();
//! s.execute("CREATE DATABASE shop")?;
//! s.execute("USE shop")?;
//! s.execute("CREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(20), qty INT NOT NULL DEFAULT 0)")?;
//! s.execute("INSERT INTO item (id, name) VALUES (1, 'bolt'), (2, 'nut')")?;
//! let out = s.execute("SELECT name, qty FROM item WHERE id = 2")?;
//! let shale_sql::Output::Rows { rows, .. } = out else { panic!("rows expected") };
//! assert_eq!(rows, vec![vec![shale_sql::Datum::text("nut"), shale_sql::Datum::Int(0)]]);
//! # Ok(()) }
//! ```

mod access;
mod aggregate;
mod catalog;
mod check;
mod ddl;
mod dml;
mod error;
mod exec_scratch;
mod executor;
mod expr;
mod fast_insert;
mod fastpred;
mod functions;
mod group;
mod index;
mod index_build;
mod index_bulk;
mod index_runs;
mod infer;
mod infoschema;
mod join;
mod keycodec;
mod lone_write;
mod maintenance;
mod name_pair;
mod order;
mod output;
mod parallel;
mod plan_cache;
mod point_select;
mod result;
mod rowcodec;
mod scan;
mod schema_upgrade;
mod select;
mod session;
mod show;
mod sort;
mod spill;
mod types;

pub use error::{Error, Result};
pub use index_bulk::IndexBuildStats;
pub use output::{ColumnMeta, Output};
pub use result::{Collect, ResultSink};
pub use session::{
    relations, ParsedStatement, PreparedStatement, Session, MAX_STATEMENT_BYTES, VERSION,
};
pub use types::{DateTime, Datum, Decimal, SqlType};

use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The SQL layer over one engine database. Cheap to clone; sessions share it.
#[derive(Clone)]
pub struct Database {
    shared: Arc<session::Shared>,
}

impl Database {
    /// Opens the SQL layer on `db`: creates its column families on first
    /// use, loads the dictionary, finishes interrupted space reclamation,
    /// removes run files a killed process left in `tmp/` (`tmpdir`).
    pub fn open(db: shaledb::Db) -> Result<Database> {
        spill::clean_dir(&db.path().join(executor::TMP_DIR))?;
        let catalog = catalog::Catalog::open(db)?;
        let upgrade = catalog.upgrade.clone();
        let shared = Arc::new(session::Shared::new(catalog));
        maintenance::spawn_sweeper(Arc::downgrade(&shared), upgrade);
        Ok(Database { shared })
    }

    /// How often the background sweep looks for schema versions no row
    /// uses any more (docs/tables.md, "Retiring schema versions"); 30 s by
    /// default.
    pub fn set_schema_sweep_interval(&self, every: std::time::Duration) {
        self.shared.catalog.upgrade.set_sweep_interval(every);
    }

    /// Rows brought to their table's current schema version by compaction
    /// (and OPTIMIZE TABLE), and schema versions dropped, since open.
    pub fn schema_upgrade_counts(&self) -> (u64, u64) {
        let u = &self.shared.catalog.upgrade;
        (
            u.rows_upgraded.load(Ordering::Relaxed),
            u.versions_dropped.load(Ordering::Relaxed),
        )
    }

    /// A new session (one per client connection).
    pub fn session(&self) -> Session {
        Session::new(self.shared.clone())
    }

    /// Whether commits wait for the WAL to reach the disk (fsync).
    pub fn set_sync_commits(&self, on: bool) {
        self.shared.sync_commits.store(on, Ordering::Relaxed);
        self.shared
            .catalog
            .set_write_options(shaledb::WriteOptions {
                sync: on,
                ..Default::default()
            });
    }

    /// How many aggregate scans ran as parallel partitions so far.
    pub fn parallel_scans(&self) -> u64 {
        self.shared.parallel_scans.load(Ordering::Relaxed)
    }

    /// Executions of prepared queries that reused the plan of an earlier
    /// execution (plan_cache.rs).
    pub fn plans_reused(&self) -> u64 {
        self.shared.plans_reused.load(Ordering::Relaxed)
    }

    /// The directory spilled sorts, groups and joins write their run
    /// files to (`tmpdir`): `tmp/` under the data directory.
    pub fn tmpdir(&self) -> std::path::PathBuf {
        self.engine().path().join(executor::TMP_DIR)
    }

    /// Bytes of index entries a bulk (non-unique) CREATE INDEX sorts in
    /// memory at a time (512 MiB by default); a larger index spills sorted
    /// runs of this size to `tmpdir` and merges them by key range
    /// (docs/tables.md, "CREATE INDEX"). A smaller value than 64 KiB is
    /// raised to it (each run is a file the final merge holds open).
    pub fn set_index_build_buffer(&self, bytes: usize) {
        self.shared
            .catalog
            .bulk
            .run_bytes
            .store(bytes.max(64 << 10), Ordering::Relaxed);
    }

    /// The most spilled runs a bulk CREATE INDEX keeps apart (64 by
    /// default, at least 2): at this many it merges them into one run file
    /// first, so its final merge holds a bounded number of files open.
    pub fn set_index_build_fan_in(&self, runs: usize) {
        self.shared
            .catalog
            .bulk
            .max_runs
            .store(runs.max(2), Ordering::Relaxed);
    }

    /// What the last bulk CREATE INDEX since open did (`None` before one).
    pub fn last_index_build(&self) -> Option<IndexBuildStats> {
        self.shared.catalog.bulk.last.lock().clone()
    }

    /// The engine underneath.
    pub fn engine(&self) -> &shaledb::Db {
        self.shared.catalog.engine()
    }
}
