//! What a statement returns: an affected-rows count or a result set with
//! typed column metadata.

use crate::expr::ScopeCol;
use crate::types::{Datum, SqlType};

/// A result column's metadata (MySQL's column definition).
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnMeta {
    /// The name the client sees (alias or expression text).
    pub name: String,
    /// The column's name in its table (empty for computed columns).
    pub org_name: String,
    /// The table alias, and the real table and database behind it.
    pub table: String,
    pub org_table: String,
    pub db: String,
    pub ty: SqlType,
    pub nullable: bool,
    pub primary_key: bool,
    pub auto_increment: bool,
}

impl ColumnMeta {
    /// A computed column of type `ty`.
    pub fn computed(name: &str, ty: SqlType) -> ColumnMeta {
        ColumnMeta {
            name: name.to_owned(),
            org_name: String::new(),
            table: String::new(),
            org_table: String::new(),
            db: String::new(),
            ty,
            nullable: true,
            primary_key: false,
            auto_increment: false,
        }
    }

    pub(crate) fn from_scope(name: &str, c: &ScopeCol) -> ColumnMeta {
        ColumnMeta {
            name: name.to_owned(),
            org_name: c.name.clone(),
            table: c.table.clone(),
            org_table: c.org_table.clone(),
            db: c.org_db.clone(),
            ty: c.ty.clone(),
            nullable: c.nullable,
            primary_key: false,
            auto_increment: false,
        }
    }
}

/// The result of one statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// A statement without a result set.
    Affected {
        rows: u64,
        last_insert_id: u64,
        warnings: u16,
    },
    /// A result set.
    Rows {
        columns: Vec<ColumnMeta>,
        rows: Vec<Vec<Datum>>,
    },
}

impl Output {
    pub fn affected(rows: u64) -> Output {
        Output::Affected {
            rows,
            last_insert_id: 0,
            warnings: 0,
        }
    }

    /// Rows of text columns (SHOW statements).
    pub fn text_rows(names: &[&str], rows: Vec<Vec<Datum>>) -> Output {
        Output::Rows {
            columns: names
                .iter()
                .map(|n| ColumnMeta::computed(n, SqlType::VarChar(255)))
                .collect(),
            rows,
        }
    }
}

/// Makes every value of a column fit the column's declared type class
/// (a protocol encodes a value by its column's type); a column whose
/// values do not all fit becomes text.
pub(crate) fn conform(columns: &mut [ColumnMeta], rows: &mut [Vec<Datum>]) {
    for (i, col) in columns.iter_mut().enumerate() {
        let fits = |d: &Datum| match (&col.ty, d) {
            (_, Datum::Null) => true,
            (
                SqlType::Int {
                    unsigned: false, ..
                },
                Datum::Int(_),
            ) => true,
            (SqlType::Int { unsigned: true, .. }, Datum::UInt(_)) => true,
            (SqlType::Float | SqlType::Double, Datum::Double(_)) => true,
            (SqlType::Decimal { .. }, Datum::Decimal(_)) => true,
            (SqlType::Date, Datum::Date(_)) => true,
            (SqlType::DateTime | SqlType::Timestamp, Datum::DateTime(_)) => true,
            (t, Datum::Bytes(_)) => t.is_string(),
            _ => false,
        };
        if rows.iter().all(|r| r.get(i).is_none_or(fits)) {
            continue;
        }
        let numeric = |d: &Datum| {
            matches!(
                d,
                Datum::Null | Datum::Int(_) | Datum::UInt(_) | Datum::Decimal(_) | Datum::Double(_)
            )
        };
        let all_numeric = rows.iter().all(|r| r.get(i).is_none_or(numeric));
        let any_double = rows
            .iter()
            .any(|r| matches!(r.get(i), Some(Datum::Double(_))));
        if all_numeric && (any_double || matches!(col.ty, SqlType::Double | SqlType::Float)) {
            col.ty = SqlType::Double;
            for r in rows.iter_mut() {
                if let Some(slot) = r.get_mut(i) {
                    if let Some(f) = slot.to_f64() {
                        *slot = Datum::Double(f);
                    }
                }
            }
        } else if all_numeric {
            let scale = rows
                .iter()
                .filter_map(|r| match r.get(i) {
                    Some(Datum::Decimal(d)) => Some(d.scale),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            col.ty = SqlType::Decimal {
                precision: 38,
                scale,
            };
            for r in rows.iter_mut() {
                if let Some(slot) = r.get_mut(i) {
                    if let Some(d) = slot.to_decimal().and_then(|d| d.rescale(scale)) {
                        *slot = Datum::Decimal(d);
                    }
                }
            }
        } else {
            col.ty = SqlType::Text(65_535);
            for r in rows.iter_mut() {
                if let Some(slot) = r.get_mut(i) {
                    if !slot.is_null() {
                        *slot = Datum::Bytes(slot.to_bytes().unwrap_or_default());
                    }
                }
            }
        }
    }
}
