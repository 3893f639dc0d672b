//! Aggregate pushdown with a parallel partitioned scan (seed 003: SUM over
//! a filtered scan split into key-range partitions, each returning a
//! partial aggregate).
//!
//! Taken when a statement runs alone in its transaction (autocommit, read
//! only), reads one table through its integer primary key or through a
//! covering secondary index whose first column is an integer (a range or
//! all of it), and every aggregate can be merged (no DISTINCT, no
//! subqueries):
//!
//! ```text
//! SELECT SUM(k), COUNT(*) FROM sbtest1 WHERE c LIKE '1%'     (id INT PRIMARY KEY)
//!   first id 1, last id 1,000,000, 2 partitions:
//!     thread 0: ids [1, 500,001)        -> {sum: s0, count: n0}
//!     thread 1: ids [500,001, 1,000,000] -> {sum: s1, count: n1}
//!   merged: {sum: s0 + s1, count: n0 + n1}
//! ```
//!
//! Every partition reads the same engine snapshot, taken when the
//! statement starts, so the result is that of one serial scan at that
//! moment. Partitions split the value range of the index's first column
//! evenly (the first and last non-NULL key of the range bound it; entries
//! with a NULL there sort first, into the first partition). Each partition
//! runs `scan::feed_partition`.

use crate::access::{self, KeyRange};
use crate::aggregate::Groups;
use crate::catalog::TableDef;
use crate::error::{Error, Result};
use crate::executor::{Executor, Rows};
use crate::expr::{BExpr, EvalCx};
use crate::keycodec;
use crate::scan::{self, EntryDecoder, RowDecoder, Source};
use crate::select::SelectPlan;
use crate::types::{Datum, SqlType};
use shaledb::ReadOptions;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// One partition's key range `[lo, hi)` (`None`: to the end).
pub type Partition = (Vec<u8>, Option<Vec<u8>>);

/// Fewer key values than this per partition is not worth a thread.
const MIN_SPAN_PER_PARTITION: i128 = 4096;

/// Key ranges `[lo, hi)` to scan in parallel, or None for a serial scan.
pub fn partitions(
    ex: &Executor<'_>,
    plan: &SelectPlan,
    first: Option<&Rows>,
) -> Result<Option<Vec<Partition>>> {
    let [t] = plan.tables.as_slice() else {
        return Ok(None);
    };
    let simple = |e: &BExpr| !e.has_agg_or_subquery();
    // A correlated subquery's plan reads the outer row, which the
    // partition threads do not have.
    let eligible = ex.allow_parallel
        && plan.outer_refs.is_empty()
        && first.is_none()
        && plan.lock.is_none()
        && t.virtual_rows.is_none()
        && !t.left
        && t.path
            .as_ref()
            .is_none_or(|p| p.index == 0 || (p.covering && p.eq.is_empty() && !p.reverse))
        && plan
            .aggs
            .iter()
            .all(|a| !a.distinct && a.arg.as_ref().is_none_or(simple))
        && plan.group_by.iter().all(simple)
        && plan.filter.iter().chain(&t.filters).all(simple);
    let threads = cores().min(8);
    if !eligible || threads < 2 {
        return Ok(None);
    }
    let index_pos = t.path.as_ref().map_or(0, |p| p.index);
    // The partitions split the value range of the index's first column.
    let Some(ix) = t.def.indexes.get(index_pos) else {
        return Ok(None);
    };
    if ix.primary && (t.def.hidden_pk || ix.columns.len() != 1) {
        return Ok(None);
    }
    let Some(first_col) = ix.columns.first() else {
        return Ok(None);
    };
    if ix.desc_at(0) {
        // The split below maps values to ascending keys.
        return Ok(None);
    }
    let Some(col) = t.def.columns.iter().find(|c| c.id == *first_col) else {
        return Ok(None);
    };
    let SqlType::Int { .. } = col.ty else {
        return Ok(None);
    };
    let row = vec![Datum::Null; plan.width];
    let KeyRange::Range { lo, hi, .. } = ex.with_cx(&[], |cx| {
        access::key_range(&t.def, t.path.as_ref(), &row, cx)
    })?
    else {
        return Ok(None);
    };
    let value = |k: &[u8]| keycodec::decode(k.get(4..)?, &col.ty).and_then(|(d, _)| d.to_i128());
    // A range bounded on both ends by values (`id BETWEEN ? AND ?`) that
    // is too narrow to split is known without touching the engine.
    if let Some(span) = hi
        .as_deref()
        .and_then(value)
        .zip(value(&lo))
        .map(|(b, a)| b - a)
    {
        if span / MIN_SPAN_PER_PARTITION < 2 {
            return Ok(None);
        }
    }
    // The first and last key in the range bound the values to split.
    let db = ex.cat.engine();
    let ro = ReadOptions {
        snapshot: None,
        lower_bound: Some(lo.clone()),
        upper_bound: hi.clone(),
        ..ReadOptions::default()
    };
    let mut it = db.iter_cf(&ro, ex.cat.data_cf)?;
    it.seek_to_first()?;
    if it.valid() && it.key().get(4) == Some(&0x00) {
        // Entries with a NULL first column sort first: the split starts at
        // the first non-NULL value (the NULLs go to the first partition).
        let mut non_null = crate::index::prefix(ix.id);
        non_null.push(0x01);
        it.seek(&non_null)?;
    }
    let first_key = if it.valid() {
        it.key().to_vec()
    } else {
        return Ok(None);
    };
    it.seek_to_last()?;
    let last_key = if it.valid() {
        it.key().to_vec()
    } else {
        return Ok(None);
    };
    let (Some(a), Some(b)) = (value(&first_key), value(&last_key)) else {
        return Ok(None);
    };
    let span = b - a;
    let parts = i128::try_from(threads)
        .unwrap_or(2)
        .min(span / MIN_SPAN_PER_PARTITION);
    if parts < 2 {
        return Ok(None);
    }
    let mut bounds = vec![lo];
    for i in 1..parts {
        let v = a + span * i / parts;
        let d = if matches!(col.ty, SqlType::Int { unsigned: true, .. }) {
            Datum::UInt(u64::try_from(v).map_err(|_| Error::OutOfRange("partition".into(), 0))?)
        } else {
            Datum::Int(i64::try_from(v).map_err(|_| Error::OutOfRange("partition".into(), 0))?)
        };
        let mut k = crate::index::prefix(ix.id);
        keycodec::encode(&mut k, &d, &col.ty);
        bounds.push(k);
    }
    let mut out = Vec::new();
    for (i, lo) in bounds.iter().enumerate() {
        let hi = bounds.get(i + 1).cloned().or_else(|| hi.clone());
        out.push((lo.clone(), hi));
    }
    Ok(Some(out))
}

/// The cores this process may use, looked up once: `available_parallelism`
/// reads the cgroup's CPU quota from files on each call (a few system calls
/// per statement under sysbench's `SUM` ranges).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Scans `parts` on one thread each and merges their partial groups.
pub fn aggregate(
    ex: &Executor<'_>,
    plan: &SelectPlan,
    parts: &[(Vec<u8>, Option<Vec<u8>>)],
) -> Result<Groups> {
    let t = plan
        .tables
        .first()
        .ok_or_else(|| Error::Syntax("no table".into()))?;
    let def: &TableDef = &t.def;
    let needed = t.needed.as_deref();
    let filters = ex.with_cx(&[], |cx| {
        scan::residual_filters(
            def,
            t.path.as_ref(),
            t.filters.iter().chain(&plan.filter),
            cx,
        )
    })?;
    let index = def
        .indexes
        .get(t.path.as_ref().map_or(0, |p| p.index))
        .ok_or_else(|| Error::RowCorrupt {
            table: def.qualified(),
            reason: "index out of range".into(),
        })?;
    let source = |_: ()| -> Result<Source<'_>> {
        Ok(if filters.is_empty() && scan::count_only(plan) {
            Source::Count
        } else if index.primary {
            Source::Rows(RowDecoder::new(def, needed))
        } else {
            Source::Entries(EntryDecoder::new(def, index, needed)?)
        })
    };
    let snapshot = ex.cat.engine().snapshot();
    let params = ex.params;
    let interrupt = ex.interrupt;
    let cat = ex.cat;
    let filters = &scan::compile_filters(def, &filters);
    let results: Vec<Result<Groups>> = std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .iter()
            .map(|(lo, hi)| {
                let snapshot = snapshot.clone();
                scope.spawn(move || -> Result<Groups> {
                    let no_sub = |_: &SelectPlan, _: &[Datum]| -> Result<Vec<Vec<Datum>>> {
                        Err(Error::Unsupported("subquery in a parallel scan".into()))
                    };
                    let cache = RefCell::new(HashMap::new());
                    let cx = EvalCx {
                        params,
                        aggs: &[],
                        outer: &[],
                        run_subquery: &no_sub,
                        subquery_cache: &cache,
                    };
                    let ro = ReadOptions {
                        snapshot: Some(snapshot),
                        lower_bound: Some(lo.clone()),
                        upper_bound: hi.clone(),
                        // A bulk scan: it must not flush the block cache.
                        cache_priority: shaledb::CachePriority::Low,
                    };
                    let mut it = cat.engine().iter_cf(&ro, cat.data_cf)?;
                    it.seek_to_first()?;
                    scan::feed_partition(plan, &source(())?, filters, &mut it, &cx, interrupt)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Unsupported("a scan thread panicked".into())))
            })
            .collect()
    });
    if let Some(c) = ex.parallel_scans {
        c.fetch_add(1, Ordering::Relaxed);
    }
    let mut total = Groups::default();
    for r in results {
        let part = r?;
        ex.with_cx(&[], |cx| {
            total.merge(part, &plan.group_by, &|e, row| e.eval(row, cx))
        })?;
    }
    Ok(total)
}
