//! `information_schema`: SCHEMATA, TABLES, COLUMNS and STATISTICS as
//! clients and ORMs read them, built from the dictionary when a query
//! names them (read-only, not stored).

use crate::catalog::{Catalog, ColumnDef, IndexDef, TableDef};
use crate::types::{Datum, SqlType};
use std::sync::Arc;

pub const NAME: &str = "information_schema";

/// A virtual table: its definition (for binding) and its rows.
pub struct Virtual {
    pub def: Arc<TableDef>,
    pub rows: Arc<Vec<Vec<Datum>>>,
}

fn text_col(id: u32, name: &str) -> ColumnDef {
    col(id, name, SqlType::VarChar(512))
}

fn col(id: u32, name: &str, ty: SqlType) -> ColumnDef {
    ColumnDef {
        id,
        name: name.to_owned(),
        ty,
        nullable: true,
        default: None,
        default_now: false,
        auto_increment: false,
        instant_default: None,
    }
}

fn def(name: &str, columns: Vec<ColumnDef>) -> Arc<TableDef> {
    let mut d = TableDef {
        id: 0,
        db: NAME.to_owned(),
        name: name.to_owned(),
        next_column_id: columns.len() as u32 + 1,
        columns,
        dropped: Vec::new(),
        indexes: vec![IndexDef {
            desc: Vec::new(),
            id: 0,
            name: "PRIMARY".into(),
            columns: Vec::new(),
            unique: true,
            primary: true,
            visible_from: 0,
        }],
        hidden_pk: true,
        versions: Vec::new(),
        index_generation: 0,
        building: Vec::new(),
    };
    d.push_version();
    Arc::new(d)
}

fn t(s: &str) -> Datum {
    Datum::text(s)
}

fn int(n: u64) -> Datum {
    Datum::UInt(n)
}

fn data_type(ty: &SqlType) -> String {
    ty.sql_name()
        .split(['(', ' '])
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn all_tables(cat: &Catalog) -> Vec<Arc<TableDef>> {
    let mut out = Vec::new();
    for db in cat.databases() {
        for name in cat.tables(&db) {
            if let Ok(d) = cat.table(&db, &name) {
                out.push(d);
            }
        }
    }
    out
}

/// The virtual table `name` (case-insensitive), if there is one.
pub fn table(cat: &Catalog, name: &str) -> Option<Virtual> {
    let big = SqlType::Int {
        bytes: 8,
        unsigned: true,
    };
    let (d, rows) = match name.to_ascii_uppercase().as_str() {
        "SCHEMATA" => {
            let d = def(
                "SCHEMATA",
                vec![
                    text_col(1, "CATALOG_NAME"),
                    text_col(2, "SCHEMA_NAME"),
                    text_col(3, "DEFAULT_CHARACTER_SET_NAME"),
                    text_col(4, "DEFAULT_COLLATION_NAME"),
                ],
            );
            let mut names = cat.databases();
            names.push(NAME.to_owned());
            names.sort();
            let rows = names
                .iter()
                .map(|n| vec![t("def"), t(n), t("utf8mb4"), t("utf8mb4_bin")])
                .collect();
            (d, rows)
        }
        "TABLES" => {
            let d = def(
                "TABLES",
                vec![
                    text_col(1, "TABLE_CATALOG"),
                    text_col(2, "TABLE_SCHEMA"),
                    text_col(3, "TABLE_NAME"),
                    text_col(4, "TABLE_TYPE"),
                    text_col(5, "ENGINE"),
                    col(6, "TABLE_ROWS", big.clone()),
                    text_col(7, "TABLE_COLLATION"),
                    text_col(8, "TABLE_COMMENT"),
                ],
            );
            let rows = all_tables(cat)
                .iter()
                .map(|x| {
                    vec![
                        t("def"),
                        t(&x.db),
                        t(&x.name),
                        t("BASE TABLE"),
                        t("ShaleDB"),
                        Datum::Null,
                        t("utf8mb4_bin"),
                        t(""),
                    ]
                })
                .collect();
            (d, rows)
        }
        "COLUMNS" => {
            let d = def(
                "COLUMNS",
                vec![
                    text_col(1, "TABLE_CATALOG"),
                    text_col(2, "TABLE_SCHEMA"),
                    text_col(3, "TABLE_NAME"),
                    text_col(4, "COLUMN_NAME"),
                    col(5, "ORDINAL_POSITION", big.clone()),
                    text_col(6, "COLUMN_DEFAULT"),
                    text_col(7, "IS_NULLABLE"),
                    text_col(8, "DATA_TYPE"),
                    col(9, "CHARACTER_MAXIMUM_LENGTH", big.clone()),
                    col(10, "NUMERIC_PRECISION", big.clone()),
                    col(11, "NUMERIC_SCALE", big.clone()),
                    text_col(12, "COLUMN_TYPE"),
                    text_col(13, "COLUMN_KEY"),
                    text_col(14, "EXTRA"),
                ],
            );
            let mut rows = Vec::new();
            for x in all_tables(cat) {
                for (i, c) in x.columns.iter().enumerate() {
                    let (len, prec, scale) = match &c.ty {
                        SqlType::Char(n)
                        | SqlType::VarChar(n)
                        | SqlType::Text(n)
                        | SqlType::Binary(n)
                        | SqlType::VarBinary(n)
                        | SqlType::Blob(n) => (int(u64::from(*n)), Datum::Null, Datum::Null),
                        SqlType::Decimal { precision, scale } => (
                            Datum::Null,
                            int(u64::from(*precision)),
                            int(u64::from(*scale)),
                        ),
                        SqlType::Int { bytes, .. } => (
                            Datum::Null,
                            int([3u64, 5, 7, 10, 19]
                                .get(usize::from(*bytes).min(5).saturating_sub(1))
                                .copied()
                                .unwrap_or(19)),
                            int(0),
                        ),
                        _ => (Datum::Null, Datum::Null, Datum::Null),
                    };
                    let key = if x
                        .primary()
                        .is_some_and(|p| !x.hidden_pk && p.columns.contains(&c.id))
                    {
                        "PRI"
                    } else if x
                        .indexes
                        .iter()
                        .skip(1)
                        .any(|ix| ix.columns.first() == Some(&c.id) && ix.unique)
                    {
                        "UNI"
                    } else if x
                        .indexes
                        .iter()
                        .skip(1)
                        .any(|ix| ix.columns.first() == Some(&c.id))
                    {
                        "MUL"
                    } else {
                        ""
                    };
                    let default = match &c.default {
                        Some(Some(v)) => t(v),
                        _ if c.default_now => t("current_timestamp()"),
                        _ => Datum::Null,
                    };
                    rows.push(vec![
                        t("def"),
                        t(&x.db),
                        t(&x.name),
                        t(&c.name),
                        int(i as u64 + 1),
                        default,
                        t(if c.nullable { "YES" } else { "NO" }),
                        t(&data_type(&c.ty)),
                        len,
                        prec,
                        scale,
                        t(&c.ty.sql_name()),
                        t(key),
                        t(if c.auto_increment {
                            "auto_increment"
                        } else {
                            ""
                        }),
                    ]);
                }
            }
            (d, rows)
        }
        "STATISTICS" => {
            let d = def(
                "STATISTICS",
                vec![
                    text_col(1, "TABLE_CATALOG"),
                    text_col(2, "TABLE_SCHEMA"),
                    text_col(3, "TABLE_NAME"),
                    col(4, "NON_UNIQUE", big.clone()),
                    text_col(5, "INDEX_SCHEMA"),
                    text_col(6, "INDEX_NAME"),
                    col(7, "SEQ_IN_INDEX", big),
                    text_col(8, "COLUMN_NAME"),
                    text_col(9, "NULLABLE"),
                    text_col(10, "INDEX_TYPE"),
                ],
            );
            let mut rows = Vec::new();
            for x in all_tables(cat) {
                for ix in &x.indexes {
                    if ix.primary && x.hidden_pk {
                        continue;
                    }
                    for (seq, id) in ix.columns.iter().enumerate() {
                        let c = x.columns.iter().find(|c| c.id == *id);
                        rows.push(vec![
                            t("def"),
                            t(&x.db),
                            t(&x.name),
                            int(u64::from(!ix.unique)),
                            t(&x.db),
                            t(&ix.name),
                            int(seq as u64 + 1),
                            c.map_or(Datum::Null, |c| t(&c.name)),
                            t(if c.is_some_and(|c| c.nullable) {
                                "YES"
                            } else {
                                ""
                            }),
                            t("LSM"),
                        ]);
                    }
                }
            }
            (d, rows)
        }
        _ => return None,
    };
    Some(Virtual {
        def: d,
        rows: Arc::new(rows),
    })
}
