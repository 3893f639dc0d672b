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
    for (e, desc) in order_by {
        match e {
            BExpr::Col(c) if *c >= t.offset && *c < t.offset + n => {
                cols.push((c - t.offset, *desc))
            }
            _ => return false,
        }
    }
    match t.path.as_mut() {
        Some(p) => {
            let Some(ix) = t.def.indexes.get(p.index) else {
                return false;
            };
            match follows(&t.def, ix, p.eq.len(), &cols) {
                Some(reverse) => {
                    p.reverse = reverse;
                    true
                }
                None => false,
            }
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
                if let Some(reverse) = follows(&t.def, ix, 0, &cols) {
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

/// Positions and directions (true: descending) of an index's key columns,
/// the primary key's appended for a secondary index.
fn key_order(def: &TableDef, ix: &IndexDef) -> Vec<(usize, bool)> {
    let mut order = Vec::new();
    let mut add = |ix: &IndexDef| {
        for (i, id) in ix.columns.iter().enumerate() {
            if let Some(p) = def.position_of_id(*id) {
                order.push((p, ix.desc_at(i)));
            }
        }
    };
    add(ix);
    if !ix.primary && !def.hidden_pk {
        if let Some(pk) = def.primary() {
            add(pk);
        }
    }
    order
}

/// Whether ORDER BY `cols` (table positions, descending?), leaving out
/// columns fixed by the first `fixed` index columns, is a prefix of the
/// index's order after them read forwards or backwards: `Some(backwards)`.
/// Each column's direction must differ from the index's in the same way
/// (`ORDER BY a, b DESC` follows `INDEX (a, b DESC)` forwards and
/// `INDEX (a DESC, b)` backwards).
fn follows(def: &TableDef, ix: &IndexDef, fixed: usize, cols: &[(usize, bool)]) -> Option<bool> {
    let order = key_order(def, ix);
    let (eq, rest) = order.split_at(fixed.min(order.len()));
    let wanted: Vec<(usize, bool)> = cols
        .iter()
        .copied()
        .filter(|(c, _)| !eq.iter().any(|(e, _)| e == c))
        .collect();
    if wanted.len() > rest.len() {
        return None;
    }
    let mut backwards = None;
    for ((pos, ix_desc), (col, want_desc)) in rest.iter().zip(&wanted) {
        if pos != col {
            return None;
        }
        let b = ix_desc != want_desc;
        if *backwards.get_or_insert(b) != b {
            return None;
        }
    }
    Some(backwards.unwrap_or(false))
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
            desc: Vec::new(),
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
        let asc = |cols: &[usize]| cols.iter().map(|c| (*c, false)).collect::<Vec<_>>();
        assert_eq!(follows(&def, pk, 0, &asc(&[0])), Some(false));
        assert_eq!(follows(&def, pk, 0, &asc(&[1])), None);
        assert_eq!(follows(&def, ab, 0, &asc(&[1])), Some(false));
        assert_eq!(follows(&def, ab, 0, &asc(&[1, 2])), Some(false));
        assert_eq!(follows(&def, ab, 0, &asc(&[1, 2, 0])), Some(false)); // the primary key follows
        assert_eq!(follows(&def, ab, 0, &asc(&[2])), None);
        assert_eq!(follows(&def, ab, 1, &asc(&[2])), Some(false)); // WHERE a = ? ORDER BY b
        assert_eq!(follows(&def, ab, 1, &asc(&[1, 2])), Some(false)); // a is fixed
        assert_eq!(follows(&def, ab, 1, &asc(&[3])), None);
        assert_eq!(follows(&def, ab, 2, &asc(&[0])), Some(false));
        assert_eq!(follows(&def, ab, 0, &[(1, true), (2, true)]), Some(true));
        assert_eq!(follows(&def, ab, 0, &[(1, false), (2, true)]), None);
    }

    #[test]
    fn descending_index_columns_set_the_direction() {
        let mut def = table();
        def.indexes[1].desc = vec![false, true]; // INDEX (a, b DESC)
        let ab = &def.indexes[1];
        assert_eq!(follows(&def, ab, 0, &[(1, false), (2, true)]), Some(false));
        assert_eq!(follows(&def, ab, 0, &[(1, true), (2, false)]), Some(true));
        assert_eq!(follows(&def, ab, 0, &[(1, false), (2, false)]), None);
        assert_eq!(follows(&def, ab, 1, &[(2, false)]), Some(true)); // WHERE a = ? ORDER BY b
                                                                     // The primary key (ascending) after b DESC: ORDER BY a, b DESC, id.
        assert_eq!(
            follows(&def, ab, 0, &[(1, false), (2, true), (0, false)]),
            Some(false)
        );
        assert_eq!(
            follows(&def, ab, 0, &[(1, false), (2, true), (0, true)]),
            None
        );
    }
}
