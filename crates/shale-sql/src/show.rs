//! SHOW and DESCRIBE statements, answered from the dictionary.

use crate::catalog::{Catalog, TableDef};
use crate::error::Result;
use crate::expr::like;
use crate::output::{ColumnMeta, Output};
use crate::types::{Datum, SqlType};

fn text(s: &str) -> Datum {
    Datum::text(s)
}

fn opt_text(s: Option<&str>) -> Datum {
    s.map_or(Datum::Null, text)
}

fn matches(pattern: Option<&str>, name: &str) -> bool {
    pattern.is_none_or(|p| like(name.as_bytes(), p.as_bytes()))
}

pub fn databases(cat: &Catalog, pattern: Option<&str>) -> Output {
    let mut names = cat.databases();
    names.push("information_schema".into());
    names.sort();
    let rows = names
        .into_iter()
        .filter(|n| matches(pattern, n))
        .map(|n| vec![text(&n)])
        .collect();
    Output::text_rows(&["Database"], rows)
}

pub fn tables(cat: &Catalog, db: &str, full: bool, pattern: Option<&str>) -> Output {
    let col = format!("Tables_in_{db}");
    let rows: Vec<Vec<Datum>> = cat
        .tables(db)
        .into_iter()
        .filter(|t| matches(pattern, t))
        .map(|t| {
            if full {
                vec![text(&t), text("BASE TABLE")]
            } else {
                vec![text(&t)]
            }
        })
        .collect();
    if full {
        Output::text_rows(&[&col, "Table_type"], rows)
    } else {
        Output::text_rows(&[&col], rows)
    }
}

fn key_kind(def: &TableDef, col_id: u32) -> &'static str {
    if def
        .primary()
        .is_some_and(|p| !def.hidden_pk && p.columns.contains(&col_id))
    {
        "PRI"
    } else if def
        .indexes
        .iter()
        .skip(1)
        .any(|i| i.unique && i.columns.len() == 1 && i.columns.first() == Some(&col_id))
    {
        "UNI"
    } else if def
        .indexes
        .iter()
        .skip(1)
        .any(|i| i.columns.first() == Some(&col_id))
    {
        "MUL"
    } else {
        ""
    }
}

fn default_of(c: &crate::catalog::ColumnDef) -> Datum {
    if c.default_now {
        return text("current_timestamp()");
    }
    match &c.default {
        Some(Some(t)) => text(t),
        _ => Datum::Null,
    }
}

/// DESCRIBE t / SHOW COLUMNS FROM t.
pub fn columns(def: &TableDef, pattern: Option<&str>) -> Output {
    let rows = def
        .columns
        .iter()
        .filter(|c| matches(pattern, &c.name))
        .map(|c| {
            vec![
                text(&c.name),
                text(&c.ty.sql_name()),
                text(if c.nullable { "YES" } else { "NO" }),
                text(key_kind(def, c.id)),
                default_of(c),
                text(if c.auto_increment {
                    "auto_increment"
                } else {
                    ""
                }),
            ]
        })
        .collect();
    Output::text_rows(&["Field", "Type", "Null", "Key", "Default", "Extra"], rows)
}

fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

fn quote_str(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// SHOW CREATE TABLE t.
pub fn create_table(def: &TableDef) -> Output {
    let mut lines = Vec::new();
    for c in &def.columns {
        let mut l = format!("  {} {}", quote_ident(&c.name), c.ty.sql_name());
        if !c.nullable {
            l.push_str(" NOT NULL");
        }
        if c.auto_increment {
            l.push_str(" AUTO_INCREMENT");
        } else if c.default_now {
            l.push_str(" DEFAULT current_timestamp()");
        } else {
            match &c.default {
                Some(Some(t))
                    if matches!(
                        c.ty,
                        SqlType::Int { .. }
                            | SqlType::Decimal { .. }
                            | SqlType::Double
                            | SqlType::Float
                    ) =>
                {
                    l.push_str(&format!(" DEFAULT {t}"))
                }
                Some(Some(t)) => l.push_str(&format!(" DEFAULT {}", quote_str(t))),
                Some(None) => l.push_str(" DEFAULT NULL"),
                None if c.nullable => l.push_str(" DEFAULT NULL"),
                None => {}
            }
        }
        lines.push(l);
    }
    for ix in &def.indexes {
        if ix.primary && def.hidden_pk {
            continue;
        }
        let cols: Vec<String> = ix
            .columns
            .iter()
            .enumerate()
            .filter_map(|(i, id)| {
                let c = def.columns.iter().find(|c| c.id == *id)?;
                let dir = if ix.desc_at(i) { " DESC" } else { "" };
                Some(format!("{}{dir}", quote_ident(&c.name)))
            })
            .collect();
        let cols = cols.join(",");
        lines.push(if ix.primary {
            format!("  PRIMARY KEY ({cols})")
        } else if ix.unique {
            format!("  UNIQUE KEY {} ({cols})", quote_ident(&ix.name))
        } else {
            format!("  KEY {} ({cols})", quote_ident(&ix.name))
        });
    }
    let sql = format!(
        "CREATE TABLE {} (\n{}\n) ENGINE=ShaleDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        quote_ident(&def.name),
        lines.join(",\n")
    );
    Output::text_rows(
        &["Table", "Create Table"],
        vec![vec![text(&def.name), text(&sql)]],
    )
}

/// SHOW INDEX FROM t.
pub fn indexes(def: &TableDef) -> Output {
    let mut rows = Vec::new();
    for ix in &def.indexes {
        if ix.primary && def.hidden_pk {
            continue;
        }
        for (seq, id) in ix.columns.iter().enumerate() {
            let c = def.columns.iter().find(|c| c.id == *id);
            rows.push(vec![
                text(&def.name),
                Datum::Int(i64::from(!ix.unique)),
                text(&ix.name),
                Datum::Int(seq as i64 + 1),
                opt_text(c.map(|c| c.name.as_str())),
                text(if ix.desc_at(seq) { "D" } else { "A" }),
                text(if c.is_some_and(|c| c.nullable) {
                    "YES"
                } else {
                    ""
                }),
                text("LSM"),
            ]);
        }
    }
    let mut out = Output::text_rows(
        &[
            "Table",
            "Non_unique",
            "Key_name",
            "Seq_in_index",
            "Column_name",
            "Collation",
            "Null",
            "Index_type",
        ],
        rows,
    );
    if let Output::Rows { columns, .. } = &mut out {
        for i in [1, 3] {
            if let Some(c) = columns.get_mut(i) {
                *c = ColumnMeta::computed(
                    &c.name.clone(),
                    SqlType::Int {
                        bytes: 8,
                        unsigned: false,
                    },
                );
            }
        }
    }
    out
}

/// SHOW VARIABLES [LIKE].
pub fn variables(vars: &[(String, Datum)], pattern: Option<&str>) -> Result<Output> {
    let rows = vars
        .iter()
        .filter(|(n, _)| matches(pattern, n))
        .map(|(n, v)| vec![text(n), Datum::Bytes(v.to_bytes().unwrap_or_default())])
        .collect();
    Ok(Output::text_rows(&["Variable_name", "Value"], rows))
}
