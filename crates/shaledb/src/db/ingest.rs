//! Ingest behind: a bulk load of sorted runs into a column family's last
//! level at sequence 0 (docs/architecture.md, "Ingest behind").
//!
//! ```no_run
//! # use shaledb::{Db, Options};
//! let db = Db::open("/tmp/shale-ingest", Options::default())?;
//! let snap = db.snapshot();
//! let ingest = db.ingest_behind(0)?;
//! ingest.add_run([(&b"a"[..], &b"1"[..]), (b"b", b"2")])?;
//! ingest.add_run([(&b"ab"[..], &b"3"[..])])?; // runs may interleave
//! let stats = ingest.commit(&snap)?;
//! assert_eq!(stats.entries, 3);
//! assert_eq!(db.get(b"ab")?, Some(b"3".to_vec()));
//! # Ok::<(), shaledb::Error>(())
//! ```
//!
//! The entries bypass the WAL and the memtable: each run goes through an
//! [`ExtentBuilder`] into free slots as it is added (no lock held), and
//! [`IngestBuilder::commit`] makes them part of the last level with one
//! compaction-style merge and one manifest edit. A new key range (a new
//! index) moves in by reference, so each entry is written once.

use super::background::{
    add_to_edit, builder_options, install_super_version, job_failed, release_all, spec,
};
use super::{CfId, Db, Snapshot};
use crate::compaction::{run_merge, Source};
use crate::error::{Error, Result};
use crate::extent::ExtentBuilder;
use crate::types::{append_internal_key, ValueKind};
use crate::version::{Extent, ExtentMeta, VersionEdit};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

/// What an ingest did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestStats {
    /// Entries ingested.
    pub entries: u64,
    /// Sorted runs given.
    pub runs: usize,
    /// Bytes of extents the runs were written into.
    pub bytes_written: u64,
    /// Bytes the commit's merge rewrote (0 when every run moved in as is).
    pub bytes_rewritten: u64,
}

/// Collects sorted runs for one ingest (see the module docs). Dropping it
/// without [`IngestBuilder::commit`] frees every slot it wrote.
///
/// Runs may be added from several threads at once (`add_run` takes
/// `&self`): a caller that splits its sorted entries into key-disjoint
/// runs writes them in parallel, and the commit still moves them in as one
/// sorted run without rewriting.
pub struct IngestBuilder {
    db: Db,
    cf: CfId,
    /// Runs written so far and the figures; guarded here because runs are
    /// added concurrently.
    state: Mutex<IngestState>,
}

#[derive(Default)]
struct IngestState {
    /// Extents of each run, in key order. Not in any version: each is
    /// marked obsolete (its slot freed on drop) unless the commit moves it
    /// into the level.
    runs: Vec<Vec<Arc<Extent>>>,
    stats: IngestStats,
}

impl Db {
    /// Starts an ingest behind into column family `cf` (docs/architecture.md,
    /// "Ingest behind"). The caller's contract: every ingested `(k, v)` is
    /// `k`'s value as of the snapshot later passed to
    /// [`IngestBuilder::commit`], and a key without a value at that snapshot
    /// is not ingested. Existing versions of a key always win over the
    /// ingested one (it is at sequence 0).
    pub fn ingest_behind(&self, cf: CfId) -> Result<IngestBuilder> {
        self.inner.check_open()?;
        if !self.inner.versions.current().cfs.contains_key(&cf) {
            return Err(Error::ColumnFamilyNotFound(cf.to_string()));
        }
        Ok(IngestBuilder {
            db: self.clone(),
            cf,
            state: Mutex::new(IngestState::default()),
        })
    }
}

impl IngestBuilder {
    /// Writes one run: `(user key, value)` pairs with strictly ascending
    /// keys. Keys must be distinct across runs too (the commit fails with
    /// `InvalidArgument` otherwise). On error nothing of this run is kept.
    /// Pairs may be borrowed slices or owned buffers (a caller merging
    /// spilled runs yields keys it cannot lend for the whole call).
    pub fn add_run<K, V, I>(&self, entries: I) -> Result<()>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
        I: IntoIterator<Item = (K, V)>,
    {
        let mut run = Vec::new();
        let mut stats = IngestStats::default();
        match self.write_run(entries, &mut run, &mut stats) {
            Ok(()) => {
                let mut st = self.state.lock();
                st.stats.entries += stats.entries;
                st.stats.runs += 1;
                st.stats.bytes_written += stats.bytes_written;
                if !run.is_empty() {
                    st.runs.push(run);
                }
                Ok(())
            }
            Err(e) => {
                discard(&run);
                Err(e)
            }
        }
    }

    fn write_run<K, V, I>(
        &self,
        entries: I,
        run: &mut Vec<Arc<Extent>>,
        stats: &mut IngestStats,
    ) -> Result<()>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
        I: IntoIterator<Item = (K, V)>,
    {
        let inner = self.db.inner.clone();
        let level = inner.opts.num_levels - 1;
        let opts = builder_options(&inner, level);
        let mut builder: Option<ExtentBuilder> = None;
        let mut ikey = Vec::new();
        // The previous key, kept as the item itself (no copy).
        let mut last: Option<K> = None;
        let mut entries_added = 0u64;
        for (key_item, value) in entries {
            let key = key_item.as_ref();
            let value = value.as_ref();
            if last.as_ref().is_some_and(|l| l.as_ref() >= key) {
                return Err(Error::InvalidArgument(
                    "ingest run keys are not strictly ascending".into(),
                ));
            }
            ikey.clear();
            append_internal_key(&mut ikey, key, 0, ValueKind::Put);
            let full = builder
                .as_ref()
                .is_some_and(|b| !b.is_empty() && b.would_overflow(ikey.len(), value.len()));
            if full {
                if let Some(b) = builder.take() {
                    run.push(self.write_extent(b, stats)?);
                }
            }
            builder
                .get_or_insert_with(|| ExtentBuilder::new(opts.clone()))
                .add(&ikey, value)?;
            entries_added += 1;
            last = Some(key_item);
        }
        if let Some(b) = builder.take().filter(|b| !b.is_empty()) {
            run.push(self.write_extent(b, stats)?);
        }
        stats.entries += entries_added;
        Ok(())
    }

    fn write_extent(&self, b: ExtentBuilder, stats: &mut IngestStats) -> Result<Arc<Extent>> {
        let inner = &self.db.inner;
        let fin = b.finish()?;
        let space = inner.versions.space();
        let (file, slot) = space.write_extent(&fin.data)?;
        let size = match u32::try_from(fin.data.len()) {
            Ok(s) => s,
            Err(_) => {
                space.release(file, slot);
                return Err(Error::InvalidArgument("extent larger than 4 GiB".into()));
            }
        };
        let props = &fin.props;
        let meta = ExtentMeta {
            id: inner.versions.new_extent_id(),
            file_number: file,
            slot,
            size,
            smallest: crate::types::user_key(&props.smallest_key).to_vec(),
            largest: crate::types::user_key(&props.largest_key).to_vec(),
            smallest_seq: props.smallest_seq,
            largest_seq: props.largest_seq,
            num_entries: props.num_entries,
            num_deletions: props.num_deletions,
            num_range_deletions: props.num_range_deletions,
            run: 0,
        };
        stats.bytes_written += u64::from(size);
        Ok(Extent::new(meta, space.clone()))
    }

    /// Makes the runs part of the last level (docs/architecture.md, "Ingest
    /// behind"): fsyncs their files, waits for the compaction turn, merges
    /// them with the overlapping last-level extents and commits one manifest
    /// edit. `snapshot` (of this database) must have been held since the
    /// ingested values were read, and is held through the call.
    pub fn commit(mut self, snapshot: &Snapshot) -> Result<IngestStats> {
        let inner = self.db.inner.clone();
        if !snapshot.belongs_to(&inner.snapshots) {
            return Err(Error::InvalidArgument(
                "ingest snapshot is of another database".into(),
            ));
        }
        let runs = coalesce_disjoint(std::mem::take(&mut self.state.get_mut().runs));
        let result = self.commit_runs(&runs, snapshot.sequence());
        // Extents the edit moved into the level now belong to the version
        // (which holds objects of its own for them); every other one was
        // rewritten or never committed, and its slot is freed here.
        let moved: Vec<u64> = match &result {
            Ok(added) => added.clone(),
            Err(_) => Vec::new(),
        };
        for e in runs.iter().flatten() {
            if !moved.contains(&e.meta.id) {
                e.mark_obsolete();
            }
        }
        result.map(|_| self.state.get_mut().stats.clone())
    }

    /// Returns the ids of the run extents that moved into the level as is.
    fn commit_runs(&mut self, runs: &[Vec<Arc<Extent>>], snapshot_seq: u64) -> Result<Vec<u64>> {
        let inner = self.db.inner.clone();
        inner.check_open()?;
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let files: Vec<u64> = runs.iter().flatten().map(|e| e.meta.file_number).collect();
        inner.versions.space().sync_files(&files)?;
        let (lo, hi) =
            key_range(runs).ok_or_else(|| Error::InvalidArgument("empty ingest".into()))?;
        // The compaction turn: no other job changes the last level meanwhile.
        {
            let mut st = inner.state.lock();
            loop {
                if let Some(e) = st.bg_error.clone() {
                    return Err(Error::Background(Arc::new(e)));
                }
                if !st.compaction_running {
                    break;
                }
                inner.bg_cv.wait_for(&mut st, Duration::from_millis(20));
            }
            st.compaction_running = true;
        }
        if let Err(e) = older_range_tombstone(&inner, self.cf, &lo, &hi, snapshot_seq) {
            inner.state.lock().compaction_running = false;
            inner.bg_cv.notify_all();
            return Err(e);
        }
        let level = inner.opts.num_levels - 1;
        let lower = inner
            .versions
            .current()
            .cfs
            .get(&self.cf)
            .map(|c| c.overlapping(level, &lo, &hi))
            .unwrap_or_default();
        let upper = runs.iter().map(|r| Source::Fresh(r.clone())).collect();
        let merged = run_merge(
            inner.versions.space(),
            spec(&inner, self.cf, upper, lower, level, 0),
        )
        .and_then(|r| {
            inner.versions.space().sync_files(&r.files_written)?;
            // Value-file records the merge dropped, before the edit (as a compaction).
            crate::blob::note_dead(&inner, std::iter::once(&r))?;
            Ok(r)
        });
        let mut st = inner.state.lock();
        st.compaction_running = false;
        let r = match merged {
            Ok(r) => r,
            Err(e) => {
                inner.bg_cv.notify_all();
                return Err(e);
            }
        };
        let mut edit = VersionEdit::default();
        add_to_edit(&mut edit, self.cf, &r);
        inner.stats.record_merge(&r, false);
        edit.lifetime_counters = Some(inner.stats.lifetime(&inner.visible_sequence));
        if let Err(e) = inner.versions.log_and_apply(edit) {
            release_all(&inner, std::slice::from_ref(&r));
            drop(st);
            return job_failed(&inner, e);
        }
        install_super_version(&inner, &st);
        inner.bg_cv.notify_all();
        drop(st);
        self.state.get_mut().stats.bytes_rewritten = r.bytes_written;
        let fresh: Vec<u64> = runs.iter().flatten().map(|e| e.meta.id).collect();
        Ok(r.added
            .iter()
            .map(|(_, m)| m.id)
            .filter(|id| fresh.contains(id))
            .collect())
    }
}

impl Drop for IngestBuilder {
    fn drop(&mut self) {
        for run in &self.state.get_mut().runs {
            discard(run);
        }
    }
}

/// Joins runs whose key ranges do not meet into one sorted run, so that a
/// parallel writer's key-disjoint runs move into the level as one (a merge
/// of several upper runs rewrites them all). Runs that overlap stay apart.
fn coalesce_disjoint(mut runs: Vec<Vec<Arc<Extent>>>) -> Vec<Vec<Arc<Extent>>> {
    let bounds = |r: &Vec<Arc<Extent>>| {
        (
            r.first()
                .map(|e| e.meta.smallest.clone())
                .unwrap_or_default(),
            r.last().map(|e| e.meta.largest.clone()).unwrap_or_default(),
        )
    };
    runs.sort_by_key(|r| bounds(r).0);
    let disjoint = runs
        .windows(2)
        .all(|w| matches!(w, [a, b] if bounds(a).1 < bounds(b).0));
    if disjoint && runs.len() > 1 {
        vec![runs.into_iter().flatten().collect()]
    } else {
        runs
    }
}

/// Frees the slots of extents no version names.
fn discard(run: &[Arc<Extent>]) {
    for e in run {
        e.mark_obsolete();
    }
}

/// Refuses an ingest whose range meets a range tombstone at or below the
/// snapshot: the caller believed keys there had values at the snapshot, yet
/// the tombstone would hide every entry at sequence 0 beneath it (a newer
/// tombstone is a legitimate later delete). Caller holds the compaction
/// turn, so the levels do not change meanwhile.
fn older_range_tombstone(
    inner: &super::DbInner,
    cf: CfId,
    lo: &[u8],
    hi: &[u8],
    snapshot_seq: u64,
) -> Result<()> {
    let sv = inner.sv.get();
    let cfs = sv
        .cfs
        .get(&cf)
        .ok_or_else(|| Error::ColumnFamilyNotFound(cf.to_string()))?;
    let mut tombs = Vec::new();
    for mem in std::iter::once(&cfs.mem).chain(cfs.imm.iter()) {
        tombs.extend(mem.range_tombstones());
    }
    let v = &cfs.version;
    let extents =
        v.l0.iter()
            .flat_map(|r| r.extents.iter())
            .chain(v.levels.iter().flatten());
    for e in extents {
        if e.meta.num_range_deletions > 0 && e.meta.overlaps(lo, hi) {
            tombs.extend(e.reader(false)?.range_tombstones()?);
        }
    }
    match tombs
        .iter()
        .find(|(b, e, seq)| *seq <= snapshot_seq && b.as_slice() <= hi && lo < e.as_slice())
    {
        Some((b, e, seq)) => Err(Error::InvalidArgument(format!(
            "ingest range meets a range tombstone [{b:02x?}, {e:02x?}) at sequence {seq}, \
             not newer than the snapshot"
        ))),
        None => Ok(()),
    }
}

fn key_range(runs: &[Vec<Arc<Extent>>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let all = runs.iter().flatten();
    let lo = all.clone().map(|e| &e.meta.smallest).min()?.clone();
    let hi = all.map(|e| &e.meta.largest).max()?.clone();
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::Options;

    fn open(dir: &std::path::Path) -> Db {
        Db::open(dir, Options::default()).unwrap()
    }

    #[test]
    fn unsorted_run_is_refused_and_frees_its_slots() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let ing = db.ingest_behind(0).unwrap();
        let err = ing
            .add_run([(&b"b"[..], &b"1"[..]), (b"a", b"2")])
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        let err = ing
            .add_run([(&b"a"[..], &b"1"[..]), (b"a", b"2")])
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert!(ing.state.lock().runs.is_empty());
    }

    #[test]
    fn snapshot_of_another_database_is_refused() {
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (open(d1.path()), open(d2.path()));
        let ing = a.ingest_behind(0).unwrap();
        ing.add_run([(&b"k"[..], &b"v"[..])]).unwrap();
        let err = ing.commit(&b.snapshot()).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert_eq!(a.get(b"k").unwrap(), None);
    }

    #[test]
    fn unknown_column_family_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        assert!(matches!(
            db.ingest_behind(77),
            Err(Error::ColumnFamilyNotFound(_))
        ));
    }
}
