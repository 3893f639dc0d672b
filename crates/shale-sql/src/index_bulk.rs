//! The bulk backfill of a non-unique index (docs/tables.md, "CREATE
//! INDEX"): the entries of every row at a snapshot are computed, sorted in
//! memory and handed to the engine's ingest behind, which writes them
//! straight into extents of the last level at sequence 0.
//!
//! ```text
//! snapshot S (taken after step 1 registered the index)
//! scan primary index at S -> per row: prefix(ix) ++ index columns ++ pk
//!                          -> arena; every RUN_BYTES: sort, add_run
//! commit(S)               -> one manifest edit
//! ```
//!
//! Why it is exact: at S the index's key range holds exactly the entries of
//! the rows at S (writers since step 1 maintained it; before step 1 it was
//! empty), so each ingested entry is its key's value at S, as the engine's
//! contract asks. A writer's later put or delete of an entry has a sequence
//! above S and wins over the entry at sequence 0. A non-unique entry's key
//! holds the primary key, so no two rows share one and no uniqueness is
//! checked; unique indexes keep the transactional backfill, whose row and
//! entry locks are what detect a duplicate inserted by a concurrent writer.

use crate::catalog::{IndexDef, TableDef};
use crate::ddl::Ddl;
use crate::error::{Error, Result};
use crate::index;
use shaledb::ReadOptions;

/// Arena bytes per sorted run: a 10 M-row index of ~25-byte entries is one
/// or two runs; memory stays bounded for larger ones.
const RUN_BYTES: usize = 128 << 20;

impl Ddl<'_> {
    /// Writes the entries of non-unique `ix` for every row of `def` through
    /// an ingest behind (module docs).
    pub(crate) fn bulk_backfill(&self, def: &TableDef, ix: &IndexDef) -> Result<()> {
        let engine = self.cat.engine();
        let cf = self.cat.data_cf;
        let pk = def
            .primary()
            .ok_or_else(|| Error::BadTableDefinition("no primary index".into()))?;
        let snapshot = engine.snapshot();
        let lo = index::prefix(pk.id);
        let hi = crate::keycodec::prefix_successor(&lo);
        let ro = ReadOptions {
            snapshot: Some(snapshot.clone()),
            lower_bound: Some(lo),
            upper_bound: hi,
        };
        let mut wanted = vec![false; def.columns.len()];
        for p in def.index_positions(ix) {
            if let Some(w) = wanted.get_mut(p) {
                *w = true;
            }
        }
        let mut ingest = engine.ingest_behind(cf)?;
        let mut run = Run::default();
        let mut it = engine.iter_cf(&ro, cf)?;
        it.seek_to_first()?;
        while it.valid() {
            let row = def.decode_row_projected(it.value(), Some(&wanted))?;
            let pk_part = it.key().get(4..).unwrap_or_default();
            let start = run.arena.len();
            run.arena.extend_from_slice(&index::prefix(ix.id));
            index::encode_columns(def, ix, &row, &mut run.arena);
            run.arena.extend_from_slice(pk_part);
            run.entries.push((start, run.arena.len() - start));
            if run.arena.len() >= RUN_BYTES {
                run.write_to(&mut ingest)?;
            }
            it.next()?;
        }
        if let Some(e) = it.status() {
            return Err(Error::Engine(e.clone()));
        }
        run.write_to(&mut ingest)?;
        ingest.commit(&snapshot)?;
        Ok(())
    }
}

/// Entries of one run: keys packed in an arena, `(offset, length)` each.
#[derive(Default)]
struct Run {
    arena: Vec<u8>,
    entries: Vec<(usize, usize)>,
}

impl Run {
    fn key(&self, (start, len): (usize, usize)) -> &[u8] {
        self.arena.get(start..start + len).unwrap_or_default()
    }

    /// Sorts the entries and hands them to the ingest as one run; empties
    /// the run.
    fn write_to(&mut self, ingest: &mut shaledb::IngestBuilder) -> Result<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let mut entries = std::mem::take(&mut self.entries);
        entries.sort_unstable_by(|a, b| self.key(*a).cmp(self.key(*b)));
        ingest.add_run(entries.iter().map(|e| (self.key(*e), &[][..])))?;
        self.arena.clear();
        entries.clear();
        self.entries = entries;
        Ok(())
    }
}
