//! Access paths: which index a table is read through and which key range
//! (docs/tables.md, "Access paths").
//!
//! From the conjuncts that constrain one table's columns by values known
//! before the table is read (constants, parameters, columns of tables
//! joined earlier), the planner picks, per table, the index with the
//! longest equality prefix, then a range on the next column:
//!
//! ```text
//! WHERE id BETWEEN ? AND ?      -> PRIMARY range [id >= ?, id <= ?]
//! WHERE k = 5 AND c > 'x'       -> k_1 (k) equality, no range column
//! JOIN u ON u.id = t.uid        -> u PRIMARY point lookup per row of t
//! ```
//!
//! A path only narrows what is read: every predicate is still evaluated on
//! every row, so a bound that cannot be converted exactly to the column's
//! type is simply dropped (a wider range), never a wrong answer.

use crate::catalog::TableDef;
use crate::error::Result;
use crate::expr::{BExpr, BinOp, EvalCx};
use crate::index;
use crate::keycodec::{encode_dir, prefix_successor};
use crate::types::{coerce, compare, Datum, SqlType};
use std::cmp::Ordering;

/// How one table is read.
#[derive(Clone, Debug)]
pub struct AccessPath {
    /// Index into `TableDef::indexes` (0: primary).
    pub index: usize,
    /// Values for the index's leading columns.
    pub eq: Vec<BExpr>,
    /// Bounds on the next column: (value, inclusive).
    pub lo: Option<(BExpr, bool)>,
    pub hi: Option<(BExpr, bool)>,
    /// The index holds every column the query reads from this table
    /// (index columns + primary key): rows come from the index entries,
    /// without a lookup of the row ("Using index").
    pub covering: bool,
    /// Read the range backwards (ORDER BY ... DESC by index order).
    pub reverse: bool,
}

impl AccessPath {
    /// MySQL's EXPLAIN `type` for this path.
    pub fn kind(&self, def: &TableDef) -> &'static str {
        let Some(ix) = def.indexes.get(self.index) else {
            return "ALL";
        };
        let bounded = self.lo.is_some() || self.hi.is_some();
        let full = self.eq.len() == ix.columns.len() && !bounded;
        if self.eq.is_empty() && !bounded {
            // The whole index, read for its order.
            "index"
        } else if full && (ix.primary || ix.unique) {
            "const"
        } else if self.lo.is_some() || self.hi.is_some() {
            "range"
        } else {
            "ref"
        }
    }
}

/// A column constrained by a value expression.
struct Constraint<'a> {
    col: usize,
    op: BinOp,
    value: &'a BExpr,
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::LtEq => BinOp::GtEq,
        BinOp::Gt => BinOp::Lt,
        BinOp::GtEq => BinOp::LtEq,
        other => other,
    }
}

/// Whether `e` can be evaluated before the table at `offset` is read.
fn known_before(e: &BExpr, offset: usize) -> bool {
    !e.has_agg_or_subquery() && e.max_column().is_none_or(|m| m < offset)
}

fn constraints<'a>(conjuncts: &[&'a BExpr], offset: usize, width: usize) -> Vec<Constraint<'a>> {
    let mine = |e: &BExpr| match e {
        BExpr::Col(c) if *c >= offset && *c < offset + width => Some(*c - offset),
        _ => None,
    };
    let mut out = Vec::new();
    for c in conjuncts {
        match c {
            BExpr::Binary(
                op @ (BinOp::Eq | BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq),
                a,
                b,
            ) => {
                if let (Some(col), true) = (mine(a), known_before(b, offset)) {
                    out.push(Constraint {
                        col,
                        op: *op,
                        value: b,
                    });
                } else if let (Some(col), true) = (mine(b), known_before(a, offset)) {
                    out.push(Constraint {
                        col,
                        op: flip(*op),
                        value: a,
                    });
                }
            }
            BExpr::Between(x, lo, hi, false) => {
                if let Some(col) = mine(x) {
                    if known_before(lo, offset) && known_before(hi, offset) {
                        out.push(Constraint {
                            col,
                            op: BinOp::GtEq,
                            value: lo,
                        });
                        out.push(Constraint {
                            col,
                            op: BinOp::LtEq,
                            value: hi,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The best path for the table at `offset` under `conjuncts`, or None for
/// a full scan of the primary index.
/// Indexes published after `snapshot` (a transaction's read view) may lack
/// entries of rows it sees, so they are not chosen for it.
pub fn choose(
    def: &TableDef,
    offset: usize,
    conjuncts: &[&BExpr],
    snapshot: Option<u64>,
) -> Option<AccessPath> {
    let cons = constraints(conjuncts, offset, def.columns.len());
    if cons.is_empty() {
        return None;
    }
    let mut best: Option<(u32, AccessPath)> = None;
    for (i, ix) in def.indexes.iter().enumerate() {
        if (ix.primary && def.hidden_pk) || snapshot.is_some_and(|s| s < ix.visible_from) {
            continue;
        }
        let positions = def.index_positions(ix);
        let mut eq = Vec::new();
        for p in &positions {
            match cons.iter().find(|c| c.col == *p && c.op == BinOp::Eq) {
                Some(c) => eq.push(c.value.clone()),
                None => break,
            }
        }
        let (mut lo, mut hi) = (None, None);
        if let Some(next) = positions.get(eq.len()) {
            for c in cons.iter().filter(|c| c.col == *next) {
                match c.op {
                    BinOp::Gt | BinOp::GtEq if lo.is_none() => {
                        lo = Some((c.value.clone(), c.op == BinOp::GtEq))
                    }
                    BinOp::Lt | BinOp::LtEq if hi.is_none() => {
                        hi = Some((c.value.clone(), c.op == BinOp::LtEq))
                    }
                    _ => {}
                }
            }
        }
        if eq.is_empty() && lo.is_none() && hi.is_none() {
            continue;
        }
        let full = eq.len() == positions.len();
        let mut score =
            eq.len() as u32 * 4 + u32::from(lo.is_some()) * 2 + u32::from(hi.is_some()) * 2;
        if full && (ix.primary || ix.unique) {
            score += 100;
        }
        if ix.primary {
            score += 1;
        }
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((
                score,
                AccessPath {
                    index: i,
                    eq,
                    lo,
                    hi,
                    covering: false,
                    reverse: false,
                },
            ));
        }
    }
    best.map(|(_, p)| p)
}

/// Marks `path` covering if the index (with the primary key) holds every
/// column in `needed` (positions within the table).
pub fn mark_covering(def: &TableDef, path: &mut AccessPath, needed: &[usize]) {
    let Some(ix) = def.indexes.get(path.index) else {
        return;
    };
    if ix.primary {
        return;
    }
    let mut have = def.index_positions(ix);
    if !def.hidden_pk {
        if let Some(pk) = def.primary() {
            have.extend(def.index_positions(pk));
        }
    }
    path.covering = needed.iter().all(|p| have.contains(p));
}

/// A concrete key range to read.
pub enum KeyRange {
    /// Nothing can match (an equality with NULL).
    Empty,
    /// One primary key.
    Point(Vec<u8>),
    /// `[lo, hi)` of index `index`; `covering`: rows come from the
    /// entries (see [`AccessPath::covering`]); `reverse`: read backwards.
    /// `ordered`: every equality value of the path was encoded, so the
    /// rows come in the order of the index's remaining columns (a value
    /// that does not convert exactly to its column's type widens the range
    /// to rows that differ in that column).
    Range {
        index: usize,
        lo: Vec<u8>,
        hi: Option<Vec<u8>>,
        covering: bool,
        reverse: bool,
        ordered: bool,
    },
}

/// `v` converted to `ty` if the conversion is exact.
pub fn exact(v: &Datum, ty: &SqlType) -> Option<Datum> {
    let c = coerce(v.clone(), ty, "", 0).ok()?;
    (compare(&c, v) == Some(Ordering::Equal)).then_some(c)
}

/// Evaluates a path's values against `row` (the outer tables' part filled
/// in) into a key range.
pub fn key_range(
    def: &TableDef,
    path: Option<&AccessPath>,
    row: &[Datum],
    cx: &EvalCx<'_>,
) -> Result<KeyRange> {
    let pk_id = def.primary().map_or(0, |p| p.id);
    let Some(path) = path else {
        return Ok(KeyRange::Range {
            index: 0,
            lo: index::prefix(pk_id),
            hi: prefix_successor(&index::prefix(pk_id)),
            covering: false,
            reverse: false,
            ordered: true,
        });
    };
    let Some(ix) = def.indexes.get(path.index) else {
        return Ok(KeyRange::Range {
            index: 0,
            lo: index::prefix(pk_id),
            hi: prefix_successor(&index::prefix(pk_id)),
            covering: false,
            reverse: false,
            ordered: true,
        });
    };
    // `def.index_positions(ix)`, walked instead of collected (no list
    // per lookup).
    let positions = || ix.columns.iter().filter_map(|id| def.position_of_id(*id));
    let mut key = index::prefix_with_room(ix.id, index::key_room(ix));
    let mut used = 0;
    let mut exact_all = true;
    for (i, (e, pos)) in path.eq.iter().zip(positions()).enumerate() {
        let v = e.eval(row, cx)?;
        if v.is_null() {
            return Ok(KeyRange::Empty);
        }
        let Some(ty) = def.columns.get(pos).map(|c| &c.ty) else {
            break;
        };
        match exact(&v, ty) {
            Some(c) => {
                encode_dir(&mut key, &c, ty, ix.desc_at(i));
                used += 1;
            }
            None => {
                exact_all = false;
                break;
            }
        }
    }
    if exact_all
        && used == positions().count()
        && ix.primary
        && path.lo.is_none()
        && path.hi.is_none()
    {
        return Ok(KeyRange::Point(key));
    }
    let mut lo = key.clone();
    let mut hi = prefix_successor(&key);
    if exact_all {
        if let Some(ty) = positions()
            .nth(used)
            .and_then(|p| def.columns.get(p))
            .map(|c| &c.ty)
        {
            // A descending column stores larger values first: its lower
            // value bound limits the keys from above, and the other way.
            let desc = ix.desc_at(used);
            for (bound, value_lower) in [(&path.lo, true), (&path.hi, false)] {
                let Some((e, incl)) = bound else {
                    continue;
                };
                let v = e.eval(row, cx)?;
                if v.is_null() {
                    return Ok(KeyRange::Empty);
                }
                let Some(c) = exact(&v, ty) else {
                    continue;
                };
                let mut k = key.clone();
                encode_dir(&mut k, &c, ty, desc);
                if value_lower != desc {
                    lo = if *incl {
                        k
                    } else {
                        prefix_successor(&k).unwrap_or(k)
                    };
                } else {
                    hi = if *incl { prefix_successor(&k) } else { Some(k) };
                }
            }
        }
    }
    Ok(KeyRange::Range {
        index: path.index,
        lo,
        hi,
        covering: path.covering,
        reverse: path.reverse,
        ordered: exact_all,
    })
}
