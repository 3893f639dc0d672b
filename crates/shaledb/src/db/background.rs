//! Background work: flushing frozen memtables and compacting levels.
//!
//! Two threads: `shale-flush` takes the oldest frozen generation; `shale-compact`
//! runs L0 -> L1 and L(n) -> L(n+1). Only one job at a time may change a column
//! family's L1 (`DbState::l1_busy`); a flush that finds L1 busy (or L0 not
//! empty) writes an L0 run instead of merging into L1 — the only way L0 is used.

use super::{write::set_bg_error, CfId, CfSuper, DbInner, DbState, SuperVersion};
use crate::compaction::{run_merge, MergeResult, MergeSpec, Source};
use crate::error::{Error, Result};
use crate::extent::ExtentBuilderOptions;
use crate::version::{CfVersion, VersionEdit};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Publishes a new super version built from `st` and the current version.
/// Caller holds `state`.
pub(crate) fn install_super_version(inner: &DbInner, st: &DbState) {
    let version = inner.versions.current();
    let mut cfs = std::collections::BTreeMap::new();
    for (id, mem) in &st.active.mems {
        let Some(v) = version.cfs.get(id) else {
            continue;
        };
        let imm = st
            .frozen
            .iter()
            .rev()
            .filter_map(|g| g.mems.get(id).cloned())
            .filter(|m| !m.is_empty())
            .collect();
        cfs.insert(*id, CfSuper::new(mem.clone(), imm, v.clone()));
    }
    inner.sv.install(SuperVersion { cfs, number: 0 });
}

/// Largest number of L0 runs over the column families.
pub(crate) fn max_l0_runs(inner: &DbInner) -> usize {
    inner
        .sv
        .get()
        .cfs
        .values()
        .map(|c| c.version.l0.len())
        .max()
        .unwrap_or(0)
}

pub(super) fn builder_options(inner: &DbInner, level: usize) -> ExtentBuilderOptions {
    let o = &inner.opts;
    ExtentBuilderOptions {
        block_size: o.block_size,
        restart_interval: o.block_restart_interval,
        bloom_bits_per_key: o.bloom_bits_per_key,
        compression: o.compression_for_level(level),
        extent_size: o.extent_size,
    }
}

pub(super) fn spec(
    inner: &Arc<DbInner>,
    cf: CfId,
    upper: Vec<Source>,
    lower: Vec<Arc<crate::version::Extent>>,
    level: usize,
    run: u64,
) -> MergeSpec {
    let inner2 = inner.clone();
    MergeSpec {
        upper,
        lower,
        output_level: u8::try_from(level).unwrap_or(u8::MAX),
        run,
        snapshots: inner.snapshots.sequences(),
        bottommost: level + 1 == inner.opts.num_levels,
        builder: builder_options(inner, level),
        new_extent_id: Arc::new(move || inner2.versions.new_extent_id()),
        filter: inner.compaction_filters.read().get(&cf).map(|f| f.create()),
        force_rewrite: false,
    }
}

pub(super) fn add_to_edit(edit: &mut VersionEdit, cf: u32, r: &MergeResult) {
    edit.deleted
        .extend(r.deleted.iter().map(|(l, id)| (cf, *l, *id)));
    edit.added
        .extend(r.added.iter().map(|(l, m)| (cf, *l, m.clone())));
}

/// Flushes the oldest frozen generation. Returns false if there was none (or
/// another flush runs).
fn flush_oldest(inner: &Arc<DbInner>) -> Result<bool> {
    let (gen, next_log, plans) = {
        let mut st = inner.state.lock();
        if st.flush_running || st.bg_error.is_some() {
            return Ok(false);
        }
        let Some(gen) = st.frozen.front().cloned() else {
            return Ok(false);
        };
        st.flush_running = true;
        let next_log = st
            .frozen
            .get(1)
            .map_or(st.active.wal_number, |g| g.wal_number);
        let version = inner.versions.current();
        let mut plans = Vec::new();
        for (cf, mem) in &gen.mems {
            let Some(cfv) = version.cfs.get(cf) else {
                continue;
            };
            if mem.is_empty() {
                continue;
            }
            let to_l1 = cfv.l0.is_empty() && !st.l1_busy.contains(cf);
            if to_l1 {
                st.l1_busy.insert(*cf);
            }
            plans.push((*cf, mem.clone(), cfv.clone(), to_l1));
        }
        (gen, next_log, plans)
    };
    let result = (|| -> Result<(VersionEdit, Vec<MergeResult>)> {
        let mut edit = VersionEdit {
            log_number: Some(next_log),
            last_sequence: Some(
                gen.mems
                    .values()
                    .map(|m| m.largest_seq())
                    .max()
                    .unwrap_or(0),
            ),
            ..Default::default()
        };
        let mut results = Vec::new();
        for (cf, mem, cfv, to_l1) in &plans {
            let r = if *to_l1 {
                let lower = cfv.level(1).to_vec();
                run_merge(
                    inner.versions.space(),
                    spec(inner, *cf, vec![Source::Mem(mem.clone())], lower, 1, 0),
                )?
            } else {
                let run = inner.versions.new_run();
                run_merge(
                    inner.versions.space(),
                    spec(
                        inner,
                        *cf,
                        vec![Source::Mem(mem.clone())],
                        Vec::new(),
                        0,
                        run,
                    ),
                )?
            };
            add_to_edit(&mut edit, *cf, &r);
            results.push(r);
        }
        let files: Vec<u64> = results
            .iter()
            .flat_map(|r| r.files_written.iter().copied())
            .collect();
        inner.versions.space().sync_files(&files)?;
        crate::blob::note_dead(inner, results.iter())?;
        Ok((edit, results))
    })();
    let mut st = inner.state.lock();
    for (cf, _, _, to_l1) in &plans {
        if *to_l1 {
            st.l1_busy.remove(cf);
        }
    }
    st.flush_running = false;
    let outcome = result.and_then(|(mut edit, results)| {
        // Counted before the edit so that it carries them to the manifest
        // (db/stats.rs, lifetime counters); a failed edit stops the
        // database, so an overcount cannot outlive the process.
        let s = &inner.stats;
        for (r, (_, _, _, to_l1)) in results.iter().zip(plans.iter()) {
            s.flushes.fetch_add(1, Ordering::Relaxed);
            if !to_l1 {
                s.flushes_to_l0.fetch_add(1, Ordering::Relaxed);
            }
            s.record_merge(r, true);
        }
        edit.lifetime_counters = Some(s.lifetime(&inner.visible_sequence));
        match inner.versions.log_and_apply(edit) {
            Ok(_) => Ok(results),
            Err(e) => {
                release_all(inner, &results);
                Err(e)
            }
        }
    });
    match outcome {
        Ok(results) => {
            st.frozen.pop_front();
            install_super_version(inner, &st);
            // The jobs' compaction filters end once their output is
            // installed, before anyone waiting is told (compaction/filter.rs).
            drop(results);
            inner.bg_cv.notify_all();
            drop(st);
            delete_old_wal_segments(inner, next_log);
            Ok(true)
        }
        Err(e) => {
            drop(st);
            job_failed(inner, e)
        }
    }
}

/// A flush or compaction failed: the error becomes the sticky background
/// error (set_bg_error also wakes every waiter).
pub(super) fn job_failed<T>(inner: &DbInner, e: Error) -> Result<T> {
    set_bg_error(inner, e.clone());
    Err(e)
}

pub(super) fn release_all(inner: &DbInner, results: &[MergeResult]) {
    for r in results {
        for (f, s) in &r.slots_written {
            inner.versions.space().release(*f, *s);
        }
    }
}

/// Deletes the segments below `log_number` that no prepared transaction
/// needs: the kept segments stay a suffix of the log, so recovery sees every
/// prepare still unresolved and every later commit or rollback of it.
fn delete_old_wal_segments(inner: &DbInner, log_number: u64) {
    let log_number = inner
        .prepared
        .min_segment()
        .map_or(log_number, |s| s.min(log_number));
    let Ok(names) = inner.fs.list_dir(&inner.dir) else {
        return;
    };
    for name in names {
        if let Some(n) = name
            .strip_suffix(".log")
            .and_then(|n| n.parse::<u64>().ok())
        {
            if n < log_number {
                // A leftover segment is replayed-and-skipped at the next open,
                // never misread: its data is older than log_number.
                let _ = inner.fs.remove_file(&inner.dir.join(&name));
            }
        }
    }
}

/// A compaction the picker chose.
struct Pick {
    cf: u32,
    upper: Vec<Source>,
    lower: Vec<Arc<crate::version::Extent>>,
    output_level: usize,
}

/// Chooses the most urgent compaction; marks L1 busy when the job touches it.
/// Caller holds `state`. `full` asks for pushing everything down (manual).
fn pick(inner: &DbInner, st: &mut DbState, full: bool) -> Option<Pick> {
    let version = inner.versions.current();
    let mut best: Option<(f64, u32, usize)> = None; // (score, cf, from_level)
    for (cf, cfv) in &version.cfs {
        if st.l1_busy.contains(cf) {
            continue;
        }
        let mut consider = |score: f64, level: usize| {
            if score >= 1.0 && best.is_none_or(|(s, _, _)| score > s) {
                best = Some((score, *cf, level));
            }
        };
        if !cfv.l0.is_empty() {
            // L0 exists only under pressure: any run makes it due (score >= 1),
            // rising towards 2 at the slowdown trigger. A level far over its
            // target still goes first, or L1 would grow without bound while
            // every L0 -> L1 merge rewrites all of it.
            let runs = cfv.l0.len() as f64;
            let score = if full {
                100.0
            } else {
                1.0 + runs / inner.opts.l0_slowdown_runs as f64
            };
            consider(score, 0);
        }
        for level in 1..inner.opts.num_levels - 1 {
            let bytes = cfv.level_bytes(level);
            let score = if full {
                if bytes > 0 {
                    1.0 + (inner.opts.num_levels - level) as f64
                } else {
                    0.0
                }
            } else {
                bytes as f64 / inner.opts.level_target(level) as f64
            };
            consider(score, level);
        }
    }
    let (_, cf, from) = best?;
    let cfv: &Arc<CfVersion> = version.cfs.get(&cf)?;
    st.l1_busy.insert(cf);
    if from == 0 {
        let upper: Vec<Source> = cfv
            .l0
            .iter()
            .map(|r| Source::Run {
                level: 0,
                extents: r.extents.clone(),
            })
            .collect();
        let all: Vec<_> = cfv
            .l0
            .iter()
            .flat_map(|r| r.extents.iter().cloned())
            .collect();
        let (lo, hi) = key_range(&all)?;
        let lower = cfv.overlapping(1, &lo, &hi);
        return Some(Pick {
            cf,
            upper,
            lower,
            output_level: 1,
        });
    }
    // A window of consecutive extents from `from`, round-robin over the key space.
    let exts = cfv.level(from);
    let cursor = st
        .compact_cursor
        .get(&(cf, from))
        .cloned()
        .unwrap_or_default();
    let start = exts.partition_point(|e| e.meta.smallest.as_slice() < cursor.as_slice());
    let start = if start >= exts.len() { 0 } else { start };
    let mut window = Vec::new();
    let mut bytes = 0u64;
    let mut lower: Vec<Arc<crate::version::Extent>> = Vec::new();
    for e in exts.get(start..).unwrap_or(&[]) {
        let mut cand = window.clone();
        cand.push(e.clone());
        let (lo, hi) = key_range(&cand)?;
        let cand_lower = cfv.overlapping(from + 1, &lo, &hi);
        let cand_bytes: u64 = cand
            .iter()
            .chain(cand_lower.iter())
            .map(|x| u64::from(x.meta.size))
            .sum();
        if !window.is_empty() && cand_bytes > inner.opts.max_compaction_bytes {
            break;
        }
        window = cand;
        lower = cand_lower;
        bytes = cand_bytes;
    }
    let _ = bytes;
    if let Some(last) = window.last() {
        let mut next = last.meta.largest.clone();
        next.push(0);
        st.compact_cursor.insert((cf, from), next);
    }
    let level = u8::try_from(from).unwrap_or(u8::MAX);
    Some(Pick {
        cf,
        upper: vec![Source::Run {
            level,
            extents: window,
        }],
        lower,
        output_level: from + 1,
    })
}

fn key_range(exts: &[Arc<crate::version::Extent>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = exts.iter().map(|e| &e.meta.smallest).min()?.clone();
    let hi = exts.iter().map(|e| &e.meta.largest).max()?.clone();
    Some((lo, hi))
}

/// Runs one compaction if one is due. Returns false when there was nothing to do.
fn compact_once(inner: &Arc<DbInner>, full: bool) -> Result<bool> {
    let picked = {
        let mut st = inner.state.lock();
        if st.compaction_running || st.bg_error.is_some() {
            return Ok(false);
        }
        let p = pick(inner, &mut st, full);
        if p.is_some() {
            st.compaction_running = true;
        }
        p
    };
    let Some(p) = picked else { return Ok(false) };
    let cf = p.cf;
    run_compaction(
        inner,
        cf,
        spec(inner, cf, p.upper, p.lower, p.output_level, 0),
        true,
    )?;
    Ok(true)
}

/// Runs one compaction whose caller set `compaction_running` (and, with
/// `release_l1`, marked L1 of `cf` busy), installs its edit and hands the
/// turn back. Returns the merge's result once installed; its compaction
/// filter ends only then (compaction/filter.rs).
pub(super) fn run_compaction(
    inner: &Arc<DbInner>,
    cf: CfId,
    spec: MergeSpec,
    release_l1: bool,
) -> Result<MergeResult> {
    let result = run_merge(inner.versions.space(), spec).and_then(|r| {
        inner.versions.space().sync_files(&r.files_written)?;
        crate::blob::note_dead(inner, std::iter::once(&r))?;
        Ok(r)
    });
    let mut st = inner.state.lock();
    if release_l1 {
        st.l1_busy.remove(&cf);
    }
    st.compaction_running = false;
    let outcome = result.and_then(|r| {
        let mut edit = VersionEdit::default();
        add_to_edit(&mut edit, cf, &r);
        // Counted first so the edit carries them (see the flush above).
        inner.stats.compactions.fetch_add(1, Ordering::Relaxed);
        inner.stats.record_merge(&r, false);
        edit.lifetime_counters = Some(inner.stats.lifetime(&inner.visible_sequence));
        match inner.versions.log_and_apply(edit) {
            Ok(_) => Ok(r),
            Err(e) => {
                release_all(inner, std::slice::from_ref(&r));
                Err(e)
            }
        }
    });
    match outcome {
        Ok(mut r) => {
            install_super_version(inner, &st);
            // The job's filter ends after the install (see the flush above).
            drop(std::mem::take(&mut r.filter));
            inner.bg_cv.notify_all();
            drop(st);
            Ok(r)
        }
        Err(e) => {
            inner.bg_cv.notify_all();
            drop(st);
            job_failed(inner, e)
        }
    }
}

/// Starts the flush and compaction threads.
pub(crate) fn spawn(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::new();
    for (name, job) in [
        (
            "shale-flush",
            flush_oldest as fn(&Arc<DbInner>) -> Result<bool>,
        ),
        ("shale-compact", |i: &Arc<DbInner>| compact_once(i, false)),
    ] {
        let inner = inner.clone();
        let t = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || background_loop(&inner, job))
            .map_err(|e| Error::io("spawn thread", name, e))?;
        threads.push(t);
    }
    Ok(threads)
}

fn background_loop(inner: &Arc<DbInner>, job: fn(&Arc<DbInner>) -> Result<bool>) {
    loop {
        if inner.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        match job(inner) {
            Ok(true) => continue,
            Ok(false) | Err(_) => {
                let mut st = inner.state.lock();
                if inner.shutting_down.load(Ordering::SeqCst) {
                    return;
                }
                inner.bg_cv.wait_for(&mut st, Duration::from_millis(200));
            }
        }
    }
}

/// Runs flushes and compactions on this thread until none is due.
pub(crate) fn run_until_idle(inner: &Arc<DbInner>) -> Result<()> {
    loop {
        let flushed = flush_oldest(inner)?;
        let compacted = compact_once(inner, false)?;
        if !flushed && !compacted {
            return Ok(());
        }
    }
}

/// Flushes every frozen generation (used during recovery to bound memory).
pub(crate) fn flush_all_frozen(inner: &Arc<DbInner>) -> Result<()> {
    while flush_oldest(inner)? {}
    Ok(())
}

pub(super) fn check_bg(inner: &DbInner) -> Result<()> {
    match inner.state.lock().bg_error.clone() {
        Some(e) => Err(Error::Background(Arc::new(e))),
        None => Ok(()),
    }
}

/// Freezes the active memtables and waits until every frozen one is flushed.
pub(crate) fn flush_and_wait(inner: &Arc<DbInner>) -> Result<()> {
    check_bg(inner)?;
    {
        let mut wal = super::lone_write::lock_quiet(inner);
        let empty = inner
            .state
            .lock()
            .active
            .mems
            .values()
            .all(|m| m.is_empty());
        if !empty {
            super::write::switch_memtable(inner, &mut wal)?;
        }
    }
    loop {
        if !inner.opts.background_threads {
            flush_all_frozen(inner)?;
        }
        let mut st = inner.state.lock();
        if let Some(e) = st.bg_error.clone() {
            return Err(Error::Background(Arc::new(e)));
        }
        if st.frozen.is_empty() {
            return Ok(());
        }
        inner.bg_cv.notify_all();
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// Flushes, then pushes every level down to the last one.
pub(crate) fn compact_all(inner: &Arc<DbInner>) -> Result<()> {
    flush_and_wait(inner)?;
    loop {
        // Wait for a running background compaction, then take a turn.
        {
            let mut st = inner.state.lock();
            while st.compaction_running {
                inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
            }
        }
        check_bg(inner)?;
        if !compact_once(inner, true)? {
            let st = inner.state.lock();
            let busy = st.compaction_running || !st.l1_busy.is_empty() || st.flush_running;
            drop(st);
            if !busy {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
