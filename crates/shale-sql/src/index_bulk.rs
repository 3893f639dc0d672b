//! The bulk backfill of a non-unique index (docs/tables.md, "CREATE
//! INDEX"): the entries of every row at a snapshot are computed, sorted in
//! memory and handed to the engine's ingest behind, which writes them
//! straight into extents of the last level at sequence 0.
//!
//! ```text
//! snapshot S (taken after step 1 registered the index)
//! scan primary index at S -> per row: prefix(ix) ++ index columns ++ pk
//!                          -> arena; every RUN_BYTES: sort (2 threads),
//!                             split in two key-disjoint halves, add_run
//!                             each on its own thread
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

/// Arena bytes sorted at a time: a 1 M-row index of 130-byte entries (a
/// CHAR(120) column) is sorted at once, so its entries are written once;
/// a larger index is sorted in pieces that the ingest merges (a second
/// write), keeping memory bounded.
const RUN_BYTES: usize = 512 << 20;

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
        let ingest = engine.ingest_behind(cf)?;
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
            run.push(start);
            if run.arena.len() >= RUN_BYTES {
                run.write_to(&ingest)?;
            }
            it.next()?;
        }
        if let Some(e) = it.status() {
            return Err(Error::Engine(e.clone()));
        }
        run.write_to(&ingest)?;
        ingest.commit(&snapshot)?;
        Ok(())
    }
}

/// Entries of one run: keys packed in an arena, each with its first 8
/// bytes after the index id as a big-endian integer (`head`), so that most
/// comparisons of the sort touch no arena memory.
#[derive(Default)]
struct Run {
    arena: Vec<u8>,
    entries: Vec<Entry>,
}

#[derive(Clone, Copy)]
struct Entry {
    head: u64,
    start: usize,
    len: usize,
}

impl Run {
    fn push(&mut self, start: usize) {
        let key = self.arena.get(start..).unwrap_or_default();
        let mut head = [0u8; 8];
        for (h, b) in head.iter_mut().zip(key.iter().skip(4)) {
            *h = *b;
        }
        self.entries.push(Entry {
            head: u64::from_be_bytes(head),
            start,
            len: key.len(),
        });
    }

    fn key(&self, e: &Entry) -> &[u8] {
        self.arena.get(e.start..e.start + e.len).unwrap_or_default()
    }

    fn cmp(&self, a: &Entry, b: &Entry) -> std::cmp::Ordering {
        a.head
            .cmp(&b.head)
            .then_with(|| self.key(a).cmp(self.key(b)))
    }

    /// Sorts the entries (two halves on two threads, then merged) and
    /// hands them to the ingest as key-disjoint runs written on two
    /// threads; empties the run.
    fn write_to(&mut self, ingest: &shaledb::IngestBuilder) -> Result<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let mut entries = std::mem::take(&mut self.entries);
        let this = &*self;
        let mid = entries.len() / 2;
        let sorted = {
            let (a, b) = entries.split_at_mut(mid);
            std::thread::scope(|s| {
                s.spawn(|| a.sort_unstable_by(|x, y| this.cmp(x, y)));
                b.sort_unstable_by(|x, y| this.cmp(x, y));
            });
            merge_sorted(a, b, |x, y| this.cmp(x, y))
        };
        let (lo, hi) = sorted.split_at(mid);
        let write = |part: &[Entry]| ingest.add_run(part.iter().map(|e| (this.key(e), &[][..])));
        let (r1, r2) = std::thread::scope(|s| {
            let h = s.spawn(|| write(hi));
            let r1 = write(lo);
            // A panic there is a bug: it goes on here, as the scope would.
            (
                r1,
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            )
        });
        r1?;
        r2?;
        self.arena.clear();
        entries.clear();
        self.entries = entries;
        Ok(())
    }
}

/// Merges two sorted slices into one vector.
fn merge_sorted<T: Copy>(a: &[T], b: &[T], cmp: impl Fn(&T, &T) -> std::cmp::Ordering) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (a.iter().peekable(), b.iter().peekable());
    loop {
        match (i.peek(), j.peek()) {
            (Some(x), Some(y)) => {
                if cmp(x, y) == std::cmp::Ordering::Greater {
                    out.push(**y);
                    j.next();
                } else {
                    out.push(**x);
                    i.next();
                }
            }
            (Some(_), None) => out.extend(i.by_ref().copied()),
            (None, Some(_)) => out.extend(j.by_ref().copied()),
            (None, None) => return out,
        }
    }
}
