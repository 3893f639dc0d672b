//! The SQL type of a bound expression, for result-set column metadata
//! (what a client is told a computed column holds).

use crate::expr::{AggCall, AggFunc, BExpr, Scope};
use crate::types::{Datum, SqlType};

/// Infers a result type for a bound expression.
pub fn infer(e: &BExpr, scope: &Scope, aggs: &[AggCall], params: &[Datum]) -> SqlType {
    let of_datum = |d: &Datum| match d {
        Datum::Int(_) | Datum::Null => SqlType::Int {
            bytes: 8,
            unsigned: false,
        },
        Datum::UInt(_) => SqlType::Int {
            bytes: 8,
            unsigned: true,
        },
        Datum::Double(_) => SqlType::Double,
        Datum::Decimal(d) => SqlType::Decimal {
            precision: 38,
            scale: d.scale,
        },
        Datum::Bytes(b) => SqlType::VarChar(u32::try_from(b.len()).unwrap_or(u32::MAX).max(1)),
        Datum::Date(_) => SqlType::Date,
        Datum::DateTime(_) => SqlType::DateTime,
    };
    let big = SqlType::Int {
        bytes: 8,
        unsigned: false,
    };
    match e {
        BExpr::Lit(d) => of_datum(d),
        BExpr::Param(i) => params.get(*i).map_or(SqlType::VarChar(255), of_datum),
        BExpr::Col(i) => scope
            .cols
            .get(*i)
            .map_or(SqlType::VarChar(255), |c| c.ty.clone()),
        BExpr::Neg(x) => infer(x, scope, aggs, params),
        BExpr::Binary(op, a, b) => {
            use crate::expr::BinOp::*;
            match op {
                Add | Sub | Mul | Div | IntDiv | Mod => {
                    let (ta, tb) = (infer(a, scope, aggs, params), infer(b, scope, aggs, params));
                    let dbl = |t: &SqlType| {
                        matches!(t, SqlType::Double | SqlType::Float) || t.is_string()
                    };
                    if *op == IntDiv {
                        big
                    } else if dbl(&ta) || dbl(&tb) {
                        SqlType::Double
                    } else if *op == Div
                        || matches!(ta, SqlType::Decimal { .. })
                        || matches!(tb, SqlType::Decimal { .. })
                    {
                        SqlType::Decimal {
                            precision: 38,
                            scale: 4,
                        }
                    } else {
                        let unsigned = matches!(ta, SqlType::Int { unsigned: true, .. })
                            || matches!(tb, SqlType::Int { unsigned: true, .. });
                        SqlType::Int { bytes: 8, unsigned }
                    }
                }
                _ => big,
            }
        }
        BExpr::Agg(i) => match aggs.get(*i) {
            Some(AggCall {
                func: AggFunc::Count | AggFunc::CountStar,
                ..
            }) => big,
            Some(AggCall {
                func, arg: Some(a), ..
            }) => {
                let t = infer(a, scope, aggs, params);
                match (func, &t) {
                    (AggFunc::Min | AggFunc::Max, _) => t,
                    (_, SqlType::Double | SqlType::Float) => SqlType::Double,
                    (AggFunc::Sum, SqlType::Decimal { scale, .. }) => SqlType::Decimal {
                        precision: 38,
                        scale: *scale,
                    },
                    (AggFunc::Sum, SqlType::Int { .. }) => SqlType::Decimal {
                        precision: 38,
                        scale: 0,
                    },
                    (AggFunc::Avg, SqlType::Decimal { scale, .. }) => SqlType::Decimal {
                        precision: 38,
                        scale: scale.saturating_add(4),
                    },
                    (AggFunc::Avg, SqlType::Int { .. }) => SqlType::Decimal {
                        precision: 38,
                        scale: 4,
                    },
                    _ => SqlType::Double,
                }
            }
            _ => big,
        },
        BExpr::Cast(_, t) => t.clone(),
        BExpr::Case(_, whens, otherwise) => whens
            .first()
            .map(|(_, r)| r)
            .or(otherwise.as_deref())
            .map_or(SqlType::VarChar(255), |r| infer(r, scope, aggs, params)),
        BExpr::Subquery(p) => p
            .projection
            .first()
            .map_or(SqlType::VarChar(255), |c| c.meta.ty.clone()),
        BExpr::Func(name, args) => match name.as_str() {
            "COALESCE" | "IFNULL" | "GREATEST" | "LEAST" | "NULLIF" | "ABS" | "ROUND"
            | "TRUNCATE" => args
                .first()
                .map_or(SqlType::VarChar(255), |a| infer(a, scope, aggs, params)),
            "IF" => args
                .get(1)
                .map_or(SqlType::VarChar(255), |a| infer(a, scope, aggs, params)),
            "LENGTH" | "OCTET_LENGTH" | "CHAR_LENGTH" | "CHARACTER_LENGTH" | "SIGN" | "ISNULL" => {
                big
            }
            "FLOOR" | "CEIL" | "CEILING" => {
                match args.first().map(|a| infer(a, scope, aggs, params)) {
                    Some(SqlType::Double | SqlType::Float) => SqlType::Double,
                    _ => big,
                }
            }
            "LAST_INSERT_ID" | "CONNECTION_ID" => SqlType::Int {
                bytes: 8,
                unsigned: true,
            },
            "NOW" | "CURRENT_TIMESTAMP" | "SYSDATE" | "UTC_TIMESTAMP" => SqlType::DateTime,
            "CURDATE" | "CURRENT_DATE" | "DATE" => SqlType::Date,
            "MOD" => big,
            _ => SqlType::Text(65_535),
        },
        _ => big,
    }
}
