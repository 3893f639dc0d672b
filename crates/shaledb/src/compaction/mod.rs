//! Merging sorted inputs into a level: flush-merge (memtable + L1), L0 -> L1,
//! and L(n) -> L(n+1). One mechanism, [`run_merge`], serves them all.
//!
//! Extent reuse (X-Engine): an input extent whose key range meets no key of
//! the other side is not rewritten. A lower-level extent untouched by the
//! upper inputs simply stays where it is; an upper extent that overlaps no
//! lower extent moves down by reference (a manifest edit, no I/O). Output
//! extents are cut so that none spans a reused extent, which keeps every
//! level sorted and non-overlapping.
//!
//! Example: L1 = [a..c] [d..f] [x..z], memtable keys {b, y}: [d..f] is reused,
//! [a..c] + {b} and [x..z] + {y} are rewritten; bytes_reused = size([d..f]).

pub mod filter;
pub mod gc;

use crate::cache::CachePriority;
use crate::error::Result;
use crate::extent::{ExtentBuilder, ExtentBuilderOptions};
use crate::iter::level_iter::LevelIterator;
use crate::iter::merge::MergingIterator;
use crate::iter::range_del::RangeTombstones;
use crate::iter::{corruption_at, BoxedIterator, InternalIterator};
use crate::memtable::MemTable;
use crate::types::{
    make_internal_key, parse_internal_key, SequenceNumber, ValueKind, KIND_FOR_SEEK,
};
use crate::version::{Extent, ExtentMeta, ExtentSpace};
use gc::Gc;
use std::sync::Arc;

/// One sorted input of a merge.
pub enum Source {
    /// A frozen memtable.
    Mem(Arc<MemTable>),
    /// A sorted run of extents from `level` (an L0 run or a level window).
    Run {
        /// Level the extents are deleted from.
        level: u8,
        /// Sorted, non-overlapping extents.
        extents: Vec<Arc<Extent>>,
    },
    /// A sorted run of extents written for this merge and in no level yet
    /// (an ingest behind, `db/ingest.rs`): like `Run`, but nothing is
    /// deleted from a level for them.
    Fresh(Vec<Arc<Extent>>),
}

/// What to merge.
pub struct MergeSpec {
    /// Newer inputs, newest first.
    pub upper: Vec<Source>,
    /// Extents of the output level that the upper inputs' key range overlaps.
    pub lower: Vec<Arc<Extent>>,
    /// Level written.
    pub output_level: u8,
    /// L0 run number of the outputs (output level 0), else 0.
    pub run: u64,
    /// Live snapshots, ascending.
    pub snapshots: Vec<SequenceNumber>,
    /// Nothing older than the inputs exists below the output level.
    pub bottommost: bool,
    /// Builder options (compression for the output level).
    pub builder: ExtentBuilderOptions,
    /// Allocates extent ids.
    pub new_extent_id: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// The column family's compaction filter for this job (`filter.rs`).
    pub filter: Option<Box<dyn filter::CompactionFilter>>,
    /// Rewrite every upper extent, even one that could move by reference
    /// (`Db::rewrite_range`: so that the filter sees its values).
    pub force_rewrite: bool,
}

/// The result: an edit's worth of changes, and figures.
#[derive(Debug, Default)]
pub struct MergeResult {
    /// (level, extent id) removed.
    pub deleted: Vec<(u8, u64)>,
    /// (level, meta) added.
    pub added: Vec<(u8, ExtentMeta)>,
    /// Data files written to (to fsync before committing).
    pub files_written: Vec<u64>,
    /// Slots written (to release if the edit is not committed).
    pub slots_written: Vec<(u64, u32)>,
    /// Bytes of input extents read.
    pub bytes_read: u64,
    /// Bytes of extents written.
    pub bytes_written: u64,
    /// Bytes of extents kept or moved without rewriting.
    pub bytes_reused: u64,
    /// Extents kept or moved without rewriting.
    pub extents_reused: u64,
    /// Record bytes of dropped BlobIndex entries, by value file (persisted
    /// before the edit: crate::blob::dead).
    pub blob_dead: crate::blob::dead::DeadCounts,
    /// Values the job's compaction filter replaced.
    pub values_changed: u64,
    /// Entries the job's compaction filter dropped (`drop_entry`).
    pub entries_dropped: u64,
    /// The job's filter, kept until the edit is installed (dropped with
    /// the result).
    pub filter: filter::FilterGuard,
}

/// True if the memtable holds a point key or range tombstone within `[lo, hi]`.
fn mem_touches(mem: &Arc<MemTable>, lo: &[u8], hi: &[u8]) -> Result<bool> {
    let mut it = mem.iter();
    it.seek(&make_internal_key(
        lo,
        SequenceNumber::MAX >> 8,
        KIND_FOR_SEEK,
    ))?;
    if it.valid() && crate::types::user_key(it.key()) <= hi {
        return Ok(true);
    }
    Ok(mem
        .range_tombstones()
        .iter()
        .any(|(b, e, _)| b.as_slice() <= hi && lo < e.as_slice()))
}

fn upper_touches(upper: &[Source], lo: &[u8], hi: &[u8]) -> Result<bool> {
    for s in upper {
        let hit = match s {
            Source::Mem(m) => mem_touches(m, lo, hi)?,
            Source::Run { extents, .. } | Source::Fresh(extents) => {
                extents.iter().any(|e| e.meta.overlaps(lo, hi))
            }
        };
        if hit {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Adjacent extents of a sorted run may share a boundary user key (versions of
/// one key split across them). Such neighbours are reused together or merged
/// together: reusing one while merging the other would put that key into the
/// merged stream and let an output overlap the reused extent.
fn keep_shared_bounds_together(run: &[Arc<Extent>], reused: &mut [bool]) {
    loop {
        let mut changed = false;
        for i in 1..run.len().min(reused.len()) {
            let (Some(a), Some(b)) = (run.get(i - 1), run.get(i)) else {
                break;
            };
            if a.meta.largest == b.meta.smallest {
                let both = reused.get(i - 1).copied().unwrap_or(false)
                    && reused.get(i).copied().unwrap_or(false);
                for j in [i - 1, i] {
                    if let Some(r) = reused.get_mut(j) {
                        if *r != both {
                            *r = both;
                            changed = true;
                        }
                    }
                }
            }
        }
        if !changed {
            return;
        }
    }
}

/// Runs a merge: writes output extents into free slots (not yet synced or
/// committed) and returns the changes. On error every slot written is released.
pub fn run_merge(space: &Arc<ExtentSpace>, mut spec: MergeSpec) -> Result<MergeResult> {
    let mut res = MergeResult::default();
    let mut filter = spec.filter.take();
    let merged = merge_inner(space, &spec, filter.as_deref_mut(), &mut res);
    match merged {
        Ok(()) => {
            res.filter = filter::FilterGuard(filter);
            Ok(res)
        }
        Err(e) => {
            for (f, s) in res.slots_written.drain(..) {
                space.release(f, s);
            }
            Err(e)
        }
    }
}

fn merge_inner(
    space: &Arc<ExtentSpace>,
    spec: &MergeSpec,
    mut filter: Option<&mut (dyn filter::CompactionFilter + 'static)>,
    res: &mut MergeResult,
) -> Result<()> {
    let out_level = spec.output_level;
    // 1. Reuse decisions.
    let mut lower_inputs = Vec::new();
    let mut reused_cuts: Vec<Vec<u8>> = Vec::new();
    let mut lower_reused = Vec::with_capacity(spec.lower.len());
    for e in &spec.lower {
        lower_reused.push(!upper_touches(
            &spec.upper,
            &e.meta.smallest,
            &e.meta.largest,
        )?);
    }
    keep_shared_bounds_together(&spec.lower, &mut lower_reused);
    for (e, reused) in spec.lower.iter().zip(lower_reused) {
        if reused {
            res.bytes_reused += u64::from(e.meta.size);
            res.extents_reused += 1;
            reused_cuts.push(e.meta.smallest.clone());
        } else {
            lower_inputs.push(e.clone());
        }
    }
    let mut children: Vec<BoxedIterator<'static>> = Vec::new();
    let mut tombstones = Vec::new();
    let single_upper = spec.upper.len() == 1;
    for s in &spec.upper {
        let (from_level, extents) = match s {
            Source::Mem(m) => {
                children.push(Box::new(m.iter()));
                tombstones.extend(m.range_tombstones());
                continue;
            }
            Source::Run { level, extents } => (Some(*level), extents),
            Source::Fresh(extents) => (None, extents),
        };
        let mut merged = Vec::new();
        let mut movable: Vec<bool> = extents
            .iter()
            .map(|e| {
                single_upper
                    && !spec.force_rewrite
                    && out_level > 0
                    && !spec
                        .lower
                        .iter()
                        .any(|l| l.meta.overlaps(&e.meta.smallest, &e.meta.largest))
                    && compressed_as_output(e, spec)
            })
            .collect();
        keep_shared_bounds_together(extents, &mut movable);
        for (e, movable) in extents.iter().zip(movable) {
            if let Some(level) = from_level {
                res.deleted.push((level, e.meta.id));
            }
            if movable {
                let mut meta = e.meta.clone();
                meta.run = spec.run;
                res.added.push((out_level, meta));
                res.bytes_reused += u64::from(e.meta.size);
                res.extents_reused += 1;
                reused_cuts.push(e.meta.smallest.clone());
            } else {
                res.bytes_read += u64::from(e.meta.size);
                if e.meta.num_range_deletions > 0 {
                    tombstones.extend(e.reader(false)?.range_tombstones()?);
                }
                merged.push(e.clone());
            }
        }
        if !merged.is_empty() {
            children.push(Box::new(
                LevelIterator::new(merged, false).with_cache_priority(CachePriority::Bypass),
            ));
        }
    }
    for e in &lower_inputs {
        res.deleted.push((out_level, e.meta.id));
        res.bytes_read += u64::from(e.meta.size);
        if e.meta.num_range_deletions > 0 {
            tombstones.extend(e.reader(false)?.range_tombstones()?);
        }
    }
    if !lower_inputs.is_empty() {
        children.push(Box::new(
            LevelIterator::new(lower_inputs, false).with_cache_priority(CachePriority::Bypass),
        ));
    }
    reused_cuts.sort();

    // 2. Merge.
    let frags = RangeTombstones::new_unfiltered(tombstones);
    let mut gc = Gc::new(spec.snapshots.clone(), spec.bottommost);
    // Room kept free in every output for the tombstone fragments it may get
    // at finish time (they are assigned by key range only then).
    let tomb_bytes: usize = frags
        .fragments_between_all_seqs(&[], None)
        .iter()
        .map(|(b, e, _)| b.len() + e.len() + 24)
        .sum();
    let mut out = OutputWriter {
        space,
        spec,
        frags: &frags,
        tomb_reserve: tomb_bytes.min(spec.builder.extent_size / 4),
        gc_keep_tombstone: |s| gc_keep_tombstone(&spec.snapshots, spec.bottommost, s),
        builder: None,
        tombstone_lo: None,
        res,
    };
    let mut it = MergingIterator::new(children);
    it.seek_to_first()?;
    let mut cut_idx = 0;
    // Sequence 0 is only ever given by an ingest behind (db/ingest.rs), whose
    // keys must be distinct: a second version at 0 would be dropped silently.
    let mut last_at_zero: Option<Vec<u8>> = None;
    while it.valid() {
        let ikey = it.key();
        let p = parse_internal_key(ikey)
            .ok_or_else(|| corruption_at(&it, "bad internal key in merge input"))?;
        if p.seq == 0 {
            if last_at_zero.as_deref() == Some(p.user_key) {
                return Err(crate::Error::InvalidArgument(
                    "a key ingested twice at sequence 0".into(),
                ));
            }
            let buf = last_at_zero.get_or_insert_with(Vec::new);
            buf.clear();
            buf.extend_from_slice(p.user_key);
        }
        // Never let an output span a reused extent: close the output at every
        // reused extent passed (tombstones between them get outputs of their own).
        while let Some(cut) = reused_cuts
            .get(cut_idx)
            .filter(|c| c.as_slice() <= p.user_key)
        {
            out.finish(Some(cut))?;
            cut_idx += 1;
        }
        let covering = if frags.is_empty() {
            0
        } else {
            frags.covering_seq_at(p.user_key, gc.stripe_bound(p.seq))
        };
        let keep = gc.keep(p.user_key, p.seq, p.kind, covering);
        let dropped = keep
            && matches!(p.kind, ValueKind::Put | ValueKind::BlobIndex)
            && filter
                .as_deref_mut()
                .is_some_and(|f| f.drop_entry(p.user_key, p.seq));
        if dropped {
            out.res.entries_dropped += 1;
            if p.kind == ValueKind::BlobIndex {
                crate::blob::dead::count_dropped(
                    &mut out.res.blob_dead,
                    p.user_key.len(),
                    it.value(),
                );
            }
        } else if keep {
            let changed = match filter.as_deref_mut() {
                Some(f) if p.kind == ValueKind::Put => f.change_value(p.user_key, it.value()),
                _ => None,
            };
            match changed {
                Some(v) => {
                    out.res.values_changed += 1;
                    out.add(ikey, &v, p.user_key)?;
                }
                None => out.add(ikey, it.value(), p.user_key)?,
            }
        } else if p.kind == ValueKind::BlobIndex {
            crate::blob::dead::count_dropped(&mut out.res.blob_dead, p.user_key.len(), it.value());
        }
        it.next()?;
    }
    for cut in reused_cuts.get(cut_idx..).unwrap_or(&[]) {
        out.finish(Some(cut))?;
    }
    out.finish(None)?;
    Ok(())
}

/// An extent moves into a compressed level only if it is compressed the
/// same way: an uncompressed hot extent moved into the cold level as is
/// would keep its size there forever (only a later overlap rewrites it).
/// Unreadable properties mean "rewrite" (the merge then reports the error).
fn compressed_as_output(e: &Extent, spec: &MergeSpec) -> bool {
    let want = spec.builder.compression;
    want == crate::extent::CompressionType::None
        || e.reader(false).is_ok_and(|r| r.compression() == want)
}

fn gc_keep_tombstone(snapshots: &[SequenceNumber], bottommost: bool, seq: SequenceNumber) -> bool {
    !(bottommost && snapshots.partition_point(|&s| s < seq) == 0)
}

/// Cuts the merged stream into extents.
struct OutputWriter<'a, F: Fn(SequenceNumber) -> bool> {
    space: &'a Arc<ExtentSpace>,
    spec: &'a MergeSpec,
    frags: &'a RangeTombstones,
    tomb_reserve: usize,
    gc_keep_tombstone: F,
    builder: Option<ExtentBuilder>,
    /// Lower bound of the tombstone fragments not yet given to an output.
    tombstone_lo: Option<Vec<u8>>,
    res: &'a mut MergeResult,
}

impl<F: Fn(SequenceNumber) -> bool> OutputWriter<'_, F> {
    fn add(&mut self, ikey: &[u8], value: &[u8], user_key: &[u8]) -> Result<()> {
        let full = self.builder.as_ref().is_some_and(|b| {
            !b.is_empty() && b.would_overflow(ikey.len() + self.tomb_reserve, value.len())
        });
        if full {
            // Versions of one user key may continue in the next extent (then
            // both extents name that key as a bound); readers allow for it.
            self.finish(Some(user_key))?;
        }
        let b = self
            .builder
            .get_or_insert_with(|| ExtentBuilder::new(self.spec.builder.clone()));
        b.add(ikey, value)
    }

    /// Finishes the current output; tombstone fragments below `hi` go with it.
    fn finish(&mut self, hi: Option<&[u8]>) -> Result<()> {
        let lo = self.tombstone_lo.clone().unwrap_or_default();
        let frags: Vec<_> = if self.frags.is_empty() {
            Vec::new()
        } else {
            self.frags
                .fragments_between_all_seqs(&lo, hi)
                .into_iter()
                .filter(|(_, _, s)| (self.gc_keep_tombstone)(*s))
                .collect()
        };
        if let Some(h) = hi {
            self.tombstone_lo = Some(h.to_vec());
        }
        let builder = match self.builder.take() {
            Some(b) => Some(b),
            // Tombstones with no point key beside them still need an extent.
            None if !frags.is_empty() => Some(ExtentBuilder::new(self.spec.builder.clone())),
            None => None,
        };
        let Some(mut b) = builder else {
            return Ok(());
        };
        let mut t_lo: Option<Vec<u8>> = None;
        let mut t_hi: Option<Vec<u8>> = None;
        for (begin, end, seq) in &frags {
            b.add_range_tombstone(begin, end, *seq);
            if t_lo.as_ref().is_none_or(|l| begin < l) {
                t_lo = Some(begin.clone());
            }
            if t_hi.as_ref().is_none_or(|h| end > h) {
                t_hi = Some(end.clone());
            }
        }
        if b.is_empty() {
            return Ok(());
        }
        let fin = b.finish()?;
        let (file, slot) = self.space.write_extent(&fin.data)?;
        self.res.slots_written.push((file, slot));
        if !self.res.files_written.contains(&file) {
            self.res.files_written.push(file);
        }
        let props = &fin.props;
        let mut smallest = crate::types::user_key(&props.smallest_key).to_vec();
        let mut largest = crate::types::user_key(&props.largest_key).to_vec();
        if props.num_entries == 0 {
            smallest = t_lo.clone().unwrap_or_default();
            largest = t_hi.clone().unwrap_or_default();
        }
        if let Some(l) = t_lo {
            if l < smallest {
                smallest = l;
            }
        }
        if let Some(h) = t_hi {
            if h > largest {
                largest = h;
            }
        }
        let size = u32::try_from(fin.data.len())
            .map_err(|_| crate::Error::InvalidArgument("extent larger than 4 GiB".into()))?;
        let meta = ExtentMeta {
            id: (self.spec.new_extent_id)(),
            file_number: file,
            slot,
            size,
            smallest,
            largest,
            smallest_seq: props.smallest_seq,
            largest_seq: props.largest_seq,
            num_entries: props.num_entries,
            num_deletions: props.num_deletions,
            num_range_deletions: props.num_range_deletions,
            run: self.spec.run,
        };
        self.res.bytes_written += u64::from(size);
        self.res.added.push((self.spec.output_level, meta));
        Ok(())
    }
}
