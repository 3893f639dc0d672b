//! Online CREATE INDEX / ALTER TABLE ADD INDEX (docs/tables.md, "CREATE
//! INDEX"): row statements go on while the entries are written.
//!
//! Three steps, the first and last under the exclusive schema lock for the
//! length of one dictionary write:
//!
//! ```text
//! 1 register   one synced batch: next id, marker G|id, table.building += ix,
//!              generation += 1
//!              -> from here every row write also writes ix's entries
//! 2 backfill   non-unique: the entries of the rows at a snapshot taken
//!              after step 1, sorted and ingested behind into the last
//!              level (index_bulk.rs); unique: scan the primary index at
//!              such a snapshot; per chunk of rows, in an RC engine
//!              transaction: lock the row, read its newest version, put its
//!              entry
//! 3 publish    building -= ix; indexes += ix (visible_from = now);
//!              marker deleted, in the same batch
//! ```
//!
//! Why the entries are exact: a row committed after step 1 was written by a
//! statement that saw `ix` in `building` (statements hold the schema lock
//! shared; a transaction that wrote the table before step 1 is refused at
//! COMMIT by the generation check). A row that existed before is in the
//! scan; the backfill locks it and writes the entry of its newest version,
//! so it and a concurrent writer are ordered by the row lock: whichever
//! comes second sees the other's result (a writer deletes the entry of the
//! version it replaces and puts its own; the backfill's put of an entry a
//! writer already wrote is the same key and value). A row deleted since the
//! snapshot is skipped. A unique index is checked as the entries go in: an
//! existing entry for another row is a real duplicate (every entry belongs
//! to a live row), so the build fails with 1062, as MySQL's online ALTER
//! does when concurrent writes create duplicates.
//!
//! Crash: until step 3 the marker names `ix.id`; `Catalog::open` removes a
//! `building` index whose marker it finds and reclaims its key range.

use crate::catalog::{IndexDef, TableDef};
use crate::ddl::{index_columns, unique_index_name, Ddl};
use crate::error::{Error, Result};
use crate::index;
use crate::types::Datum;
use parking_lot::Mutex;
use shaledb::txn::{Isolation, TxnOptions};
use shaledb::{ReadOptions, WriteBatch};
use sqlparser::ast;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Rows per backfill transaction: large enough to amortise a commit, small
/// enough that the row locks it holds block writers only briefly.
const CHUNK_ROWS: usize = 512;

/// How often a chunk is retried after a lock timeout or deadlock with row
/// statements before the build gives up.
const CHUNK_RETRIES: u32 = 50;

impl Ddl<'_> {
    /// Builds a new secondary index on `db.table` while row statements go
    /// on, then publishes it. The caller holds the DDL lock (not the schema
    /// lock).
    pub(crate) fn add_index_online(
        &self,
        db: &str,
        table: &str,
        name: Option<String>,
        columns: &[ast::IndexColumn],
        unique: bool,
    ) -> Result<()> {
        let ix = {
            let _s = self.cat.schema.write();
            let mut def = (*self.cat.table(db, table)?).clone();
            let mut batch = WriteBatch::new();
            let ix = self.new_index(&def, &mut batch, name, columns, unique)?;
            self.cat.mark_building(&mut batch, ix.id);
            def.building.push(ix.clone());
            def.index_generation += 1;
            self.cat.put_table(batch, def, None, &[])?;
            ix
        };
        let built = self.backfill(db, table, &ix);
        let _s = self.cat.schema.write();
        let mut def = (*self.cat.table(db, table)?).clone();
        def.building.retain(|b| b.id != ix.id);
        match built {
            Ok(()) => {
                let mut batch = WriteBatch::new();
                self.cat.clear_mark(&mut batch, ix.id);
                def.indexes.push(IndexDef {
                    visible_from: self.cat.engine().latest_sequence(),
                    ..ix
                });
                self.cat.put_table(batch, def, None, &[])
            }
            Err(e) => {
                // Writers stop maintaining it; its entries are reclaimed.
                self.cat.put_table(WriteBatch::new(), def, None, &[ix.id])?;
                Err(e)
            }
        }
    }

    /// Validates and names a new index on `def`, allocating its id in
    /// `batch`.
    fn new_index(
        &self,
        def: &TableDef,
        batch: &mut WriteBatch,
        name: Option<String>,
        columns: &[ast::IndexColumn],
        unique: bool,
    ) -> Result<IndexDef> {
        let (cols, desc) = index_columns(def, columns)?;
        let taken = |n: &str| {
            def.indexes
                .iter()
                .chain(&def.building)
                .any(|i| i.name.eq_ignore_ascii_case(n))
        };
        if let Some(n) = &name {
            if taken(n) {
                return Err(Error::DuplicateIndex(n.clone()));
            }
        }
        if !def.building.is_empty() {
            return Err(Error::Unsupported(
                "a second index build on a table being indexed".into(),
            ));
        }
        let base = name.unwrap_or_else(|| {
            def.columns
                .iter()
                .find(|c| Some(&c.id) == cols.first())
                .map_or("key".into(), |c| c.name.clone())
        });
        Ok(IndexDef {
            id: self.cat.allocate_id(batch)?,
            name: unique_index_name(def, &base),
            columns: cols,
            unique,
            primary: false,
            visible_from: 0,
            desc,
        })
    }

    /// Writes the entries of `ix` for every row that existed when the
    /// build registered it (step 2 of the module docs). The scan runs here;
    /// chunks of row keys go to one worker thread per core (at most 4),
    /// each chunk its own transaction. The first error stops the build.
    fn backfill(&self, db: &str, table: &str, ix: &IndexDef) -> Result<()> {
        let def = self.cat.table(db, table)?;
        if !ix.unique {
            return self.bulk_backfill(&def, ix); // index_bulk.rs
        }
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4);
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<Error>> = Mutex::new(None);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(workers * 2);
        let rx = Mutex::new(rx);
        let scanned = std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| loop {
                    let Ok(chunk) = rx.lock().recv() else {
                        break;
                    };
                    if failed.load(Ordering::Relaxed) {
                        continue; // drain: the build has failed
                    }
                    if let Err(e) = self.backfill_chunk(&def, ix, &chunk) {
                        failed.store(true, Ordering::Relaxed);
                        first_error.lock().get_or_insert(e);
                    }
                });
            }
            let scanned = self.scan_rows(&def, &failed, |chunk| tx.send(chunk).is_ok());
            drop(tx); // the workers finish the queue and stop
            scanned
        });
        match first_error.into_inner() {
            Some(e) => Err(e),
            None => scanned,
        }
    }

    /// Reads the primary keys of `def` from a snapshot and hands them on in
    /// chunks of [`CHUNK_ROWS`] until `send` refuses or `stop` is set.
    fn scan_rows(
        &self,
        def: &TableDef,
        stop: &AtomicBool,
        mut send: impl FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<()> {
        let engine = self.cat.engine();
        let pk = def
            .primary()
            .ok_or_else(|| Error::BadTableDefinition("no primary index".into()))?;
        let lo = index::prefix(pk.id);
        let hi = crate::keycodec::prefix_successor(&lo);
        let ro = ReadOptions {
            snapshot: Some(engine.snapshot()),
            lower_bound: Some(lo),
            upper_bound: hi,
            // A bulk scan: it must not flush the block cache.
            cache_priority: shaledb::CachePriority::Low,
        };
        let mut it = engine.iter_cf(&ro, self.cat.data_cf)?;
        it.seek_to_first()?;
        let mut chunk = Vec::with_capacity(CHUNK_ROWS);
        while it.valid() && !stop.load(Ordering::Relaxed) {
            chunk.push(it.key().to_vec());
            if chunk.len() == CHUNK_ROWS
                && !send(std::mem::replace(
                    &mut chunk,
                    Vec::with_capacity(CHUNK_ROWS),
                ))
            {
                return Ok(());
            }
            it.next()?;
        }
        if let Some(e) = it.status() {
            return Err(Error::Engine(e.clone()));
        }
        if !chunk.is_empty() {
            send(chunk);
        }
        Ok(())
    }

    /// One backfill transaction over the rows keyed `keys`, retried when it
    /// loses a lock wait or a deadlock to row statements.
    fn backfill_chunk(&self, def: &TableDef, ix: &IndexDef, keys: &[Vec<u8>]) -> Result<()> {
        let mut attempt = 0;
        loop {
            match self.try_backfill_chunk(def, ix, keys) {
                Err(Error::Engine(
                    shaledb::Error::LockTimeout { .. } | shaledb::Error::Deadlock { .. },
                )) if attempt < CHUNK_RETRIES => attempt += 1,
                other => return other,
            }
        }
    }

    fn try_backfill_chunk(&self, def: &TableDef, ix: &IndexDef, keys: &[Vec<u8>]) -> Result<()> {
        let cf = self.cat.data_cf;
        // Not synced: the publishing dictionary batch is, and a synced WAL
        // write makes every earlier one durable (a finished WAL segment is
        // synced before the next is created).
        let mut txn = self.cat.engine().begin(TxnOptions {
            isolation: Isolation::ReadCommitted,
            lock_wait_timeout: Duration::from_millis(200),
            write_options: shaledb::WriteOptions {
                sync: false,
                ..self.cat.write_options()
            },
        });
        for key in keys {
            let Some(value) = txn.get_for_update_cf(cf, key)? else {
                continue; // deleted since the snapshot
            };
            let row = def.decode_row(&value)?;
            let pk_part = key.get(4..).unwrap_or_default();
            let (k, v) = index::secondary_entry(def, ix, &row, pk_part);
            if ix.unique && !v.is_empty() {
                match txn.get_for_update_cf(cf, &k)? {
                    Some(other) if other == v => continue, // a writer put it
                    Some(_) => return Err(duplicate(def, ix, &row)),
                    None => {}
                }
            }
            txn.put_cf(cf, &k, &v)?;
        }
        txn.commit()?;
        Ok(())
    }
}

fn duplicate(def: &TableDef, ix: &IndexDef, row: &[Datum]) -> Error {
    let value = def
        .index_positions(ix)
        .iter()
        .map(|p| row.get(*p).and_then(Datum::to_text).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("-");
    Error::DuplicateKey {
        value,
        key: ix.name.clone(),
    }
}
