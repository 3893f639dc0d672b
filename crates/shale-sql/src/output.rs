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
    let mut stats = ConformStats::new(columns);
    for r in rows.iter() {
        stats.observe(r);
    }
    let plan = stats.decide(columns);
    for r in rows.iter_mut() {
        plan.apply(r);
    }
}

fn fits(ty: &SqlType, d: &Datum) -> bool {
    match (ty, d) {
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
    }
}

/// Whether every value of `row` fits its column's type as declared (a
/// streamed row must: it goes out before later rows are seen).
pub(crate) fn row_fits(columns: &[ColumnMeta], row: &[Datum]) -> bool {
    columns.iter().zip(row).all(|(c, d)| fits(&c.ty, d))
}

/// What [`conform`] needs to know of a column's values, gathered row by
/// row (a sort gathers it as rows come in, then streams them out).
#[derive(Clone, Copy)]
struct ColumnStats {
    all_fit: bool,
    all_numeric: bool,
    any_double: bool,
    scale: u8,
}

pub(crate) struct ConformStats {
    types: Vec<SqlType>,
    cols: Vec<ColumnStats>,
}

impl ConformStats {
    pub(crate) fn new(columns: &[ColumnMeta]) -> ConformStats {
        ConformStats {
            types: columns.iter().map(|c| c.ty.clone()).collect(),
            cols: vec![
                ColumnStats {
                    all_fit: true,
                    all_numeric: true,
                    any_double: false,
                    scale: 0,
                };
                columns.len()
            ],
        }
    }

    pub(crate) fn observe(&mut self, row: &[Datum]) {
        for ((st, ty), d) in self.cols.iter_mut().zip(&self.types).zip(row) {
            st.all_fit &= fits(ty, d);
            st.all_numeric &= matches!(
                d,
                Datum::Null | Datum::Int(_) | Datum::UInt(_) | Datum::Decimal(_) | Datum::Double(_)
            );
            st.any_double |= matches!(d, Datum::Double(_));
            if let Datum::Decimal(x) = d {
                st.scale = st.scale.max(x.scale);
            }
        }
    }

    /// Sets the columns' types; the returned plan converts each row.
    pub(crate) fn decide(self, columns: &mut [ColumnMeta]) -> Conversions {
        let mut out = Vec::with_capacity(columns.len());
        for (col, st) in columns.iter_mut().zip(self.cols) {
            let c = if st.all_fit {
                Conversion::Keep
            } else if st.all_numeric
                && (st.any_double || matches!(col.ty, SqlType::Double | SqlType::Float))
            {
                col.ty = SqlType::Double;
                Conversion::Double
            } else if st.all_numeric {
                col.ty = SqlType::Decimal {
                    precision: 38,
                    scale: st.scale,
                };
                Conversion::Decimal(st.scale)
            } else {
                col.ty = SqlType::Text(65_535);
                Conversion::Text
            };
            out.push(c);
        }
        Conversions(out)
    }
}

#[derive(Clone, Copy)]
enum Conversion {
    Keep,
    Double,
    Decimal(u8),
    Text,
}

/// Per-column conversions [`ConformStats::decide`] chose.
pub(crate) struct Conversions(Vec<Conversion>);

impl Conversions {
    pub(crate) fn apply(&self, row: &mut [Datum]) {
        for (c, slot) in self.0.iter().zip(row.iter_mut()) {
            match c {
                Conversion::Keep => {}
                Conversion::Double => {
                    if let Some(f) = slot.to_f64() {
                        *slot = Datum::Double(f);
                    }
                }
                Conversion::Decimal(scale) => {
                    if let Some(d) = slot.to_decimal().and_then(|d| d.rescale(*scale)) {
                        *slot = Datum::Decimal(d);
                    }
                }
                Conversion::Text => {
                    if !slot.is_null() {
                        *slot = Datum::Bytes(slot.to_bytes().unwrap_or_default());
                    }
                }
            }
        }
    }
}
