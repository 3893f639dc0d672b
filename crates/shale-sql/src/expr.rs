//! Expressions: binding parsed SQL expressions to a row shape ([`Scope`])
//! and evaluating them with MySQL's semantics (three-valued logic, numeric
//! promotion, strict division by zero as NULL in SELECT).
//!
//! Binding resolves every column name to a position once per statement,
//! so evaluation per row is a tree walk with no name lookups:
//!
//! ```text
//! WHERE k + 1 > ?   over scope [id, k, c]   binds to   Gt(Add(Col(1), Lit(1)), Param(0))
//! ```

use crate::error::{Error, Result};
use crate::select::SelectPlan;
use crate::types::{compare, format_double, DateTime, Datum, Decimal, SqlType};
use sqlparser::ast;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;

/// One column visible to expressions.
#[derive(Clone, Debug)]
pub struct ScopeCol {
    /// The table's alias or name.
    pub table: String,
    pub name: String,
    pub ty: SqlType,
    /// Database and table the column comes from (result metadata).
    pub org_db: String,
    pub org_table: String,
    pub nullable: bool,
}

/// The row shape expressions are bound against.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub cols: Vec<ScopeCol>,
    /// The columns of the query a subquery is in: a name not found in
    /// `cols` binds to one of them (`BExpr::Outer`, a correlated subquery).
    /// One level: a subquery of a subquery sees its own outer query only.
    pub outer: Option<Vec<ScopeCol>>,
}

impl Scope {
    /// The position of `[table.]name`.
    pub fn resolve(&self, table: Option<&str>, name: &str) -> Result<usize> {
        resolve_in(&self.cols, table, name)
    }
}

fn resolve_in(cols: &[ScopeCol], table: Option<&str>, name: &str) -> Result<usize> {
    let mut found = None;
    for (i, c) in cols.iter().enumerate() {
        // VALUES(col) columns of ON DUPLICATE KEY UPDATE are reached
        // only through their qualifier.
        if table.is_none() && c.table == crate::dml::VALUES_TABLE {
            continue;
        }
        if c.name.eq_ignore_ascii_case(name) && table.is_none_or(|t| t == c.table) {
            if found.is_some() {
                return Err(Error::AmbiguousColumn(name.to_owned(), "field list".into()));
            }
            found = Some(i);
        }
    }
    found.ok_or_else(|| {
        let full = match table {
            Some(t) => format!("{t}.{name}"),
            None => name.to_owned(),
        };
        Error::UnknownColumn(full, "field list".into())
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    IntDiv,
    Mod,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    NullSafeEq,
    And,
    Or,
    Xor,
    BitAnd,
    BitOr,
    BitXor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFunc {
    Count,
    CountStar,
    Sum,
    Avg,
    Min,
    Max,
}

/// An aggregate call found while binding; `BExpr::Agg(i)` reads slot `i`.
#[derive(Clone, Debug)]
pub struct AggCall {
    pub func: AggFunc,
    pub arg: Option<BExpr>,
    pub distinct: bool,
}

/// A bound expression.
#[derive(Clone, Debug)]
pub enum BExpr {
    Lit(Datum),
    Col(usize),
    /// A column of the outer query's current row (correlated subquery).
    Outer(usize),
    /// A `?` placeholder (0-based).
    Param(usize),
    Neg(Box<BExpr>),
    Not(Box<BExpr>),
    Binary(BinOp, Box<BExpr>, Box<BExpr>),
    IsNull(Box<BExpr>, bool),
    IsTrue(Box<BExpr>, bool, bool),
    InList(Box<BExpr>, Vec<BExpr>, bool),
    InSubquery(Box<BExpr>, Box<SelectPlan>, bool),
    Exists(Box<SelectPlan>, bool),
    Subquery(Box<SelectPlan>),
    Between(Box<BExpr>, Box<BExpr>, Box<BExpr>, bool),
    Like(Box<BExpr>, Box<BExpr>, bool),
    Case(Option<Box<BExpr>>, Vec<(BExpr, BExpr)>, Option<Box<BExpr>>),
    Func(String, Vec<BExpr>),
    Cast(Box<BExpr>, SqlType),
    Agg(usize),
}

/// Session facts an expression may read (bound as constants).
#[derive(Clone, Debug, Default)]
pub struct SessionFacts {
    pub database: Option<String>,
    pub last_insert_id: u64,
    pub connection_id: u64,
    pub vars: HashMap<String, Datum>,
}

/// Binds expressions of one statement.
pub struct Binder<'a> {
    pub scope: &'a Scope,
    pub facts: &'a SessionFacts,
    /// Aggregate slots; `None` where aggregates are not allowed.
    pub aggs: Option<&'a mut Vec<AggCall>>,
    /// Plans subqueries (the SELECT planner), given the scope they are in
    /// (for correlated references).
    pub subquery: &'a dyn Fn(&ast::Query, &Scope) -> Result<SelectPlan>,
    /// Result-column aliases a name may refer to when it is not a column
    /// (HAVING and ORDER BY).
    pub aliases: &'a [(String, BExpr)],
}

pub(crate) fn ident_name(name: &ast::ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => i.value.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn parse_number(s: &str) -> Result<Datum> {
    if let Ok(v) = s.parse::<i64>() {
        return Ok(Datum::Int(v));
    }
    if let Ok(v) = s.parse::<u64>() {
        return Ok(Datum::UInt(v));
    }
    if s.contains(['e', 'E']) {
        return s
            .parse::<f64>()
            .map(Datum::Double)
            .map_err(|_| Error::Syntax(format!("bad number {s}")));
    }
    Decimal::parse(s)
        .map(Datum::Decimal)
        .ok_or_else(|| Error::Syntax(format!("bad number {s}")))
}

/// A literal value of the parser as a datum (placeholders excluded).
pub fn literal(v: &ast::Value) -> Result<Datum> {
    use ast::Value as V;
    Ok(match v {
        V::Number(s, _) => parse_number(s)?,
        V::SingleQuotedString(s)
        | V::DoubleQuotedString(s)
        | V::EscapedStringLiteral(s)
        | V::NationalStringLiteral(s) => Datum::text(s),
        V::HexStringLiteral(h) => {
            let mut out = Vec::new();
            let h = if h.len() % 2 == 1 {
                format!("0{h}")
            } else {
                h.clone()
            };
            for i in (0..h.len()).step_by(2) {
                let byte = h.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok());
                out.push(byte.ok_or_else(|| Error::Syntax(format!("bad hex literal {h}")))?);
            }
            Datum::Bytes(out)
        }
        V::Boolean(b) => Datum::from_bool(*b),
        V::Null => Datum::Null,
        other => return Err(Error::Unsupported(format!("literal {other}"))),
    })
}

/// The 0-based index of a numbered placeholder (`?3` -> 2).
pub fn placeholder_index(p: &str) -> Result<usize> {
    p.strip_prefix('?')
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .ok_or_else(|| Error::Syntax(format!("unexpected placeholder {p}")))
}

impl Binder<'_> {
    /// `[table.]name` among the outer query's columns: a correlated
    /// reference (`None` if there is no outer query or no such column).
    fn outer(&self, table: Option<&str>, name: &str) -> Option<BExpr> {
        let cols = self.scope.outer.as_ref()?;
        resolve_in(cols, table, name).ok().map(BExpr::Outer)
    }

    pub fn bind(&mut self, e: &ast::Expr) -> Result<BExpr> {
        use ast::Expr as E;
        Ok(match e {
            E::Identifier(id) => {
                if let Some(var) = id.value.strip_prefix("@@") {
                    return Ok(BExpr::Lit(self.system_var(var)?));
                }
                if let Some(var) = id.value.strip_prefix('@') {
                    return Ok(BExpr::Lit(
                        self.facts
                            .vars
                            .get(&format!("@{}", var.to_ascii_lowercase()))
                            .cloned()
                            .unwrap_or(Datum::Null),
                    ));
                }
                if id.quote_style == Some('"') || id.quote_style == Some('\'') {
                    return Ok(BExpr::Lit(Datum::text(&id.value)));
                }
                match self.scope.resolve(None, &id.value) {
                    Ok(i) => BExpr::Col(i),
                    Err(e) => match self
                        .aliases
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(&id.value))
                    {
                        Some((_, x)) => x.clone(),
                        None => self.outer(None, &id.value).ok_or(e)?,
                    },
                }
            }
            E::CompoundIdentifier(parts) => {
                let names: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
                match names.as_slice() {
                    [first, var] if first.starts_with("@@") => BExpr::Lit(self.system_var(var)?),
                    [t, c] | [_, t, c] => match self.scope.resolve(Some(t), c) {
                        Ok(i) => BExpr::Col(i),
                        Err(e) => self.outer(Some(t), c).ok_or(e)?,
                    },
                    _ => return Err(Error::Unsupported(e.to_string())),
                }
            }
            E::Value(v) => match &v.value {
                ast::Value::Placeholder(p) => BExpr::Param(placeholder_index(p)?),
                other => BExpr::Lit(literal(other)?),
            },
            E::Nested(inner) => self.bind(inner)?,
            E::UnaryOp { op, expr } => {
                let inner = self.bind(expr)?;
                match op {
                    ast::UnaryOperator::Minus => match inner {
                        BExpr::Lit(Datum::Int(v)) => BExpr::Lit(Datum::Int(-v)),
                        BExpr::Lit(Datum::UInt(v)) if v == 1u64 << 63 => {
                            BExpr::Lit(Datum::Int(i64::MIN))
                        }
                        BExpr::Lit(Datum::Decimal(d)) => BExpr::Lit(Datum::Decimal(Decimal {
                            value: -d.value,
                            scale: d.scale,
                        })),
                        other => BExpr::Neg(Box::new(other)),
                    },
                    ast::UnaryOperator::Plus => inner,
                    ast::UnaryOperator::Not | ast::UnaryOperator::BangNot => {
                        BExpr::Not(Box::new(inner))
                    }
                    other => return Err(Error::Unsupported(format!("operator {other}"))),
                }
            }
            E::BinaryOp { left, op, right } => {
                use ast::BinaryOperator as O;
                let op = match op {
                    O::Plus => BinOp::Add,
                    O::Minus => BinOp::Sub,
                    O::Multiply => BinOp::Mul,
                    O::Divide => BinOp::Div,
                    O::MyIntegerDivide => BinOp::IntDiv,
                    O::Modulo => BinOp::Mod,
                    O::Eq => BinOp::Eq,
                    O::NotEq => BinOp::NotEq,
                    O::Lt => BinOp::Lt,
                    O::LtEq => BinOp::LtEq,
                    O::Gt => BinOp::Gt,
                    O::GtEq => BinOp::GtEq,
                    O::Spaceship => BinOp::NullSafeEq,
                    O::And => BinOp::And,
                    O::Or | O::StringConcat => BinOp::Or,
                    O::Xor => BinOp::Xor,
                    O::BitwiseAnd => BinOp::BitAnd,
                    O::BitwiseOr => BinOp::BitOr,
                    O::BitwiseXor => BinOp::BitXor,
                    other => return Err(Error::Unsupported(format!("operator {other}"))),
                };
                BExpr::Binary(op, Box::new(self.bind(left)?), Box::new(self.bind(right)?))
            }
            E::IsNull(x) => BExpr::IsNull(Box::new(self.bind(x)?), false),
            E::IsNotNull(x) => BExpr::IsNull(Box::new(self.bind(x)?), true),
            E::IsTrue(x) => BExpr::IsTrue(Box::new(self.bind(x)?), true, false),
            E::IsNotTrue(x) => BExpr::IsTrue(Box::new(self.bind(x)?), true, true),
            E::IsFalse(x) => BExpr::IsTrue(Box::new(self.bind(x)?), false, false),
            E::IsNotFalse(x) => BExpr::IsTrue(Box::new(self.bind(x)?), false, true),
            E::In {
                expr,
                target,
                negated,
                ..
            } => {
                let x = Box::new(self.bind(expr)?);
                match target {
                    ast::InTarget::List(list) => {
                        let items = list.iter().map(|i| self.bind(i)).collect::<Result<_>>()?;
                        BExpr::InList(x, items, *negated)
                    }
                    ast::InTarget::Subquery(q) => {
                        let plan = (self.subquery)(q, self.scope)?;
                        if plan.projection.len() != 1 {
                            return Err(Error::OperandColumns(1));
                        }
                        BExpr::InSubquery(x, Box::new(plan), *negated)
                    }
                    _ => return Err(Error::Unsupported(e.to_string())),
                }
            }
            E::Exists { subquery, negated } => {
                let mut plan = (self.subquery)(subquery, self.scope)?;
                // One row decides EXISTS.
                if plan.limit.is_none() && plan.unions.is_empty() {
                    plan.limit = Some(1);
                }
                BExpr::Exists(Box::new(plan), *negated)
            }
            E::Subquery(q) => {
                let plan = (self.subquery)(q, self.scope)?;
                if plan.projection.len() != 1 {
                    return Err(Error::OperandColumns(1));
                }
                BExpr::Subquery(Box::new(plan))
            }
            E::Between {
                expr,
                negated,
                low,
                high,
            } => BExpr::Between(
                Box::new(self.bind(expr)?),
                Box::new(self.bind(low)?),
                Box::new(self.bind(high)?),
                *negated,
            ),
            E::Like {
                negated,
                expr,
                pattern,
                escape_char: None,
                any: false,
            } => BExpr::Like(
                Box::new(self.bind(expr)?),
                Box::new(self.bind(pattern)?),
                *negated,
            ),
            E::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let operand = match operand {
                    Some(o) => Some(Box::new(self.bind(o)?)),
                    None => None,
                };
                let mut whens = Vec::new();
                for w in conditions {
                    whens.push((self.bind(&w.condition)?, self.bind(&w.result)?));
                }
                let otherwise = match else_result {
                    Some(x) => Some(Box::new(self.bind(x)?)),
                    None => None,
                };
                BExpr::Case(operand, whens, otherwise)
            }
            E::Cast {
                expr, data_type, ..
            }
            | E::Convert {
                expr,
                data_type: Some(data_type),
                ..
            } => BExpr::Cast(
                Box::new(self.bind(expr)?),
                crate::ddl::cast_type(data_type)?,
            ),
            E::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.bind(expr)?];
                args.push(match substring_from {
                    Some(f) => self.bind(f)?,
                    None => BExpr::Lit(Datum::Int(1)),
                });
                if let Some(f) = substring_for {
                    args.push(self.bind(f)?);
                }
                BExpr::Func("SUBSTRING".into(), args)
            }
            E::Trim {
                expr,
                trim_where: None,
                trim_what: None,
                trim_characters: None,
            } => BExpr::Func("TRIM".into(), vec![self.bind(expr)?]),
            E::Ceil { expr, .. } => BExpr::Func("CEIL".into(), vec![self.bind(expr)?]),
            E::Floor { expr, .. } => BExpr::Func("FLOOR".into(), vec![self.bind(expr)?]),
            E::Function(f) => self.bind_function(f)?,
            E::TypedString(ts) => {
                let text = match &ts.value.value {
                    ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
                        s.clone()
                    }
                    other => other.to_string(),
                };
                let ty = crate::ddl::cast_type(&ts.data_type)?;
                BExpr::Cast(Box::new(BExpr::Lit(Datum::text(&text))), ty)
            }
            other => return Err(Error::Unsupported(format!("expression {other}"))),
        })
    }

    fn system_var(&self, var: &str) -> Result<Datum> {
        let name = var
            .trim_start_matches("session.")
            .trim_start_matches("SESSION.")
            .trim_start_matches("global.")
            .trim_start_matches("GLOBAL.")
            .to_ascii_lowercase();
        if let Some(v) = self.facts.vars.get(&name) {
            return Ok(v.clone());
        }
        crate::session::default_variable(&name).ok_or(Error::UnknownVariable(name))
    }

    fn bind_function(&mut self, f: &ast::Function) -> Result<BExpr> {
        let name = ident_name(&f.name).join(".").to_ascii_uppercase();
        let (args, distinct, star) = match &f.args {
            ast::FunctionArguments::None => (Vec::new(), false, false),
            ast::FunctionArguments::List(l) => {
                let distinct = matches!(
                    l.duplicate_treatment,
                    Some(ast::DuplicateTreatment::Distinct)
                );
                let mut out = Vec::new();
                let mut star = false;
                for a in &l.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => out.push(x),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        other => return Err(Error::Unsupported(format!("argument {other}"))),
                    }
                }
                (out, distinct, star)
            }
            ast::FunctionArguments::Subquery(_) => return Err(Error::Unsupported(f.to_string())),
        };
        let agg = match name.as_str() {
            "COUNT" if star => Some(AggFunc::CountStar),
            "COUNT" => Some(AggFunc::Count),
            "SUM" => Some(AggFunc::Sum),
            "AVG" => Some(AggFunc::Avg),
            "MIN" => Some(AggFunc::Min),
            "MAX" => Some(AggFunc::Max),
            _ => None,
        };
        if let Some(func) = agg {
            let arg = match args.as_slice() {
                [] if func == AggFunc::CountStar => None,
                [x] => {
                    // An aggregate's argument may not contain an aggregate.
                    let saved = self.aggs.take();
                    let bound = self.bind(x);
                    self.aggs = saved;
                    Some(bound?)
                }
                _ => return Err(Error::WrongArguments(name)),
            };
            let slots = self.aggs.as_mut().ok_or(Error::GroupFunction)?;
            slots.push(AggCall {
                func,
                arg,
                distinct,
            });
            return Ok(BExpr::Agg(slots.len() - 1));
        }
        if star {
            return Err(Error::Syntax(format!("{name}(*)")));
        }
        let bound: Vec<BExpr> = args.iter().map(|a| self.bind(a)).collect::<Result<_>>()?;
        let arity_ok = match name.as_str() {
            "DATABASE" | "SCHEMA" | "VERSION" | "NOW" | "CURRENT_TIMESTAMP" | "CURDATE"
            | "CURRENT_DATE" | "LAST_INSERT_ID" | "CONNECTION_ID" | "UTC_TIMESTAMP" | "SYSDATE"
            | "USER" | "CURRENT_USER" => bound.len() <= 1,
            "LENGTH" | "OCTET_LENGTH" | "CHAR_LENGTH" | "CHARACTER_LENGTH" | "LOWER" | "LCASE"
            | "UPPER" | "UCASE" | "ABS" | "FLOOR" | "CEIL" | "CEILING" | "TRIM" | "LTRIM"
            | "RTRIM" | "HEX" | "SIGN" | "DATE" | "ISNULL" => bound.len() == 1,
            "ROUND" | "TRUNCATE" => (1..=2).contains(&bound.len()),
            "IFNULL" | "NULLIF" | "MOD" | "LEFT" | "RIGHT" | "REPEAT" => bound.len() == 2,
            "IF" | "REPLACE" => bound.len() == 3,
            "SUBSTRING" | "SUBSTR" | "MID" => (2..=3).contains(&bound.len()),
            "COALESCE" | "CONCAT" | "GREATEST" | "LEAST" => !bound.is_empty(),
            "CONCAT_WS" => bound.len() >= 2,
            _ => return Err(Error::Unsupported(format!("function {name}"))),
        };
        if !arity_ok {
            return Err(Error::WrongArguments(name));
        }
        Ok(match name.as_str() {
            "DATABASE" | "SCHEMA" => BExpr::Lit(
                self.facts
                    .database
                    .as_deref()
                    .map_or(Datum::Null, Datum::text),
            ),
            "VERSION" => BExpr::Lit(Datum::text(crate::session::VERSION)),
            "LAST_INSERT_ID" if bound.is_empty() => {
                BExpr::Lit(Datum::UInt(self.facts.last_insert_id))
            }
            "CONNECTION_ID" => BExpr::Lit(Datum::UInt(self.facts.connection_id)),
            "SUBSTR" | "MID" => BExpr::Func("SUBSTRING".into(), bound),
            _ => BExpr::Func(name, bound),
        })
    }
}

/// What evaluation needs beyond the row.
pub struct EvalCx<'a> {
    pub params: &'a [Datum],
    /// Aggregate results of the current group (`BExpr::Agg`).
    pub aggs: &'a [Datum],
    /// The outer query's current row (`BExpr::Outer`), empty outside a
    /// correlated subquery.
    pub outer: &'a [Datum],
    /// Runs a subquery; a correlated one with the given outer row.
    pub run_subquery: &'a RunSubquery<'a>,
    pub subquery_cache: &'a RefCell<SubqueryCache>,
}

/// Runs a subquery plan with an outer row, returning its rows.
pub type RunSubquery<'a> = dyn Fn(&SelectPlan, &[Datum]) -> Result<Vec<Vec<Datum>>> + 'a;

/// Subquery results of one statement, by plan address and, for a
/// correlated subquery, the outer values it reads: an uncorrelated
/// subquery runs once, a correlated one once per distinct outer value.
pub type SubqueryCache = HashMap<(usize, Vec<u8>), std::rc::Rc<Vec<Vec<Datum>>>>;

/// Correlated results kept per statement; beyond this they are not cached.
const SUBQUERY_CACHE_ENTRIES: usize = 4096;

impl EvalCx<'_> {
    fn subquery_rows(
        &self,
        plan: &SelectPlan,
        row: &[Datum],
    ) -> Result<std::rc::Rc<Vec<Vec<Datum>>>> {
        let outer_values: Vec<Datum> = plan
            .outer_refs
            .iter()
            .map(|i| row.get(*i).cloned().unwrap_or(Datum::Null))
            .collect();
        let key = (
            plan as *const SelectPlan as usize,
            crate::executor::group_key(&outer_values),
        );
        if let Some(r) = self.subquery_cache.borrow().get(&key) {
            return Ok(r.clone());
        }
        let rows = std::rc::Rc::new((self.run_subquery)(plan, row)?);
        let mut cache = self.subquery_cache.borrow_mut();
        if plan.outer_refs.is_empty() || cache.len() < SUBQUERY_CACHE_ENTRIES {
            cache.insert(key, rows.clone());
        }
        Ok(rows)
    }
}

fn overflow() -> Error {
    Error::ValueOutOfRange("BIGINT".into())
}

/// Three-valued AND/OR/XOR and the arithmetic and comparison operators.
pub fn binary(op: BinOp, a: &Datum, b: &Datum) -> Result<Datum> {
    use BinOp::*;
    match op {
        And => {
            return Ok(match (a.truth(), b.truth()) {
                (Some(false), _) | (_, Some(false)) => Datum::Int(0),
                (Some(true), Some(true)) => Datum::Int(1),
                _ => Datum::Null,
            })
        }
        Or => {
            return Ok(match (a.truth(), b.truth()) {
                (Some(true), _) | (_, Some(true)) => Datum::Int(1),
                (Some(false), Some(false)) => Datum::Int(0),
                _ => Datum::Null,
            })
        }
        NullSafeEq => {
            return Ok(Datum::from_bool(match (a.is_null(), b.is_null()) {
                (true, true) => true,
                (false, false) => compare(a, b) == Some(Ordering::Equal),
                _ => false,
            }))
        }
        _ => {}
    }
    if a.is_null() || b.is_null() {
        return Ok(Datum::Null);
    }
    let cmp = |want: fn(Ordering) -> bool| -> Datum {
        compare(a, b).map_or(Datum::Null, |o| Datum::from_bool(want(o)))
    };
    Ok(match op {
        Eq => cmp(|o| o == Ordering::Equal),
        NotEq => cmp(|o| o != Ordering::Equal),
        Lt => cmp(|o| o == Ordering::Less),
        LtEq => cmp(|o| o != Ordering::Greater),
        Gt => cmp(|o| o == Ordering::Greater),
        GtEq => cmp(|o| o != Ordering::Less),
        Xor => Datum::from_bool(a.truth() != b.truth()),
        BitAnd | BitOr | BitXor => {
            let (x, y) = (
                a.to_i128().unwrap_or(0) as u64,
                b.to_i128().unwrap_or(0) as u64,
            );
            Datum::UInt(match op {
                BitAnd => x & y,
                BitOr => x | y,
                _ => x ^ y,
            })
        }
        Add | Sub | Mul | Div | IntDiv | Mod => arith(op, a, b)?,
        And | Or | NullSafeEq => Datum::Null,
    })
}

fn is_float_like(d: &Datum) -> bool {
    match d {
        Datum::Double(_) => true,
        Datum::Bytes(b) => std::str::from_utf8(b)
            .ok()
            .and_then(Decimal::parse)
            .is_none(),
        _ => false,
    }
}

fn arith(op: BinOp, a: &Datum, b: &Datum) -> Result<Datum> {
    use BinOp::*;
    if is_float_like(a) || is_float_like(b) {
        let (x, y) = (a.to_f64().unwrap_or(0.0), b.to_f64().unwrap_or(0.0));
        return Ok(match op {
            Add => Datum::Double(x + y),
            Sub => Datum::Double(x - y),
            Mul => Datum::Double(x * y),
            Div if y == 0.0 => Datum::Null,
            Div => Datum::Double(x / y),
            IntDiv if y == 0.0 => Datum::Null,
            IntDiv => Datum::Int((x / y).trunc() as i64),
            Mod if y == 0.0 => Datum::Null,
            _ => Datum::Double(x % y),
        });
    }
    let integral = |d: &Datum| matches!(d, Datum::Int(_) | Datum::UInt(_));
    if integral(a) && integral(b) && op != Div {
        let (x, y) = (a.to_i128().unwrap_or(0), b.to_i128().unwrap_or(0));
        let unsigned = matches!(a, Datum::UInt(_)) || matches!(b, Datum::UInt(_));
        let r = match op {
            Add => x + y,
            Sub => x - y,
            Mul => x.checked_mul(y).ok_or_else(overflow)?,
            IntDiv | Mod if y == 0 => return Ok(Datum::Null),
            IntDiv => x / y,
            _ => x % y,
        };
        return if unsigned && r >= 0 {
            u64::try_from(r).map(Datum::UInt).map_err(|_| overflow())
        } else {
            i64::try_from(r).map(Datum::Int).map_err(|_| overflow())
        };
    }
    let (Some(x), Some(y)) = (a.to_decimal(), b.to_decimal()) else {
        return Ok(Datum::Null);
    };
    if matches!(op, Div | IntDiv | Mod) && y.value == 0 {
        return Ok(Datum::Null);
    }
    let r = match op {
        Add => Decimal::checked_add(x, y),
        Sub => Decimal::checked_sub(x, y),
        Mul => Decimal::checked_mul(x, y),
        Div => Decimal::checked_div(x, y),
        IntDiv => Decimal::checked_div(x, y)
            .map(|d| Decimal::from_i128(d.value / 10i128.pow(u32::from(d.scale)))),
        _ => {
            // x - trunc(x / y) * y, exactly.
            let q =
                Decimal::checked_div(x, y).map_or(0, |d| d.value / 10i128.pow(u32::from(d.scale)));
            Decimal::checked_mul(Decimal::from_i128(q), y).and_then(|p| Decimal::checked_sub(x, p))
        }
    };
    let r = r.ok_or_else(|| Error::OutOfRange("DECIMAL value".into(), 0))?;
    if op == IntDiv {
        return i64::try_from(r.value)
            .map(Datum::Int)
            .map_err(|_| overflow());
    }
    Ok(Datum::Decimal(r))
}

/// Length of the UTF-8 character starting with `lead` (1 for a byte that
/// cannot start one, so malformed input still advances).
fn char_len(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// SQL LIKE with `%`, `_` and `\` escapes, bytewise (utf8mb4_bin): `_` is
/// one UTF-8 character, everything else compares bytes. Works on the bytes
/// in place (no copy per row); a `%` retry moves by whole characters.
pub fn like(s: &[u8], p: &[u8]) -> bool {
    let (mut si, mut pi) = (0usize, 0usize);
    let (mut star_p, mut star_s) = (None::<usize>, 0usize);
    while si < s.len() {
        match p.get(pi).copied() {
            // A trailing % matches whatever is left.
            Some(b'%') if pi + 1 == p.len() => return true,
            Some(b'%') => {
                star_p = Some(pi);
                star_s = si;
                pi += 1;
                continue;
            }
            Some(b'\\') if p.get(pi + 1).is_some() && p.get(pi + 1) == s.get(si) => {
                pi += 2;
                si += 1;
                continue;
            }
            Some(b'_') => {
                pi += 1;
                si += s.get(si).map_or(1, |b| char_len(*b));
                continue;
            }
            Some(c) if c != b'\\' && Some(&c) == s.get(si) => {
                pi += 1;
                si += 1;
                continue;
            }
            _ => {}
        }
        match star_p {
            Some(sp) => {
                pi = sp + 1;
                star_s += s.get(star_s).map_or(1, |b| char_len(*b));
                si = star_s;
            }
            None => return false,
        }
    }
    while p.get(pi) == Some(&b'%') {
        pi += 1;
    }
    pi == p.len()
}

impl BExpr {
    /// True if the expression reads no column of the row, no aggregate and
    /// no subquery (its value is the same for every row).
    pub fn is_constant(&self) -> bool {
        self.max_column().is_none() && !self.has_agg_or_subquery()
    }

    /// The largest column position the expression reads (correlated
    /// subqueries included).
    pub fn max_column(&self) -> Option<usize> {
        let mut cols = Vec::new();
        self.collect_columns(&mut cols);
        cols.into_iter().max()
    }

    /// Appends every column position the expression reads, with those a
    /// correlated subquery in it reads of this row.
    pub fn collect_columns(&self, out: &mut Vec<usize>) {
        self.walk(&mut |e| match e {
            BExpr::Col(i) => out.push(*i),
            BExpr::InSubquery(_, p, _) | BExpr::Exists(p, _) | BExpr::Subquery(p) => {
                out.extend(&p.outer_refs)
            }
            _ => {}
        });
    }

    /// Appends the outer-row positions the expression reads.
    pub fn collect_outer(&self, out: &mut Vec<usize>) {
        self.walk(&mut |e| {
            if let BExpr::Outer(i) = e {
                out.push(*i);
            }
        });
    }

    pub fn has_agg_or_subquery(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| {
            if matches!(
                e,
                BExpr::Agg(_) | BExpr::Subquery(_) | BExpr::Exists(..) | BExpr::InSubquery(..)
            ) {
                found = true;
            }
        });
        found
    }

    fn walk(&self, f: &mut dyn FnMut(&BExpr)) {
        f(self);
        match self {
            BExpr::Lit(_)
            | BExpr::Col(_)
            | BExpr::Outer(_)
            | BExpr::Param(_)
            | BExpr::Agg(_)
            | BExpr::Exists(..)
            | BExpr::Subquery(_) => {}
            BExpr::Neg(x)
            | BExpr::Not(x)
            | BExpr::IsNull(x, _)
            | BExpr::IsTrue(x, ..)
            | BExpr::Cast(x, _)
            | BExpr::InSubquery(x, ..) => x.walk(f),
            BExpr::Binary(_, a, b) | BExpr::Like(a, b, _) => {
                a.walk(f);
                b.walk(f);
            }
            BExpr::Between(a, b, c, _) => {
                a.walk(f);
                b.walk(f);
                c.walk(f);
            }
            BExpr::InList(x, l, _) => {
                x.walk(f);
                l.iter().for_each(|i| i.walk(f));
            }
            BExpr::Case(o, w, e) => {
                if let Some(o) = o {
                    o.walk(f);
                }
                for (a, b) in w {
                    a.walk(f);
                    b.walk(f);
                }
                if let Some(e) = e {
                    e.walk(f);
                }
            }
            BExpr::Func(_, args) => args.iter().for_each(|a| a.walk(f)),
        }
    }

    /// The conjuncts of an AND tree.
    pub fn conjuncts(&self) -> Vec<&BExpr> {
        match self {
            BExpr::Binary(BinOp::And, a, b) => {
                let mut v = a.conjuncts();
                v.extend(b.conjuncts());
                v
            }
            other => vec![other],
        }
    }

    /// As [`BExpr::eval`], without copying a column's or a literal's value
    /// (the hot path of filters: a comparison or LIKE on a string column).
    pub fn eval_ref<'r>(
        &'r self,
        row: &'r [Datum],
        cx: &EvalCx<'_>,
    ) -> Result<std::borrow::Cow<'r, Datum>> {
        Ok(match self {
            BExpr::Col(i) => match row.get(*i) {
                Some(d) => std::borrow::Cow::Borrowed(d),
                None => std::borrow::Cow::Owned(Datum::Null),
            },
            BExpr::Lit(d) => std::borrow::Cow::Borrowed(d),
            other => std::borrow::Cow::Owned(other.eval(row, cx)?),
        })
    }

    pub fn eval(&self, row: &[Datum], cx: &EvalCx<'_>) -> Result<Datum> {
        Ok(match self {
            BExpr::Lit(d) => d.clone(),
            BExpr::Col(i) => row.get(*i).cloned().unwrap_or(Datum::Null),
            BExpr::Outer(i) => cx.outer.get(*i).cloned().unwrap_or(Datum::Null),
            BExpr::Param(i) => cx
                .params
                .get(*i)
                .cloned()
                .ok_or_else(|| Error::PlaceholderCount("mysqld_stmt_execute".into()))?,
            BExpr::Agg(i) => cx.aggs.get(*i).cloned().unwrap_or(Datum::Null),
            BExpr::Neg(x) => match x.eval(row, cx)? {
                Datum::Null => Datum::Null,
                Datum::Int(v) => Datum::Int(v.checked_neg().ok_or_else(overflow)?),
                Datum::UInt(v) => {
                    Datum::Int(i64::try_from(i128::from(v).wrapping_neg()).map_err(|_| overflow())?)
                }
                Datum::Decimal(d) => Datum::Decimal(Decimal {
                    value: -d.value,
                    scale: d.scale,
                }),
                other => Datum::Double(-other.to_f64().unwrap_or(0.0)),
            },
            BExpr::Not(x) => x
                .eval(row, cx)?
                .truth()
                .map_or(Datum::Null, |t| Datum::from_bool(!t)),
            BExpr::Binary(op, a, b) => {
                let av = a.eval_ref(row, cx)?;
                // Short-circuit where the answer is already known.
                match (op, av.truth()) {
                    (BinOp::And, Some(false)) => return Ok(Datum::Int(0)),
                    (BinOp::Or, Some(true)) => return Ok(Datum::Int(1)),
                    _ => {}
                }
                let bv = b.eval_ref(row, cx)?;
                binary(*op, &av, &bv)?
            }
            BExpr::IsNull(x, neg) => Datum::from_bool(x.eval(row, cx)?.is_null() != *neg),
            BExpr::IsTrue(x, want, neg) => {
                Datum::from_bool((x.eval(row, cx)?.truth() == Some(*want)) != *neg)
            }
            BExpr::InList(x, list, neg) => {
                let v = x.eval(row, cx)?;
                let mut items = Vec::with_capacity(list.len());
                for i in list {
                    items.push(i.eval(row, cx)?);
                }
                in_set(&v, items.iter(), *neg)
            }
            BExpr::InSubquery(x, plan, neg) => {
                let v = x.eval(row, cx)?;
                let rows = cx.subquery_rows(plan, row)?;
                in_set(&v, rows.iter().filter_map(|r| r.first()), *neg)
            }
            BExpr::Exists(plan, neg) => {
                Datum::from_bool(cx.subquery_rows(plan, row)?.is_empty() == *neg)
            }
            BExpr::Subquery(plan) => {
                let rows = cx.subquery_rows(plan, row)?;
                if rows.len() > 1 {
                    return Err(Error::SubqueryRows);
                }
                rows.first()
                    .and_then(|r| r.first())
                    .cloned()
                    .unwrap_or(Datum::Null)
            }
            BExpr::Between(x, lo, hi, neg) => {
                let v = x.eval(row, cx)?;
                let a = binary(BinOp::GtEq, &v, &lo.eval(row, cx)?)?;
                let b = binary(BinOp::LtEq, &v, &hi.eval(row, cx)?)?;
                let r = binary(BinOp::And, &a, &b)?;
                if *neg {
                    r.truth().map_or(Datum::Null, |t| Datum::from_bool(!t))
                } else {
                    r
                }
            }
            BExpr::Like(x, p, neg) => {
                let (xv, pv) = (x.eval_ref(row, cx)?, p.eval_ref(row, cx)?);
                match (xv.as_bytes(), pv.as_bytes()) {
                    (Some(s), Some(p)) => Datum::from_bool(like(&s, &p) != *neg),
                    _ => Datum::Null,
                }
            }
            BExpr::Case(operand, whens, otherwise) => {
                let base = match operand {
                    Some(o) => Some(o.eval(row, cx)?),
                    None => None,
                };
                for (cond, result) in whens {
                    let c = cond.eval(row, cx)?;
                    let hit = match &base {
                        Some(b) => compare(b, &c) == Some(Ordering::Equal),
                        None => c.truth() == Some(true),
                    };
                    if hit {
                        return result.eval(row, cx);
                    }
                }
                match otherwise {
                    Some(e) => e.eval(row, cx)?,
                    None => Datum::Null,
                }
            }
            BExpr::Cast(x, ty) => cast(x.eval(row, cx)?, ty)?,
            BExpr::Func(name, args) => {
                let mut vals = Vec::with_capacity(args.len());
                // IF/IFNULL/COALESCE evaluate lazily in MySQL; eager is
                // equivalent here as functions have no side effects.
                for a in args {
                    vals.push(a.eval(row, cx)?);
                }
                crate::functions::call(name, vals)?
            }
        })
    }
}

fn in_set<'a>(v: &Datum, items: impl Iterator<Item = &'a Datum>, neg: bool) -> Datum {
    if v.is_null() {
        return Datum::Null;
    }
    let mut saw_null = false;
    for i in items {
        match compare(v, i) {
            Some(Ordering::Equal) => return Datum::from_bool(!neg),
            None => saw_null = true,
            _ => {}
        }
    }
    if saw_null {
        Datum::Null
    } else {
        Datum::from_bool(neg)
    }
}

/// CAST(x AS type): lenient where MySQL's CAST is (no strict-mode error
/// for a non-numeric string: it becomes 0 with MySQL's warning).
pub fn cast(v: Datum, ty: &SqlType) -> Result<Datum> {
    if v.is_null() {
        return Ok(Datum::Null);
    }
    Ok(match ty {
        SqlType::Int {
            unsigned: false, ..
        } => Datum::Int(
            v.to_i128()
                .or_else(|| v.to_f64().map(|f| f.round() as i128))
                .unwrap_or(0)
                .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
        ),
        SqlType::Int { unsigned: true, .. } => {
            let n = v.to_i128().unwrap_or(0);
            Datum::UInt(if n < 0 {
                (n as i64) as u64
            } else {
                n.min(i128::from(u64::MAX)) as u64
            })
        }
        SqlType::Double | SqlType::Float => Datum::Double(v.to_f64().unwrap_or(0.0)),
        SqlType::Decimal { scale, .. } => match v
            .to_decimal()
            .or_else(|| Decimal::parse(&format_double(v.to_f64().unwrap_or(0.0))))
        {
            Some(d) => Datum::Decimal(
                d.rescale(*scale)
                    .ok_or_else(|| Error::OutOfRange("CAST".into(), 0))?,
            ),
            None => Datum::Decimal(Decimal {
                value: 0,
                scale: *scale,
            }),
        },
        SqlType::Date | SqlType::DateTime | SqlType::Timestamp => {
            let dt = match &v {
                Datum::Date(d) | Datum::DateTime(d) => Some(*d),
                other => other.to_text().and_then(|t| DateTime::parse(&t)),
            };
            match dt {
                Some(d) if matches!(ty, SqlType::Date) => Datum::Date(d.date_only()),
                Some(d) => Datum::DateTime(d),
                None => Datum::Null,
            }
        }
        _ => Datum::Bytes(v.to_bytes().unwrap_or_default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns() {
        assert!(like(b"hello", b"h%o"));
        assert!(like(b"hello", b"h_llo"));
        assert!(!like(b"hello", b"h_lo"));
        assert!(like(b"", b"%"));
        assert!(like(b"a%b", b"a\\%b"));
        assert!(!like(b"axb", b"a\\%b"));
        assert!(like(b"abcabc", b"%abc"));
        // `_` is one character, also when it takes several bytes.
        assert!(like("héllo".as_bytes(), b"h_llo"));
        assert!(!like("héllo".as_bytes(), b"h__llo"));
        assert!(like("日本語".as_bytes(), b"%_"));
        assert!(!like("éx".as_bytes(), b"%__x"));
        assert!(like("aé".as_bytes(), "%é".as_bytes()));
        assert!(like(b"50%", b"50\\%"));
        assert!(!like(b"500", b"50\\%"));
    }

    #[test]
    fn three_valued_logic() {
        let n = Datum::Null;
        let t = Datum::Int(1);
        let f = Datum::Int(0);
        assert_eq!(binary(BinOp::And, &n, &f).ok(), Some(Datum::Int(0)));
        assert_eq!(binary(BinOp::And, &n, &t).ok(), Some(Datum::Null));
        assert_eq!(binary(BinOp::Or, &n, &t).ok(), Some(Datum::Int(1)));
        assert_eq!(binary(BinOp::Eq, &n, &n).ok(), Some(Datum::Null));
        assert_eq!(binary(BinOp::NullSafeEq, &n, &n).ok(), Some(Datum::Int(1)));
        assert_eq!(
            in_set(&Datum::Int(3), [Datum::Int(1), Datum::Null].iter(), false),
            Datum::Null
        );
        assert_eq!(
            in_set(&Datum::Int(1), [Datum::Int(1), Datum::Null].iter(), false),
            Datum::Int(1)
        );
    }

    #[test]
    fn arithmetic_promotes_like_mysql() {
        assert_eq!(
            binary(BinOp::Add, &Datum::Int(1), &Datum::Int(2)).ok(),
            Some(Datum::Int(3))
        );
        let d = binary(BinOp::Div, &Datum::Int(1), &Datum::Int(3))
            .ok()
            .and_then(|d| d.to_text());
        assert_eq!(d.as_deref(), Some("0.3333"));
        assert_eq!(
            binary(BinOp::Div, &Datum::Int(1), &Datum::Int(0)).ok(),
            Some(Datum::Null)
        );
        assert!(binary(BinOp::Mul, &Datum::Int(i64::MAX), &Datum::Int(2)).is_err());
        assert_eq!(
            binary(BinOp::Add, &Datum::text("1.5"), &Datum::Int(1))
                .ok()
                .and_then(|d| d.to_text())
                .as_deref(),
            Some("2.5")
        );
    }
}
