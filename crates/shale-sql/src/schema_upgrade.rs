//! Old rows brought to the current schema, and schema versions no row uses
//! any more dropped (seed 000, Fast DDL; docs/tables.md, "Retiring schema
//! versions").
//!
//! Instant DDL leaves rows of older schema versions in place. Two things
//! retire them:
//!
//! * **Upgrade by compaction.** [`UpgradeState`] is the engine compaction
//!   filter of `sql_data`: as a merge copies a primary-index row whose
//!   version is older than its table's current one, the row is decoded and
//!   re-encoded under the current version (the same row to every reader).
//!   `OPTIMIZE TABLE` rewrites the whole table this way
//!   (`shaledb::Db::rewrite_range`).
//! * **The sweep** ([`UpgradeState::sweep`]) proves that no row can be
//!   read under a version any more and removes it from the dictionary:
//!
//! ```text
//! 1. under the exclusive schema lock: no open transaction has written the
//!    table (WriterPin), no XA transaction is prepared; note Vc = current
//!    version; start a new filter epoch
//! 2. wait until every compaction job of an older epoch is installed (such
//!    a job may still write rows under a version older than Vc)
//! 3. scan the primary index at a fresh snapshot S, collecting the versions
//!    of the rows there
//! 4. under the DDL mutex and the exclusive schema lock, if no snapshot
//!    older than S is alive: drop every version < Vc not seen in 3
//! ```
//!
//! Why nothing can read a dropped version afterwards: every row visible at
//! S was scanned. A row committed after S was written by a statement that
//! ran after step 1 (an autocommit statement commits under the schema lock;
//! a transaction that wrote the table before step 1 would have held a
//! pin), so it is encoded under Vc or newer; a compaction job that started
//! after step 1 upgrades only to Vc or newer. A version hidden by a newer
//! one at S is read only by snapshots older than S, and step 4 requires
//! there are none (every statement reads under the shared schema lock, so
//! none is half-way through while step 4 runs). Stale rows a merge still
//! meets (shadowed versions not yet garbage-collected) fail to decode in
//! the filter and are kept as they are; no reader ever decodes them.

use crate::catalog::{Catalog, TableDef};
use crate::error::Result;
use crate::rowcodec;
use parking_lot::{Condvar, Mutex, RwLock};
use shaledb::{CompactionFilter, CompactionFilterFactory};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Tables with more than one schema version, by primary index id (the
/// only rows the filter touches).
type UpgradeMap = HashMap<u32, Arc<TableDef>>;

/// Shared by the catalog, the compaction filter and the sessions. Holds
/// no engine handle, so the filter the engine keeps does not keep the
/// engine alive.
#[derive(Default)]
pub struct UpgradeState {
    /// Replaced whenever the dictionary changes (`Catalog::commit`).
    tables: RwLock<Arc<UpgradeMap>>,
    /// Compaction jobs alive, by the epoch they started in.
    jobs: Mutex<Jobs>,
    jobs_done: Condvar,
    /// Transactions holding rows of a table not yet committed, by table id.
    writers: Mutex<HashMap<u32, usize>>,
    /// Rows re-encoded by compaction jobs, since open.
    pub rows_upgraded: AtomicU64,
    /// The same, by table id.
    upgraded_by_table: Mutex<HashMap<u32, u64>>,
    /// Schema versions removed from the dictionary, since open.
    pub versions_dropped: AtomicU64,
    /// How long each table's last sweep spent scanning rows.
    scan_times: Mutex<HashMap<u32, Duration>>,
    /// Milliseconds between background sweeps of a table (0: the default).
    sweep_interval_ms: AtomicU64,
}

/// Time between background sweeps of one table, unless set otherwise.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Jobs {
    epoch: u64,
    alive: HashMap<u64, usize>,
}

/// What a sweep did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// The table has a single schema version.
    NothingToDo,
    /// The versions removed from the dictionary (may be empty: every old
    /// version still has rows).
    Dropped(Vec<u32>),
    /// Not now; the reason (an open writer, a prepared XA transaction, an
    /// old snapshot, a concurrent DDL).
    Deferred(&'static str),
}

impl UpgradeState {
    /// Rebuilds the map of tables to upgrade from the dictionary cache.
    pub(crate) fn refresh<'a>(&self, tables: impl Iterator<Item = &'a Arc<TableDef>>) {
        let map: UpgradeMap = tables
            .filter(|t| t.versions.len() > 1)
            .filter_map(|t| t.primary().map(|p| (p.id, t.clone())))
            .collect();
        *self.tables.write() = Arc::new(map);
    }

    /// Notes that the open transaction now holds rows of `table`; the
    /// pin's drop (commit or rollback) undoes it.
    pub fn pin_writer(self: &Arc<Self>, table: u32) -> WriterPin {
        *self.writers.lock().entry(table).or_insert(0) += 1;
        WriterPin {
            state: self.clone(),
            table,
        }
    }

    pub fn sweep_interval(&self) -> Duration {
        match self.sweep_interval_ms.load(Ordering::Relaxed) {
            0 => DEFAULT_SWEEP_INTERVAL,
            ms => Duration::from_millis(ms),
        }
    }

    pub fn set_sweep_interval(&self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        self.sweep_interval_ms.store(ms, Ordering::Relaxed);
    }

    /// Rows of table `id` re-encoded by compaction jobs since open.
    pub fn rows_upgraded_of(&self, id: u32) -> u64 {
        self.upgraded_by_table.lock().get(&id).copied().unwrap_or(0)
    }

    /// How long the last sweep of table `id` spent reading its rows (what
    /// the background sweeper paces itself by; waits are not counted).
    pub fn last_scan_time(&self, id: u32) -> Duration {
        self.scan_times.lock().get(&id).copied().unwrap_or_default()
    }

    /// The tables that have more than one schema version.
    pub fn tables_to_sweep(&self) -> Vec<Arc<TableDef>> {
        self.tables.read().values().cloned().collect()
    }

    fn has_writers(&self, table: u32) -> bool {
        self.writers.lock().get(&table).is_some_and(|n| *n > 0)
    }

    /// Starts a new epoch; returns the old one.
    fn next_epoch(&self) -> u64 {
        let mut j = self.jobs.lock();
        j.epoch += 1;
        j.epoch - 1
    }

    /// Waits until no job of epoch `epoch` or older is alive.
    fn wait_jobs_through(&self, epoch: u64) {
        let mut j = self.jobs.lock();
        while j.alive.iter().any(|(e, n)| *e <= epoch && *n > 0) {
            self.jobs_done.wait(&mut j);
        }
    }

    /// Removes the versions of `db.table` that no row uses (the module
    /// docs give the protocol and why it is safe).
    pub fn sweep(&self, cat: &Catalog, db: &str, table: &str) -> Result<Sweep> {
        let engine = cat.engine();
        // 1.
        let (def, epoch) = {
            let _s = cat.schema.write();
            let def = cat.table(db, table)?;
            if def.versions.len() <= 1 {
                return Ok(Sweep::NothingToDo);
            }
            if self.has_writers(def.id) {
                return Ok(Sweep::Deferred("a transaction holds uncommitted rows"));
            }
            if !engine.prepared().is_empty() {
                return Ok(Sweep::Deferred("an XA transaction is prepared"));
            }
            (def, self.next_epoch())
        };
        let current = def.current_version();
        // 2.
        self.wait_jobs_through(epoch);
        // 3.
        let candidates: BTreeSet<u32> = def
            .versions
            .iter()
            .map(|v| v.version)
            .filter(|v| *v < current)
            .collect();
        let scan_start = std::time::Instant::now();
        let (used, seq) = versions_in_use(cat, &def, &candidates)?;
        self.scan_times.lock().insert(def.id, scan_start.elapsed());
        // 4.
        let _g = cat.ddl_lock();
        let _s = cat.schema.write();
        let now = cat.table(db, table)?;
        if now.id != def.id || now.index_generation != def.index_generation {
            return Ok(Sweep::Deferred("the table changed"));
        }
        if engine.oldest_snapshot_sequence().is_some_and(|s| s < seq) {
            return Ok(Sweep::Deferred("a snapshot older than the scan is alive"));
        }
        let drop: Vec<u32> = candidates.difference(&used).copied().collect();
        if drop.is_empty() {
            return Ok(Sweep::Dropped(drop));
        }
        let mut next = (*now).clone();
        next.versions.retain(|v| !drop.contains(&v.version));
        let named: BTreeSet<u32> = next
            .versions
            .iter()
            .flat_map(|v| v.columns.iter().copied())
            .collect();
        next.dropped.retain(|c| named.contains(&c.id));
        cat.put_table(shaledb::WriteBatch::new(), next, None, &[])?;
        self.versions_dropped
            .fetch_add(drop.len() as u64, Ordering::Relaxed);
        Ok(Sweep::Dropped(drop))
    }
}

/// The versions among `candidates` that rows of `def` visible at a fresh
/// snapshot use, and that snapshot's sequence. Reads only each row's
/// header, and stops once every candidate was seen.
fn versions_in_use(
    cat: &Catalog,
    def: &TableDef,
    candidates: &BTreeSet<u32>,
) -> Result<(BTreeSet<u32>, u64)> {
    let engine = cat.engine();
    let snap = engine.snapshot();
    let seq = snap.sequence();
    let mut used = BTreeSet::new();
    let Some(pk) = def.primary() else {
        return Ok((used, seq));
    };
    let ro = shaledb::ReadOptions {
        snapshot: Some(snap),
        lower_bound: Some(pk.id.to_be_bytes().to_vec()),
        upper_bound: pk.id.checked_add(1).map(|n| n.to_be_bytes().to_vec()),
        // A bulk scan: it must not flush the block cache.
        cache_priority: shaledb::CachePriority::Low,
    };
    let mut it = engine.iter_cf(&ro, cat.data_cf)?;
    it.seek_to_first()?;
    while it.valid() && used.len() < candidates.len() {
        if let Some(v) = rowcodec::version_of(it.value()) {
            if candidates.contains(&v) {
                used.insert(v);
            }
        }
        it.next()?;
    }
    if let Some(e) = it.status() {
        return Err(e.clone().into());
    }
    Ok((used, seq))
}

/// A transaction's claim on a table it wrote (see [`UpgradeState::pin_writer`]).
pub struct WriterPin {
    state: Arc<UpgradeState>,
    table: u32,
}

impl Drop for WriterPin {
    fn drop(&mut self) {
        let mut w = self.state.writers.lock();
        if let Some(n) = w.get_mut(&self.table) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                w.remove(&self.table);
            }
        }
    }
}

/// The compaction filter factory registered on `sql_data`.
pub(crate) struct UpgradeFilters(pub Arc<UpgradeState>);

impl CompactionFilterFactory for UpgradeFilters {
    fn create(&self) -> Box<dyn CompactionFilter> {
        // Epoch first, then the map: a job counted in the new epoch read
        // the map after the epoch began (module docs, step 2).
        let epoch = {
            let mut j = self.0.jobs.lock();
            let e = j.epoch;
            *j.alive.entry(e).or_insert(0) += 1;
            e
        };
        Box::new(UpgradeJob {
            state: self.0.clone(),
            tables: self.0.tables.read().clone(),
            epoch,
            upgraded: HashMap::new(),
        })
    }
}

struct UpgradeJob {
    state: Arc<UpgradeState>,
    tables: Arc<UpgradeMap>,
    epoch: u64,
    /// Rows re-encoded, by table id.
    upgraded: HashMap<u32, u64>,
}

impl CompactionFilter for UpgradeJob {
    fn change_value(&mut self, key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
        if self.tables.is_empty() {
            return None;
        }
        let id = u32::from_be_bytes(key.get(..4)?.try_into().ok()?);
        let def = self.tables.get(&id)?;
        if rowcodec::version_of(value)? >= def.current_version() {
            return None;
        }
        // A row that does not decode (a shadowed version of a schema
        // version already dropped) is kept as it is.
        let row = def.decode_row(value).ok()?;
        *self.upgraded.entry(def.id).or_insert(0) += 1;
        Some(def.encode_row(&row))
    }
}

impl Drop for UpgradeJob {
    /// Runs once the job's edit is installed (or the job failed).
    fn drop(&mut self) {
        if !self.upgraded.is_empty() {
            let mut by_table = self.state.upgraded_by_table.lock();
            for (id, n) in &self.upgraded {
                *by_table.entry(*id).or_insert(0) += n;
                self.state.rows_upgraded.fetch_add(*n, Ordering::Relaxed);
            }
        }
        let mut j = self.state.jobs.lock();
        if let Some(n) = j.alive.get_mut(&self.epoch) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                j.alive.remove(&self.epoch);
            }
        }
        drop(j);
        self.state.jobs_done.notify_all();
    }
}
