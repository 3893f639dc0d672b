//! The scan loop of one partition of a parallel aggregate (`parallel.rs`),
//! with the per-row costs cut (docs/tables.md, "Aggregate pushdown"):
//!
//! - a row decodes into one buffer reused for every row of the partition,
//!   only the columns the query reads, strings into the allocation their
//!   slot already holds ([`RowDecoder`]);
//! - an entry of a covering secondary index decodes only the columns read
//!   from its memcomparable key (no lookup of the row);
//! - a WHERE conjunct that the key range already guarantees is not
//!   evaluated per row ([`residual_filters`]); integer comparisons run
//!   compiled (`fastpred.rs`);
//! - an aggregate of only COUNT(*) whose rows need no filter counts the
//!   entries without decoding them.

use crate::access::{self, AccessPath};
use crate::aggregate::Groups;
use crate::catalog::{IndexDef, TableDef};
use crate::error::{Error, Result};
use crate::expr::{AggFunc, BExpr, BinOp, EvalCx};
use crate::fastpred::{Pred, Truth};
use crate::keycodec;
use crate::rowcodec;
use crate::select::SelectPlan;
use crate::types::{Datum, SqlType};
use shaledb::DbIterator;
use std::sync::atomic::{AtomicBool, Ordering};

/// The current schema version and its decode layout (reading the
/// `needed` columns), when that version's columns are the table's columns
/// in order: rows of that version decode in place; `None` otherwise.
pub(crate) fn current_layout(
    def: &TableDef,
    needed: Option<&[bool]>,
) -> Option<(u32, rowcodec::RowLayout)> {
    let current = def.current_version();
    let same_columns = def
        .versions
        .iter()
        .find(|v| v.version == current)
        .is_some_and(|v| v.columns.iter().eq(def.columns.iter().map(|c| &c.id)));
    same_columns.then(|| {
        let types = def.columns.iter().map(|c| &c.ty).collect::<Vec<_>>();
        (current, rowcodec::RowLayout::new(&types, needed))
    })
}

/// Decodes primary-index rows into a reused buffer.
pub struct RowDecoder<'a> {
    def: &'a TableDef,
    needed: Option<&'a [bool]>,
    /// The current schema version and its decode plan, when its columns
    /// are the table's columns in order (rows of that version decode in
    /// place); other versions go through `TableDef::decode_row_projected`.
    fast: Option<(u32, rowcodec::RowLayout)>,
}

impl<'a> RowDecoder<'a> {
    pub fn new(def: &'a TableDef, needed: Option<&'a [bool]>) -> Self {
        let fast = current_layout(def, needed);
        RowDecoder { def, needed, fast }
    }

    /// Decodes `bytes` into `row` (resized to the table's width).
    pub fn decode(&self, bytes: &[u8], row: &mut Vec<Datum>) -> Result<()> {
        if let Some((version, layout)) = &self.fast {
            if rowcodec::version_of(bytes) == Some(*version) {
                row.resize(self.def.columns.len(), Datum::Null);
                return layout.decode(bytes, row).ok_or_else(|| Error::RowCorrupt {
                    table: self.def.qualified(),
                    reason: "bad row encoding".into(),
                });
            }
        }
        *row = self.def.decode_row_projected(bytes, self.needed)?;
        Ok(())
    }
}

/// Decodes the columns a query reads from entries of a covering index
/// (its columns from the key, the primary key's from the pk part).
pub struct EntryDecoder<'a> {
    def: &'a TableDef,
    index: &'a IndexDef,
    /// Index columns in key order: (position in the row, type, read,
    /// descending).
    columns: Vec<(usize, &'a SqlType, bool, bool)>,
    /// Primary-key columns, likewise; empty if none is read.
    pk: Vec<(usize, &'a SqlType, bool, bool)>,
}

impl<'a> EntryDecoder<'a> {
    pub fn new(def: &'a TableDef, index: &'a IndexDef, needed: Option<&[bool]>) -> Result<Self> {
        let read = |p: usize| needed.is_none_or(|n| n.get(p).copied().unwrap_or(true));
        let cols = |ix: &IndexDef| -> Result<Vec<(usize, &'a SqlType, bool, bool)>> {
            let mut out = Vec::new();
            for (i, id) in ix.columns.iter().enumerate() {
                let p = def.position_of_id(*id).ok_or_else(|| Error::RowCorrupt {
                    table: def.qualified(),
                    reason: format!("index {} names an unknown column", ix.name),
                })?;
                let c = def.columns.get(p).ok_or_else(|| Error::RowCorrupt {
                    table: def.qualified(),
                    reason: "column out of range".into(),
                })?;
                out.push((p, &c.ty, read(p), ix.desc_at(i)));
            }
            Ok(out)
        };
        let columns = cols(index)?;
        let mut pk = Vec::new();
        if !def.hidden_pk {
            if let Some(p) = def.primary() {
                // Lifetimes: `def.primary()` borrows `def` for 'a.
                let p: &'a IndexDef = p;
                pk = cols(p)?;
            }
        }
        if !pk.iter().any(|c| c.2) {
            pk.clear();
        }
        Ok(EntryDecoder {
            def,
            index,
            columns,
            pk,
        })
    }

    /// Decodes the entry `key -> value` into `row` (the table's width;
    /// columns not read are left as they are: NULL from the start).
    pub fn decode(&self, key: &[u8], value: &[u8], row: &mut Vec<Datum>) -> Result<()> {
        let n = self.def.columns.len();
        if row.len() != n {
            row.clear();
            row.resize(n, Datum::Null);
        }
        self.decode_inner(key, value, row)
            .ok_or_else(|| Error::RowCorrupt {
                table: self.def.qualified(),
                reason: format!("bad entry in index {}", self.index.name),
            })
    }

    fn decode_inner(&self, key: &[u8], value: &[u8], row: &mut [Datum]) -> Option<()> {
        let mut rest = key.get(4..)?;
        for (pos, ty, read, desc) in &self.columns {
            let (v, r) = keycodec::decode_dir(rest, ty, *desc)?;
            if *read {
                *row.get_mut(*pos)? = v;
            }
            rest = r;
        }
        if self.pk.is_empty() {
            return Some(());
        }
        // Unique form: the pk part is the value; else it ends the key.
        let mut rest = if value.is_empty() { rest } else { value };
        for (pos, ty, read, desc) in &self.pk {
            let (v, r) = keycodec::decode_dir(rest, ty, *desc)?;
            if *read {
                *row.get_mut(*pos)? = v;
            }
            rest = r;
        }
        Some(())
    }
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::LtEq => BinOp::GtEq,
        BinOp::Gt => BinOp::Lt,
        BinOp::GtEq => BinOp::LtEq,
        other => other,
    }
}

/// The path and the position of the integer column whose range it reads,
/// if its key range can guarantee conjuncts ([`residual_filters`]): no
/// equality prefix, the index's first column an integer. Otherwise every
/// conjunct stays, and a caller need not list them.
pub fn range_column<'p>(
    def: &TableDef,
    path: Option<&'p AccessPath>,
) -> Option<(&'p AccessPath, usize)> {
    let path = path.filter(|p| p.eq.is_empty())?;
    let ix = def.indexes.get(path.index)?;
    // The first resolvable column, as `TableDef::index_positions` lists
    // them (without collecting the list).
    let col = ix.columns.iter().find_map(|id| def.position_of_id(*id))?;
    let cdef = def.columns.get(col)?;
    matches!(cdef.ty, SqlType::Int { .. }).then_some((path, col))
}

/// The conjuncts among `filters` that the scan's key range does not
/// already guarantee, for a single-table plan (column positions are table
/// positions). A conjunct `col op value` on the first column of the path's
/// index is guaranteed when the path has no equality prefix, the column is
/// an integer (its key order is its SQL order), and the range was bounded
/// by the same value and inclusiveness, the value converting exactly (as
/// `access::key_range` bounds it). An upper bound alone leaves the NULL
/// entries (which sort first) in the range, so it guarantees the conjunct
/// only for a NOT NULL column. `col BETWEEN a AND b` is guaranteed when
/// the range is `[a, b]` on both ends.
pub fn residual_filters<'p>(
    def: &TableDef,
    path: Option<&AccessPath>,
    filters: impl Iterator<Item = &'p BExpr>,
    cx: &EvalCx<'_>,
) -> Result<Vec<&'p BExpr>> {
    let filters: Vec<&BExpr> = filters.collect();
    let Some((path, col)) = range_column(def, path) else {
        return Ok(filters);
    };
    let Some(cdef) = def.columns.get(col) else {
        return Ok(filters);
    };
    let convert = |e: &BExpr| -> Result<Option<Datum>> {
        let v = e.eval(&[], cx)?;
        Ok(if v.is_null() {
            None
        } else {
            access::exact(&v, &cdef.ty)
        })
    };
    let bound = |b: &Option<(BExpr, bool)>| -> Result<Option<(Datum, bool)>> {
        Ok(match b {
            Some((e, incl)) => convert(e)?.map(|v| (v, *incl)),
            None => None,
        })
    };
    let lo = bound(&path.lo)?;
    let hi = bound(&path.hi)?;
    let constant = |e: &BExpr| e.max_column().is_none() && !e.has_agg_or_subquery();
    let mut out = Vec::new();
    for f in filters {
        let side = match f {
            BExpr::Binary(op, a, b) => match (a.as_ref(), b.as_ref()) {
                (BExpr::Col(c), v) if *c == col && constant(v) => Some((*op, v)),
                (v, BExpr::Col(c)) if *c == col && constant(v) => Some((flip(*op), v)),
                _ => None,
            },
            _ => None,
        };
        if let BExpr::Between(x, a, b, false) = f {
            // `col BETWEEN a AND b`: both ends must be the range's.
            if matches!(x.as_ref(), BExpr::Col(c) if *c == col) && constant(a) && constant(b) {
                let from = convert(a)?.map(|d| (d, true));
                let to = convert(b)?.map(|d| (d, true));
                if lo.is_some() && hi.is_some() && from == lo && to == hi {
                    continue;
                }
            }
            out.push(f);
            continue;
        }
        let implied = match side {
            Some((op, v)) => {
                let want = |incl: bool| -> Result<Option<(Datum, bool)>> {
                    Ok(convert(v)?.map(|d| (d, incl)))
                };
                let lower_known = lo.is_some() || !cdef.nullable;
                match op {
                    BinOp::Gt => lo.is_some() && want(false)? == lo,
                    BinOp::GtEq => lo.is_some() && want(true)? == lo,
                    BinOp::Lt => hi.is_some() && lower_known && want(false)? == hi,
                    BinOp::LtEq => hi.is_some() && lower_known && want(true)? == hi,
                    _ => false,
                }
            }
            None => false,
        };
        if !implied {
            out.push(f);
        }
    }
    Ok(out)
}

/// Whether the plan's answer needs nothing but the number of rows: no
/// GROUP BY, only COUNT(*), and no column read after grouping (a
/// non-aggregated column in the select list takes the first row's value).
pub fn count_only(plan: &SelectPlan) -> bool {
    let no_column = |e: &BExpr| e.max_column().is_none();
    plan.group_by.is_empty()
        && !plan.aggs.is_empty()
        && plan.aggs.iter().all(|a| a.func == AggFunc::CountStar)
        && plan.projection.iter().all(|c| no_column(&c.expr))
        && plan.having.as_ref().is_none_or(no_column)
        && plan.order_by.iter().all(|(e, _)| no_column(e))
}

/// How a partition's entries become rows.
pub enum Source<'a> {
    /// Primary-index rows.
    Rows(RowDecoder<'a>),
    /// Covering secondary-index entries.
    Entries(EntryDecoder<'a>),
    /// Only the number of entries matters.
    Count,
}

/// A conjunct to evaluate per row, with its compiled form if it has one.
pub type Filter<'p> = (Option<Pred>, &'p BExpr);

/// `filters` with the compiled form of each that has one (`fastpred.rs`).
pub fn compile_filters<'p>(def: &TableDef, filters: &[&'p BExpr]) -> Vec<Filter<'p>> {
    filters
        .iter()
        .map(|f| (Pred::compile(f, def), *f))
        .collect()
}

/// Feeds every entry of `it` (positioned on the first) to the partial
/// groups of `plan`, checking `interrupt` every 1024 entries.
pub fn feed_partition(
    plan: &SelectPlan,
    source: &Source<'_>,
    filters: &[Filter<'_>],
    it: &mut DbIterator,
    cx: &EvalCx<'_>,
    interrupt: Option<&AtomicBool>,
) -> Result<Groups> {
    let mut acc = Groups::default();
    let mut row: Vec<Datum> = vec![Datum::Null; plan.width];
    let mut n = 0u32;
    let mut counted = 0i64;
    while it.valid() {
        n = n.wrapping_add(1);
        if n.is_multiple_of(1024) && interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(Error::Interrupted);
        }
        let decoded = match source {
            Source::Count => {
                counted += 1;
                false
            }
            Source::Rows(d) => {
                d.decode(it.value(), &mut row)?;
                true
            }
            Source::Entries(d) => {
                d.decode(it.key(), it.value(), &mut row)?;
                true
            }
        };
        if decoded && passes(filters, &row, cx)? {
            if plan.group_by.is_empty() {
                acc.feed_ungrouped(&plan.aggs, &row, cx)?;
            } else {
                acc.feed(&plan.group_by, &plan.aggs, &row, &|e| e.eval(&row, cx))?;
            }
        }
        it.next()?;
    }
    if let Some(e) = it.status() {
        return Err(Error::Engine(e.clone()));
    }
    acc.count_rows(&plan.aggs, &row, counted);
    Ok(acc)
}

fn passes(filters: &[Filter<'_>], row: &[Datum], cx: &EvalCx<'_>) -> Result<bool> {
    for (fast, f) in filters {
        let truth = fast.as_ref().map_or(Truth::Unknown, |p| p.eval(row));
        let pass = match truth {
            Truth::True => true,
            Truth::Fails => false,
            Truth::Unknown => f.eval(row, cx)?.truth() == Some(true),
        };
        if !pass {
            return Ok(false);
        }
    }
    Ok(true)
}
