//! SELECT execution (docs/tables.md, "Access paths", "Joins"): nested
//! loops over the tables' access paths (or hash tables, `join.rs`), filters
//! placed at the first table that has their columns, grouping through
//! `aggregate.rs` (in parallel partitions when `parallel.rs` allows), then
//! the sort (skipped when the read order is ORDER BY's, bounded under a
//! LIMIT), DISTINCT and OFFSET/LIMIT. Plans come from `select.rs`.

use crate::access::{self, KeyRange};
use crate::catalog::{Catalog, TableDef};
use crate::error::{Error, Result};
use crate::exec_scratch::ExecScratch;
use crate::expr::{BExpr, EvalCx, SubqueryCache};
use crate::index;
use crate::output::{conform, ColumnMeta};
use crate::result::{Collect, Pipeline, ResultSink, Shape};
use crate::scan::RowDecoder;
use crate::select::SelectPlan;
use crate::sort::{row_bytes, Limits};
use crate::types::{Datum, Decimal};
use shaledb::txn::Txn;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

/// Executes plans inside a transaction.
pub struct Executor<'a> {
    pub cat: &'a Catalog,
    pub txn: &'a Txn,
    pub params: &'a [Datum],
    pub interrupt: Option<&'a AtomicBool>,
    pub subquery_cache: RefCell<SubqueryCache>,
    /// Outer rows of the correlated subqueries being run, innermost last
    /// (`EvalCx::outer`).
    outer_rows: RefCell<Vec<std::rc::Rc<Vec<Datum>>>>,
    /// Hash-join tables built in this statement, by plan address and table
    /// position; `None`: too big, joined by nested loop.
    hash_tables: RefCell<HashMap<(usize, usize), Option<SharedHashTable>>>,
    /// The statement runs alone in its transaction (autocommit, read
    /// only): an aggregate scan may read a fresh snapshot in parallel
    /// partitions instead of going through the transaction.
    pub allow_parallel: bool,
    /// Counts the scans that ran in parallel.
    pub parallel_scans: Option<&'a std::sync::atomic::AtomicU64>,
    /// Memory bounds and the temporary directory (session variables).
    pub limits: Limits,
    /// Row buffers lent by the session for this statement (taken back
    /// with `take`); a nested run (a subquery) finds them taken and
    /// allocates its own.
    pub scratch: RefCell<ExecScratch>,
}

/// What a hash-table entry costs beyond its row and keys (the map slot,
/// the key's and primary key's vectors), as `join_buffer_size` counts it.
const HASH_ENTRY_BYTES: usize = 64;

/// The temporary directory under the data directory (MySQL's `tmpdir`),
/// emptied of run files when the database opens.
pub const TMP_DIR: &str = "tmp";

/// A row source for the first table, replacing its access path (rows
/// already read and locked by UPDATE/DELETE/FOR UPDATE).
pub type Rows = Vec<(Vec<u8>, Vec<Datum>)>;

/// Receives a range's rows (`Executor::read_range`): the primary key and
/// the reused row buffer; false stops.
pub type RangeVisitor<'a> = dyn FnMut(&[u8], &mut Vec<Datum>) -> Result<bool> + 'a;

/// Receives joined rows with their tables' primary keys; false stops.
pub type RowSink<'a> = dyn FnMut(&[Datum], &[Vec<u8>]) -> Result<bool> + 'a;

/// A hash-join table: rows (primary key and values) by join-key.
type HashTable = HashMap<Vec<u8>, Vec<(Vec<u8>, Vec<Datum>)>>;
type SharedHashTable = std::rc::Rc<HashTable>;

/// The state of one nested-loop walk (`Executor::level`): the joined row
/// being built, the primary keys of its tables' rows, where rows go.
struct Level<'p, 's> {
    plan: &'p SelectPlan,
    /// Copy each table's primary key out for the sink (UPDATE, DELETE and
    /// locking reads use them; a SELECT does not).
    want_keys: bool,
    row: &'p mut Vec<Datum>,
    keys: &'p mut Vec<Vec<u8>>,
    sink: &'p mut RowSink<'s>,
}

/// Result columns and rows.
pub type ResultSet = (Vec<ColumnMeta>, Vec<Vec<Datum>>);

impl<'a> Executor<'a> {
    pub fn new(
        cat: &'a Catalog,
        txn: &'a Txn,
        params: &'a [Datum],
        interrupt: Option<&'a AtomicBool>,
    ) -> Self {
        Executor {
            cat,
            txn,
            params,
            interrupt,
            subquery_cache: RefCell::new(HashMap::new()),
            outer_rows: RefCell::new(Vec::new()),
            hash_tables: RefCell::new(HashMap::new()),
            allow_parallel: false,
            parallel_scans: None,
            limits: Limits::default(),
            scratch: RefCell::default(),
        }
    }

    pub fn with_cx<R>(&self, aggs: &[Datum], f: impl FnOnce(&EvalCx<'_>) -> R) -> R {
        let run = |p: &SelectPlan, outer: &[Datum]| self.run_subquery(p, outer);
        let outer = self.outer_rows.borrow().last().cloned();
        let cx = EvalCx {
            params: self.params,
            aggs,
            outer: outer.as_deref().map_or(&[], |v| v.as_slice()),
            run_subquery: &run,
            subquery_cache: &self.subquery_cache,
        };
        f(&cx)
    }

    /// Runs a subquery; a correlated one sees `outer` as the outer row.
    fn run_subquery(&self, plan: &SelectPlan, outer: &[Datum]) -> Result<Vec<Vec<Datum>>> {
        if plan.outer_refs.is_empty() {
            return self.run(plan).map(|(_, rows)| rows);
        }
        self.outer_rows
            .borrow_mut()
            .push(std::rc::Rc::new(outer.to_vec()));
        let r = self.run(plan);
        self.outer_rows.borrow_mut().pop();
        r.map(|(_, rows)| rows)
    }

    pub(crate) fn check_interrupt(&self) -> Result<()> {
        if self
            .interrupt
            .is_some_and(|f| f.load(AtomicOrdering::Relaxed))
        {
            return Err(Error::Interrupted);
        }
        Ok(())
    }

    /// Reads the rows of `def` in `range`, calling `f(pk_key, row)` until
    /// it returns false. Returns false if stopped early. `row` is one
    /// buffer reused for every row of the range (decoded in place, strings
    /// into the allocations its slots hold): `f` may take its values, or
    /// swap them with its own (see `level`), and the next row overwrites
    /// whatever it left.
    pub fn read_range(
        &self,
        def: &TableDef,
        needed: Option<&[bool]>,
        range: &KeyRange,
        f: &mut RangeVisitor<'_>,
    ) -> Result<bool> {
        let cf = self.cat.data_cf;
        match range {
            KeyRange::Empty => Ok(true),
            KeyRange::Point(key) => match self.txn.get_cf(cf, key)? {
                Some(v) => f(key, &mut def.decode_row_projected(&v, needed)?),
                None => Ok(true),
            },
            KeyRange::Range {
                index: ix,
                lo,
                hi,
                covering,
                reverse,
                ..
            } => {
                let index = def.indexes.get(*ix).ok_or_else(|| Error::RowCorrupt {
                    table: def.qualified(),
                    reason: "index out of range".into(),
                })?;
                let bad = || Error::RowCorrupt {
                    table: def.qualified(),
                    reason: format!("bad entry in index {}", index.name),
                };
                let decoder = RowDecoder::new(def, needed);
                let mut row = Vec::new();
                let mut it = self.txn.iter_cf(cf, Some(lo), hi.as_deref())?;
                if *reverse {
                    it.seek_to_last()?;
                } else {
                    it.seek_to_first()?;
                }
                let mut n = 0u32;
                while it.valid() {
                    n = n.wrapping_add(1);
                    if n.is_multiple_of(1024) {
                        self.check_interrupt()?;
                    }
                    let go = if index.primary {
                        decoder.decode(it.value(), &mut row)?;
                        f(it.key(), &mut row)?
                    } else if *covering {
                        row = index::covering_row(def, index, it.key(), it.value())
                            .ok_or_else(bad)?;
                        let pk =
                            index::pk_of_entry(def, index, it.key(), it.value()).ok_or_else(bad)?;
                        f(&index::pk_key(def, &pk), &mut row)?
                    } else {
                        let pk =
                            index::pk_of_entry(def, index, it.key(), it.value()).ok_or_else(bad)?;
                        let key = index::pk_key(def, &pk);
                        let bytes =
                            self.txn
                                .get_cf(cf, &key)?
                                .ok_or_else(|| Error::RowCorrupt {
                                    table: def.qualified(),
                                    reason: format!("index {} names a missing row", index.name),
                                })?;
                        decoder.decode(&bytes, &mut row)?;
                        f(&key, &mut row)?
                    };
                    if !go {
                        return Ok(false);
                    }
                    if *reverse {
                        it.prev()?;
                    } else {
                        it.next()?;
                    }
                }
                if let Some(e) = it.status() {
                    return Err(Error::Engine(e.clone()));
                }
                Ok(true)
            }
        }
    }

    /// The hash table of `plan`'s table `i` (built on first use), or
    /// `None` if it is not hash-joined or has too many rows.
    fn hash_table(&self, plan: &SelectPlan, i: usize) -> Result<Option<SharedHashTable>> {
        let Some(t) = plan.tables.get(i) else {
            return Ok(None);
        };
        let Some(h) = &t.hash else {
            return Ok(None);
        };
        let id = (plan as *const SelectPlan as usize, i);
        if let Some(built) = self.hash_tables.borrow().get(&id) {
            return Ok(built.clone());
        }
        let range = self.with_cx(&[], |cx| access::key_range(&t.def, None, &[], cx))?;
        let mut table = HashTable::new();
        let mut bytes = 0usize;
        let complete = self.read_range(&t.def, t.needed.as_deref(), &range, &mut |k, r| {
            let (k, r) = (k.to_vec(), std::mem::take(r));
            let key: Vec<Datum> = h
                .inner
                .iter()
                .map(|c| r.get(*c).cloned().unwrap_or(Datum::Null))
                .collect();
            if !key.iter().any(Datum::is_null) {
                let key = group_key(&key);
                bytes += row_bytes(&r) + k.len() + key.len() + HASH_ENTRY_BYTES;
                table.entry(key).or_default().push((k, r));
            }
            Ok(bytes <= self.limits.join_buffer)
        })?;
        let built = complete.then(|| std::rc::Rc::new(table));
        self.hash_tables.borrow_mut().insert(id, built.clone());
        Ok(built)
    }

    /// Whether the first table's range, as evaluated now, reads its rows in
    /// index order (see `KeyRange::Range::ordered`).
    fn first_range_ordered(&self, plan: &SelectPlan) -> Result<bool> {
        let Some(t) = plan.tables.first() else {
            return Ok(false);
        };
        let row = vec![Datum::Null; plan.width];
        let range = self.with_cx(&[], |cx| {
            access::key_range(&t.def, t.path.as_ref(), &row, cx)
        })?;
        Ok(match range {
            KeyRange::Range { ordered, .. } => ordered,
            KeyRange::Empty | KeyRange::Point(_) => true,
        })
    }

    /// Streams joined rows passing every WHERE conjunct, with the primary
    /// keys of each table's row (empty for a NULL-extended one).
    pub fn for_each_row(
        &self,
        plan: &SelectPlan,
        first: Option<&Rows>,
        sink: &mut RowSink<'_>,
    ) -> Result<()> {
        self.rows(plan, first, true, sink)
    }

    /// As [`Self::for_each_row`] for a sink that ignores the primary keys
    /// (they are not copied out of the iterator: one allocation less per
    /// row of a SELECT).
    pub fn for_each_row_values(
        &self,
        plan: &SelectPlan,
        first: Option<&Rows>,
        sink: &mut dyn FnMut(&[Datum]) -> Result<bool>,
    ) -> Result<()> {
        self.rows(plan, first, false, &mut |row, _| sink(row))
    }

    fn rows(
        &self,
        plan: &SelectPlan,
        first: Option<&Rows>,
        want_keys: bool,
        sink: &mut RowSink<'_>,
    ) -> Result<()> {
        let mut row = std::mem::take(&mut self.scratch.borrow_mut().row);
        row.clear();
        row.resize(plan.width, Datum::Null);
        let mut keys = Vec::with_capacity(plan.tables.len());
        let mut cx = Level {
            plan,
            want_keys,
            row: &mut row,
            keys: &mut keys,
            sink,
        };
        let r = self.level(&mut cx, 0, first);
        row.clear();
        self.scratch.borrow_mut().row = row;
        r.map(|_| ())
    }

    pub(crate) fn passes(&self, conds: &[BExpr], row: &[Datum]) -> Result<bool> {
        for c in conds {
            if self.with_cx(&[], |cx| c.eval(row, cx))?.truth() != Some(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn passes_refs(&self, conds: &[&BExpr], row: &[Datum]) -> Result<bool> {
        for c in conds {
            if self.with_cx(&[], |cx| c.eval(row, cx))?.truth() != Some(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The nested loop at table `i` of the plan: each of its rows (from
    /// `first` for the first table if given, its virtual rows, its hash
    /// table, or its access path) goes into `cx.row` and on to the next
    /// table; past the last table, the WHERE conjuncts left and the sink.
    fn level(&self, cx: &mut Level<'_, '_>, i: usize, first: Option<&Rows>) -> Result<bool> {
        let plan = cx.plan;
        let Some(t) = plan.tables.get(i) else {
            if !self.passes(&plan.filter, cx.row)? {
                return Ok(true);
            }
            return (cx.sink)(cx.row, cx.keys);
        };
        let n = t.def.columns.len();
        // A lone table read by its access path skips the conjuncts its key
        // range already guarantees (`id BETWEEN ? AND ?` on the primary
        // key): positions are table positions when it is the only table.
        // None: every conjunct stays (no list is built: a point select's
        // path has an equality prefix, which guarantees none).
        let residual: Option<Vec<&BExpr>> = if plan.tables.len() == 1
            && first.is_none()
            && t.virtual_rows.is_none()
            && t.hash.is_none()
            && crate::scan::range_column(&t.def, t.path.as_ref()).is_some()
        {
            Some(self.with_cx(&[], |ecx| {
                crate::scan::residual_filters(&t.def, t.path.as_ref(), t.filters.iter(), ecx)
            })?)
        } else {
            None
        };
        let mut matched = false;
        let mut visit =
            |key: &[u8], trow: &mut Vec<Datum>, cx: &mut Level<'_, '_>| -> Result<bool> {
                // Swapped, not copied: the row buffer keeps the last row's
                // values, whose allocations the next decode reuses.
                for (slot, v) in cx
                    .row
                    .iter_mut()
                    .skip(t.offset)
                    .take(n)
                    .zip(trow.iter_mut())
                {
                    std::mem::swap(slot, v);
                }
                if let Some(on) = &t.on {
                    if self.with_cx(&[], |ecx| on.eval(cx.row, ecx))?.truth() != Some(true) {
                        return Ok(true);
                    }
                }
                matched = true;
                let passed = match &residual {
                    Some(conds) => self.passes_refs(conds, cx.row)?,
                    None => self.passes(&t.filters, cx.row)?,
                };
                if !passed {
                    return Ok(true);
                }
                cx.keys.push(if cx.want_keys {
                    key.to_vec()
                } else {
                    Vec::new()
                });
                let go = self.level(cx, i + 1, None)?;
                cx.keys.pop();
                Ok(go)
            };
        let go = match (i, first) {
            (0, Some(rows)) => {
                let mut go = true;
                for (k, r) in rows {
                    if !visit(k, &mut r.clone(), cx)? {
                        go = false;
                        break;
                    }
                }
                go
            }
            _ if t.virtual_rows.is_some() => {
                let mut go = true;
                for r in t.virtual_rows.iter().flat_map(|v| v.iter()) {
                    if !visit(&[], &mut r.clone(), cx)? {
                        go = false;
                        break;
                    }
                }
                go
            }
            _ => match (&t.hash, self.hash_table(plan, i)?) {
                (Some(h), Some(table)) => {
                    let key: Vec<Datum> = h
                        .outer
                        .iter()
                        .map(|c| cx.row.get(*c).cloned().unwrap_or(Datum::Null))
                        .collect();
                    let mut go = true;
                    // A NULL key equals nothing.
                    if !key.iter().any(Datum::is_null) {
                        for (k, r) in table.get(&group_key(&key)).into_iter().flatten() {
                            if !visit(k, &mut r.clone(), cx)? {
                                go = false;
                                break;
                            }
                        }
                    }
                    go
                }
                _ => {
                    let range = self.with_cx(&[], |ecx| {
                        access::key_range(&t.def, t.path.as_ref(), cx.row, ecx)
                    })?;
                    self.read_range(&t.def, t.needed.as_deref(), &range, &mut |k, r| {
                        visit(k, r, cx)
                    })?
                }
            },
        };
        if !go {
            return Ok(false);
        }
        if t.left && !matched {
            for slot in cx.row.iter_mut().skip(t.offset).take(n) {
                *slot = Datum::Null;
            }
            if !self.passes(&t.filters, cx.row)? {
                return Ok(true);
            }
            cx.keys.push(Vec::new());
            let go = self.level(cx, i + 1, None)?;
            cx.keys.pop();
            return Ok(go);
        }
        Ok(true)
    }

    /// Runs a SELECT: its column metadata and rows.
    pub fn run(&self, plan: &SelectPlan) -> Result<ResultSet> {
        self.run_with(plan, None)
    }

    pub fn run_with(&self, plan: &SelectPlan, first: Option<&Rows>) -> Result<ResultSet> {
        let mut c = Collect::default();
        self.stream(plan, first, &mut c)?;
        Ok(c.finish())
    }

    /// The directory run files go to (`tmpdir`).
    pub fn tmpdir(&self) -> PathBuf {
        self.limits
            .tmpdir
            .clone()
            .unwrap_or_else(|| self.cat.engine().path().join(TMP_DIR))
    }

    fn pipeline<'s>(
        &self,
        plan: &SelectPlan,
        sorted: bool,
        columns: std::borrow::Cow<'s, [ColumnMeta]>,
        plain: bool,
        sink: &'s mut dyn ResultSink,
    ) -> Result<Pipeline<'a, 's>> {
        let desc = if sorted {
            Vec::new()
        } else {
            plan.order_by.iter().map(|(_, d)| *d).collect()
        };
        let runs = !desc.is_empty() || plan.distinct || (sink.streaming() && !plain);
        let shape = Shape {
            columns,
            desc,
            distinct: plan.distinct,
            offset: plan.offset,
            limit: plan.limit,
            plain,
            sort_buffer: self.limits.sort_buffer,
            // Only a sorter writes run files: a direct pipeline (what
            // Pipeline::new picks for this shape) leaves the path unbuilt
            // (a `Path::join` per point select otherwise).
            tmpdir: if runs { self.tmpdir() } else { PathBuf::new() },
            interrupt: self.interrupt,
        };
        Pipeline::new(shape, sink)
    }

    /// Runs a SELECT, handing its columns and rows to `sink` (rows of a
    /// spilled sort stream out of the merge; see `result.rs`).
    pub fn stream(
        &self,
        plan: &SelectPlan,
        first: Option<&Rows>,
        sink: &mut dyn ResultSink,
    ) -> Result<()> {
        if !plan.unions.is_empty() {
            return self.run_union(plan, sink);
        }
        if first.is_none() && self.point_select(plan, sink)? {
            return Ok(());
        }
        let sorted = plan.ordered && first.is_none() && self.first_range_ordered(plan)?;
        let columns = std::borrow::Cow::Borrowed(plan.columns());
        // Values of plain table columns always fit their declared types.
        let plain = !plan.aggregate
            && plan
                .projection
                .iter()
                .all(|c| matches!(c.expr, BExpr::Col(_)) && !c.meta.org_name.is_empty());
        let mut out = self.pipeline(plan, sorted, columns, plain, sink)?;
        if plan.aggregate {
            self.aggregate(plan, first, &mut out)?;
        } else if plan.tables.is_empty() {
            let row: Vec<Datum> = Vec::new();
            if self.passes(&plan.filter, &row)? {
                let (keys, vals) = self.project(plan, &row, &[])?;
                out.push(keys, vals)?;
            }
        } else {
            // One pair of buffers for every row: a direct pipeline hands
            // them to the sink by reference (no allocation per row). The
            // values' buffer is the session's (project_into overwrites
            // each of its slots).
            let mut keys = Vec::new();
            let mut vals = std::mem::take(&mut self.scratch.borrow_mut().vals);
            let r = self.for_each_row_values(plan, first, &mut |row| {
                self.project_into(plan, row, &[], &mut keys, &mut vals)?;
                out.push_ref(&keys, &vals)
            });
            self.scratch.borrow_mut().vals = vals;
            r?;
        }
        out.finish()
    }

    fn run_union(&self, plan: &SelectPlan, sink: &mut dyn ResultSink) -> Result<()> {
        let mut columns = None;
        let mut rows: Vec<Vec<Datum>> = Vec::new();
        for (arm, all) in &plan.unions {
            let (cols, r) = self.run(arm)?;
            if columns.is_none() {
                columns = Some(cols);
            }
            rows.extend(r);
            if !all {
                let mut seen = HashSet::new();
                rows.retain(|r| seen.insert(group_key(r)));
            }
        }
        let mut columns = columns.unwrap_or_default();
        conform(&mut columns, &mut rows);
        // Conformed: every value fits its column, so rows may stream.
        let mut out = self.pipeline(plan, false, columns.into(), true, sink)?;
        for r in rows {
            let keys = plan
                .order_by
                .iter()
                .map(|(e, _)| match e {
                    BExpr::Col(i) => r.get(*i).cloned().unwrap_or(Datum::Null),
                    _ => Datum::Null,
                })
                .collect();
            if !out.push(keys, r)? {
                break;
            }
        }
        out.finish()
    }

    /// [`Executor::project`] into buffers kept across rows: a plain
    /// column's string is copied into the buffer its slot held for the
    /// previous row instead of a new allocation (the allocations were ~7%
    /// of the server's samples under sysbench `oltp_read_write`,
    /// docs/benchmarks.md "Rows projected into reused buffers").
    fn project_into(
        &self,
        plan: &SelectPlan,
        row: &[Datum],
        aggs: &[Datum],
        keys: &mut Vec<Datum>,
        vals: &mut Vec<Datum>,
    ) -> Result<()> {
        self.with_cx(aggs, |cx| {
            keys.clear();
            for (e, _) in &plan.order_by {
                keys.push(e.eval(row, cx)?);
            }
            vals.resize(plan.projection.len(), Datum::Null);
            for (slot, c) in vals.iter_mut().zip(&plan.projection) {
                match &c.expr {
                    BExpr::Col(i) => slot.assign(row.get(*i).unwrap_or(&Datum::Null)),
                    e => *slot = e.eval(row, cx)?,
                }
            }
            Ok(())
        })
    }

    /// The projected values and ORDER BY keys of one (grouped) row.
    pub(crate) fn project(
        &self,
        plan: &SelectPlan,
        row: &[Datum],
        aggs: &[Datum],
    ) -> Result<(Vec<Datum>, Vec<Datum>)> {
        let mut keys = Vec::with_capacity(plan.order_by.len());
        let mut vals = Vec::with_capacity(plan.projection.len());
        self.project_into(plan, row, aggs, &mut keys, &mut vals)?;
        Ok((keys, vals))
    }
}

/// A hashable key for grouping and DISTINCT: equal values (1 and 1.0)
/// give equal keys.
pub fn group_key(vals: &[Datum]) -> Vec<u8> {
    // Sized up front: growing the buffer byte string by byte string was
    // half of this function's cost for a DISTINCT over 120-byte strings.
    let cap: usize = vals
        .iter()
        .map(|v| match v {
            Datum::Bytes(b) => b.len() + 10,
            _ => 24,
        })
        .sum();
    let mut k = Vec::with_capacity(cap);
    for v in vals {
        match v {
            Datum::Null => k.push(0),
            Datum::Int(_) | Datum::UInt(_) | Datum::Decimal(_) => {
                k.push(1);
                let d = v.to_decimal().unwrap_or(Decimal::from_i128(0));
                // Normalize: strip trailing zero decimals.
                let mut d = d;
                while d.scale > 0 && d.value % 10 == 0 {
                    d = Decimal {
                        value: d.value / 10,
                        scale: d.scale - 1,
                    };
                }
                k.extend_from_slice(d.to_string().as_bytes());
            }
            Datum::Double(f) => {
                k.push(1);
                let t = crate::types::format_double(*f);
                k.extend_from_slice(t.as_bytes());
            }
            Datum::Bytes(b) => {
                k.push(2);
                k.extend_from_slice(&(b.len() as u64).to_le_bytes());
                k.extend_from_slice(b);
            }
            Datum::Date(d) | Datum::DateTime(d) => {
                k.push(3);
                k.extend_from_slice(&d.pack().to_be_bytes());
            }
        }
        k.push(0xFE);
    }
    k
}
