//! ORDER BY by index order (docs/tables.md, "Access paths").
//!
//! Rows of an index range come in key order: the index columns after the
//! ones fixed by equalities, then (for a secondary index) the primary key.
//! When the ORDER BY list is such a prefix, all ascending or all
//! descending, reading the first table's range forwards or backwards yields
//! the rows in order: the sort is skipped and a LIMIT stops the read early.
//!
//! ```text
//! INDEX (a, b)   WHERE a = 5 ORDER BY b DESC LIMIT 3   -> range a=5, backwards, 3 rows
//! PRIMARY (id)   ORDER BY id LIMIT 10                  -> primary index from the start, 10 rows
//! INDEX (k)      ORDER BY k LIMIT 10 (no WHERE)        -> index k from the start, 10 lookups
//! INDEX (a, b)   ORDER BY b                            -> sorted (b is not a prefix)
//! ```
//!
//! Joins keep the order of the first table (each of its rows is joined in
//! turn), so ORDER BY columns of the first table qualify there too.

use crate::access::AccessPath;
use crate::catalog::{IndexDef, TableDef};
use crate::expr::BExpr;
use crate::select::TableRef;

/// Whether reading `t` (the first table) through its path yields rows in
/// `order_by` order; may set the path's direction, and when `limited` and
/// `t` has no path, picks an index whose order is asked for.
pub fn use_index_order(t: &mut TableRef, order_by: &[(BExpr, bool)], limited: bool) -> bool {
    if order_by.is_empty() || t.left || t.virtual_rows.is_some() {
        return false;
    }
    let n = t.def.columns.len();
    let mut cols = Vec::with_capacity(order_by.len());
    for (e, _) in order_by {
        match e {
            BExpr::Col(c) if *c >= t.offset && *c < t.offset + n => cols.push(c - t.offset),
            _ => return false,
        }
    }
    let reverse = order_by.first().is_some_and(|(_, d)| *d);
    if order_by.iter().any(|(_, d)| *d != reverse) {
        return false;
    }
    match t.path.as_mut() {
        Some(p) => {
            let Some(ix) = t.def.indexes.get(p.index) else {
                return false;
            };
            let ok = follows(&t.def, ix, p.eq.len(), &cols);
            if ok {
                p.reverse = reverse;
            }
            ok
        }
        None => {
            // A full read: the primary index (unless hidden) always; a
            // secondary index (with a lookup per row) only under a LIMIT.
            let candidates = t
                .def
                .indexes
                .iter()
                .enumerate()
                .filter(|(i, ix)| (*i == 0 && !t.def.hidden_pk) || (limited && !ix.primary));
            for (i, ix) in candidates {
                if follows(&t.def, ix, 0, &cols) {
                    t.path = (i > 0 || reverse).then(|| AccessPath {
                        index: i,
                        eq: Vec::new(),
                        lo: None,
                        hi: None,
                        covering: false,
                        reverse,
                    });
                    return true;
                }
            }
            false
        }
    }
}

/// Whether `cols` (table positions), leaving out columns fixed by the
/// first `fixed` index columns, are a prefix of the index's order after
/// them.
fn follows(def: &TableDef, ix: &IndexDef, fixed: usize, cols: &[usize]) -> bool {
    let mut order = def.index_positions(ix);
    if !ix.primary && !def.hidden_pk {
        if let Some(pk) = def.primary() {
            order.extend(def.index_positions(pk));
        }
    }
    let (eq, rest) = order.split_at(fixed.min(order.len()));
    let wanted: Vec<usize> = cols.iter().copied().filter(|c| !eq.contains(c)).collect();
    wanted.len() <= rest.len() && rest.iter().zip(&wanted).all(|(a, b)| a == b)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure
    use super::follows;
    use crate::catalog::{ColumnDef, IndexDef, TableDef};
    use crate::types::SqlType;

    fn index(id: u32, columns: Vec<u32>, primary: bool) -> IndexDef {
        IndexDef {
            id,
            name: format!("i{id}"),
            columns,
            unique: primary,
            primary,
            visible_from: 0,
        }
    }

    fn table() -> TableDef {
        // Columns id (0), a (1), b (2), c (3); PRIMARY (id), INDEX (a, b).
        let columns = ["id", "a", "b", "c"]
            .iter()
            .zip(1..)
            .map(|(name, id)| ColumnDef {
                id,
                name: (*name).into(),
                ty: SqlType::Int {
                    bytes: 4,
                    unsigned: false,
                },
                nullable: true,
                default: None,
                default_now: false,
                auto_increment: false,
                instant_default: None,
            })
            .collect();
        TableDef {
            id: 1,
            db: "d".into(),
            name: "t".into(),
            columns,
            dropped: Vec::new(),
            indexes: vec![index(10, vec![1], true), index(11, vec![2, 3], false)],
            hidden_pk: false,
            versions: Vec::new(),
            next_column_id: 5,
            index_generation: 0,
            building: Vec::new(),
        }
    }

    #[test]
    fn order_follows_the_index_after_fixed_columns() {
        let def = table();
        let (pk, ab) = (&def.indexes[0], &def.indexes[1]);
        assert!(follows(&def, pk, 0, &[0]));
        assert!(!follows(&def, pk, 0, &[1]));
        assert!(follows(&def, ab, 0, &[1]));
        assert!(follows(&def, ab, 0, &[1, 2]));
        assert!(follows(&def, ab, 0, &[1, 2, 0])); // the primary key follows
        assert!(!follows(&def, ab, 0, &[2]));
        assert!(follows(&def, ab, 1, &[2])); // WHERE a = ? ORDER BY b
        assert!(follows(&def, ab, 1, &[1, 2])); // a is fixed
        assert!(!follows(&def, ab, 1, &[3]));
        assert!(follows(&def, ab, 2, &[0]));
    }
}
