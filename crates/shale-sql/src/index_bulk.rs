//! The bulk backfill of a non-unique index (docs/tables.md, "CREATE
//! INDEX"): the entries of every row at a snapshot are computed, sorted and
//! handed to the engine's ingest behind, which writes them straight into
//! extents of the last level at sequence 0.
//!
//! ```text
//! snapshot S (taken after step 1 registered the index)
//! scan primary index at S -> per row: prefix(ix) ++ index columns ++ pk
//!                          -> arena; every `run_bytes` (512 MiB): sort
//!                             (2 threads) and spill as a sorted run file
//!                             (index_runs.rs) to tmpdir; at 64 runs merge
//!                             them into one (bounded open files)
//! end of scan             -> sort the last arena (kept in memory); pick
//!                             P-1 splitters (P = cores, at most 4) from the
//!                             runs' block keys and a sample of the arena
//! per key range, P threads -> merge the range of every run and of the
//!                             arena -> add_run: P key-disjoint runs
//! commit(S)               -> one manifest edit; the disjoint runs move in
//!                             by reference, each entry written once
//! ```
//!
//! Why partitions by key and not runs by arrival: runs cut by arrival
//! order overlap in key range (an index column rarely follows the primary
//! key), and the engine's commit has to merge overlapping runs, writing
//! every entry a second time. Merged here, the P ranges are disjoint and
//! the commit moves them in as written. Memory stays bounded by one arena
//! (`run_bytes` of keys plus 24 bytes per entry) and P x (runs + 1) block
//! buffers; a spilled run costs one sequential write and read of its keys.
//!
//! Why it is exact: at S the index's key range holds exactly the entries of
//! the rows at S (writers since step 1 maintained it; before step 1 it was
//! empty), so each ingested entry is its key's value at S, as the engine's
//! contract asks. A writer's later put or delete of an entry has a sequence
//! above S and wins over the entry at sequence 0. A non-unique entry's key
//! holds the primary key, so no two rows share one and no uniqueness is
//! checked; unique indexes keep the transactional backfill, whose row and
//! entry locks are what detect a duplicate inserted by a concurrent writer.
//! The build checks that it ingested as many entries as it scanned.

use crate::catalog::{IndexDef, TableDef};
use crate::ddl::Ddl;
use crate::error::{Error, Result};
use crate::index;
use crate::index_runs::{self, Merge, SpilledRun};
use parking_lot::Mutex;
use shaledb::ReadOptions;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Default arena bytes sorted at a time: a 1 M-row index of 130-byte
/// entries (a CHAR(120) column) fits, so it is never spilled.
const RUN_BYTES: usize = 512 << 20;
/// Most partitions (and threads) of the final merge.
const MAX_PARTITIONS: usize = 4;
/// Default most spilled runs kept apart: at this many they are merged into
/// one, so the final merge's open files (partitions x runs) stay bounded.
const MAX_RUNS: usize = 64;

/// The bulk build's setting and figures, kept in the catalog.
pub struct BulkState {
    /// `Database::set_index_build_buffer`.
    pub run_bytes: AtomicUsize,
    /// `Database::set_index_build_fan_in`.
    pub max_runs: AtomicUsize,
    pub last: Mutex<Option<IndexBuildStats>>,
}

impl Default for BulkState {
    fn default() -> Self {
        BulkState {
            run_bytes: AtomicUsize::new(RUN_BYTES),
            max_runs: AtomicUsize::new(MAX_RUNS),
            last: Mutex::new(None),
        }
    }
}

/// What a bulk CREATE INDEX did (`Database::last_index_build`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexBuildStats {
    /// Entries written (one per row).
    pub entries: u64,
    /// Sorted runs spilled to `tmpdir` (0: the index fit in memory).
    pub runs_spilled: usize,
    /// Times the spilled runs reached the fan-in and were merged into one.
    pub early_merges: usize,
    /// Key-disjoint runs handed to the ingest (one per partition).
    pub partitions: usize,
    /// Bytes of extents written.
    pub bytes_written: u64,
    /// Bytes the ingest's commit wrote again by merging (0: every run moved
    /// into the last level as written).
    pub bytes_rewritten: u64,
}

impl Ddl<'_> {
    /// Writes the entries of non-unique `ix` for every row of `def` through
    /// an ingest behind (module docs).
    pub(crate) fn bulk_backfill(&self, def: &TableDef, ix: &IndexDef) -> Result<()> {
        let engine = self.cat.engine();
        let cf = self.cat.data_cf;
        let pk = def
            .primary()
            .ok_or_else(|| Error::BadTableDefinition("no primary index".into()))?;
        let run_bytes = self.cat.bulk.run_bytes.load(Ordering::Relaxed).max(1);
        let max_runs = self.cat.bulk.max_runs.load(Ordering::Relaxed).max(2);
        let tmpdir = engine.path().join(crate::executor::TMP_DIR);
        let snapshot = engine.snapshot();
        let lo = index::prefix(pk.id);
        let hi = crate::keycodec::prefix_successor(&lo);
        let ro = ReadOptions {
            snapshot: Some(snapshot.clone()),
            lower_bound: Some(lo),
            upper_bound: hi,
            // A bulk scan: it must not flush the block cache.
            cache_priority: shaledb::CachePriority::Low,
        };
        let mut wanted = vec![false; def.columns.len()];
        for p in def.index_positions(ix) {
            if let Some(w) = wanted.get_mut(p) {
                *w = true;
            }
        }
        let mut run = Run::default();
        let mut spilled: Vec<SpilledRun> = Vec::new();
        let (mut runs_spilled, mut early_merges) = (0, 0);
        let mut scanned = 0u64;
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
            scanned += 1;
            if run.arena.len() >= run_bytes {
                let sorted = run.sort();
                spilled.push(index_runs::spill(
                    &tmpdir,
                    sorted.iter().map(|e| run.key(e)),
                )?);
                run.clear(sorted);
                runs_spilled += 1;
                if spilled.len() >= max_runs {
                    spilled = vec![merge_spilled(&tmpdir, &spilled)?];
                    early_merges += 1;
                }
            }
            it.next()?;
        }
        if let Some(e) = it.status() {
            return Err(Error::Engine(e.clone()));
        }
        drop(it);
        let sorted = run.sort();
        let ingest = engine.ingest_behind(cf)?;
        let (partitions, written) = write_partitions(&ingest, &run, &sorted, &spilled)?;
        drop(spilled);
        if written != scanned {
            // Only a spilled run read back short could cause this; the
            // uncommitted ingest is dropped (its slots freed).
            return Err(Error::TempFile {
                path: tmpdir.display().to_string(),
                reason: format!("index build wrote {written} entries of {scanned} rows"),
            });
        }
        let stats = ingest.commit(&snapshot)?;
        *self.cat.bulk.last.lock() = Some(IndexBuildStats {
            entries: stats.entries,
            runs_spilled,
            early_merges,
            partitions,
            bytes_written: stats.bytes_written,
            bytes_rewritten: stats.bytes_rewritten,
        });
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

    /// The entries in key order: two halves sorted on two threads, then
    /// merged. Leaves `self.entries` empty (its buffer comes back through
    /// [`Run::clear`]).
    fn sort(&mut self) -> Vec<Entry> {
        let mut entries = std::mem::take(&mut self.entries);
        let this = &*self;
        let mid = entries.len() / 2;
        let (a, b) = entries.split_at_mut(mid);
        std::thread::scope(|s| {
            s.spawn(|| a.sort_unstable_by(|x, y| this.cmp(x, y)));
            b.sort_unstable_by(|x, y| this.cmp(x, y));
        });
        merge_sorted(a, b, |x, y| this.cmp(x, y))
    }

    /// Empties the run for the next arena, keeping the buffers.
    fn clear(&mut self, mut sorted: Vec<Entry>) {
        self.arena.clear();
        sorted.clear();
        self.entries = sorted;
    }
}

/// Merges `runs` into one new run file (the old files are removed when the
/// caller drops them); checks that no entry went missing.
fn merge_spilled(dir: &std::path::Path, runs: &[SpilledRun]) -> Result<SpilledRun> {
    let mut merge = Merge::new(runs, Box::new(std::iter::empty()), None, None)?;
    let merged = index_runs::spill(dir, merge.by_ref().map(|(k, _)| k))?;
    if let Some(e) = merge.error {
        return Err(e);
    }
    let expected: u64 = runs.iter().map(|r| r.entries).sum();
    if merged.entries != expected {
        return Err(Error::TempFile {
            path: dir.display().to_string(),
            reason: format!(
                "merged {} index entries of {expected} spilled",
                merged.entries
            ),
        });
    }
    Ok(merged)
}

/// `[lo, hi)` of a partition, unbounded where `None`.
type KeyRange<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Writes the entries of the spilled runs and of `run` (`sorted`) as
/// key-disjoint runs, one per partition, each on its own thread; returns
/// how many partitions there were and how many entries they wrote.
fn write_partitions(
    ingest: &shaledb::IngestBuilder,
    run: &Run,
    sorted: &[Entry],
    spilled: &[SpilledRun],
) -> Result<(usize, u64)> {
    if sorted.is_empty() && spilled.is_empty() {
        return Ok((0, 0));
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_PARTITIONS);
    let splitters = splitters(run, sorted, spilled, threads);
    let bounds: Vec<KeyRange> = (0..=splitters.len())
        .map(|i| {
            let lo = i.checked_sub(1).and_then(|j| splitters.get(j)).copied();
            (lo, splitters.get(i).copied())
        })
        .collect();
    let write = |lo: Option<&[u8]>, hi: Option<&[u8]>| -> Result<u64> {
        let from = lo.map_or(0, |lo| sorted.partition_point(|e| run.key(e) < lo));
        let to = hi.map_or(sorted.len(), |hi| {
            sorted.partition_point(|e| run.key(e) < hi)
        });
        let mem = sorted.get(from..to).unwrap_or_default();
        if spilled.is_empty() {
            // All in memory: the keys are lent straight from the arena.
            ingest.add_run(mem.iter().map(|e| (run.key(e), [0u8; 0])))?;
            return Ok(mem.len() as u64);
        }
        let mut merge = Merge::new(spilled, Box::new(mem.iter().map(|e| run.key(e))), lo, hi)?;
        let mut n = 0u64;
        ingest.add_run(merge.by_ref().inspect(|_| n += 1))?;
        match merge.error {
            Some(e) => Err(e),
            None => Ok(n),
        }
    };
    let results: Vec<Result<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = bounds
            .iter()
            .skip(1)
            .map(|&(lo, hi)| s.spawn(move || write(lo, hi)))
            .collect();
        let first = bounds.first().map_or(Ok(0), |&(lo, hi)| write(lo, hi));
        std::iter::once(first)
            .chain(handles.into_iter().map(|h| {
                // A panic there is a bug: it goes on here, as the scope would.
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            }))
            .collect()
    });
    let mut written = 0;
    for r in results {
        written += r?;
    }
    Ok((bounds.len(), written))
}

/// Up to `parts - 1` distinct keys that cut the entries into ranges of
/// about equal size: quantiles of a sample holding each spilled block's
/// first key and every k-th key of the arena, k = the entries of a block
/// (so both weigh the same per entry).
fn splitters<'a>(
    run: &'a Run,
    sorted: &'a [Entry],
    spilled: &'a [SpilledRun],
    parts: usize,
) -> Vec<&'a [u8]> {
    let avg = run.arena.len() / sorted.len().max(1);
    let step = (index_runs::BLOCK_BYTES / (avg + 4).max(1)).max(1);
    let mut sample: Vec<&[u8]> = spilled
        .iter()
        .flat_map(|r| r.blocks.iter().map(|b| b.first.as_slice()))
        .chain(sorted.iter().step_by(step).map(|e| run.key(e)))
        .collect();
    sample.sort_unstable();
    let mut out: Vec<&[u8]> = (1..parts)
        .filter_map(|i| sample.get(sample.len() * i / parts).copied())
        .collect();
    out.dedup();
    // The smallest key is no cut (the range below it would be empty).
    let smallest = sample.first().copied();
    out.retain(|k| Some(*k) != smallest);
    out
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
