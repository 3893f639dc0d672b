//! UPDATE and DELETE: a plan made once from the statement, and runs of it.
//!
//! The plan ([`TargetPlan`]) is what the statement's text decides: the
//! target table, the access path for its WHERE, the bound SET list, ORDER
//! BY and a constant LIMIT. A run finds, locks and rewrites the rows with
//! the parameter values of its execution (`BExpr::Param` is read when the
//! plan runs). So a prepared `UPDATE sbtest1 SET k = k + 1 WHERE id = ?`
//! keeps its plan between executions (plan_cache.rs, under the same rules
//! as a SELECT's); before, planning was about a tenth of each execution's
//! instructions under sysbench's oltp_write_only.

use super::{assignment_column, rows_equal, table_scope, Dml, OrderBy};
use crate::catalog::TableDef;
use crate::error::{Error, Result};
use crate::expr::{BExpr, Scope};
use crate::select::{SelectPlan, TableRef};
use crate::types::Datum;
use shaledb::txn::Txn;
use sqlparser::ast;
use std::sync::Arc;

/// A planned UPDATE or DELETE.
#[derive(Debug)]
pub struct TargetPlan {
    /// The target table, as the dictionary had it when planned.
    pub def: Arc<TableDef>,
    plan: SelectPlan,
    /// UPDATE's SET list in order (column position, value); empty for
    /// DELETE.
    sets: Vec<(usize, BExpr)>,
    order: OrderBy,
    limit: Option<u64>,
}

impl Dml<'_> {
    /// Plans `u` (single-table UPDATE only).
    pub fn plan_update(&self, u: &ast::Update) -> Result<TargetPlan> {
        if !u.table.joins.is_empty() || u.from.is_some() {
            return Err(Error::Unsupported("multi-table UPDATE".into()));
        }
        let ast::TableFactor::Table { name, alias, .. } = &u.table.relation else {
            return Err(Error::Unsupported("UPDATE of a derived table".into()));
        };
        let (def, scope, plan) = self.plan_target(
            name,
            alias.as_ref().map(|a| a.name.value.as_str()),
            u.selection.as_ref(),
        )?;
        let mut sets = Vec::with_capacity(u.assignments.len());
        for a in &u.assignments {
            sets.push((assignment_column(&def, a)?, self.bind(&scope, &a.value)?));
        }
        let (order, limit) = self.order_and_limit(&scope, &u.order_by, u.limit.as_ref())?;
        Ok(TargetPlan {
            def,
            plan,
            sets,
            order,
            limit,
        })
    }

    /// Plans `d` (single-table DELETE only).
    pub fn plan_delete(&self, d: &ast::Delete) -> Result<TargetPlan> {
        let from = match &d.from {
            ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
        };
        let [twj] = from.as_slice() else {
            return Err(Error::Unsupported("multi-table DELETE".into()));
        };
        if !twj.joins.is_empty() || !d.tables.is_empty() || d.using.is_some() {
            return Err(Error::Unsupported("multi-table DELETE".into()));
        }
        let ast::TableFactor::Table { name, alias, .. } = &twj.relation else {
            return Err(Error::Unsupported("DELETE from a derived table".into()));
        };
        let (def, scope, plan) = self.plan_target(
            name,
            alias.as_ref().map(|a| a.name.value.as_str()),
            d.selection.as_ref(),
        )?;
        let (order, limit) = self.order_and_limit(&scope, &d.order_by, d.limit.as_ref())?;
        Ok(TargetPlan {
            def,
            plan,
            sets: Vec::new(),
            order,
            limit,
        })
    }

    /// Runs an UPDATE's plan: (rows matched, rows changed).
    pub fn run_update(&self, txn: &mut Txn, tp: &TargetPlan) -> Result<(u64, u64)> {
        let def = &tp.def;
        let rows = self.locked_rows(txn, &tp.plan, &tp.order, tp.limit, true)?;
        let (mut matched, mut changed) = (0u64, 0u64);
        for (i, (key, old)) in rows.into_iter().enumerate() {
            matched += 1;
            let mut new = old.clone();
            // MySQL evaluates SET left to right over the updated row.
            for (col, e) in &tp.sets {
                let v = self.eval(txn, e, &new)?;
                if let Some(slot) = new.get_mut(*col) {
                    *slot = v;
                }
            }
            let new = self.check_row(def, new, i as u64 + 1)?;
            // Before update_row locks the new key (invariant N of catalog/autoinc.rs).
            self.note_autoinc_of(def, &new)?;
            if rows_equal(&old, &new) {
                continue;
            }
            self.update_row(txn, def, &key, &old, new)?;
            changed += 1;
        }
        Ok((matched, changed))
    }

    /// Runs a DELETE's plan: rows deleted.
    pub fn run_delete(&self, txn: &mut Txn, tp: &TargetPlan) -> Result<u64> {
        let rows = self.locked_rows(txn, &tp.plan, &tp.order, tp.limit, true)?;
        let n = rows.len() as u64;
        for (key, old) in rows {
            let pk = key.get(4..).unwrap_or_default().to_vec();
            self.write_row(txn, &tp.def, Some((&key, &old, &pk)), None)?;
        }
        Ok(n)
    }

    /// A single-table plan for UPDATE/DELETE.
    fn plan_target(
        &self,
        name: &ast::ObjectName,
        alias: Option<&str>,
        selection: Option<&ast::Expr>,
    ) -> Result<(Arc<TableDef>, Scope, SelectPlan)> {
        let def = self.planner().table(name)?;
        let alias = alias.unwrap_or(&def.name).to_owned();
        let scope = table_scope(&def, &alias);
        let filter = match selection {
            Some(e) => vec![self.bind(&scope, e)?],
            None => Vec::new(),
        };
        let conj: Vec<&BExpr> = filter.iter().flat_map(|f| f.conjuncts()).collect();
        let path = crate::access::choose(&def, 0, &conj, self.snapshot);
        let plan = SelectPlan {
            tables: vec![TableRef {
                def: def.clone(),
                alias,
                offset: 0,
                left: false,
                on: None,
                path,
                filters: Vec::new(),
                virtual_rows: None,
                hash: None,
                needed: None,
            }],
            width: def.columns.len(),
            filter,
            group_by: Vec::new(),
            aggs: Vec::new(),
            aggregate: false,
            having: None,
            projection: Vec::new(),
            out_columns: Default::default(),
            point: Default::default(),
            order_by: Vec::new(),
            ordered: false,
            distinct: false,
            limit: None,
            offset: 0,
            lock: None,
            outer_refs: Vec::new(),
            unions: Vec::new(),
        };
        Ok((def, scope, plan))
    }

    fn order_and_limit(
        &self,
        scope: &Scope,
        order_by: &[ast::OrderByExpr],
        limit: Option<&ast::Expr>,
    ) -> Result<(OrderBy, Option<u64>)> {
        let mut order = Vec::new();
        for o in order_by {
            order.push((
                self.bind(scope, &o.expr)?,
                matches!(o.options.sort, Some(ast::OrderBySort::Desc)),
            ));
        }
        let limit = match limit {
            Some(e) => {
                let v = self.eval_const(e)?;
                Some(
                    v.to_i128()
                        .and_then(|n| u64::try_from(n).ok())
                        .ok_or_else(|| Error::Syntax(format!("bad LIMIT {e}")))?,
                )
            }
            None => None,
        };
        Ok((order, limit))
    }

    fn eval_const(&self, e: &ast::Expr) -> Result<Datum> {
        let bound = self.bind(&Scope::default(), e)?;
        match bound {
            BExpr::Lit(d) => Ok(d),
            BExpr::Param(i) => self
                .params
                .get(i)
                .cloned()
                .ok_or_else(|| Error::PlaceholderCount("LIMIT".into())),
            other => Err(Error::Syntax(format!(
                "LIMIT must be a constant, not {other:?}"
            ))),
        }
    }
}
