//! The short way through [`Executor::stream`] for a point select: one table
//! read by its whole primary key, plain columns out, nothing to join, group,
//! sort or de-duplicate. `SELECT c FROM sbtest1 WHERE id = ?` is sysbench's
//! point select, and what an ORM sends to load one object:
//!
//! ```text
//! key   = index prefix + encode(?)              access::key_range
//! value = txn.get_cf_into(key, scratch.value)   no allocation once sized
//! row   = layout.decode(value, scratch.row)     the plan's decode layout
//! every WHERE conjunct on row -> project into scratch.vals -> sink.row_ref
//! ```
//!
//! The answer is the general path's (`stream` -> `pipeline` -> `level` ->
//! `read_range` in executor.rs) for the same plan, rows and errors alike,
//! without its set-up per statement: the pipeline, the nested-loop state,
//! the per-row closures, a decode layout and a value buffer allocated per
//! read. Whether a plan qualifies, and its decode layout, are worked out once
//! per plan ([`SelectPlan::point`]), so a prepared statement's cached plan
//! works them out once. Measured in docs/benchmarks.md ("A short way for
//! point selects").

use crate::access::KeyRange;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::expr::BExpr;
use crate::output::row_fits;
use crate::result::ResultSink;
use crate::rowcodec::{self, RowLayout};
use crate::select::SelectPlan;
use crate::types::Datum;

/// What a qualifying plan needs at run time (see the module comment).
#[derive(Clone, Debug)]
pub(crate) struct PointShape {
    /// The current schema version and its decode layout, when that
    /// version's columns are the table's columns in order; a row of any
    /// other version decodes through `TableDef::decode_row_projected`.
    layout: Option<(u32, RowLayout)>,
}

/// `Some` if `plan` may take the short way. LIMIT and OFFSET are looked at
/// per run, not here.
pub(crate) fn point_shape(plan: &SelectPlan) -> Option<PointShape> {
    let simple = plan.unions.is_empty()
        && !plan.aggregate
        && plan.group_by.is_empty()
        && plan.having.is_none()
        && !plan.distinct
        && plan.order_by.is_empty()
        && plan.lock.is_none();
    let [t] = plan.tables.as_slice() else {
        return None;
    };
    let lone = t.offset == 0
        && plan.width == t.def.columns.len()
        && !t.left
        && t.on.is_none()
        && t.virtual_rows.is_none()
        && t.hash.is_none();
    let path = t.path.as_ref()?;
    let ix = t.def.indexes.get(path.index)?;
    let whole_key =
        ix.primary && path.eq.len() == ix.columns.len() && path.lo.is_none() && path.hi.is_none();
    // What `Executor::stream` calls plain: such values always fit their
    // declared types, so rows may go to a streaming sink as they are made.
    let plain = plan
        .projection
        .iter()
        .all(|c| matches!(c.expr, BExpr::Col(_)) && !c.meta.org_name.is_empty());
    if !(simple && lone && whole_key && plain) {
        return None;
    }
    Some(PointShape {
        layout: crate::scan::current_layout(&t.def, t.needed.as_deref()),
    })
}

impl Executor<'_> {
    /// Runs `plan` the short way if it is a point select going to a
    /// streaming sink: `Ok(true)` when done, `Ok(false)` (nothing sent)
    /// when the general path must run it.
    pub(crate) fn point_select(
        &self,
        plan: &SelectPlan,
        sink: &mut dyn ResultSink,
    ) -> Result<bool> {
        if !sink.streaming() || plan.offset != 0 {
            return Ok(false);
        }
        let Some(shape) = plan.point.get_or_init(|| point_shape(plan)) else {
            return Ok(false);
        };
        let ([t], Some(path)) = (
            plan.tables.as_slice(),
            plan.tables.first().and_then(|t| t.path.as_ref()),
        ) else {
            return Ok(false);
        };
        // The session's buffers, given back whatever happens below.
        let mut scratch = std::mem::take(&mut *self.scratch.borrow_mut());
        let r = (|| {
            let row = &mut scratch.row;
            row.clear();
            row.resize(plan.width, Datum::Null);
            let key = match self.with_cx(&[], |cx| {
                crate::access::key_range(&t.def, Some(path), row, cx)
            })? {
                KeyRange::Point(key) => Some(key),
                KeyRange::Empty => None,
                // A value that does not convert exactly to the key column's
                // type widens the read to a range: the general path's job.
                KeyRange::Range { .. } => return Ok(false),
            };
            let columns = plan.columns();
            sink.columns(columns)?;
            let Some(key) = key.filter(|_| plan.limit != Some(0)) else {
                return Ok(true);
            };
            if !self
                .txn
                .get_cf_into(self.cat.data_cf, &key, &mut scratch.value)?
            {
                return Ok(true);
            }
            let bytes = &scratch.value;
            match &shape.layout {
                Some((version, layout)) if rowcodec::version_of(bytes) == Some(*version) => {
                    row.resize(t.def.columns.len(), Datum::Null);
                    layout.decode(bytes, row).ok_or_else(|| Error::RowCorrupt {
                        table: t.def.qualified(),
                        reason: "bad row encoding".into(),
                    })?;
                }
                _ => *row = t.def.decode_row_projected(bytes, t.needed.as_deref())?,
            }
            if !self.passes(&t.filters, row)? || !self.passes(&plan.filter, row)? {
                return Ok(true);
            }
            let vals = &mut scratch.vals;
            vals.resize(plan.projection.len(), Datum::Null);
            for (slot, c) in vals.iter_mut().zip(&plan.projection) {
                if let BExpr::Col(i) = &c.expr {
                    slot.assign(row.get(*i).unwrap_or(&Datum::Null));
                }
            }
            // As the general path's direct pipeline: a row that does not
            // fit its columns' types is refused, never sent mistyped.
            if !row_fits(columns, vals) {
                return Err(Error::Unsupported(
                    "streaming a value that does not fit its column's type".into(),
                ));
            }
            sink.row_ref(vals)?;
            Ok(true)
        })();
        scratch.row.clear();
        *self.scratch.borrow_mut() = scratch;
        r
    }
}
