//! SELECT: planning (tables, access paths, bound expressions) and
//! execution (nested-loop joins over access paths, filters, grouping,
//! sorting, DISTINCT, LIMIT).
//!
//! A statement is planned on each execution, with its parameters known
//! (point queries plan in microseconds; a cached plan would save little).
//! Execution streams rows from the first table's path; each joined table
//! is read per row of the tables before it, through its own path.

use crate::access::{self, AccessPath, KeyRange};
use crate::aggregate::{AggState, Groups};
use crate::catalog::{Catalog, TableDef};
use crate::error::{Error, Result};
use crate::expr::{
    ident_name, AggCall, AggFunc, BExpr, Binder, EvalCx, Scope, ScopeCol, SessionFacts,
    SubqueryCache,
};
use crate::index;
use crate::output::{conform, ColumnMeta};
use crate::types::{sort_order, Datum, Decimal, SqlType};
use shaledb::txn::Txn;
use sqlparser::ast;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

/// A table in FROM.
#[derive(Clone, Debug)]
pub struct TableRef {
    pub def: Arc<TableDef>,
    pub alias: String,
    /// Position of its first column in the joined row.
    pub offset: usize,
    /// LEFT JOIN: rows without a match are NULL-extended.
    pub left: bool,
    pub on: Option<BExpr>,
    pub path: Option<AccessPath>,
    /// WHERE conjuncts evaluated as soon as this table's columns are in.
    pub filters: Vec<BExpr>,
    /// The rows of a virtual table (information_schema), read instead of
    /// the engine.
    pub virtual_rows: Option<Arc<Vec<Vec<Datum>>>>,
    /// Read once into a hash table probed per outer row (`join.rs`).
    pub hash: Option<crate::join::HashJoin>,
    /// The columns the query reads from this table (by position; `None`:
    /// all): rows are decoded with only these, the others read as NULL.
    pub needed: Option<Vec<bool>>,
}

/// A result column.
#[derive(Clone, Debug)]
pub struct OutCol {
    pub expr: BExpr,
    pub meta: ColumnMeta,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Share,
    Update,
}

/// A planned SELECT.
#[derive(Clone, Debug)]
pub struct SelectPlan {
    pub tables: Vec<TableRef>,
    pub width: usize,
    /// WHERE conjuncts not placed at a table.
    pub filter: Vec<BExpr>,
    pub group_by: Vec<BExpr>,
    pub aggs: Vec<AggCall>,
    pub aggregate: bool,
    pub having: Option<BExpr>,
    pub projection: Vec<OutCol>,
    pub order_by: Vec<(BExpr, bool)>,
    /// The first table's read order satisfies ORDER BY (`order.rs`).
    pub ordered: bool,
    pub distinct: bool,
    pub limit: Option<u64>,
    pub offset: u64,
    pub lock: Option<LockKind>,
    /// Positions in the outer query's row this (correlated) subquery reads,
    /// its own UNION arms included; empty for an uncorrelated one.
    pub outer_refs: Vec<usize>,
    /// UNION [ALL] arms after this one: (plan, all).
    pub unions: Vec<(SelectPlan, bool)>,
}

/// Plans statements for one session.
pub struct Planner<'a> {
    pub cat: &'a Catalog,
    pub facts: &'a SessionFacts,
    pub params: &'a [Datum],
    /// The snapshot sequence of the reading transaction (`None`: reads see
    /// the newest state), which decides the indexes it may read through.
    pub snapshot: Option<u64>,
    /// Planning a subquery: the columns of the query it is in.
    pub outer: Option<Vec<ScopeCol>>,
}

fn const_u64(e: &ast::Expr, params: &[Datum]) -> Result<u64> {
    let v = match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => params
                .get(crate::expr::placeholder_index(p)?)
                .cloned()
                .unwrap_or(Datum::Null),
            other => crate::expr::literal(other)?,
        },
        other => {
            return Err(Error::Syntax(format!(
                "LIMIT/OFFSET must be a number, not {other}"
            )))
        }
    };
    v.to_i128()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| Error::Syntax(format!("bad LIMIT/OFFSET value {e}")))
}

/// Infers a result type for a bound expression.
pub fn infer(e: &BExpr, scope: &Scope, aggs: &[AggCall], params: &[Datum]) -> SqlType {
    let of_datum = |d: &Datum| match d {
        Datum::Int(_) | Datum::Null => SqlType::Int {
            bytes: 8,
            unsigned: false,
        },
        Datum::UInt(_) => SqlType::Int {
            bytes: 8,
            unsigned: true,
        },
        Datum::Double(_) => SqlType::Double,
        Datum::Decimal(d) => SqlType::Decimal {
            precision: 38,
            scale: d.scale,
        },
        Datum::Bytes(b) => SqlType::VarChar(u32::try_from(b.len()).unwrap_or(u32::MAX).max(1)),
        Datum::Date(_) => SqlType::Date,
        Datum::DateTime(_) => SqlType::DateTime,
    };
    let big = SqlType::Int {
        bytes: 8,
        unsigned: false,
    };
    match e {
        BExpr::Lit(d) => of_datum(d),
        BExpr::Param(i) => params.get(*i).map_or(SqlType::VarChar(255), of_datum),
        BExpr::Col(i) => scope
            .cols
            .get(*i)
            .map_or(SqlType::VarChar(255), |c| c.ty.clone()),
        BExpr::Neg(x) => infer(x, scope, aggs, params),
        BExpr::Binary(op, a, b) => {
            use crate::expr::BinOp::*;
            match op {
                Add | Sub | Mul | Div | IntDiv | Mod => {
                    let (ta, tb) = (infer(a, scope, aggs, params), infer(b, scope, aggs, params));
                    let dbl = |t: &SqlType| {
                        matches!(t, SqlType::Double | SqlType::Float) || t.is_string()
                    };
                    if *op == IntDiv {
                        big
                    } else if dbl(&ta) || dbl(&tb) {
                        SqlType::Double
                    } else if *op == Div
                        || matches!(ta, SqlType::Decimal { .. })
                        || matches!(tb, SqlType::Decimal { .. })
                    {
                        SqlType::Decimal {
                            precision: 38,
                            scale: 4,
                        }
                    } else {
                        let unsigned = matches!(ta, SqlType::Int { unsigned: true, .. })
                            || matches!(tb, SqlType::Int { unsigned: true, .. });
                        SqlType::Int { bytes: 8, unsigned }
                    }
                }
                _ => big,
            }
        }
        BExpr::Agg(i) => match aggs.get(*i) {
            Some(AggCall {
                func: AggFunc::Count | AggFunc::CountStar,
                ..
            }) => big,
            Some(AggCall {
                func, arg: Some(a), ..
            }) => {
                let t = infer(a, scope, aggs, params);
                match (func, &t) {
                    (AggFunc::Min | AggFunc::Max, _) => t,
                    (_, SqlType::Double | SqlType::Float) => SqlType::Double,
                    (AggFunc::Sum, SqlType::Decimal { scale, .. }) => SqlType::Decimal {
                        precision: 38,
                        scale: *scale,
                    },
                    (AggFunc::Sum, SqlType::Int { .. }) => SqlType::Decimal {
                        precision: 38,
                        scale: 0,
                    },
                    (AggFunc::Avg, SqlType::Decimal { scale, .. }) => SqlType::Decimal {
                        precision: 38,
                        scale: scale.saturating_add(4),
                    },
                    (AggFunc::Avg, SqlType::Int { .. }) => SqlType::Decimal {
                        precision: 38,
                        scale: 4,
                    },
                    _ => SqlType::Double,
                }
            }
            _ => big,
        },
        BExpr::Cast(_, t) => t.clone(),
        BExpr::Case(_, whens, otherwise) => whens
            .first()
            .map(|(_, r)| r)
            .or(otherwise.as_deref())
            .map_or(SqlType::VarChar(255), |r| infer(r, scope, aggs, params)),
        BExpr::Subquery(p) => p
            .projection
            .first()
            .map_or(SqlType::VarChar(255), |c| c.meta.ty.clone()),
        BExpr::Func(name, args) => match name.as_str() {
            "COALESCE" | "IFNULL" | "GREATEST" | "LEAST" | "NULLIF" | "ABS" | "ROUND"
            | "TRUNCATE" => args
                .first()
                .map_or(SqlType::VarChar(255), |a| infer(a, scope, aggs, params)),
            "IF" => args
                .get(1)
                .map_or(SqlType::VarChar(255), |a| infer(a, scope, aggs, params)),
            "LENGTH" | "OCTET_LENGTH" | "CHAR_LENGTH" | "CHARACTER_LENGTH" | "SIGN" | "ISNULL" => {
                big
            }
            "FLOOR" | "CEIL" | "CEILING" => {
                match args.first().map(|a| infer(a, scope, aggs, params)) {
                    Some(SqlType::Double | SqlType::Float) => SqlType::Double,
                    _ => big,
                }
            }
            "LAST_INSERT_ID" | "CONNECTION_ID" => SqlType::Int {
                bytes: 8,
                unsigned: true,
            },
            "NOW" | "CURRENT_TIMESTAMP" | "SYSDATE" | "UTC_TIMESTAMP" => SqlType::DateTime,
            "CURDATE" | "CURRENT_DATE" | "DATE" => SqlType::Date,
            "MOD" => big,
            _ => SqlType::Text(65_535),
        },
        _ => big,
    }
}

impl<'a> Planner<'a> {
    fn binder<'b>(
        &'b self,
        scope: &'b Scope,
        aggs: Option<&'b mut Vec<AggCall>>,
        sub: &'b dyn Fn(&ast::Query, &Scope) -> Result<SelectPlan>,
    ) -> Binder<'b> {
        Binder {
            scope,
            facts: self.facts,
            aggs,
            subquery: sub,
            aliases: &[],
        }
    }

    /// Resolves `[db.]table` against the current database.
    pub fn table(&self, name: &ast::ObjectName) -> Result<Arc<TableDef>> {
        let parts = ident_name(name);
        match parts.as_slice() {
            [t] => {
                let db = self.facts.database.as_deref().ok_or(Error::NoDatabase)?;
                if !self.cat.database_exists(db) {
                    return Err(Error::UnknownDatabase(db.to_owned()));
                }
                self.cat.table(db, t)
            }
            [d, t] => self.cat.table(d, t),
            _ => Err(Error::Syntax(format!("bad table name {name}"))),
        }
    }

    pub fn plan_query(&self, q: &ast::Query) -> Result<SelectPlan> {
        if q.with.is_some() {
            return Err(Error::Unsupported("WITH".into()));
        }
        let mut lock = None;
        for l in &q.locks {
            lock = Some(match l.lock_type {
                ast::LockType::Share => LockKind::Share,
                ast::LockType::Update => LockKind::Update,
            });
        }
        let (limit, offset) = match &q.limit_clause {
            None => (None, 0),
            Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => (
                limit
                    .as_ref()
                    .map(|l| const_u64(l, self.params))
                    .transpose()?,
                offset
                    .as_ref()
                    .map(|o| const_u64(&o.value, self.params))
                    .transpose()?
                    .unwrap_or(0),
            ),
            Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => (
                Some(const_u64(limit, self.params)?),
                const_u64(offset, self.params)?,
            ),
        };
        let order: Vec<&ast::OrderByExpr> = match &q.order_by {
            Some(ast::OrderBy {
                kind: ast::OrderByKind::Expressions(v),
                ..
            }) => v.iter().collect(),
            Some(_) => return Err(Error::Unsupported("ORDER BY ALL".into())),
            None => Vec::new(),
        };
        match q.body.as_ref() {
            ast::SetExpr::Select(s) => {
                let mut plan = self.plan_select(s, &order, limit.is_some())?;
                plan.limit = limit;
                plan.offset = offset;
                plan.lock = lock;
                Ok(plan)
            }
            ast::SetExpr::Query(inner) if order.is_empty() && limit.is_none() => {
                self.plan_query(inner)
            }
            ast::SetExpr::SetOperation { .. } => {
                let mut arms = Vec::new();
                self.flatten_union(q.body.as_ref(), true, &mut arms)?;
                let first = &arms
                    .first()
                    .ok_or_else(|| Error::Syntax("empty UNION".into()))?
                    .0;
                let width = first.projection.len();
                if arms.iter().any(|(p, _)| p.projection.len() != width) {
                    return Err(Error::Syntax(
                        "The used SELECT statements have a different number of columns".into(),
                    ));
                }
                // ORDER BY over a UNION names result columns.
                let mut order_by = Vec::new();
                for o in order {
                    let pos = match &o.expr {
                        ast::Expr::Value(v) => match crate::expr::literal(&v.value)? {
                            Datum::Int(n) if n >= 1 && (n as usize) <= width => n as usize - 1,
                            _ => {
                                return Err(Error::UnknownColumn(
                                    o.expr.to_string(),
                                    "order clause".into(),
                                ))
                            }
                        },
                        ast::Expr::Identifier(id) => first
                            .projection
                            .iter()
                            .position(|c| c.meta.name.eq_ignore_ascii_case(&id.value))
                            .ok_or_else(|| {
                                Error::UnknownColumn(id.value.clone(), "order clause".into())
                            })?,
                        other => {
                            return Err(Error::Unsupported(format!("ORDER BY {other} over UNION")))
                        }
                    };
                    order_by.push((
                        BExpr::Col(pos),
                        matches!(o.options.sort, Some(ast::OrderBySort::Desc)),
                    ));
                }
                Ok(SelectPlan {
                    tables: Vec::new(),
                    width: 0,
                    filter: Vec::new(),
                    group_by: Vec::new(),
                    aggs: Vec::new(),
                    aggregate: false,
                    having: None,
                    projection: Vec::new(),
                    order_by,
                    ordered: false,
                    distinct: false,
                    limit,
                    offset,
                    lock: None,
                    outer_refs: arms
                        .iter()
                        .flat_map(|(a, _)| a.outer_refs.clone())
                        .collect(),
                    unions: arms,
                })
            }
            other => Err(Error::Unsupported(format!("query {other}"))),
        }
    }

    fn flatten_union(
        &self,
        body: &ast::SetExpr,
        all: bool,
        out: &mut Vec<(SelectPlan, bool)>,
    ) -> Result<()> {
        match body {
            ast::SetExpr::SetOperation {
                left,
                op: ast::SetOperator::Union,
                set_quantifier,
                right,
            } => {
                self.flatten_union(left, all, out)?;
                let all = matches!(set_quantifier, ast::SetQuantifier::All);
                self.flatten_union(right, all, out)
            }
            ast::SetExpr::Select(s) => {
                out.push((self.plan_select(s, &[], false)?, all));
                Ok(())
            }
            ast::SetExpr::Query(q) => {
                out.push((self.plan_query(q)?, all));
                Ok(())
            }
            other => Err(Error::Unsupported(format!("set operation {other}"))),
        }
    }

    /// Plans a subquery of a query whose columns are `scope`.
    pub fn plan_subquery(&self, q: &ast::Query, scope: &Scope) -> Result<SelectPlan> {
        Planner {
            cat: self.cat,
            facts: self.facts,
            params: self.params,
            snapshot: self.snapshot,
            outer: Some(scope.cols.clone()),
        }
        .plan_query(q)
    }

    /// `limited`: the query has a LIMIT (an index read for ORDER BY may
    /// then pay a lookup per row, see `order.rs`).
    fn plan_select(
        &self,
        s: &ast::Select,
        order: &[&ast::OrderByExpr],
        limited: bool,
    ) -> Result<SelectPlan> {
        let sub = |q: &ast::Query, scope: &Scope| self.plan_subquery(q, scope);
        // FROM: tables and joins.
        let mut tables: Vec<TableRef> = Vec::new();
        let mut scope = Scope {
            cols: Vec::new(),
            outer: self.outer.clone(),
        };
        let mut ons: Vec<(usize, ast::Expr)> = Vec::new();
        let add = |tables: &mut Vec<TableRef>,
                   scope: &mut Scope,
                   f: &ast::TableFactor,
                   left: bool|
         -> Result<()> {
            let ast::TableFactor::Table { name, alias, .. } = f else {
                return Err(Error::Unsupported(format!("FROM {f}")));
            };
            let parts = ident_name(name);
            let in_schema = match parts.as_slice() {
                [d, _] => d.eq_ignore_ascii_case(crate::infoschema::NAME),
                _ => self
                    .facts
                    .database
                    .as_deref()
                    .is_some_and(|d| d.eq_ignore_ascii_case(crate::infoschema::NAME)),
            };
            let virt = if in_schema {
                let t = parts.last().cloned().unwrap_or_default();
                Some(
                    crate::infoschema::table(self.cat, &t)
                        .ok_or_else(|| Error::UnknownSystemTable(t.clone()))?,
                )
            } else {
                None
            };
            let (def, virtual_rows) = match virt {
                Some(v) => (v.def, Some(v.rows)),
                None => (self.table(name)?, None),
            };
            let alias = alias
                .as_ref()
                .map_or(def.name.clone(), |a| a.name.value.clone());
            if tables.iter().any(|t| t.alias == alias) {
                return Err(Error::Syntax(format!("Not unique table/alias: '{alias}'")));
            }
            let offset = scope.cols.len();
            for c in &def.columns {
                scope.cols.push(ScopeCol {
                    table: alias.clone(),
                    name: c.name.clone(),
                    ty: c.ty.clone(),
                    org_db: def.db.clone(),
                    org_table: def.name.clone(),
                    nullable: c.nullable || left,
                });
            }
            tables.push(TableRef {
                def,
                alias,
                offset,
                left,
                on: None,
                path: None,
                filters: Vec::new(),
                virtual_rows,
                hash: None,
                needed: None,
            });
            Ok(())
        };
        for twj in &s.from {
            add(&mut tables, &mut scope, &twj.relation, false)?;
            for j in &twj.joins {
                let (left, constraint) = match &j.join_operator {
                    ast::JoinOperator::Join(c)
                    | ast::JoinOperator::Inner(c)
                    | ast::JoinOperator::CrossJoin(c)
                    | ast::JoinOperator::StraightJoin(c) => (false, c),
                    ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c) => (true, c),
                    other => return Err(Error::Unsupported(format!("join {other:?}"))),
                };
                add(&mut tables, &mut scope, &j.relation, left)?;
                match constraint {
                    ast::JoinConstraint::On(e) => ons.push((tables.len() - 1, e.clone())),
                    ast::JoinConstraint::None => {}
                    other => return Err(Error::Unsupported(format!("join constraint {other:?}"))),
                }
            }
        }
        for (t, e) in ons {
            let bound = self.binder(&scope, None, &sub).bind(&e)?;
            if let Some(tr) = tables.get_mut(t) {
                tr.on = Some(bound);
            }
        }
        let where_ = match &s.selection {
            Some(e) => Some(self.binder(&scope, None, &sub).bind(e)?),
            None => None,
        };
        // Access paths: WHERE conjuncts serve inner-joined tables; a LEFT
        // joined table is read through its ON conjuncts only.
        let where_conj: Vec<&BExpr> = where_.as_ref().map(|w| w.conjuncts()).unwrap_or_default();
        let mut paths = Vec::new();
        for t in &tables {
            let mut conj: Vec<&BExpr> = t.on.as_ref().map(|o| o.conjuncts()).unwrap_or_default();
            if !t.left {
                conj.extend(where_conj.iter().copied());
            }
            paths.push(if t.virtual_rows.is_some() {
                None
            } else {
                access::choose(&t.def, t.offset, &conj, self.snapshot)
            });
        }
        for (t, p) in tables.iter_mut().zip(paths) {
            t.path = p;
        }
        for t in tables.iter_mut().skip(1) {
            if t.path.is_none() && t.virtual_rows.is_none() {
                let mut conj: Vec<&BExpr> =
                    t.on.as_ref().map(|o| o.conjuncts()).unwrap_or_default();
                if !t.left {
                    conj.extend(where_conj.iter().copied());
                }
                t.hash = crate::join::hash_keys(t, &conj, &scope);
            }
        }
        // Place each WHERE conjunct at the first table where all its
        // columns are in (never at a LEFT table: NULL extension comes first).
        let mut filter = Vec::new();
        for c in where_conj {
            let level = c
                .max_column()
                .and_then(|m| tables.iter().rposition(|t| t.offset <= m));
            match level {
                Some(l)
                    if !c.has_agg_or_subquery()
                        && tables.get(l).is_some_and(|t| !t.left)
                        && tables.iter().skip(l + 1).all(|t| !t.left) =>
                {
                    if let Some(t) = tables.get_mut(l) {
                        t.filters.push(c.clone());
                    }
                }
                _ => filter.push(c.clone()),
            }
        }
        // Projection, HAVING, ORDER BY may hold aggregates.
        let mut aggs = Vec::new();
        let mut projection = Vec::new();
        for item in &s.projection {
            match item {
                ast::SelectItem::Wildcard(_) => {
                    if tables.is_empty() {
                        return Err(Error::Syntax("No tables used".into()));
                    }
                    for (i, c) in scope.cols.iter().enumerate() {
                        projection.push(OutCol {
                            expr: BExpr::Col(i),
                            meta: ColumnMeta::from_scope(&c.name, c),
                        });
                    }
                }
                ast::SelectItem::QualifiedWildcard(kind, _) => {
                    let name = kind.to_string();
                    let t = tables
                        .iter()
                        .find(|t| t.alias == name || name.ends_with(&format!(".{}", t.alias)));
                    let t = t.ok_or_else(|| Error::UnknownTable(name.clone()))?;
                    for i in t.offset..t.offset + t.def.columns.len() {
                        if let Some(c) = scope.cols.get(i) {
                            projection.push(OutCol {
                                expr: BExpr::Col(i),
                                meta: ColumnMeta::from_scope(&c.name, c),
                            });
                        }
                    }
                }
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    let bound = self.binder(&scope, Some(&mut aggs), &sub).bind(e)?;
                    let name = match item {
                        ast::SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                        _ => match e {
                            ast::Expr::Identifier(id) => id.value.clone(),
                            ast::Expr::CompoundIdentifier(p) => {
                                p.last().map_or(e.to_string(), |i| i.value.clone())
                            }
                            other => other.to_string(),
                        },
                    };
                    let meta = match &bound {
                        BExpr::Col(i) => scope.cols.get(*i).map_or_else(
                            || ColumnMeta::computed(&name, SqlType::VarChar(255)),
                            |c| ColumnMeta::from_scope(&name, c),
                        ),
                        other => {
                            ColumnMeta::computed(&name, infer(other, &scope, &aggs, self.params))
                        }
                    };
                    projection.push(OutCol { expr: bound, meta });
                }
                other => return Err(Error::Unsupported(format!("select item {other}"))),
            }
        }
        let group_by = match &s.group_by {
            ast::GroupByExpr::Expressions(v, _) => {
                let mut out = Vec::new();
                for e in v {
                    out.push(self.resolve_output_ref(
                        e,
                        &projection,
                        &scope,
                        &mut aggs,
                        &sub,
                        false,
                    )?);
                }
                out
            }
            ast::GroupByExpr::All(_) => return Err(Error::Unsupported("GROUP BY ALL".into())),
        };
        let having = match &s.having {
            Some(h) => {
                Some(self.resolve_output_ref(h, &projection, &scope, &mut aggs, &sub, true)?)
            }
            None => None,
        };
        let mut order_by = Vec::new();
        for o in order {
            let e = self.resolve_output_ref(&o.expr, &projection, &scope, &mut aggs, &sub, true)?;
            order_by.push((e, matches!(o.options.sort, Some(ast::OrderBySort::Desc))));
        }
        let mut outer_refs = Vec::new();
        for e in projection
            .iter()
            .map(|c| &c.expr)
            .chain(&filter)
            .chain(&group_by)
            .chain(having.iter())
            .chain(order_by.iter().map(|(e, _)| e))
            .chain(aggs.iter().filter_map(|a| a.arg.as_ref()))
            .chain(tables.iter().flat_map(|t| t.on.iter().chain(&t.filters)))
            .chain(tables.iter().filter_map(|t| t.path.as_ref()).flat_map(|p| {
                p.eq.iter()
                    .chain(p.lo.iter().map(|(e, _)| e))
                    .chain(p.hi.iter().map(|(e, _)| e))
            }))
        {
            e.collect_outer(&mut outer_refs);
        }
        outer_refs.sort_unstable();
        outer_refs.dedup();
        let aggregate = !aggs.is_empty() || !group_by.is_empty();
        let ordered = !aggregate
            && tables
                .first_mut()
                .is_some_and(|t| crate::order::use_index_order(t, &order_by, limited));
        // Covering reads: a secondary path whose index (with the primary
        // key) holds every column the query reads from that table.
        let mut used = Vec::new();
        for e in projection
            .iter()
            .map(|c| &c.expr)
            .chain(&filter)
            .chain(&group_by)
            .chain(having.iter())
            .chain(order_by.iter().map(|(e, _)| e))
        {
            e.collect_columns(&mut used);
        }
        for a in &aggs {
            if let Some(e) = &a.arg {
                e.collect_columns(&mut used);
            }
        }
        for t in &tables {
            for e in t.on.iter().chain(&t.filters) {
                e.collect_columns(&mut used);
            }
        }
        for t in &mut tables {
            let n = t.def.columns.len();
            let needed: Vec<usize> = used
                .iter()
                .filter(|c| **c >= t.offset && **c < t.offset + n)
                .map(|c| c - t.offset)
                .collect();
            if let Some(p) = t.path.as_mut() {
                access::mark_covering(&t.def, p, &needed);
            }
            let mut mask = vec![false; n];
            for c in &needed {
                if let Some(m) = mask.get_mut(*c) {
                    *m = true;
                }
            }
            t.needed = mask.contains(&false).then_some(mask);
        }
        let distinct = match &s.distinct {
            None | Some(ast::Distinct::All) => false,
            Some(ast::Distinct::Distinct) => true,
            Some(ast::Distinct::On(_)) => return Err(Error::Unsupported("DISTINCT ON".into())),
        };
        Ok(SelectPlan {
            width: scope.cols.len(),
            tables,
            filter,
            group_by,
            aggs,
            aggregate,
            having,
            projection,
            order_by,
            ordered,
            distinct,
            limit: None,
            offset: 0,
            lock: None,
            outer_refs,
            unions: Vec::new(),
        })
    }

    /// ORDER BY / GROUP BY / HAVING may name a result column by alias or
    /// position (`ORDER BY 2`).
    fn resolve_output_ref(
        &self,
        e: &ast::Expr,
        projection: &[OutCol],
        scope: &Scope,
        aggs: &mut Vec<AggCall>,
        sub: &dyn Fn(&ast::Query, &Scope) -> Result<SelectPlan>,
        alias_first: bool,
    ) -> Result<BExpr> {
        if let ast::Expr::Value(v) = e {
            if let ast::Value::Number(n, _) = &v.value {
                let pos: usize = n
                    .parse()
                    .map_err(|_| Error::UnknownColumn(n.clone(), "order clause".into()))?;
                return pos
                    .checked_sub(1)
                    .and_then(|p| projection.get(p))
                    .map(|c| c.expr.clone())
                    .ok_or_else(|| Error::UnknownColumn(n.clone(), "order clause".into()));
            }
        }
        if let ast::Expr::Identifier(id) = e {
            let by_alias = projection
                .iter()
                .find(|c| c.meta.name.eq_ignore_ascii_case(&id.value));
            if let Some(c) = by_alias {
                if alias_first || scope.resolve(None, &id.value).is_err() {
                    return Ok(c.expr.clone());
                }
            }
        }
        let aliases: Vec<(String, BExpr)> = if alias_first {
            projection
                .iter()
                .map(|c| (c.meta.name.clone(), c.expr.clone()))
                .collect()
        } else {
            Vec::new()
        };
        let mut b = self.binder(scope, Some(aggs), sub);
        b.aliases = &aliases;
        b.bind(e)
    }
}

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
}

/// A row source for the first table, replacing its access path (rows
/// already read and locked by UPDATE/DELETE/FOR UPDATE).
pub type Rows = Vec<(Vec<u8>, Vec<Datum>)>;

/// Receives joined rows with their tables' primary keys; false stops.
pub type RowSink<'a> = dyn FnMut(&[Datum], &[Vec<u8>]) -> Result<bool> + 'a;

/// A hash-join table: rows (primary key and values) by join-key.
type HashTable = HashMap<Vec<u8>, Vec<(Vec<u8>, Vec<Datum>)>>;
type SharedHashTable = std::rc::Rc<HashTable>;

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

    fn check_interrupt(&self) -> Result<()> {
        if self
            .interrupt
            .is_some_and(|f| f.load(AtomicOrdering::Relaxed))
        {
            return Err(Error::Interrupted);
        }
        Ok(())
    }

    /// Reads the rows of `def` in `range`, calling `f(pk_key, row)` until
    /// it returns false. Returns false if stopped early.
    pub fn read_range(
        &self,
        def: &TableDef,
        needed: Option<&[bool]>,
        range: &KeyRange,
        f: &mut dyn FnMut(Vec<u8>, Vec<Datum>) -> Result<bool>,
    ) -> Result<bool> {
        let cf = self.cat.data_cf;
        match range {
            KeyRange::Empty => Ok(true),
            KeyRange::Point(key) => match self.txn.get_cf(cf, key)? {
                Some(v) => f(key.clone(), def.decode_row_projected(&v, needed)?),
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
                    let (key, row) = if index.primary {
                        (
                            it.key().to_vec(),
                            def.decode_row_projected(it.value(), needed)?,
                        )
                    } else if *covering {
                        let bad = || Error::RowCorrupt {
                            table: def.qualified(),
                            reason: format!("bad entry in index {}", index.name),
                        };
                        let row = index::covering_row(def, index, it.key(), it.value())
                            .ok_or_else(bad)?;
                        let pk =
                            index::pk_of_entry(def, index, it.key(), it.value()).ok_or_else(bad)?;
                        (index::pk_key(def, &pk), row)
                    } else {
                        let pk = index::pk_of_entry(def, index, it.key(), it.value()).ok_or_else(
                            || Error::RowCorrupt {
                                table: def.qualified(),
                                reason: format!("bad entry in index {}", index.name),
                            },
                        )?;
                        let key = index::pk_key(def, &pk);
                        let bytes =
                            self.txn
                                .get_cf(cf, &key)?
                                .ok_or_else(|| Error::RowCorrupt {
                                    table: def.qualified(),
                                    reason: format!("index {} names a missing row", index.name),
                                })?;
                        (key, def.decode_row_projected(&bytes, needed)?)
                    };
                    if !f(key, row)? {
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
        let mut rows = 0usize;
        let complete = self.read_range(&t.def, t.needed.as_deref(), &range, &mut |k, r| {
            let key: Vec<Datum> = h
                .inner
                .iter()
                .map(|c| r.get(*c).cloned().unwrap_or(Datum::Null))
                .collect();
            if !key.iter().any(Datum::is_null) {
                table.entry(group_key(&key)).or_default().push((k, r));
            }
            rows += 1;
            Ok(rows < crate::join::MAX_BUILD_ROWS)
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
        let mut row = vec![Datum::Null; plan.width];
        let mut keys = Vec::with_capacity(plan.tables.len());
        self.level(plan, 0, first, &mut row, &mut keys, sink)?;
        Ok(())
    }

    fn passes(&self, conds: &[BExpr], row: &[Datum]) -> Result<bool> {
        for c in conds {
            if self.with_cx(&[], |cx| c.eval(row, cx))?.truth() != Some(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn level(
        &self,
        plan: &SelectPlan,
        i: usize,
        first: Option<&Rows>,
        row: &mut Vec<Datum>,
        keys: &mut Vec<Vec<u8>>,
        sink: &mut RowSink<'_>,
    ) -> Result<bool> {
        let Some(t) = plan.tables.get(i) else {
            if !self.passes(&plan.filter, row)? {
                return Ok(true);
            }
            return sink(row, keys);
        };
        let n = t.def.columns.len();
        let mut matched = false;
        let mut visit = |key: Vec<u8>,
                         trow: Vec<Datum>,
                         row: &mut Vec<Datum>,
                         keys: &mut Vec<Vec<u8>>|
         -> Result<bool> {
            for (slot, v) in row.iter_mut().skip(t.offset).take(n).zip(trow) {
                *slot = v;
            }
            if let Some(on) = &t.on {
                if self.with_cx(&[], |cx| on.eval(row, cx))?.truth() != Some(true) {
                    return Ok(true);
                }
            }
            matched = true;
            if !self.passes(&t.filters, row)? {
                return Ok(true);
            }
            keys.push(key);
            let go = self.level(plan, i + 1, None, row, keys, sink)?;
            keys.pop();
            Ok(go)
        };
        let go = match (i, first) {
            (0, Some(rows)) => {
                let mut go = true;
                for (k, r) in rows {
                    if !visit(k.clone(), r.clone(), row, keys)? {
                        go = false;
                        break;
                    }
                }
                go
            }
            _ if t.virtual_rows.is_some() => {
                let mut go = true;
                for r in t.virtual_rows.iter().flat_map(|v| v.iter()) {
                    if !visit(Vec::new(), r.clone(), row, keys)? {
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
                        .map(|c| row.get(*c).cloned().unwrap_or(Datum::Null))
                        .collect();
                    let mut go = true;
                    // A NULL key equals nothing.
                    if !key.iter().any(Datum::is_null) {
                        for (k, r) in table.get(&group_key(&key)).into_iter().flatten() {
                            if !visit(k.clone(), r.clone(), row, keys)? {
                                go = false;
                                break;
                            }
                        }
                    }
                    go
                }
                _ => {
                    let range = self.with_cx(&[], |cx| {
                        access::key_range(&t.def, t.path.as_ref(), row, cx)
                    })?;
                    self.read_range(&t.def, t.needed.as_deref(), &range, &mut |k, r| {
                        visit(k, r, row, keys)
                    })?
                }
            },
        };
        if !go {
            return Ok(false);
        }
        if t.left && !matched {
            for slot in row.iter_mut().skip(t.offset).take(n) {
                *slot = Datum::Null;
            }
            if !self.passes(&t.filters, row)? {
                return Ok(true);
            }
            keys.push(Vec::new());
            let go = self.level(plan, i + 1, None, row, keys, sink)?;
            keys.pop();
            return Ok(go);
        }
        Ok(true)
    }

    /// Runs a SELECT: its column metadata and rows.
    pub fn run(&self, plan: &SelectPlan) -> Result<ResultSet> {
        self.run_with(plan, None)
    }

    pub fn run_with(
        &self,
        plan: &SelectPlan,
        first: Option<&Rows>,
    ) -> Result<(Vec<ColumnMeta>, Vec<Vec<Datum>>)> {
        if !plan.unions.is_empty() {
            return self.run_union(plan);
        }
        let mut out: Vec<(Vec<Datum>, Vec<Datum>)> = Vec::new();
        let sorted = plan.ordered && first.is_none() && self.first_range_ordered(plan)?;
        if plan.aggregate {
            self.aggregate(plan, first, &mut out)?;
        } else {
            let wanted = plan
                .limit
                .filter(|_| !plan.distinct)
                .map(|l| usize::try_from(l.saturating_add(plan.offset)).unwrap_or(usize::MAX));
            // In order: stop after LIMIT + OFFSET rows. Otherwise under a
            // LIMIT keep only the best rows seen so far (a top-N sort).
            let (stop_at, top_n) = match wanted {
                Some(w) if plan.order_by.is_empty() || sorted => (Some(w), None),
                Some(w) => (None, Some(w)),
                None => (None, None),
            };
            if plan.tables.is_empty() {
                let row: Vec<Datum> = Vec::new();
                if self.passes(&plan.filter, &row)? {
                    out.push(self.project(plan, &row, &[])?);
                }
            } else {
                self.for_each_row(plan, first, &mut |row, _| {
                    out.push(self.project(plan, row, &[])?);
                    if let Some(n) = top_n {
                        if out.len() >= n.saturating_mul(2).max(TOP_N_SLACK) {
                            keep_best(plan, &mut out, n);
                        }
                    }
                    Ok(stop_at.is_none_or(|s| out.len() < s))
                })?;
            }
        }
        let mut rows = finish(plan, out, sorted);
        let mut columns: Vec<ColumnMeta> = plan.projection.iter().map(|c| c.meta.clone()).collect();
        conform(&mut columns, &mut rows);
        Ok((columns, rows))
    }

    fn run_union(&self, plan: &SelectPlan) -> Result<ResultSet> {
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
        let keyed: Vec<(Vec<Datum>, Vec<Datum>)> = rows
            .into_iter()
            .map(|r| {
                let keys = plan
                    .order_by
                    .iter()
                    .map(|(e, _)| match e {
                        BExpr::Col(i) => r.get(*i).cloned().unwrap_or(Datum::Null),
                        _ => Datum::Null,
                    })
                    .collect();
                (keys, r)
            })
            .collect();
        let mut rows = finish(
            &SelectPlan {
                unions: Vec::new(),
                ..plan.clone()
            },
            keyed,
            false,
        );
        conform(&mut columns, &mut rows);
        Ok((columns, rows))
    }

    /// The projected values and ORDER BY keys of one (grouped) row.
    fn project(
        &self,
        plan: &SelectPlan,
        row: &[Datum],
        aggs: &[Datum],
    ) -> Result<(Vec<Datum>, Vec<Datum>)> {
        self.with_cx(aggs, |cx| {
            let mut keys = Vec::with_capacity(plan.order_by.len());
            for (e, _) in &plan.order_by {
                keys.push(e.eval(row, cx)?);
            }
            let mut vals = Vec::with_capacity(plan.projection.len());
            for c in &plan.projection {
                vals.push(c.expr.eval(row, cx)?);
            }
            Ok((keys, vals))
        })
    }

    fn aggregate(
        &self,
        plan: &SelectPlan,
        first: Option<&Rows>,
        out: &mut Vec<(Vec<Datum>, Vec<Datum>)>,
    ) -> Result<()> {
        let mut acc = match crate::parallel::partitions(self, plan, first)? {
            Some(parts) => crate::parallel::aggregate(self, plan, &parts)?,
            None => {
                let mut acc = Groups::default();
                if plan.tables.is_empty() {
                    let row: Vec<Datum> = Vec::new();
                    if self.passes(&plan.filter, &row)? {
                        self.with_cx(&[], |cx| {
                            acc.feed(&plan.group_by, &plan.aggs, &row, &|e| e.eval(&row, cx))
                        })?;
                    }
                } else {
                    self.for_each_row(plan, first, &mut |row, _| {
                        self.with_cx(&[], |cx| {
                            acc.feed(&plan.group_by, &plan.aggs, row, &|e| e.eval(row, cx))
                        })?;
                        Ok(true)
                    })?;
                }
                acc
            }
        };
        let mut groups = std::mem::take(&mut acc.groups);
        let fresh = || plan.aggs.iter().map(AggState::new).collect::<Vec<_>>();
        if groups.is_empty() && plan.group_by.is_empty() {
            groups.push((vec![Datum::Null; plan.width], fresh()));
        }
        for (row, states) in groups {
            let aggs: Vec<Datum> = states
                .into_iter()
                .map(AggState::finish)
                .collect::<Result<_>>()?;
            if let Some(h) = &plan.having {
                if self.with_cx(&aggs, |cx| h.eval(&row, cx))?.truth() != Some(true) {
                    continue;
                }
            }
            out.push(self.project(plan, &row, &aggs)?);
        }
        Ok(())
    }
}

/// Rows a top-N sort may hold beyond twice N before it trims.
const TOP_N_SLACK: usize = 1024;

/// ORDER BY's comparison of two rows' sort keys.
fn by_keys(plan: &SelectPlan, a: &[Datum], b: &[Datum]) -> Ordering {
    for ((x, y), (_, desc)) in a.iter().zip(b).zip(&plan.order_by) {
        let o = sort_order(x, y);
        if o != Ordering::Equal {
            return if *desc { o.reverse() } else { o };
        }
    }
    Ordering::Equal
}

/// Keeps the `n` first rows of `out` in ORDER BY order. The sort is
/// stable, so among equal keys the earlier rows stay, as in a full sort.
fn keep_best(plan: &SelectPlan, out: &mut Vec<(Vec<Datum>, Vec<Datum>)>, n: usize) {
    out.sort_by(|(a, _), (b, _)| by_keys(plan, a, b));
    out.truncate(n);
}

/// Sorts (unless `sorted`: the rows came in ORDER BY order), removes
/// duplicates and applies OFFSET/LIMIT.
fn finish(
    plan: &SelectPlan,
    mut out: Vec<(Vec<Datum>, Vec<Datum>)>,
    sorted: bool,
) -> Vec<Vec<Datum>> {
    if !plan.order_by.is_empty() && !sorted {
        out.sort_by(|(a, _), (b, _)| by_keys(plan, a, b));
    }
    let mut rows: Vec<Vec<Datum>> = out.into_iter().map(|(_, v)| v).collect();
    if plan.distinct {
        let mut seen = HashSet::new();
        rows.retain(|r| seen.insert(group_key(r)));
    }
    let offset = usize::try_from(plan.offset).unwrap_or(usize::MAX);
    let rows: Vec<Vec<Datum>> = rows.into_iter().skip(offset).collect();
    match plan.limit {
        Some(l) => rows
            .into_iter()
            .take(usize::try_from(l).unwrap_or(usize::MAX))
            .collect(),
        None => rows,
    }
}

/// A hashable key for grouping and DISTINCT: equal values (1 and 1.0)
/// give equal keys.
pub fn group_key(vals: &[Datum]) -> Vec<u8> {
    let mut k = Vec::new();
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
