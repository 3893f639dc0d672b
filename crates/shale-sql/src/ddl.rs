//! DDL: CREATE/DROP DATABASE, CREATE/DROP/ALTER/TRUNCATE/RENAME TABLE,
//! CREATE/DROP INDEX (docs/tables.md, "DDL").
//!
//! Column changes are instant: ADD/DROP COLUMN push a schema version and
//! rewrite no rows (rows carry their version; reads convert). RENAME
//! COLUMN/TABLE, SET/DROP DEFAULT, widening a type and NOT NULL -> NULL
//! change only the dictionary. DROP TABLE, TRUNCATE and DROP INDEX retire
//! index ids and reclaim their key ranges with range deletes. CREATE INDEX
//! is online (`index_build.rs`): row statements go on during the build.

use crate::catalog::{Catalog, ColumnDef, IndexDef, TableDef};
use crate::error::{Error, Result};
use crate::expr::{ident_name, Binder, Scope, SessionFacts};
use crate::types::{coerce, Datum, SqlType};
use shaledb::WriteBatch;
use sqlparser::ast;

fn length(l: &Option<ast::CharacterLength>, default: u32) -> Result<u32> {
    match l {
        Some(ast::CharacterLength::IntegerLength { length, .. }) => u32::try_from(*length)
            .map_err(|_| Error::BadTableDefinition(format!("length {length} too large"))),
        Some(ast::CharacterLength::Max) => Ok(65_535),
        None => Ok(default),
    }
}

fn decimal(info: &ast::ExactNumberInfo) -> Result<SqlType> {
    let (p, s) = match info {
        ast::ExactNumberInfo::None => (10, 0),
        ast::ExactNumberInfo::Precision(p) => (*p, 0),
        ast::ExactNumberInfo::PrecisionAndScale(p, s) => (
            *p,
            u64::try_from(*s).map_err(|_| Error::BadTableDefinition("negative scale".into()))?,
        ),
    };
    if p > 38 {
        return Err(Error::TooBigPrecision(p));
    }
    if s > p || s > 30 {
        return Err(Error::BadTableDefinition(format!(
            "scale {s} larger than precision {p}"
        )));
    }
    Ok(SqlType::Decimal {
        precision: u8::try_from(p).unwrap_or(38),
        scale: u8::try_from(s).unwrap_or(0),
    })
}

/// A column's declared type.
pub fn column_type(dt: &ast::DataType) -> Result<SqlType> {
    use ast::DataType as D;
    let int = |bytes: u8, unsigned: bool| SqlType::Int { bytes, unsigned };
    Ok(match dt {
        D::TinyInt(_) | D::Bool | D::Boolean => int(1, false),
        D::TinyIntUnsigned(_) | D::UTinyInt => int(1, true),
        D::SmallInt(_) | D::Int2(_) => int(2, false),
        D::SmallIntUnsigned(_) | D::Int2Unsigned(_) | D::USmallInt => int(2, true),
        D::MediumInt(_) => int(3, false),
        D::MediumIntUnsigned(_) => int(3, true),
        D::Int(_) | D::Integer(_) | D::Int4(_) => int(4, false),
        D::IntUnsigned(_) | D::IntegerUnsigned(_) | D::Int4Unsigned(_) => int(4, true),
        D::BigInt(_) | D::Int8(_) | D::SignedInteger => int(8, false),
        D::BigIntUnsigned(_) | D::Int8Unsigned(_) | D::UBigInt | D::UnsignedInteger => int(8, true),
        D::Float(_) | D::Real | D::Float4 => SqlType::Float,
        D::Double(_) | D::DoublePrecision | D::Float8 | D::Float64 => SqlType::Double,
        D::Decimal(i) | D::Numeric(i) | D::Dec(i) => decimal(i)?,
        D::Char(l) | D::Character(l) => {
            let n = length(l, 1)?;
            if n > 255 {
                return Err(Error::BadTableDefinition(format!(
                    "Column length too big for CHAR (max = 255); use BLOB or TEXT instead: {n}"
                )));
            }
            SqlType::Char(n)
        }
        D::Varchar(l) | D::CharVarying(l) | D::CharacterVarying(l) | D::Nvarchar(l) => {
            let n = length(l, 0)?;
            if l.is_none() {
                return Err(Error::Syntax("VARCHAR needs a length".into()));
            }
            if n > 16_383 {
                return Err(Error::BadTableDefinition(format!("Column length too big for VARCHAR (max = 16383); use BLOB or TEXT instead: {n}")));
            }
            SqlType::VarChar(n)
        }
        D::Text => SqlType::Text(65_535),
        D::TinyText => SqlType::Text(255),
        D::MediumText => SqlType::Text(16_777_215),
        D::LongText => SqlType::Text(u32::MAX),
        D::Binary(n) => SqlType::Binary(
            u32::try_from(n.unwrap_or(1))
                .map_err(|_| Error::BadTableDefinition("BINARY too long".into()))?,
        ),
        D::Varbinary(l) => match l {
            Some(ast::BinaryLength::IntegerLength { length }) => SqlType::VarBinary(
                u32::try_from(*length)
                    .map_err(|_| Error::BadTableDefinition("VARBINARY too long".into()))?,
            ),
            _ => return Err(Error::Syntax("VARBINARY needs a length".into())),
        },
        D::Blob(_) => SqlType::Blob(65_535),
        D::TinyBlob => SqlType::Blob(255),
        D::MediumBlob => SqlType::Blob(16_777_215),
        D::LongBlob => SqlType::Blob(u32::MAX),
        D::Date => SqlType::Date,
        D::Datetime(_) => SqlType::DateTime,
        D::Timestamp(..) => SqlType::Timestamp,
        other => return Err(Error::Unsupported(format!("type {other}"))),
    })
}

/// The target type of CAST/CONVERT.
pub fn cast_type(dt: &ast::DataType) -> Result<SqlType> {
    use ast::DataType as D;
    Ok(match dt {
        D::Signed | D::SignedInteger | D::Int(_) | D::Integer(_) | D::BigInt(_) => SqlType::Int {
            bytes: 8,
            unsigned: false,
        },
        D::Unsigned
        | D::UnsignedInteger
        | D::IntUnsigned(_)
        | D::BigIntUnsigned(_)
        | D::IntegerUnsigned(_) => SqlType::Int {
            bytes: 8,
            unsigned: true,
        },
        D::Char(_) | D::Character(_) | D::Varchar(_) | D::Text | D::Nvarchar(_) => {
            SqlType::Text(u32::MAX)
        }
        D::Binary(_) | D::Varbinary(_) | D::Blob(_) => SqlType::Blob(u32::MAX),
        D::Custom(name, _) => match ident_name(name).join(" ").to_ascii_uppercase().as_str() {
            "SIGNED" | "SIGNED INTEGER" => SqlType::Int {
                bytes: 8,
                unsigned: false,
            },
            "UNSIGNED" | "UNSIGNED INTEGER" => SqlType::Int {
                bytes: 8,
                unsigned: true,
            },
            other => return Err(Error::Unsupported(format!("CAST to {other}"))),
        },
        other => column_type(other)?,
    })
}

/// Evaluates a DEFAULT expression to its stored text.
fn default_text(e: &ast::Expr, facts: &SessionFacts) -> Result<Option<String>> {
    let scope = Scope::default();
    let no_sub = |_: &ast::Query, _: &Scope| -> Result<crate::select::SelectPlan> {
        Err(Error::Unsupported("subquery in DEFAULT".into()))
    };
    let bound = Binder {
        scope: &scope,
        facts,
        aggs: None,
        subquery: &no_sub,
        aliases: &[],
    }
    .bind(e)?;
    match bound {
        crate::expr::BExpr::Lit(d) => Ok(d.to_text()),
        other if other.is_constant() => {
            let cache = std::cell::RefCell::new(std::collections::HashMap::new());
            let run = |_: &crate::select::SelectPlan, _: &[Datum]| -> Result<Vec<Vec<Datum>>> {
                Ok(Vec::new())
            };
            let cx = crate::expr::EvalCx {
                params: &[],
                aggs: &[],
                outer: &[],
                run_subquery: &run,
                subquery_cache: &cache,
            };
            Ok(other.eval(&[], &cx)?.to_text())
        }
        _ => Err(Error::BadTableDefinition(format!(
            "Invalid default value: {e}"
        ))),
    }
}

fn is_now(e: &ast::Expr) -> bool {
    let s = e.to_string().to_ascii_uppercase();
    s.starts_with("CURRENT_TIMESTAMP") || s.starts_with("NOW(")
}

/// Builds a column definition from its SQL; returns it and whether the
/// column options declared it PRIMARY KEY / UNIQUE.
fn column_def(
    c: &ast::ColumnDef,
    id: u32,
    facts: &SessionFacts,
) -> Result<(ColumnDef, bool, bool)> {
    column_from_parts(
        &c.name.value,
        &c.data_type,
        c.options.iter().map(|o| &o.option),
        id,
        facts,
    )
}

fn column_from_parts<'o>(
    name: &str,
    dt: &ast::DataType,
    options: impl Iterator<Item = &'o ast::ColumnOption>,
    id: u32,
    facts: &SessionFacts,
) -> Result<(ColumnDef, bool, bool)> {
    let ty = column_type(dt)?;
    let mut col = ColumnDef {
        id,
        name: name.to_owned(),
        ty,
        nullable: true,
        default: None,
        default_now: false,
        auto_increment: false,
        instant_default: None,
    };
    let (mut primary, mut unique) = (false, false);
    let mut explicit_null = false;
    for o in options {
        match o {
            ast::ColumnOption::Null => explicit_null = true,
            ast::ColumnOption::NotNull => col.nullable = false,
            ast::ColumnOption::Default(e) if is_now(e) => col.default_now = true,
            ast::ColumnOption::Default(e) => col.default = Some(default_text(e, facts)?),
            ast::ColumnOption::PrimaryKey(_) => primary = true,
            ast::ColumnOption::Unique(_) => unique = true,
            ast::ColumnOption::DialectSpecific(tokens) => {
                let text: String = tokens
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_ascii_uppercase();
                if text.contains("AUTO_INCREMENT") {
                    col.auto_increment = true;
                } else {
                    return Err(Error::Unsupported(format!("column option {text}")));
                }
            }
            ast::ColumnOption::Comment(_)
            | ast::ColumnOption::CharacterSet(_)
            | ast::ColumnOption::Collation(_) => {}
            ast::ColumnOption::OnUpdate(_) => {}
            other => return Err(Error::Unsupported(format!("column option {other}"))),
        }
    }
    if primary {
        col.nullable = false;
    }
    if primary && explicit_null {
        return Err(Error::BadTableDefinition(format!(
            "All parts of a PRIMARY KEY must be NOT NULL: {name}"
        )));
    }
    if col.auto_increment && !col.ty.is_integer() {
        return Err(Error::BadTableDefinition(format!(
            "Incorrect column specifier for column '{name}'"
        )));
    }
    if let Some(Some(text)) = &col.default {
        coerce(Datum::text(text), &col.ty, &col.name, 0).map_err(|_| {
            Error::BadTableDefinition(format!("Invalid default value for '{name}'"))
        })?;
    }
    if matches!(col.default, Some(None)) && !col.nullable {
        return Err(Error::BadTableDefinition(format!(
            "Invalid default value for '{name}'"
        )));
    }
    Ok((col, primary, unique))
}

/// The column ids of an index definition, and per column whether it is
/// DESC (empty if none is, as records written before DESC existed).
pub(crate) fn index_columns(
    def: &TableDef,
    cols: &[ast::IndexColumn],
) -> Result<(Vec<u32>, Vec<bool>)> {
    let mut out = Vec::new();
    let mut desc = Vec::new();
    for c in cols {
        let name = match &c.column.expr {
            ast::Expr::Identifier(id) => id.value.clone(),
            other => return Err(Error::Unsupported(format!("index on expression {other}"))),
        };
        let pos = def
            .column_index(&name)
            .ok_or_else(|| Error::UnknownColumn(name.clone(), "key column".into()))?;
        let col = def
            .columns
            .get(pos)
            .ok_or_else(|| Error::UnknownColumn(name.clone(), "key column".into()))?;
        if matches!(col.ty, SqlType::Text(_) | SqlType::Blob(_)) {
            return Err(Error::BadTableDefinition(format!(
                "BLOB/TEXT column '{name}' used in key specification without a key length"
            )));
        }
        if out.contains(&col.id) {
            return Err(Error::DuplicateColumn(name));
        }
        out.push(col.id);
        desc.push(matches!(
            c.column.options.sort,
            Some(ast::OrderBySort::Desc)
        ));
    }
    if !desc.contains(&true) {
        desc.clear();
    }
    Ok((out, desc))
}

/// A parsed table constraint that is an index.
struct IndexSpec {
    name: Option<String>,
    columns: Vec<ast::IndexColumn>,
    unique: bool,
    primary: bool,
}

fn index_spec(c: &ast::TableConstraint) -> Result<IndexSpec> {
    Ok(match c {
        ast::TableConstraint::PrimaryKey(p) => IndexSpec {
            name: Some("PRIMARY".into()),
            columns: p.columns.clone(),
            unique: true,
            primary: true,
        },
        ast::TableConstraint::Unique(u) => IndexSpec {
            name: u
                .index_name
                .as_ref()
                .or(u.name.as_ref())
                .map(|i| i.value.clone()),
            columns: u.columns.clone(),
            unique: true,
            primary: false,
        },
        ast::TableConstraint::Index(i) => IndexSpec {
            name: i.name.as_ref().map(|n| n.value.clone()),
            columns: i.columns.clone(),
            unique: false,
            primary: false,
        },
        other => return Err(Error::Unsupported(format!("constraint {other}"))),
    })
}

pub(crate) fn unique_index_name(def: &TableDef, base: &str) -> String {
    if !def
        .indexes
        .iter()
        .any(|i| i.name.eq_ignore_ascii_case(base))
    {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|n| !def.indexes.iter().any(|i| i.name.eq_ignore_ascii_case(n)))
        .unwrap_or_default()
}

/// Runs DDL for one session.
pub struct Ddl<'a> {
    pub cat: &'a Catalog,
    pub facts: &'a SessionFacts,
}

impl Ddl<'_> {
    fn resolve(&self, name: &ast::ObjectName) -> Result<(String, String)> {
        let parts = ident_name(name);
        match parts.as_slice() {
            [t] => {
                let db = self.facts.database.clone().ok_or(Error::NoDatabase)?;
                Ok((db, t.clone()))
            }
            [d, t] => Ok((d.clone(), t.clone())),
            _ => Err(Error::Syntax(format!("bad table name {name}"))),
        }
    }

    pub fn create_database(&self, name: &str, if_not_exists: bool) -> Result<bool> {
        let _g = self.cat.ddl_lock();
        if self.cat.database_exists(name) {
            return if if_not_exists {
                Ok(false)
            } else {
                Err(Error::DatabaseExists(name.to_owned()))
            };
        }
        check_name(name)?;
        self.cat.create_database(name)?;
        Ok(true)
    }

    pub fn drop_database(&self, name: &str, if_exists: bool) -> Result<u64> {
        let _g = self.cat.ddl_lock();
        let _s = self.cat.schema.write();
        if !self.cat.database_exists(name) {
            return if if_exists {
                Ok(0)
            } else {
                Err(Error::UnknownDatabase(name.to_owned()))
            };
        }
        let n = self.cat.tables(name).len() as u64;
        self.cat.drop_database(name)?;
        Ok(n)
    }

    pub fn create_table(&self, ct: &ast::CreateTable) -> Result<()> {
        if ct.query.is_some() || ct.like.is_some() {
            return Err(Error::Unsupported("CREATE TABLE ... SELECT/LIKE".into()));
        }
        let (db, name) = self.resolve(&ct.name)?;
        check_name(&name)?;
        let _g = self.cat.ddl_lock();
        if !self.cat.database_exists(&db) {
            return Err(Error::UnknownDatabase(db));
        }
        if self.cat.table(&db, &name).is_ok() {
            return if ct.if_not_exists {
                Ok(())
            } else {
                Err(Error::TableExists(name))
            };
        }
        if ct.columns.is_empty() {
            return Err(Error::BadTableDefinition(
                "A table must have at least 1 column".into(),
            ));
        }
        let mut def = TableDef {
            id: 0,
            db,
            name,
            columns: Vec::new(),
            dropped: Vec::new(),
            indexes: Vec::new(),
            hidden_pk: false,
            versions: Vec::new(),
            next_column_id: 1,
            index_generation: 0,
            building: Vec::new(),
        };
        let mut specs = Vec::new();
        for c in &ct.columns {
            if def.column_index(&c.name.value).is_some() {
                return Err(Error::DuplicateColumn(c.name.value.clone()));
            }
            let (col, primary, unique) = column_def(c, def.next_column_id, self.facts)?;
            def.next_column_id += 1;
            let one = vec![ast::IndexColumn {
                column: ast::OrderByExpr {
                    expr: ast::Expr::Identifier(c.name.clone()),
                    options: ast::OrderByOptions {
                        sort: None,
                        nulls_first: None,
                    },
                    with_fill: None,
                },
                operator_class: None,
            }];
            if primary {
                specs.push(IndexSpec {
                    name: Some("PRIMARY".into()),
                    columns: one,
                    unique: true,
                    primary: true,
                });
            } else if unique {
                specs.push(IndexSpec {
                    name: Some(c.name.value.clone()),
                    columns: one,
                    unique: true,
                    primary: false,
                });
            }
            def.columns.push(col);
        }
        for c in &ct.constraints {
            specs.push(index_spec(c)?);
        }
        let mut batch = WriteBatch::new();
        def.id = self.cat.allocate_id(&mut batch)?;
        if specs.iter().filter(|s| s.primary).count() > 1 {
            return Err(Error::BadTableDefinition(
                "Multiple primary key defined".into(),
            ));
        }
        // The primary index first; a hidden one if none is declared.
        specs.sort_by_key(|s| !s.primary);
        if specs.first().is_none_or(|s| !s.primary) {
            def.hidden_pk = true;
            def.indexes.push(IndexDef {
                id: self.cat.allocate_id(&mut batch)?,
                name: "PRIMARY".into(),
                columns: Vec::new(),
                unique: true,
                primary: true,
                visible_from: 0,
                desc: Vec::new(),
            });
        }
        for s in specs {
            let (columns, desc) = index_columns(&def, &s.columns)?;
            if s.primary {
                for id in &columns {
                    if let Some(c) = def.columns.iter_mut().find(|c| c.id == *id) {
                        c.nullable = false;
                    }
                }
            }
            let base = s.name.clone().unwrap_or_else(|| {
                def.columns
                    .iter()
                    .find(|c| Some(&c.id) == columns.first())
                    .map_or("key".into(), |c| c.name.clone())
            });
            if s.name.is_some()
                && def
                    .indexes
                    .iter()
                    .any(|i| i.name.eq_ignore_ascii_case(&base))
            {
                return Err(Error::DuplicateIndex(base));
            }
            let name = unique_index_name(&def, &base);
            def.indexes.push(IndexDef {
                id: self.cat.allocate_id(&mut batch)?,
                name,
                columns,
                unique: s.unique,
                primary: s.primary,
                visible_from: 0,
                desc,
            });
        }
        let autos = def.columns.iter().filter(|c| c.auto_increment).count();
        if autos > 1
            || (autos == 1
                && !def.indexes.iter().any(|i| {
                    !i.columns.is_empty()
                        && def
                            .columns
                            .iter()
                            .find(|c| c.auto_increment)
                            .is_some_and(|c| i.columns.first() == Some(&c.id))
                }))
        {
            return Err(Error::BadTableDefinition(
                "there can be only one auto column and it must be defined as a key".into(),
            ));
        }
        def.push_version();
        self.cat.put_table(batch, def, None, &[])
    }

    pub fn drop_tables(&self, names: &[ast::ObjectName], if_exists: bool) -> Result<()> {
        let _g = self.cat.ddl_lock();
        let _s = self.cat.schema.write();
        let mut defs = Vec::new();
        let mut missing = Vec::new();
        for n in names {
            let (db, t) = self.resolve(n)?;
            match self.cat.table(&db, &t) {
                Ok(d) => defs.push(d),
                Err(_) => missing.push(format!("{db}.{t}")),
            }
        }
        if !missing.is_empty() && !if_exists {
            return Err(Error::UnknownTable(missing.join(",")));
        }
        for d in defs {
            self.cat.drop_table(&d)?;
        }
        Ok(())
    }

    pub fn truncate(&self, name: &ast::ObjectName) -> Result<()> {
        let (db, t) = self.resolve(name)?;
        let _g = self.cat.ddl_lock();
        let _s = self.cat.schema.write();
        let old = self.cat.table(&db, &t)?;
        let mut def = (*old).clone();
        let mut batch = WriteBatch::new();
        for ix in &mut def.indexes {
            ix.id = self.cat.allocate_id(&mut batch)?;
        }
        def.index_generation += 1;
        self.cat.reset_autoinc(def.id, &mut batch);
        let dropped: Vec<u32> = old.indexes.iter().map(|i| i.id).collect();
        self.cat.put_table(batch, def, None, &dropped)
    }

    pub fn rename_table(&self, from: &ast::ObjectName, to: &ast::ObjectName) -> Result<()> {
        let (db, t) = self.resolve(from)?;
        let (ndb, nt) = self.resolve(to)?;
        check_name(&nt)?;
        let _g = self.cat.ddl_lock();
        let _s = self.cat.schema.write();
        let old = self.cat.table(&db, &t)?;
        if !self.cat.database_exists(&ndb) {
            return Err(Error::UnknownDatabase(ndb));
        }
        if self.cat.table(&ndb, &nt).is_ok() {
            return Err(Error::TableExists(nt));
        }
        let mut def = (*old).clone();
        def.db = ndb;
        def.name = nt;
        self.cat
            .put_table(WriteBatch::new(), def, Some((db, t)), &[])
    }

    pub fn create_index(
        &self,
        table: &ast::ObjectName,
        name: Option<String>,
        columns: &[ast::IndexColumn],
        unique: bool,
    ) -> Result<()> {
        let (db, t) = self.resolve(table)?;
        let _g = self.cat.ddl_lock();
        self.add_index_online(&db, &t, name, columns, unique)
    }

    pub fn drop_index(&self, table: &ast::ObjectName, name: &str) -> Result<()> {
        let (db, t) = self.resolve(table)?;
        let _g = self.cat.ddl_lock();
        let _s = self.cat.schema.write();
        let old = self.cat.table(&db, &t)?;
        let mut def = (*old).clone();
        let pos = def
            .indexes
            .iter()
            .position(|i| i.name.eq_ignore_ascii_case(name) && !(i.primary && def.hidden_pk))
            .ok_or_else(|| Error::CantDrop(name.to_owned()))?;
        if pos == 0 {
            return Err(Error::Unsupported("dropping the primary key".into()));
        }
        let ix = def.indexes.remove(pos);
        def.index_generation += 1;
        self.cat.put_table(WriteBatch::new(), def, None, &[ix.id])
    }

    pub fn alter_table(&self, at: &ast::AlterTable) -> Result<()> {
        let (db, t) = self.resolve(&at.name)?;
        let _g = self.cat.ddl_lock();
        let schema = self.cat.schema.write();
        let old = self.cat.table(&db, &t)?;
        let mut def = (*old).clone();
        let mut dropped_indexes = Vec::new();
        let mut new_indexes = Vec::new();
        let mut columns_changed = false;
        let mut renamed = None;
        for op in &at.operations {
            use ast::AlterTableOperation as A;
            match op {
                A::AddColumn {
                    column_def,
                    column_position,
                    if_not_exists,
                    ..
                } => {
                    if def.column_index(&column_def.name.value).is_some() {
                        if *if_not_exists {
                            continue;
                        }
                        return Err(Error::DuplicateColumn(column_def.name.value.clone()));
                    }
                    let (mut col, primary, unique) =
                        column_def_checked(column_def, def.next_column_id, self.facts)?;
                    if primary || col.auto_increment {
                        return Err(Error::Unsupported(
                            "ADD COLUMN with PRIMARY KEY or AUTO_INCREMENT".into(),
                        ));
                    }
                    if !col.nullable && col.default.is_none() && !col.default_now {
                        // MySQL fills existing rows with the type's implicit default.
                        col.default = None;
                        col.instant_default = Some(implicit_default(&col.ty));
                    } else {
                        col.instant_default = match &col.default {
                            Some(Some(t)) => Some(t.clone()),
                            _ if col.default_now => {
                                Some(crate::types::DateTime::now().format_datetime())
                            }
                            _ => None,
                        };
                    }
                    def.next_column_id += 1;
                    let at = match column_position {
                        None => def.columns.len(),
                        Some(ast::MySQLColumnPosition::First) => 0,
                        Some(ast::MySQLColumnPosition::After(a)) => {
                            def.column_index(&a.value).ok_or_else(|| {
                                Error::UnknownColumn(a.value.clone(), def.name.clone())
                            })? + 1
                        }
                    };
                    let name = col.name.clone();
                    def.columns.insert(at, col);
                    columns_changed = true;
                    if unique {
                        new_indexes.push((Some(name.clone()), vec![index_col(&name)], true));
                    }
                }
                A::DropColumn {
                    column_names,
                    if_exists,
                    ..
                } => {
                    for n in column_names {
                        let Some(pos) = def.column_index(&n.value) else {
                            if *if_exists {
                                continue;
                            }
                            return Err(Error::CantDrop(n.value.clone()));
                        };
                        let id = def.columns.get(pos).map(|c| c.id).unwrap_or_default();
                        if def.primary().is_some_and(|p| p.columns.contains(&id)) {
                            return Err(Error::Unsupported("dropping a primary key column".into()));
                        }
                        if def.columns.len() == 1 {
                            return Err(Error::BadTableDefinition("You can't delete all columns with ALTER TABLE; use DROP TABLE instead".into()));
                        }
                        // Indexes on the column lose it; an index left empty goes.
                        for ix in def.indexes.iter_mut().skip(1) {
                            if ix.columns.contains(&id) {
                                dropped_indexes.push(ix.id);
                            }
                        }
                        def.indexes
                            .retain(|ix| ix.primary || !ix.columns.contains(&id));
                        let col = def.columns.remove(pos);
                        def.dropped.push(col);
                        columns_changed = true;
                    }
                }
                A::RenameColumn {
                    old_column_name,
                    new_column_name,
                } => {
                    let pos = def.column_index(&old_column_name.value).ok_or_else(|| {
                        Error::UnknownColumn(old_column_name.value.clone(), def.name.clone())
                    })?;
                    if def
                        .column_index(&new_column_name.value)
                        .is_some_and(|p| p != pos)
                    {
                        return Err(Error::DuplicateColumn(new_column_name.value.clone()));
                    }
                    if let Some(c) = def.columns.get_mut(pos) {
                        c.name = new_column_name.value.clone();
                    }
                }
                A::AlterColumn { column_name, op } => {
                    let pos = def.column_index(&column_name.value).ok_or_else(|| {
                        Error::UnknownColumn(column_name.value.clone(), def.name.clone())
                    })?;
                    let facts = self.facts;
                    let Some(c) = def.columns.get_mut(pos) else {
                        continue;
                    };
                    match op {
                        ast::AlterColumnOperation::SetDefault { value } if is_now(value) => {
                            c.default_now = true
                        }
                        ast::AlterColumnOperation::SetDefault { value } => {
                            let text = default_text(value, facts)?;
                            if let Some(t) = &text {
                                coerce(Datum::text(t), &c.ty, &c.name, 0).map_err(|_| {
                                    Error::BadTableDefinition(format!(
                                        "Invalid default value for '{}'",
                                        c.name
                                    ))
                                })?;
                            }
                            c.default = Some(text);
                            c.default_now = false;
                        }
                        ast::AlterColumnOperation::DropDefault => {
                            c.default = None;
                            c.default_now = false;
                        }
                        ast::AlterColumnOperation::DropNotNull => c.nullable = true,
                        other => return Err(Error::Unsupported(format!("ALTER COLUMN {other}"))),
                    }
                }
                A::ModifyColumn {
                    col_name,
                    data_type,
                    options,
                    column_position,
                } => {
                    self.modify_column(
                        &mut def,
                        &col_name.value,
                        &col_name.value,
                        data_type,
                        options,
                        column_position.as_ref(),
                    )?;
                }
                A::ChangeColumn {
                    old_name,
                    new_name,
                    data_type,
                    options,
                    column_position,
                } => {
                    self.modify_column(
                        &mut def,
                        &old_name.value,
                        &new_name.value,
                        data_type,
                        options,
                        column_position.as_ref(),
                    )?;
                }
                A::AddConstraint { constraint, .. } => {
                    let s = index_spec(constraint)?;
                    if s.primary {
                        return Err(Error::Unsupported("adding a primary key".into()));
                    }
                    new_indexes.push((s.name, s.columns, s.unique));
                }
                A::DropIndex { name } => {
                    let pos = def
                        .indexes
                        .iter()
                        .position(|i| !i.primary && i.name.eq_ignore_ascii_case(&name.value))
                        .ok_or_else(|| Error::CantDrop(name.value.clone()))?;
                    let ix = def.indexes.remove(pos);
                    dropped_indexes.push(ix.id);
                }
                A::RenameTable { table_name } => {
                    let target = match table_name {
                        ast::RenameTableNameKind::To(n) | ast::RenameTableNameKind::As(n) => n,
                    };
                    let (ndb, nt) = self.resolve(target)?;
                    check_name(&nt)?;
                    if self.cat.table(&ndb, &nt).is_ok() {
                        return Err(Error::TableExists(nt));
                    }
                    renamed = Some((def.db.clone(), def.name.clone()));
                    def.db = ndb;
                    def.name = nt;
                }
                other => return Err(Error::Unsupported(format!("ALTER TABLE {other}"))),
            }
        }
        if columns_changed {
            def.push_version();
        }
        if !dropped_indexes.is_empty() {
            def.index_generation += 1;
        }
        if new_indexes.is_empty() {
            return self
                .cat
                .put_table(WriteBatch::new(), def, renamed, &dropped_indexes);
        }
        // Publish the column changes first, then build each index on them
        // online (the schema lock is taken again only to register and to
        // publish each index).
        let (db, t) = (def.db.clone(), def.name.clone());
        self.cat
            .put_table(WriteBatch::new(), def, renamed, &dropped_indexes)?;
        drop(schema);
        for (name, cols, unique) in new_indexes {
            self.add_index_online(&db, &t, name, &cols, unique)?;
        }
        Ok(())
    }

    /// MODIFY/CHANGE COLUMN: allowed when instant (same storage, wider or
    /// equal type, NOT NULL -> NULL); anything else would rewrite rows.
    fn modify_column(
        &self,
        def: &mut TableDef,
        old: &str,
        new: &str,
        dt: &ast::DataType,
        options: &[ast::ColumnOption],
        pos: Option<&ast::MySQLColumnPosition>,
    ) -> Result<()> {
        let p = def
            .column_index(old)
            .ok_or_else(|| Error::UnknownColumn(old.to_owned(), def.name.clone()))?;
        if !new.eq_ignore_ascii_case(old) && def.column_index(new).is_some() {
            return Err(Error::DuplicateColumn(new.to_owned()));
        }
        let cur = def
            .columns
            .get(p)
            .cloned()
            .ok_or_else(|| Error::UnknownColumn(old.to_owned(), def.name.clone()))?;
        let (mut col, primary, _) = column_from_parts(new, dt, options.iter(), cur.id, self.facts)?;
        if primary {
            return Err(Error::Unsupported("MODIFY COLUMN ... PRIMARY KEY".into()));
        }
        if col.auto_increment && !cur.auto_increment {
            // The existing rows' values were never noted by the counter,
            // which generated keys rely on (catalog/autoinc.rs); MySQL
            // would scan for the largest value first.
            return Err(Error::Unsupported(
                "MODIFY/CHANGE COLUMN adding AUTO_INCREMENT to an existing column".into(),
            ));
        }
        if !cur.ty.widens_to(&col.ty) {
            return Err(Error::Unsupported(format!(
                "changing {} from {} to {} (not instant: only widening is supported)",
                old,
                cur.ty.sql_name(),
                col.ty.sql_name()
            )));
        }
        if cur.nullable && !col.nullable {
            return Err(Error::Unsupported(
                "NULL -> NOT NULL (would need to check every row)".into(),
            ));
        }
        col.instant_default = cur.instant_default.clone();
        if let Some(position) = pos {
            def.columns.remove(p);
            let at = match position {
                ast::MySQLColumnPosition::First => 0,
                ast::MySQLColumnPosition::After(a) => {
                    def.column_index(&a.value)
                        .ok_or_else(|| Error::UnknownColumn(a.value.clone(), def.name.clone()))?
                        + 1
                }
            };
            def.columns.insert(at, col);
            def.push_version();
        } else if let Some(slot) = def.columns.get_mut(p) {
            *slot = col;
        }
        Ok(())
    }
}

fn column_def_checked(
    c: &ast::ColumnDef,
    id: u32,
    facts: &SessionFacts,
) -> Result<(ColumnDef, bool, bool)> {
    column_def(c, id, facts)
}

fn index_col(name: &str) -> ast::IndexColumn {
    ast::IndexColumn {
        column: ast::OrderByExpr {
            expr: ast::Expr::Identifier(ast::Ident::new(name)),
            options: ast::OrderByOptions {
                sort: None,
                nulls_first: None,
            },
            with_fill: None,
        },
        operator_class: None,
    }
}

/// The value MySQL gives existing rows for a new NOT NULL column without
/// a default: 0, '' or the zero date's nearest valid value.
fn implicit_default(ty: &SqlType) -> String {
    match ty {
        SqlType::Date => "1970-01-01".into(),
        SqlType::DateTime | SqlType::Timestamp => "1970-01-01 00:00:00".into(),
        t if t.is_string() => String::new(),
        _ => "0".into(),
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 64 || name.contains('\0') || name.ends_with(' ') {
        return Err(Error::Syntax(format!("Incorrect name '{name}'")));
    }
    Ok(())
}
