//! The data dictionary (docs/tables.md, "Dictionary"): databases, tables,
//! columns, indexes, schema versions and auto-increment counters, stored in
//! the engine's `sql_dict` column family and cached in memory.
//!
//! Every dictionary change is one atomic engine write batch made under the
//! DDL mutex, so after a crash a DDL statement is wholly there or not at
//! all. Table data lives in the `sql_data` column family under index ids;
//! dropping data leaves a garbage marker in the same batch as the
//! dictionary change, and the range is deleted afterwards (again at open if
//! a crash came first).
//!
//! Locks: `state` guards the cache (readers take it for a lookup only);
//! `ddl` serializes dictionary writers; `schema` is held shared by every
//! statement that reads or writes rows and exclusively by DDL, so a
//! statement sees one table definition from start to end.

mod autoinc;
pub use autoinc::Claim;

use crate::error::{Error, Result};
use crate::rowcodec;
use crate::types::{coerce, Datum, SqlType};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use shaledb::{CfId, Db, WriteBatch, WriteOptions};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Column family of the dictionary and of the table data.
pub const DICT_CF: &str = "sql_dict";
pub const DATA_CF: &str = "sql_data";

const FRAME_MAGIC: &[u8; 4] = b"SHDD";
const FRAME_VERSION: u8 = 1;

/// A column of a table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ColumnDef {
    /// Stable id: rows name columns by id through their schema version.
    pub id: u32,
    pub name: String,
    pub ty: SqlType,
    pub nullable: bool,
    /// The DEFAULT as SQL text (`None`: no default; `Some(None)`: NULL).
    pub default: Option<Option<String>>,
    /// DEFAULT CURRENT_TIMESTAMP.
    pub default_now: bool,
    pub auto_increment: bool,
    /// The value rows written before this column existed read as (its
    /// default when it was added); fixed for the column's life.
    pub instant_default: Option<String>,
}

/// An index: the primary key (clustered) or a secondary index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexDef {
    /// Key prefix of the index in `sql_data`.
    pub id: u32,
    pub name: String,
    /// Column ids, in key order.
    pub columns: Vec<u32>,
    pub unique: bool,
    pub primary: bool,
    /// The engine sequence at which the index became readable: a
    /// transaction whose snapshot is older may miss its entries and reads
    /// through other paths (0: readable by every snapshot).
    #[serde(default)]
    pub visible_from: u64,
    /// Per column (in `columns` order): stored descending (`DESC` in the
    /// index definition). Missing entries are ascending, so records
    /// written before DESC existed read unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub desc: Vec<bool>,
}

impl IndexDef {
    /// Whether the index's `i`-th column is stored descending.
    pub fn desc_at(&self, i: usize) -> bool {
        self.desc.get(i).copied().unwrap_or(false)
    }
}

/// The column ids of one schema version, in row order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SchemaVersion {
    pub version: u32,
    pub columns: Vec<u32>,
}

/// A table's definition.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableDef {
    pub id: u32,
    pub db: String,
    pub name: String,
    /// Current columns, in display order.
    pub columns: Vec<ColumnDef>,
    /// Dropped columns still named by an old schema version.
    pub dropped: Vec<ColumnDef>,
    /// `indexes[0]` is the primary key (hidden if `hidden_pk`).
    pub indexes: Vec<IndexDef>,
    /// The table has no declared primary key: rows are keyed by a hidden
    /// auto-increment row id.
    pub hidden_pk: bool,
    pub versions: Vec<SchemaVersion>,
    pub next_column_id: u32,
    /// Bumped whenever the set of indexes or the table's data is replaced
    /// (index DDL, TRUNCATE): a transaction that wrote rows under an older
    /// generation cannot commit (they would lack the new entries).
    #[serde(default)]
    pub index_generation: u64,
    /// Secondary indexes being built online: writers maintain their
    /// entries, readers never use them (docs/tables.md, "CREATE INDEX").
    #[serde(default)]
    pub building: Vec<IndexDef>,
}

impl TableDef {
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }

    /// Position of the column named `name` (case-insensitive).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    pub fn position_of_id(&self, id: u32) -> Option<usize> {
        self.columns.iter().position(|c| c.id == id)
    }

    pub fn primary(&self) -> Option<&IndexDef> {
        self.indexes.first()
    }

    /// The secondary indexes row writes maintain: the readable ones and
    /// those being built.
    pub fn maintained_secondaries(&self) -> impl Iterator<Item = &IndexDef> {
        self.indexes.iter().skip(1).chain(self.building.iter())
    }

    /// Positions of an index's columns in the current column order.
    pub fn index_positions(&self, index: &IndexDef) -> Vec<usize> {
        index
            .columns
            .iter()
            .filter_map(|id| self.position_of_id(*id))
            .collect()
    }

    pub fn current_version(&self) -> u32 {
        self.versions.last().map_or(0, |v| v.version)
    }

    /// Adds a schema version for the current column list.
    pub fn push_version(&mut self) {
        let version = self.current_version() + 1;
        let columns = self.columns.iter().map(|c| c.id).collect();
        self.versions.push(SchemaVersion { version, columns });
    }

    fn column_by_id(&self, id: u32) -> Option<&ColumnDef> {
        self.columns
            .iter()
            .chain(&self.dropped)
            .find(|c| c.id == id)
    }

    /// Encodes a row (current column order) under the current version.
    pub fn encode_row(&self, values: &[Datum]) -> Vec<u8> {
        let types: Vec<&SqlType> = self.columns.iter().map(|c| &c.ty).collect();
        rowcodec::encode(self.current_version(), values, &types)
    }

    /// Decodes a stored row of any schema version into the current column
    /// order: dropped columns are skipped, columns added since read as the
    /// default they were added with.
    pub fn decode_row(&self, bytes: &[u8]) -> Result<Vec<Datum>> {
        self.decode_row_projected(bytes, None)
    }

    /// As [`TableDef::decode_row`], but only the columns whose `wanted`
    /// entry (by current position) is true are read; the others are NULL.
    pub fn decode_row_projected(
        &self,
        bytes: &[u8],
        wanted: Option<&[bool]>,
    ) -> Result<Vec<Datum>> {
        let corrupt = |reason: &str| Error::RowCorrupt {
            table: self.qualified(),
            reason: reason.to_owned(),
        };
        let version = rowcodec::version_of(bytes).ok_or_else(|| corrupt("bad row header"))?;
        let schema = self
            .versions
            .iter()
            .find(|v| v.version == version)
            .ok_or_else(|| corrupt(&format!("unknown schema version {version}")))?;
        let mut types = Vec::with_capacity(schema.columns.len());
        for id in &schema.columns {
            types.push(
                &self
                    .column_by_id(*id)
                    .ok_or_else(|| corrupt("unknown column id"))?
                    .ty,
            );
        }
        let current = version == self.current_version();
        // `wanted` by the stored version's positions.
        let mapped: Vec<bool>;
        let keep = match wanted {
            Some(w) if current => Some(w),
            Some(w) => {
                mapped = schema
                    .columns
                    .iter()
                    .map(|id| {
                        self.position_of_id(*id)
                            .is_some_and(|p| w.get(p).copied().unwrap_or(true))
                    })
                    .collect();
                Some(mapped.as_slice())
            }
            None => None,
        };
        let stored = rowcodec::decode_projected(bytes, &types, keep)
            .ok_or_else(|| corrupt("bad row encoding"))?;
        if current {
            return Ok(stored);
        }
        let mut out = Vec::with_capacity(self.columns.len());
        for c in &self.columns {
            match schema.columns.iter().position(|id| *id == c.id) {
                Some(p) => out.push(stored.get(p).cloned().unwrap_or(Datum::Null)),
                None => out.push(match &c.instant_default {
                    Some(text) => coerce(Datum::text(text), &c.ty, &c.name, 0)?,
                    None => Datum::Null,
                }),
            }
        }
        Ok(out)
    }
}

#[derive(Serialize, Deserialize)]
struct DatabaseRecord {
    name: String,
}

#[derive(Serialize, Deserialize)]
struct Counter {
    value: u64,
}

/// Frames a dictionary payload: magic, version, CRC32C, JSON.
fn frame<T: Serialize>(v: &T) -> Vec<u8> {
    // Serializing these plain structs to a Vec cannot fail.
    let json = serde_json::to_vec(v).unwrap_or_default();
    let mut out = Vec::with_capacity(json.len() + 9);
    out.extend_from_slice(FRAME_MAGIC);
    out.push(FRAME_VERSION);
    out.extend_from_slice(&crc32c::crc32c(&json).to_le_bytes());
    out.extend_from_slice(&json);
    out
}

fn unframe<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T> {
    let corrupt = |reason: &str| Error::DictionaryCorrupt {
        what: what.to_owned(),
        reason: reason.to_owned(),
    };
    let (magic, rest) = bytes
        .split_at_checked(4)
        .ok_or_else(|| corrupt("truncated"))?;
    if magic != FRAME_MAGIC {
        return Err(corrupt("bad magic"));
    }
    let (&version, rest) = rest.split_first().ok_or_else(|| corrupt("truncated"))?;
    if version != FRAME_VERSION {
        return Err(corrupt(&format!("unsupported version {version}")));
    }
    let (crc, json) = rest
        .split_at_checked(4)
        .ok_or_else(|| corrupt("truncated"))?;
    let crc = u32::from_le_bytes(crc.try_into().map_err(|_| corrupt("truncated"))?);
    if crc32c::crc32c(json) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    serde_json::from_slice(json).map_err(|e| corrupt(&e.to_string()))
}

fn db_key(name: &str) -> Vec<u8> {
    let mut k = b"D".to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

fn table_key(db: &str, table: &str) -> Vec<u8> {
    let mut k = b"T".to_vec();
    k.extend_from_slice(db.as_bytes());
    k.push(0);
    k.extend_from_slice(table.as_bytes());
    k
}

fn autoinc_key(table_id: u32) -> Vec<u8> {
    let mut k = b"A".to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

fn garbage_key(index_id: u32) -> Vec<u8> {
    let mut k = b"G".to_vec();
    k.extend_from_slice(&index_id.to_be_bytes());
    k
}

const NEXT_ID_KEY: &[u8] = b"N";

#[derive(Default)]
struct CatalogState {
    databases: BTreeSet<String>,
    /// foldhash, not SipHash: looked up twice per statement.
    tables: HashMap<(String, String), Arc<TableDef>, foldhash::fast::RandomState>,
}

/// The dictionary and its cache.
pub struct Catalog {
    db: Db,
    pub dict_cf: CfId,
    pub data_cf: CfId,
    state: RwLock<CatalogState>,
    ddl: Mutex<()>,
    /// Held shared by row statements, exclusively by DDL.
    pub schema: RwLock<()>,
    next_id: Mutex<u64>,
    /// Auto-increment counters and pending claims (catalog/autoinc.rs).
    autoinc: Mutex<autoinc::AutoIncState>,
    write_options: RwLock<WriteOptions>,
    /// Rows to bring to their table's current schema version, and the
    /// sweep that retires unused versions (schema_upgrade.rs).
    pub upgrade: Arc<crate::schema_upgrade::UpgradeState>,
    /// Bumped after every change of `state` (under its write lock): a
    /// cached plan made at another epoch is stale (plan_cache.rs).
    plan_epoch: AtomicU64,
    /// The newest `visible_from` of any published index, as of the last
    /// change of `state`.
    max_visible_from: AtomicU64,
    /// The bulk index build's memory bound and last figures (index_bulk.rs).
    pub bulk: crate::index_bulk::BulkState,
}

impl Catalog {
    /// Opens (creating if needed) the dictionary of `db`, loads it, and
    /// finishes any data deletion a crash interrupted.
    pub fn open(db: Db) -> Result<Catalog> {
        let cf = |name: &str| -> Result<CfId> {
            match db.cf_id(name) {
                Ok(id) => Ok(id),
                Err(shaledb::Error::ColumnFamilyNotFound(_)) => Ok(db.create_cf(name)?),
                Err(e) => Err(e.into()),
            }
        };
        let dict_cf = cf(DICT_CF)?;
        let data_cf = cf(DATA_CF)?;
        let catalog = Catalog {
            db,
            dict_cf,
            data_cf,
            state: RwLock::new(CatalogState::default()),
            ddl: Mutex::new(()),
            schema: RwLock::new(()),
            next_id: Mutex::new(1),
            autoinc: Mutex::new(autoinc::AutoIncState::default()),
            write_options: RwLock::new(WriteOptions::default()),
            upgrade: Arc::default(),
            plan_epoch: AtomicU64::new(0),
            max_visible_from: AtomicU64::new(0),
            bulk: crate::index_bulk::BulkState::default(),
        };
        catalog.load()?;
        catalog.db.set_compaction_filter(
            data_cf,
            Some(Arc::new(crate::schema_upgrade::UpgradeFilters(
                catalog.upgrade.clone(),
            ))),
        )?;
        Ok(catalog)
    }

    pub fn engine(&self) -> &Db {
        &self.db
    }

    pub fn set_write_options(&self, wo: WriteOptions) {
        *self.write_options.write() = wo;
    }

    pub fn write_options(&self) -> WriteOptions {
        *self.write_options.read()
    }

    fn load(&self) -> Result<()> {
        let mut state = CatalogState::default();
        let mut next_id = 1u64;
        let mut garbage = Vec::new();
        let mut it = self
            .db
            .iter_cf(&shaledb::ReadOptions::default(), self.dict_cf)?;
        it.seek_to_first()?;
        while it.valid() {
            let (k, v) = (it.key(), it.value());
            match k.first() {
                Some(b'D') => {
                    let r: DatabaseRecord = unframe(v, &String::from_utf8_lossy(k))?;
                    state.databases.insert(r.name);
                }
                Some(b'T') => {
                    let t: TableDef =
                        unframe(v, &String::from_utf8_lossy(k.get(1..).unwrap_or_default()))?;
                    state
                        .tables
                        .insert((t.db.clone(), t.name.clone()), Arc::new(t));
                }
                Some(b'N') => next_id = unframe::<Counter>(v, "next object id")?.value,
                Some(b'G') => garbage.push(k.to_vec()),
                _ => {}
            }
            it.next()?;
        }
        if let Some(e) = it.status() {
            return Err(Error::Engine(e.clone()));
        }
        self.upgrade.refresh(state.tables.values());
        let mut guard = self.state.write();
        *guard = state;
        self.state_changed(&guard);
        drop(guard);
        *self.next_id.lock() = next_id;
        for key in garbage {
            let id = key
                .get(1..5)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes);
            if let Some(id) = id {
                self.abandon_build(id)?;
                self.reclaim(id)?;
            }
        }
        Ok(())
    }

    /// After a crash during an online index build: takes the unfinished
    /// index `index_id` out of its table's `building` list (writers stop
    /// maintaining it) before its entries are reclaimed.
    fn abandon_build(&self, index_id: u32) -> Result<()> {
        let def = self
            .state
            .read()
            .tables
            .values()
            .find(|t| t.building.iter().any(|b| b.id == index_id))
            .cloned();
        let Some(def) = def else {
            return Ok(());
        };
        let mut def = (*def).clone();
        def.building.retain(|b| b.id != index_id);
        let mut batch = WriteBatch::new();
        batch.put_cf(self.dict_cf, &table_key(&def.db, &def.name), &frame(&def));
        let def = Arc::new(def);
        self.commit(batch, |s| {
            s.tables
                .insert((def.db.clone(), def.name.clone()), def.clone());
        })
    }

    /// Deletes the data of a dropped index and then its garbage marker.
    pub fn reclaim(&self, index_id: u32) -> Result<()> {
        let lo = index_id.to_be_bytes();
        let hi = index_id.checked_add(1).map(u32::to_be_bytes);
        match hi {
            Some(hi) => self.db.delete_range_cf(self.data_cf, &lo, &hi)?,
            None => self.db.delete_range_cf(self.data_cf, &lo, &[0xFF; 5])?,
        }
        self.db.delete_cf(self.dict_cf, &garbage_key(index_id))?;
        Ok(())
    }

    pub fn database_exists(&self, name: &str) -> bool {
        self.state.read().databases.contains(name)
    }

    pub fn databases(&self) -> Vec<String> {
        self.state.read().databases.iter().cloned().collect()
    }

    pub fn tables(&self, db: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .state
            .read()
            .tables
            .keys()
            .filter(|(d, _)| d == db)
            .map(|(_, t)| t.clone())
            .collect();
        v.sort();
        v
    }

    pub fn table(&self, db: &str, name: &str) -> Result<Arc<TableDef>> {
        self.state
            .read()
            .tables
            .get(&(db, name) as &dyn crate::name_pair::NamePair)
            .cloned()
            .ok_or_else(|| Error::UnknownTable(format!("{db}.{name}")))
    }

    /// Serializes dictionary changes; DDL holds it for the whole statement.
    pub fn ddl_lock(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.ddl.lock()
    }

    /// A fresh object id (tables and indexes), persisted in `batch`.
    pub fn allocate_id(&self, batch: &mut WriteBatch) -> Result<u32> {
        let mut next = self.next_id.lock();
        let id = u32::try_from(*next)
            .map_err(|_| Error::Unsupported("more than 2^32 dictionary objects".into()))?;
        *next += 1;
        batch.put_cf(self.dict_cf, NEXT_ID_KEY, &frame(&Counter { value: *next }));
        Ok(id)
    }

    /// Applies a dictionary batch, then the cache change.
    fn commit(&self, batch: WriteBatch, apply: impl FnOnce(&mut CatalogState)) -> Result<()> {
        self.db.write(
            &WriteOptions {
                sync: true,
                ..self.write_options()
            },
            batch,
        )?;
        let mut state = self.state.write();
        apply(&mut state);
        self.upgrade.refresh(state.tables.values());
        self.state_changed(&state);
        Ok(())
    }

    /// Called with `state` write-locked after each change.
    fn state_changed(&self, state: &CatalogState) {
        let newest = state
            .tables
            .values()
            .flat_map(|t| t.indexes.iter().map(|ix| ix.visible_from))
            .max()
            .unwrap_or(0);
        self.max_visible_from.store(newest, Ordering::SeqCst);
        self.plan_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Changes with every change of the dictionary (plan_cache.rs).
    pub fn plan_epoch(&self) -> u64 {
        self.plan_epoch.load(Ordering::SeqCst)
    }

    /// A reader at `snapshot` (`None`: the newest state) may read every
    /// published index (access.rs skips those published after it).
    pub fn all_indexes_visible_to(&self, snapshot: Option<u64>) -> bool {
        snapshot.is_none_or(|s| s >= self.max_visible_from.load(Ordering::SeqCst))
    }

    pub fn create_database(&self, name: &str) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_cf(
            self.dict_cf,
            &db_key(name),
            &frame(&DatabaseRecord {
                name: name.to_owned(),
            }),
        );
        self.commit(b, |s| {
            s.databases.insert(name.to_owned());
        })
    }

    /// Drops a database and its tables (their data is reclaimed after).
    pub fn drop_database(&self, name: &str) -> Result<()> {
        let tables: Vec<Arc<TableDef>> = self
            .state
            .read()
            .tables
            .iter()
            .filter(|((d, _), _)| d == name)
            .map(|(_, t)| t.clone())
            .collect();
        let mut b = WriteBatch::new();
        b.delete_cf(self.dict_cf, &db_key(name));
        let mut ids = Vec::new();
        for t in &tables {
            b.delete_cf(self.dict_cf, &table_key(&t.db, &t.name));
            b.delete_cf(self.dict_cf, &autoinc_key(t.id));
            for ix in &t.indexes {
                b.put_cf(
                    self.dict_cf,
                    &garbage_key(ix.id),
                    &frame(&Counter { value: 0 }),
                );
                ids.push(ix.id);
            }
        }
        self.commit(b, |s| {
            s.databases.remove(name);
            s.tables.retain(|(d, _), _| d != name);
        })?;
        for id in ids {
            self.reclaim(id)?;
        }
        Ok(())
    }

    /// Writes a new or changed table definition; `dropped_indexes` have
    /// their data reclaimed; `renamed_from` removes the old name.
    pub fn put_table(
        &self,
        mut batch: WriteBatch,
        def: TableDef,
        renamed_from: Option<(String, String)>,
        dropped_indexes: &[u32],
    ) -> Result<()> {
        batch.put_cf(self.dict_cf, &table_key(&def.db, &def.name), &frame(&def));
        if let Some((d, t)) = &renamed_from {
            batch.delete_cf(self.dict_cf, &table_key(d, t));
        }
        for id in dropped_indexes {
            batch.put_cf(
                self.dict_cf,
                &garbage_key(*id),
                &frame(&Counter { value: 0 }),
            );
        }
        let def = Arc::new(def);
        self.commit(batch, |s| {
            if let Some(old) = renamed_from {
                s.tables.remove(&old);
            }
            s.tables
                .insert((def.db.clone(), def.name.clone()), def.clone());
        })?;
        for id in dropped_indexes {
            self.reclaim(*id)?;
        }
        Ok(())
    }

    /// Drops a table: dictionary entry and counter go in one batch with
    /// garbage markers for its indexes; the data is reclaimed after.
    pub fn drop_table(&self, def: &TableDef) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_cf(self.dict_cf, &table_key(&def.db, &def.name));
        b.delete_cf(self.dict_cf, &autoinc_key(def.id));
        for ix in &def.indexes {
            b.put_cf(
                self.dict_cf,
                &garbage_key(ix.id),
                &frame(&Counter { value: 0 }),
            );
        }
        self.commit(b, |s| {
            s.tables.remove(&(def.db.clone(), def.name.clone()));
        })?;
        self.forget_autoinc(def.id);
        for ix in &def.indexes {
            self.reclaim(ix.id)?;
        }
        Ok(())
    }

    /// Marks `index_id` as garbage in `batch`, the batch that registers the
    /// build and allocated the id: durable before any entry is written, so
    /// a crash during an index build leaves only data that is reclaimed at
    /// the next open. One batch, so an id is never marked (and its range
    /// deleted at open) without its allocation being durable too: a reused
    /// id would put a new index under the old range tombstone, which hides
    /// entries ingested at sequence 0 (index_bulk.rs). The dictionary batch
    /// that publishes the index clears the mark ([`Catalog::clear_mark`]).
    pub fn mark_building(&self, batch: &mut WriteBatch, index_id: u32) {
        batch.put_cf(
            self.dict_cf,
            &garbage_key(index_id),
            &frame(&Counter { value: 0 }),
        );
    }

    pub fn clear_mark(&self, batch: &mut WriteBatch, index_id: u32) {
        batch.delete_cf(self.dict_cf, &garbage_key(index_id));
    }

    /// The index generation of the table with id `table_id`, if it exists.
    pub fn index_generation(&self, table_id: u32) -> Option<u64> {
        self.state
            .read()
            .tables
            .values()
            .find(|t| t.id == table_id)
            .map(|t| t.index_generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_reject_damage() {
        let f = frame(&Counter { value: 7 });
        assert_eq!(unframe::<Counter>(&f, "x").map(|c| c.value).ok(), Some(7));
        for i in 0..f.len() {
            let mut bad = f.clone();
            if let Some(b) = bad.get_mut(i) {
                *b ^= 0x20;
            }
            assert!(unframe::<Counter>(&bad, "x").is_err(), "byte {i}");
        }
        assert!(unframe::<Counter>(&f[..3], "x").is_err());
    }
}
