//! INSERT, REPLACE, UPDATE and DELETE.
//!
//! Rows are found through the same access paths as SELECT, then each is
//! locked and re-read at its latest committed version
//! (`Txn::get_for_update_cf`) and the WHERE clause checked again, so a
//! concurrent change is either seen (READ COMMITTED) or reported as a
//! write conflict (REPEATABLE READ / SERIALIZABLE), never lost.
//! Uniqueness: a row's primary key and each unique secondary entry are
//! single keys, locked before they are written.

use crate::catalog::{Catalog, Claim, TableDef};
use crate::error::{Error, Result};
use crate::executor::{Executor, Rows};
use crate::expr::{ident_name, BExpr, Binder, Scope, ScopeCol, SessionFacts};
use crate::index;
use crate::select::{Planner, SelectPlan};
use crate::types::{coerce, compare, sort_order, DateTime, Datum};
use shaledb::txn::Txn;
use sqlparser::ast;
use std::cmp::Ordering;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod target;
pub use target::TargetPlan;

/// What a DML statement did.
#[derive(Default, Debug)]
pub struct DmlResult {
    pub affected: u64,
    /// The first auto-increment value this statement generated.
    pub first_insert_id: Option<u64>,
}

/// How an INSERT treats a row that collides with an existing one.
struct InsertMode<'a> {
    /// REPLACE: delete the old row(s), insert the new one.
    replace: bool,
    /// INSERT IGNORE: skip the new row.
    ignore: bool,
    /// ON DUPLICATE KEY UPDATE: update the old row.
    on_dup: Option<&'a Vec<ast::Assignment>>,
    /// The claim of a generated primary-key value (catalog/autoinc.rs).
    claim: Option<Claim<'a>>,
}

/// Shared state of one DML statement.
pub struct Dml<'a> {
    pub cat: &'a Catalog,
    pub facts: &'a SessionFacts,
    pub params: &'a [Datum],
    pub interrupt: Option<&'a AtomicBool>,
    /// As [`Planner::snapshot`].
    pub snapshot: Option<u64>,
}

fn table_scope(def: &TableDef, alias: &str) -> Scope {
    Scope {
        cols: def
            .columns
            .iter()
            .map(|c| ScopeCol {
                table: alias.to_owned(),
                name: c.name.clone(),
                ty: c.ty.clone(),
                org_db: def.db.clone(),
                org_table: def.name.clone(),
                nullable: c.nullable,
            })
            .collect(),
        outer: None,
    }
}

fn dup_value(def: &TableDef, index: &crate::catalog::IndexDef, row: &[Datum]) -> String {
    def.index_positions(index)
        .iter()
        .map(|p| {
            row.get(*p)
                .and_then(Datum::to_text)
                .unwrap_or_else(|| "NULL".into())
        })
        .collect::<Vec<_>>()
        .join("-")
}

impl<'a> Dml<'a> {
    fn planner(&self) -> Planner<'_> {
        Planner {
            cat: self.cat,
            facts: self.facts,
            params: self.params,
            snapshot: self.snapshot,
            outer: None,
        }
    }

    fn bind(&self, scope: &Scope, e: &ast::Expr) -> Result<BExpr> {
        let planner = self.planner();
        let sub = |q: &ast::Query, outer: &Scope| planner.plan_subquery(q, outer);
        Binder {
            scope,
            facts: self.facts,
            aggs: None,
            subquery: &sub,
            aliases: &[],
        }
        .bind(e)
    }

    fn eval(&self, txn: &Txn, e: &BExpr, row: &[Datum]) -> Result<Datum> {
        let ex = Executor::new(self.cat, txn, self.params, self.interrupt);
        ex.with_cx(&[], |cx| e.eval(row, cx))
    }

    /// The value a column takes when an INSERT does not name it.
    fn default_value(&self, def: &TableDef, pos: usize, row_no: u64) -> Result<Datum> {
        let Some(c) = def.columns.get(pos) else {
            return Ok(Datum::Null);
        };
        if c.default_now {
            return coerce(Datum::DateTime(DateTime::now()), &c.ty, &c.name, row_no);
        }
        match &c.default {
            Some(Some(text)) => coerce(Datum::text(text), &c.ty, &c.name, row_no),
            Some(None) => Ok(Datum::Null),
            None if c.auto_increment || c.nullable => Ok(Datum::Null),
            None => Err(Error::NoDefault(c.name.clone())),
        }
    }

    /// Coerces a full row to the table's types and checks NOT NULL.
    fn check_row(&self, def: &TableDef, row: Vec<Datum>, row_no: u64) -> Result<Vec<Datum>> {
        let mut out = Vec::with_capacity(row.len());
        for (c, v) in def.columns.iter().zip(row) {
            let v = coerce(v, &c.ty, &c.name, row_no)?;
            if v.is_null() && !c.nullable {
                return Err(Error::NotNull(c.name.clone()));
            }
            out.push(v);
        }
        Ok(out)
    }

    /// Runs `ins`; `values`, when given, are its VALUES rows instead of
    /// the statement's own (an INSERT made from a kept head, whose
    /// statement has none: fast_insert.rs).
    pub fn insert(
        &self,
        txn: &mut Txn,
        ins: &ast::Insert,
        values: Option<&[ast::Parens<Vec<ast::Expr>>]>,
    ) -> Result<DmlResult> {
        let ast::TableObject::TableName(name) = &ins.table else {
            return Err(Error::Unsupported("INSERT into a table function".into()));
        };
        let def = self.planner().table(name)?;
        let positions: Vec<usize> = if ins.columns.is_empty() {
            (0..def.columns.len()).collect()
        } else {
            let mut v = Vec::new();
            for c in &ins.columns {
                // The last part names the column; a plain identifier is
                // read in place (copying every column name of every
                // INSERT was an allocation each).
                let n: std::borrow::Cow<'_, str> = match c.0.last() {
                    Some(ast::ObjectNamePart::Identifier(i)) => i.value.as_str().into(),
                    _ => ident_name(c).pop().unwrap_or_default().into(),
                };
                let p = def
                    .column_index(&n)
                    .ok_or_else(|| Error::UnknownColumn(n.to_string(), "field list".into()))?;
                if v.contains(&p) {
                    return Err(Error::DuplicateColumn(n.into_owned()));
                }
                v.push(p);
            }
            v
        };
        let empty = Scope::default();
        let source = ins
            .source
            .as_ref()
            .ok_or_else(|| Error::Unsupported("INSERT ... SET".into()))?;
        // Input rows: VALUES lists, or the result of a SELECT read first.
        let rows = match (values, source.body.as_ref()) {
            (Some(rows), _) => Some(rows),
            (None, ast::SetExpr::Values(v)) => Some(v.rows.as_slice()),
            (None, _) => None,
        };
        let inputs: Vec<Vec<Datum>> = match rows {
            Some(rows) => {
                let mut out = Vec::with_capacity(rows.len());
                for (i, r) in rows.iter().enumerate() {
                    if r.content.len() != positions.len()
                        && !(r.content.is_empty() && ins.columns.is_empty())
                    {
                        return Err(Error::ColumnCount(i as u64 + 1));
                    }
                    let mut vals = Vec::with_capacity(r.content.len());
                    for e in &r.content {
                        vals.push(self.eval(txn, &self.bind(&empty, e)?, &[])?);
                    }
                    out.push(vals);
                }
                out
            }
            None => {
                let plan = self.planner().plan_query(source)?;
                let ex = Executor::new(self.cat, txn, self.params, self.interrupt);
                let (_, rows) = ex.run(&plan)?;
                if let Some(r) = rows.first() {
                    if r.len() != positions.len() {
                        return Err(Error::ColumnCount(1));
                    }
                }
                rows
            }
        };
        let on_dup = match &ins.on {
            Some(ast::OnInsert::DuplicateKeyUpdate(a)) => Some(a),
            Some(_) => return Err(Error::Unsupported("ON CONFLICT".into())),
            None => None,
        };
        let mut result = DmlResult::default();
        for (i, vals) in inputs.into_iter().enumerate() {
            let row_no = i as u64 + 1;
            let mut row = vec![Datum::Null; def.columns.len()];
            let mut given = vec![false; def.columns.len()];
            for (p, v) in positions.iter().zip(vals) {
                if let Some(slot) = row.get_mut(*p) {
                    *slot = v;
                }
                if let Some(g) = given.get_mut(*p) {
                    *g = true;
                }
            }
            for (p, g) in given.iter().enumerate() {
                if !g {
                    if let Some(slot) = row.get_mut(p) {
                        *slot = self.default_value(&def, p, row_no)?;
                    }
                }
            }
            // AUTO_INCREMENT: NULL or 0 takes the next value. One in the
            // primary key is claimed, so the key needs no existence check
            // (catalog/autoinc.rs).
            let (mut claim, mut explicit) = (None, false);
            for (p, c) in def.columns.iter().enumerate() {
                if !c.auto_increment {
                    continue;
                }
                let v = row.get(p).cloned().unwrap_or(Datum::Null);
                let zero = v.to_i128() == Some(0);
                if v.is_null() || zero {
                    let id = if def.primary().is_some_and(|pk| pk.columns.contains(&c.id)) {
                        self.cat.claim_autoinc_into(def.id, &mut claim)?
                    } else {
                        self.cat.next_autoinc(def.id)?
                    };
                    result.first_insert_id.get_or_insert(id);
                    if let Some(slot) = row.get_mut(p) {
                        *slot = Datum::UInt(id);
                    }
                } else {
                    explicit = true;
                }
            }
            let row = self.check_row(&def, row, row_no)?;
            if explicit {
                // The value as stored (check_row may round or convert it),
                // before insert_row locks the key (invariant N of
                // catalog/autoinc.rs).
                self.note_autoinc_of(&def, &row)?;
            }
            let row_id = if def.hidden_pk {
                Some(self.cat.claim_autoinc_into(def.id, &mut claim)?)
            } else {
                None
            };
            result.affected += self.insert_row(
                txn,
                &def,
                row,
                row_id,
                InsertMode {
                    replace: ins.replace_into,
                    ignore: ins.ignore,
                    on_dup,
                    claim,
                },
            )?;
        }
        Ok(result)
    }

    /// Inserts one checked row; returns MySQL's affected-row count for it
    /// (1 inserted, 2 replaced or updated by ON DUPLICATE KEY UPDATE).
    fn insert_row(
        &self,
        txn: &mut Txn,
        def: &Arc<TableDef>,
        row: Vec<Datum>,
        row_id: Option<u64>,
        mode: InsertMode<'_>,
    ) -> Result<u64> {
        let InsertMode {
            replace,
            ignore,
            on_dup,
            claim,
        } = mode;
        let cf = self.cat.data_cf;
        let pk = index::pk_part(def, &row, row_id);
        let key = index::pk_key(def, &pk);
        // A generated key whose claim holds under the key's lock is new
        // (catalog/autoinc.rs); any other key is looked up.
        let fresh = match claim {
            Some(c) => txn.try_lock_fresh_cf(cf, &key)? && c.confirm(),
            None => false,
        };
        // Find a conflicting row: same primary key, or same unique value.
        let mut conflict: Option<(Vec<u8>, String)> = None;
        if !fresh && txn.get_for_update_cf(cf, &key)?.is_some() {
            let name = "PRIMARY".to_owned();
            conflict = Some((
                key.clone(),
                format!(
                    "{}' for key '{}",
                    dup_value(
                        def,
                        def.primary()
                            .ok_or_else(|| Error::BadTableDefinition("no primary index".into()))?,
                        &row
                    ),
                    name
                ),
            ));
        }
        if conflict.is_none() {
            for ix in def.maintained_secondaries().filter(|ix| ix.unique) {
                let (ekey, evalue) = index::secondary_entry(def, ix, &row, &pk);
                if evalue.is_empty() {
                    continue; // a NULL in the index: never a duplicate
                }
                if let Some(other_pk) = txn.get_for_update_cf(cf, &ekey)? {
                    conflict = Some((
                        index::pk_key(def, &other_pk),
                        format!("{}' for key '{}", dup_value(def, ix, &row), ix.name),
                    ));
                    break;
                }
            }
        }
        let Some((other_key, what)) = conflict else {
            self.write_row(txn, def, None, Some((&key, &row, &pk)))?;
            return Ok(1);
        };
        if ignore && on_dup.is_none() && !replace {
            return Ok(0);
        }
        let old_bytes =
            txn.get_for_update_cf(cf, &other_key)?
                .ok_or_else(|| Error::RowCorrupt {
                    table: def.qualified(),
                    reason: "a unique entry names a missing row".into(),
                })?;
        let old = def.decode_row(&old_bytes)?;
        let old_pk = other_key.get(4..).unwrap_or_default().to_vec();
        if replace {
            self.write_row(txn, def, Some((&other_key, &old, &old_pk)), None)?;
            // The new row may collide with yet another row on another key.
            return Ok(1 + self.insert_row(
                txn,
                def,
                row,
                row_id,
                InsertMode {
                    replace: true,
                    ignore: false,
                    on_dup: None,
                    claim: None,
                },
            )?);
        }
        let Some(assignments) = on_dup else {
            let (value, key) = what.split_once("' for key '").unwrap_or((&what, ""));
            return Err(Error::DuplicateKey {
                value: value.to_owned(),
                key: key.to_owned(),
            });
        };
        // ON DUPLICATE KEY UPDATE: VALUES(col) reads the row that failed.
        let scope = table_scope(def, &def.name);
        let mut new = old.clone();
        for a in assignments {
            let col = assignment_column(def, a)?;
            let expr = rewrite_values(&a.value);
            let mut values_cols = scope.cols.clone();
            for c in &mut values_cols {
                c.table = VALUES_TABLE.to_owned();
            }
            let bound = self.bind(
                &Scope {
                    cols: [scope.cols.clone(), values_cols].concat(),
                    outer: None,
                },
                &expr,
            )?;
            let mut both = new.clone();
            both.extend(row.iter().cloned());
            let v = self.eval(txn, &bound, &both)?;
            if let Some(slot) = new.get_mut(col) {
                *slot = v;
            }
        }
        let new = self.check_row(def, new, 1)?;
        // Before update_row locks the new key (invariant N of catalog/autoinc.rs).
        self.note_autoinc_of(def, &new)?;
        if rows_equal(&old, &new) {
            return Ok(0);
        }
        self.update_row(txn, def, &other_key, &old, new)?;
        Ok(2)
    }

    /// Notes the explicit auto-increment value of a row about to be
    /// written by an update, so later generated values start above it.
    pub(crate) fn note_autoinc_of(&self, def: &TableDef, row: &[Datum]) -> Result<()> {
        for (p, c) in def.columns.iter().enumerate() {
            if !c.auto_increment {
                continue;
            }
            let n = row
                .get(p)
                .and_then(Datum::to_i128)
                .and_then(|n| u64::try_from(n).ok());
            if let Some(n) = n {
                self.cat.note_autoinc(def.id, n)?;
            }
        }
        Ok(())
    }

    /// Replaces `old` (at `key`) by `new`, keeping every index in step and
    /// checking uniqueness of changed keys.
    fn update_row(
        &self,
        txn: &mut Txn,
        def: &TableDef,
        key: &[u8],
        old: &[Datum],
        new: Vec<Datum>,
    ) -> Result<()> {
        let cf = self.cat.data_cf;
        let old_pk = key.get(4..).unwrap_or_default().to_vec();
        let new_pk = if def.hidden_pk {
            old_pk.clone()
        } else {
            index::pk_part(def, &new, None)
        };
        let new_key = index::pk_key(def, &new_pk);
        if new_key != key && txn.get_for_update_cf(cf, &new_key)?.is_some() {
            let pk = def
                .primary()
                .ok_or_else(|| Error::BadTableDefinition("no primary index".into()))?;
            return Err(Error::DuplicateKey {
                value: dup_value(def, pk, &new),
                key: "PRIMARY".into(),
            });
        }
        for ix in def.maintained_secondaries().filter(|ix| ix.unique) {
            let (ekey, evalue) = index::secondary_entry(def, ix, &new, &new_pk);
            let (okey, _) = index::secondary_entry(def, ix, old, &old_pk);
            if evalue.is_empty() || ekey == okey {
                continue;
            }
            if txn.get_for_update_cf(cf, &ekey)?.is_some() {
                return Err(Error::DuplicateKey {
                    value: dup_value(def, ix, &new),
                    key: ix.name.clone(),
                });
            }
        }
        self.write_row(
            txn,
            def,
            Some((key, old, &old_pk)),
            Some((&new_key, &new, &new_pk)),
        )
    }

    /// Deletes `old` and/or writes `new` with their index entries; entries
    /// that are the same in both are left alone.
    fn write_row(
        &self,
        txn: &mut Txn,
        def: &TableDef,
        old: Option<(&[u8], &[Datum], &[u8])>,
        new: Option<(&[u8], &[Datum], &[u8])>,
    ) -> Result<()> {
        let cf = self.cat.data_cf;
        for ix in def.maintained_secondaries() {
            let o = old.map(|(_, r, pk)| index::secondary_entry(def, ix, r, pk));
            let n = new.map(|(_, r, pk)| index::secondary_entry(def, ix, r, pk));
            if o == n {
                continue;
            }
            // A non-unique entry's key ends with the row's primary key: only
            // the holder of the row's lock (taken before this) writes it.
            let covered = !ix.unique;
            if let Some((k, _)) = &o {
                if n.as_ref().is_none_or(|(nk, _)| nk != k) {
                    if covered {
                        txn.delete_cf_covered(cf, k)?;
                    } else {
                        txn.delete_cf(cf, k)?;
                    }
                }
            }
            if let Some((k, v)) = &n {
                if covered {
                    txn.put_cf_covered(cf, k, v)?;
                } else {
                    txn.put_cf(cf, k, v)?;
                }
            }
        }
        if let Some((k, _, _)) = old {
            if new.is_none_or(|(nk, _, _)| nk != k) {
                txn.delete_cf(cf, k)?;
            }
        }
        if let Some((k, r, _)) = new {
            txn.put_cf(cf, k, &def.encode_row(r))?;
        }
        Ok(())
    }

    /// Finds the rows a statement targets, locks them, and returns their
    /// latest versions that still match (in ORDER BY order, LIMIT applied).
    pub fn locked_rows(
        &self,
        txn: &mut Txn,
        plan: &SelectPlan,
        order: &[(BExpr, bool)],
        limit: Option<u64>,
        exclusive: bool,
    ) -> Result<Rows> {
        let mut found: Vec<Found> = Vec::new();
        // A primary-key point (OLTP's `UPDATE/DELETE ... WHERE id = ?`):
        // the lock-and-read below reads the row, so it is not read at the
        // snapshot first (that was a second read of the same key).
        let point = self.point_key(txn, plan)?;
        if let Some(key) = &point {
            found.push((Vec::new(), key.clone(), Vec::new()));
        } else {
            let ex = Executor::new(self.cat, txn, self.params, self.interrupt);
            ex.for_each_row(plan, None, &mut |row, keys| {
                let sort = ex.with_cx(&[], |cx| {
                    order
                        .iter()
                        .map(|(e, _)| e.eval(row, cx))
                        .collect::<Result<Vec<_>>>()
                })?;
                found.push((
                    sort,
                    keys.first().cloned().unwrap_or_default(),
                    row.to_vec(),
                ));
                Ok(order
                    .is_empty()
                    .then_some(limit)
                    .flatten()
                    .is_none_or(|l| (found.len() as u64) < l))
            })?;
        }
        if !order.is_empty() {
            found.sort_by(|(a, ..), (b, ..)| {
                for ((x, y), (_, desc)) in a.iter().zip(b).zip(order) {
                    let o = sort_order(x, y);
                    if o != Ordering::Equal {
                        return if *desc { o.reverse() } else { o };
                    }
                }
                Ordering::Equal
            });
        }
        let def = plan
            .tables
            .first()
            .map(|t| t.def.clone())
            .ok_or_else(|| Error::Syntax("no table".into()))?;
        let cf = self.cat.data_cf;
        let mut out = Vec::new();
        for (_, key, _) in found {
            if limit.is_some_and(|l| out.len() as u64 >= l) {
                break;
            }
            let latest = if exclusive {
                txn.get_for_update_cf(cf, &key)
            } else {
                txn.get_for_share_cf(cf, &key)
            };
            let latest = match latest {
                // A point not read at the snapshot first: a row committed
                // after the snapshot is a conflict only if the snapshot
                // sees the row too (else the statement matches nothing,
                // as it would had the snapshot been read first).
                Err(shaledb::Error::WriteConflict { .. })
                    if point.is_some() && txn.get_cf(cf, &key)?.is_none() =>
                {
                    None
                }
                r => r?,
            };
            let Some(bytes) = latest else { continue };
            let row = def.decode_row(&bytes)?;
            let ex = Executor::new(self.cat, txn, self.params, self.interrupt);
            let mut still = true;
            for f in &plan.filter {
                if ex.with_cx(&[], |cx| f.eval(&row, cx))?.truth() != Some(true) {
                    still = false;
                    break;
                }
            }
            if still {
                out.push((key, row));
            }
        }
        Ok(out)
    }

    /// The primary key `plan` reads, when it reads exactly one key of one
    /// table with no filter of its own (the WHERE is in `plan.filter`,
    /// which [`Self::locked_rows`] checks on the row it locks).
    fn point_key(&self, txn: &Txn, plan: &SelectPlan) -> Result<Option<Vec<u8>>> {
        let ([t], []) = (plan.tables.as_slice(), plan.unions.as_slice()) else {
            return Ok(None);
        };
        if t.path.is_none() || !t.filters.is_empty() || t.virtual_rows.is_some() || t.hash.is_some()
        {
            return Ok(None);
        }
        let ex = Executor::new(self.cat, txn, self.params, self.interrupt);
        let row = vec![Datum::Null; plan.width];
        let range = ex.with_cx(&[], |cx| {
            crate::access::key_range(&t.def, t.path.as_ref(), &row, cx)
        })?;
        Ok(match range {
            crate::access::KeyRange::Point(key) => Some(key),
            _ => None,
        })
    }
}

/// A row found by the first pass of UPDATE/DELETE: sort keys, key, row.
type Found = (Vec<Datum>, Vec<u8>, Vec<Datum>);

/// ORDER BY expressions with their DESC flags.
type OrderBy = Vec<(BExpr, bool)>;

/// The table name `VALUES(col)` is rewritten to (see `Scope::resolve`).
pub const VALUES_TABLE: &str = "__values__";

fn rows_equal(a: &[Datum], b: &[Datum]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| match (x.is_null(), y.is_null()) {
                (true, true) => true,
                (false, false) => {
                    compare(x, y) == Some(Ordering::Equal)
                        && std::mem::discriminant(x) == std::mem::discriminant(y)
                        && x.to_bytes() == y.to_bytes()
                }
                _ => false,
            })
}

fn assignment_column(def: &TableDef, a: &ast::Assignment) -> Result<usize> {
    let ast::AssignmentTarget::ColumnName(n) = &a.target else {
        return Err(Error::Unsupported("tuple assignment".into()));
    };
    let name = ident_name(n).pop().unwrap_or_default();
    def.column_index(&name)
        .ok_or_else(|| Error::UnknownColumn(name, "field list".into()))
}

/// `VALUES(col)` in ON DUPLICATE KEY UPDATE becomes a reference to the
/// failed row's column, marked by a `__values__` qualifier.
fn rewrite_values(e: &ast::Expr) -> ast::Expr {
    use ast::Expr as E;
    match e {
        E::Function(f) if ident_name(&f.name).join(".").eq_ignore_ascii_case("VALUES") => {
            if let ast::FunctionArguments::List(l) = &f.args {
                if let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(E::Identifier(id)))] =
                    l.args.as_slice()
                {
                    return E::CompoundIdentifier(vec![ast::Ident::new(VALUES_TABLE), id.clone()]);
                }
            }
            e.clone()
        }
        E::BinaryOp { left, op, right } => E::BinaryOp {
            left: Box::new(rewrite_values(left)),
            op: op.clone(),
            right: Box::new(rewrite_values(right)),
        },
        E::Nested(x) => E::Nested(Box::new(rewrite_values(x))),
        E::UnaryOp { op, expr } => E::UnaryOp {
            op: *op,
            expr: Box::new(rewrite_values(expr)),
        },
        E::Function(f) => {
            let mut f = f.clone();
            if let ast::FunctionArguments::List(l) = &mut f.args {
                for a in &mut l.args {
                    if let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) = a {
                        *x = rewrite_values(x);
                    }
                }
            }
            E::Function(f)
        }
        other => other.clone(),
    }
}
