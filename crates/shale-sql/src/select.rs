//! SELECT planning: tables, access paths, bound expressions, ORDER BY by
//! index order, hash-join keys; execution is in `executor.rs`.
//!
//! A statement is planned on each execution, with its parameters known
//! (point queries plan in microseconds; a cached plan would save little).
//! Execution streams rows from the first table's path; each joined table
//! is read per row of the tables before it, through its own path.

use crate::access::{self, AccessPath};
use crate::catalog::{Catalog, TableDef};
use crate::error::{Error, Result};
use crate::expr::{ident_name, AggCall, BExpr, Binder, Scope, ScopeCol, SessionFacts};
use crate::infer::infer;
use crate::output::ColumnMeta;
use crate::types::{Datum, SqlType};
use sqlparser::ast;
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
    /// The result's column definitions, made from `projection` the first
    /// time the plan runs ([`SelectPlan::columns`]): a cached plan (a
    /// prepared statement's) hands the same ones to every execution
    /// instead of five strings cloned per column per execution. So
    /// `projection` must not change once the plan has run (a cached plan is
    /// shared and never changes).
    pub(crate) out_columns: std::sync::OnceLock<Vec<crate::output::ColumnMeta>>,
    /// Whether the plan is a point select and how it decodes its row
    /// (`point_select.rs`), worked out the first time it runs; the same
    /// rule as `out_columns`: a plan that has run does not change.
    pub(crate) point: std::sync::OnceLock<Option<crate::point_select::PointShape>>,
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

impl SelectPlan {
    /// The result's column definitions (see `out_columns`).
    pub(crate) fn columns(&self) -> &[crate::output::ColumnMeta] {
        self.out_columns
            .get_or_init(|| self.projection.iter().map(|c| c.meta.clone()).collect())
    }
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
            // Planned at prepare time, without values (Session::prepare
            // passes none): any count will do for the result's columns.
            ast::Value::Placeholder(p) => match params.get(crate::expr::placeholder_index(p)?) {
                Some(v) => v.clone(),
                None if params.is_empty() => return Ok(u64::MAX),
                None => Datum::Null,
            },
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
        use ast::ObjectNamePart::Identifier as Id;
        // Plain identifiers are looked up as they are (every statement
        // names its table; copying the parts cost two allocations).
        match name.0.as_slice() {
            [Id(t)] => self.table_in_current(&t.value),
            [Id(d), Id(t)] => self.cat.table(&d.value, &t.value),
            _ => match ident_name(name).as_slice() {
                [t] => self.table_in_current(t),
                [d, t] => self.cat.table(d, t),
                _ => Err(Error::Syntax(format!("bad table name {name}"))),
            },
        }
    }

    fn table_in_current(&self, t: &str) -> Result<Arc<TableDef>> {
        let db = self.facts.database.as_deref().ok_or(Error::NoDatabase)?;
        if !self.cat.database_exists(db) {
            return Err(Error::UnknownDatabase(db.to_owned()));
        }
        self.cat.table(db, t)
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
                    out_columns: Default::default(),
                    point: Default::default(),
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
        // Every expression of the statement: the columns it reads (for
        // covering paths and projected decoding) and the outer-row columns
        // it reads (a correlated subquery). Access-path values come from
        // conjuncts that stay in the filters, so they are covered too.
        let (mut used, mut outer_refs) = (Vec::new(), Vec::new());
        for e in projection
            .iter()
            .map(|c| &c.expr)
            .chain(&filter)
            .chain(&group_by)
            .chain(having.iter())
            .chain(order_by.iter().map(|(e, _)| e))
            .chain(aggs.iter().filter_map(|a| a.arg.as_ref()))
            .chain(tables.iter().flat_map(|t| t.on.iter().chain(&t.filters)))
        {
            e.collect_columns(&mut used);
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
            out_columns: Default::default(),
            point: Default::default(),
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
