//! WHERE conjuncts of a partition scan (`scan.rs`) compiled for signed
//! integer columns: `id % 3 = 0`, `k + 1 > 100`, `a < b` evaluate on `i64`
//! without building intermediate values or dividing in `i128` as the
//! general evaluator (`expr::binary`) does. Only the shapes below are
//! compiled; anything else, and any value the compiled form cannot decide
//! exactly (an overflow, which the general evaluator reports as an error; a
//! column that unexpectedly holds another kind of value), is evaluated the
//! general way, so the answers are the general evaluator's.
//!
//! ```text
//! conjunct := term (= | <> | < | <= | > | >=) term
//!           | string column [NOT] LIKE 'prefix%'
//! term     := signed INT column | INT literal | term (+ | - | * | %) term
//! ```
//!
//! A LIKE pattern compiles only when it is literal characters (no `%`,
//! `_` or `\\`) followed by one `%`: then it matches exactly the strings that
//! start with those bytes (`expr::like` compares bytewise, utf8mb4_bin), a
//! `starts_with` instead of the general matcher and its copies.

use crate::catalog::TableDef;
use crate::expr::{BExpr, BinOp};
use crate::types::{Datum, SqlType};

/// An integer term.
#[derive(Debug)]
enum Term {
    Col(usize),
    Lit(i64),
    Op(BinOp, Box<Term>, Box<Term>),
    /// `term % d` for a literal `d` in `2..=u32::MAX`, with `m = ceil(2^64
    /// / d)` for Lemire's remainder by multiplication ([`fast_rem`]): a
    /// 64-bit `idiv` costs tens of cycles per row (`id % 3 = 0` over 10M
    /// rows), two multiplications a few.
    ModConst {
        term: Box<Term>,
        d: u32,
        m: u64,
    },
}

/// `x % d` for `x < 2^32`, `d` in `2..=u32::MAX` (`m` would not fit for 1) and `m = u64::MAX / d + 1`
/// (Lemire, Kaser, Kurz: "Faster remainder by direct computation", 2019):
/// the low 64 bits of `m * x` are the fraction `x / d` scaled by `2^64`,
/// and multiplying that fraction by `d` leaves the remainder in the high
/// 64 bits. Exact for every 32-bit `x` and such `d` (the paper's Theorem 1).
#[inline]
fn fast_rem(x: u32, d: u32, m: u64) -> u32 {
    let frac = m.wrapping_mul(u64::from(x));
    let r = (u128::from(frac) * u128::from(d)) >> 64;
    // Below `d`, so it fits: the remainder of a 32-bit division.
    u32::try_from(r).unwrap_or(u32::MAX)
}

/// A compiled conjunct.
#[derive(Debug)]
pub struct Pred {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// An integer comparison.
    Cmp { op: BinOp, a: Term, b: Term },
    /// `col [NOT] LIKE 'prefix%'` on a string column.
    Prefix {
        col: usize,
        prefix: Vec<u8>,
        neg: bool,
    },
}

/// The literal prefix of a pattern that is literal bytes and one trailing
/// `%`, if it is one.
fn literal_prefix(pattern: &[u8]) -> Option<&[u8]> {
    let prefix = pattern.strip_suffix(b"%")?;
    (!prefix.iter().any(|b| matches!(b, b'%' | b'_' | b'\\'))).then_some(prefix)
}

/// What a compiled form says about a row.
#[derive(Debug, PartialEq, Eq)]
pub enum Truth {
    /// The conjunct is true.
    True,
    /// False or NULL: the row does not pass.
    Fails,
    /// Not decided here: evaluate the general way.
    Unknown,
}

/// A literal divisor [`fast_rem`] takes: `2..=u32::MAX`.
fn fast_divisor(e: &BExpr) -> Option<u32> {
    match e {
        BExpr::Lit(Datum::Int(d)) => u32::try_from(*d).ok().filter(|d| *d >= 2),
        _ => None,
    }
}

/// The value of a term: `None` is NULL; `Err(())` undecided.
type Val = Result<Option<i64>, ()>;

impl Term {
    fn compile(e: &BExpr, def: &TableDef) -> Option<Term> {
        match e {
            BExpr::Col(c) => match def.columns.get(*c).map(|c| &c.ty) {
                Some(SqlType::Int {
                    unsigned: false, ..
                }) => Some(Term::Col(*c)),
                _ => None,
            },
            BExpr::Lit(Datum::Int(v)) => Some(Term::Lit(*v)),
            BExpr::Binary(BinOp::Mod, a, b) if fast_divisor(b).is_some() => {
                let d = fast_divisor(b)?;
                Some(Term::ModConst {
                    term: Box::new(Term::compile(a, def)?),
                    d,
                    m: u64::MAX / u64::from(d) + 1,
                })
            }
            BExpr::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Mod), a, b) => {
                Some(Term::Op(
                    *op,
                    Box::new(Term::compile(a, def)?),
                    Box::new(Term::compile(b, def)?),
                ))
            }
            _ => None,
        }
    }

    fn eval(&self, row: &[Datum]) -> Val {
        match self {
            Term::Col(c) => match row.get(*c) {
                Some(Datum::Int(v)) => Ok(Some(*v)),
                Some(Datum::Null) => Ok(None),
                _ => Err(()),
            },
            Term::Lit(v) => Ok(Some(*v)),
            // A non-negative dividend below 2^32 (ids, counters): by
            // multiplication. MySQL's sign rule (the remainder takes the
            // dividend's sign) makes it the plain remainder here.
            Term::ModConst { term, d, m } => Ok(term.eval(row)?.map(|x| match u32::try_from(x) {
                Ok(x) => i64::from(fast_rem(x, *d, *m)),
                Err(_) => x % i64::from(*d),
            })),
            Term::Op(op, a, b) => {
                let (Some(x), Some(y)) = (a.eval(row)?, b.eval(row)?) else {
                    return Ok(None);
                };
                match op {
                    BinOp::Add => x.checked_add(y).map(Some).ok_or(()),
                    BinOp::Sub => x.checked_sub(y).map(Some).ok_or(()),
                    BinOp::Mul => x.checked_mul(y).map(Some).ok_or(()),
                    // x % 0 is NULL; i64::MIN % -1 is 0 (no i64 overflow in
                    // the result, only in the machine division).
                    BinOp::Mod if y == 0 => Ok(None),
                    BinOp::Mod => Ok(Some(x.checked_rem(y).unwrap_or(0))),
                    _ => Err(()),
                }
            }
        }
    }
}

impl Pred {
    /// The compiled form of conjunct `e` over the columns of `def` (row
    /// positions are table positions: a single-table plan), if it has one.
    pub fn compile(e: &BExpr, def: &TableDef) -> Option<Pred> {
        let kind = match e {
            BExpr::Binary(
                op @ (BinOp::Eq | BinOp::NotEq | BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq),
                a,
                b,
            ) => Kind::Cmp {
                op: *op,
                a: Term::compile(a, def)?,
                b: Term::compile(b, def)?,
            },
            BExpr::Like(x, p, neg) => {
                let (BExpr::Col(col), BExpr::Lit(Datum::Bytes(pattern))) = (&**x, &**p) else {
                    return None;
                };
                let string = matches!(
                    def.columns.get(*col).map(|c| &c.ty),
                    Some(
                        SqlType::Char(_)
                            | SqlType::VarChar(_)
                            | SqlType::Text(_)
                            | SqlType::Binary(_)
                            | SqlType::VarBinary(_)
                            | SqlType::Blob(_)
                    )
                );
                if !string {
                    return None;
                }
                Kind::Prefix {
                    col: *col,
                    prefix: literal_prefix(pattern)?.to_vec(),
                    neg: *neg,
                }
            }
            _ => return None,
        };
        Some(Pred { kind })
    }

    pub fn eval(&self, row: &[Datum]) -> Truth {
        let (op, a, b) = match &self.kind {
            Kind::Cmp { op, a, b } => (op, a, b),
            Kind::Prefix { col, prefix, neg } => {
                return match row.get(*col) {
                    Some(Datum::Bytes(s)) if s.starts_with(prefix) != *neg => Truth::True,
                    Some(Datum::Bytes(_) | Datum::Null) => Truth::Fails,
                    _ => Truth::Unknown,
                };
            }
        };
        let (Ok(a), Ok(b)) = (a.eval(row), b.eval(row)) else {
            return Truth::Unknown;
        };
        let (Some(x), Some(y)) = (a, b) else {
            return Truth::Fails;
        };
        let holds = match op {
            BinOp::Eq => x == y,
            BinOp::NotEq => x != y,
            BinOp::Lt => x < y,
            BinOp::LtEq => x <= y,
            BinOp::Gt => x > y,
            BinOp::GtEq => x >= y,
            _ => return Truth::Unknown,
        };
        if holds {
            Truth::True
        } else {
            Truth::Fails
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ColumnDef;
    use crate::expr::EvalCx;
    use crate::select::SelectPlan;
    use proptest::prelude::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// Columns a, b (signed INT), u (unsigned INT), s (VARCHAR).
    fn table() -> TableDef {
        let ty = |i: u32| match i {
            1 | 2 => SqlType::Int {
                bytes: 8,
                unsigned: false,
            },
            3 => SqlType::Int {
                bytes: 8,
                unsigned: true,
            },
            _ => SqlType::Text(10),
        };
        let columns = ["a", "b", "u", "s"]
            .iter()
            .zip(1..)
            .map(|(name, id)| ColumnDef {
                id,
                name: (*name).into(),
                ty: ty(id),
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
            indexes: Vec::new(),
            hidden_pk: false,
            versions: Vec::new(),
            next_column_id: 5,
            index_generation: 0,
            building: Vec::new(),
        }
    }

    fn bin(op: BinOp, a: BExpr, b: BExpr) -> BExpr {
        BExpr::Binary(op, Box::new(a), Box::new(b))
    }

    fn arb_val() -> impl Strategy<Value = i64> {
        prop_oneof![
            -20i64..20,
            Just(i64::MIN),
            Just(i64::MAX),
            Just(-1),
            // Around the fast remainder's 32-bit range (`Term::ModConst`).
            0i64..=i64::from(u32::MAX),
            Just(i64::from(u32::MAX)),
            Just(1i64 << 32),
            any::<i64>()
        ]
    }

    fn arb_term() -> impl Strategy<Value = BExpr> {
        let leaf = prop_oneof![
            (0usize..2).prop_map(BExpr::Col),
            arb_val().prop_map(|v| BExpr::Lit(Datum::Int(v))),
        ];
        leaf.prop_recursive(3, 8, 2, |inner| {
            (
                prop_oneof![
                    Just(BinOp::Add),
                    Just(BinOp::Sub),
                    Just(BinOp::Mul),
                    Just(BinOp::Mod)
                ],
                inner.clone(),
                inner,
            )
                .prop_map(|(op, a, b)| bin(op, a, b))
        })
    }

    fn arb_cmp() -> impl Strategy<Value = BinOp> {
        prop_oneof![
            Just(BinOp::Eq),
            Just(BinOp::NotEq),
            Just(BinOp::Lt),
            Just(BinOp::LtEq),
            Just(BinOp::Gt),
            Just(BinOp::GtEq)
        ]
    }

    proptest! {
        /// Where the compiled form decides, it says what the general
        /// evaluator says; where the general evaluator fails (overflow),
        /// the compiled form leaves the row to it.
        #[test]
        fn compiled_matches_general(
            op in arb_cmp(),
            a in arb_term(),
            b in arb_term(),
            x in proptest::option::weighted(0.9, arb_val()),
            y in proptest::option::weighted(0.9, arb_val()),
        ) {
            let def = table();
            let e = bin(op, a, b);
            let pred = Pred::compile(&e, &def).expect("compiles");
            let row = vec![
                x.map_or(Datum::Null, Datum::Int),
                y.map_or(Datum::Null, Datum::Int),
                Datum::Null,
                Datum::Null,
            ];
            let no_sub = |_: &SelectPlan, _: &[Datum]| -> crate::error::Result<Vec<Vec<Datum>>> {
                Ok(Vec::new())
            };
            let cache = RefCell::new(HashMap::new());
            let cx = EvalCx { params: &[], aggs: &[], outer: &[], run_subquery: &no_sub, subquery_cache: &cache };
            match (pred.eval(&row), e.eval(&row, &cx)) {
                (Truth::True, Ok(d)) => prop_assert_eq!(d.truth(), Some(true)),
                (Truth::Fails, Ok(d)) => prop_assert!(d.truth() != Some(true)),
                (Truth::Unknown, _) => {}
                (t, Err(err)) => prop_assert!(false, "{t:?} where the evaluator fails: {err}"),
            }
        }
    }

    proptest! {
        /// The remainder by multiplication equals the division's for every
        /// 32-bit dividend and divisor.
        #[test]
        fn fast_rem_is_exact(x: u32, d in 2u32..=u32::MAX) {
            prop_assert_eq!(fast_rem(x, d, u64::MAX / u64::from(d) + 1), x % d);
        }
    }

    #[test]
    fn fast_rem_at_the_edges() {
        for d in [2u32, 3, 7, 1 << 31, u32::MAX - 1, u32::MAX] {
            for x in [0u32, 1, d - 1, d, d.wrapping_add(1), u32::MAX - 1, u32::MAX] {
                assert_eq!(
                    fast_rem(x, d, u64::MAX / u64::from(d) + 1),
                    x % d,
                    "{x} % {d}"
                );
            }
        }
    }

    proptest! {
    /// `s LIKE 'prefix%'` compiled says what the general evaluator says,
    /// for patterns made of literal bytes, wildcards and escapes (only the
    /// literal-prefix ones compile), NULL and NOT LIKE.
    #[test]
    fn prefix_like_matches_general(
        pattern in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'%'), Just(b'_'), Just(b'\\'), Just(0xc3)], 0..5),
        s in proptest::option::weighted(0.9, proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'%'), Just(0xc3), Just(0xa9)], 0..6)),
        neg: bool,
    ) {
        let def = table();
        let e = BExpr::Like(Box::new(BExpr::Col(3)), Box::new(BExpr::Lit(Datum::Bytes(pattern.clone()))), neg);
        let pred = Pred::compile(&e, &def);
        prop_assert_eq!(pred.is_some(), literal_prefix(&pattern).is_some());
        let Some(pred) = pred else { return Ok(()) };
        let row = vec![Datum::Null, Datum::Null, Datum::Null, s.map_or(Datum::Null, Datum::Bytes)];
        let no_sub = |_: &SelectPlan, _: &[Datum]| -> crate::error::Result<Vec<Vec<Datum>>> {
            Ok(Vec::new())
        };
        let cache = RefCell::new(HashMap::new());
        let cx = EvalCx { params: &[], aggs: &[], outer: &[], run_subquery: &no_sub, subquery_cache: &cache };
        let general = e.eval(&row, &cx).unwrap().truth() == Some(true);
        prop_assert_eq!(pred.eval(&row), if general { Truth::True } else { Truth::Fails });
    }
    }

    #[test]
    fn prefix_like_compiles_only_on_string_columns() {
        let def = table();
        let like = |col, p: &[u8]| {
            BExpr::Like(
                Box::new(BExpr::Col(col)),
                Box::new(BExpr::Lit(Datum::Bytes(p.to_vec()))),
                false,
            )
        };
        assert!(Pred::compile(&like(3, b"1%"), &def).is_some());
        assert!(Pred::compile(&like(0, b"1%"), &def).is_none());
        assert!(Pred::compile(&like(3, b"1_%"), &def).is_none());
        assert!(Pred::compile(&like(3, b"1"), &def).is_none());
        let p = Pred::compile(&like(3, b"1%"), &def).unwrap();
        assert_eq!(
            p.eval(&[Datum::Null, Datum::Null, Datum::Null, Datum::Int(1)]),
            Truth::Unknown
        );
    }

    #[test]
    fn only_signed_integer_shapes_compile() {
        let def = table();
        let lit = |v| BExpr::Lit(Datum::Int(v));
        let m = bin(BinOp::Mod, BExpr::Col(0), lit(3));
        assert!(Pred::compile(&bin(BinOp::Eq, m.clone(), lit(0)), &def).is_some());
        // Unsigned and string columns, a DOUBLE literal, AND: general path.
        assert!(Pred::compile(&bin(BinOp::Eq, BExpr::Col(2), lit(0)), &def).is_none());
        assert!(Pred::compile(&bin(BinOp::Eq, BExpr::Col(3), lit(0)), &def).is_none());
        let f = BExpr::Lit(Datum::Double(0.5));
        assert!(Pred::compile(&bin(BinOp::Lt, BExpr::Col(0), f), &def).is_none());
        assert!(Pred::compile(&bin(BinOp::And, m.clone(), m), &def).is_none());
        // A row holding another kind of value is left to the general path.
        let p = Pred::compile(&bin(BinOp::Gt, BExpr::Col(0), lit(1)), &def).unwrap();
        assert_eq!(p.eval(&[Datum::Int(2)]), Truth::True);
        assert_eq!(p.eval(&[Datum::Null]), Truth::Fails);
        assert_eq!(p.eval(&[Datum::UInt(2)]), Truth::Unknown);
    }
}
