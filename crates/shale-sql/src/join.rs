//! Hash joins (docs/tables.md, "Joins").
//!
//! Joins run as nested loops: each table after the first is read once per
//! row of the tables before it, through its access path. A table with no
//! path (no index fits the join) would be scanned whole per outer row;
//! when the join has equalities between its columns and earlier tables'
//! columns of the same kind, it is read once instead into a hash table
//! keyed by those columns, and each outer row probes it.
//!
//! ```text
//! SELECT * FROM a JOIN b ON b.x = a.x AND b.y > a.y     (no index on b.x)
//!   build: every row of b, keyed by group_key(b.x)       (NULL keys left out)
//!   probe: per row of a, the b rows under group_key(a.x); then ON and WHERE
//! ```
//!
//! Equal keys mean equal values only within a kind (integers, decimals,
//! character strings, byte strings, dates, date-times), so a pair of
//! columns of different kinds (an INT and a VARCHAR compare as numbers)
//! stays a nested loop. Every ON and WHERE conjunct is still evaluated on
//! each joined row; the hash only narrows which rows are tried.

use crate::expr::{BExpr, BinOp, Scope};
use crate::select::TableRef;
use crate::types::SqlType;

/// The equi-join columns a table is hashed on.
#[derive(Clone, Debug)]
pub struct HashJoin {
    /// Positions of the keyed columns within the table.
    pub inner: Vec<usize>,
    /// The earlier tables' columns (positions in the joined row) they equal.
    pub outer: Vec<usize>,
}

/// The kinds of values whose equal keys mean equal values.
#[derive(PartialEq)]
enum Kind {
    Integer,
    Decimal,
    Text,
    Binary,
    Date,
    DateTime,
}

fn kind(ty: &SqlType) -> Option<Kind> {
    Some(match ty {
        SqlType::Int { .. } => Kind::Integer,
        SqlType::Decimal { .. } => Kind::Decimal,
        SqlType::Char(_) | SqlType::VarChar(_) | SqlType::Text(_) => Kind::Text,
        SqlType::Binary(_) | SqlType::VarBinary(_) | SqlType::Blob(_) => Kind::Binary,
        SqlType::Date => Kind::Date,
        SqlType::DateTime | SqlType::Timestamp => Kind::DateTime,
        SqlType::Float | SqlType::Double => return None,
    })
}

/// The hash-join keys of `t` (a table after the first, read without an
/// access path) under `conjuncts`, if it has any.
pub fn hash_keys(t: &TableRef, conjuncts: &[&BExpr], scope: &Scope) -> Option<HashJoin> {
    let n = t.def.columns.len();
    let mut join = HashJoin {
        inner: Vec::new(),
        outer: Vec::new(),
    };
    for c in conjuncts {
        let BExpr::Binary(BinOp::Eq, a, b) = c else {
            continue;
        };
        let (BExpr::Col(a), BExpr::Col(b)) = (a.as_ref(), b.as_ref()) else {
            continue;
        };
        let mine = |x: usize| x >= t.offset && x < t.offset + n;
        let (inner, outer) = match (mine(*a), mine(*b)) {
            (true, false) if *b < t.offset => (*a, *b),
            (false, true) if *a < t.offset => (*b, *a),
            _ => continue,
        };
        let ty = |i: usize| scope.cols.get(i).map(|c| &c.ty);
        match (ty(inner).and_then(kind), ty(outer).and_then(kind)) {
            (Some(x), Some(y)) if x == y => {
                join.inner.push(inner - t.offset);
                join.outer.push(outer);
            }
            _ => {}
        }
    }
    (!join.inner.is_empty()).then_some(join)
}
