//! A fast parse of the statement bulk loads are made of: `INSERT` or
//! `REPLACE ... VALUES (row), (row), ...` whose rows hold only literals
//! (what sysbench's prepare, `mysqldump` and most loaders send).
//!
//! The general parser costs ~2.5 us per literal there: before it takes a
//! literal as a value it tries to read it as a type name (for typed
//! strings such as `DATE '2020-01-01'`), and the failed try formats an
//! error message each time. Here the statement is split in three:
//!
//! ```text
//! INSERT INTO t (k, c) VALUES (1, 'a'), (2, 'b\'c'), (3, NULL) ON DUPLICATE KEY UPDATE ...
//! |------- head --------------|-row 1--|----- more rows ------|------ tail --------------|
//! ```
//!
//! `head ++ row 1 ++ tail` goes through the general parser (so every
//! clause means what it always means; the parse of a head without a tail
//! is kept, by its text, for the next statement with the same head: a
//! loader or sysbench's `oltp_insert` sends thousands of statements that
//! differ only in their rows; such a statement comes back as
//! [`FastInsert::Kept`], the shared head and its rows, which the session
//! runs without copying the head), and the rows are scanned here into
//! the same expressions the parser builds: `Expr::Value` of a number,
//! a single-quoted string (unescaped as the MySQL dialect's tokenizer does),
//! NULL, TRUE or FALSE, and unary minus over a number. Anything else (an
//! expression, a comment, a double-quoted or introduced string, a hex
//! literal) makes the scan give up and the caller parses the whole text
//! as before. The first row is scanned too and must equal what the
//! parser made of it, and a property test checks the scan against the
//! parser on random rows.

use parking_lot::RwLock;
use sqlparser::ast::{Expr, Parens, SetExpr, Statement, UnaryOperator, Value};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// Parsed heads kept at most; the map is emptied when full (a workload
/// with more distinct heads than this parses them as before).
const TEMPLATES_KEPT: usize = 1024;

/// What a kept head says about every statement made from it: literal
/// rows name no table and hold no subquery, so the session's walks of the
/// whole statement (the tables it names, for the privilege check; whether
/// it may run alone at READ COMMITTED, `lone_write.rs`) give the head's
/// answers, computed once when the head is kept.
#[derive(Debug)]
pub(crate) struct HeadFacts {
    pub relations: Arc<Vec<(Option<String>, String)>>,
    pub reads_one_row_set: bool,
}

/// A kept head: its statement with no rows, and its facts.
#[derive(Debug)]
pub(crate) struct Template {
    pub stmt: Statement,
    pub facts: Arc<HeadFacts>,
}

/// The rows of one VALUES clause, as the parser builds them.
pub(crate) type Rows = Vec<Parens<Vec<Expr>>>;

/// What the fast parse made of a statement.
#[derive(Debug)]
pub(crate) enum FastInsert {
    /// The whole statement, parsed now; with the head's facts if its head
    /// was kept for the next statement.
    Parsed(Box<Statement>, Option<Arc<HeadFacts>>),
    /// A statement made from a kept head: the head's statement (no rows,
    /// shared, not copied: copying it was 9 % of an INSERT's instructions)
    /// and the rows scanned from this text. The session runs the head with
    /// these rows (`Dml::insert`'s `values`).
    Kept(Arc<Template>, Rows),
}

impl FastInsert {
    /// The whole statement as the general parser returns it (a kept
    /// head's is copied and given the rows), with the head's facts.
    pub(crate) fn into_statement(self) -> Option<(Statement, Option<Arc<HeadFacts>>)> {
        match self {
            FastInsert::Parsed(stmt, facts) => Some((*stmt, facts)),
            FastInsert::Kept(template, rows) => {
                let mut stmt = template.stmt.clone();
                *values_of(&mut stmt)? = rows;
                Some((stmt, Some(Arc::clone(&template.facts))))
            }
        }
    }
}

/// Head text -> its kept head (foldhash: one lookup per INSERT).
type Templates = HashMap<Box<str>, Arc<Template>, foldhash::fast::RandomState>;

/// Head text -> the statement parsed from it, with no rows. Parsing
/// depends only on the text, so one map serves every session.
static TEMPLATES: LazyLock<RwLock<Templates>> = LazyLock::new(RwLock::default);

/// The statement `sql` as the general parser would return it, if it is an
/// `INSERT`/`REPLACE ... VALUES` of literal rows; `None` otherwise (the
/// caller then parses `sql` itself).
#[cfg(test)]
pub(crate) fn parse(sql: &str) -> Option<Statement> {
    scan(sql)?.into_statement().map(|(stmt, _)| stmt)
}

/// [`parse`], leaving a statement made from a kept head in two parts
/// ([`FastInsert::Kept`]); the head's facts come with it when the
/// statement is its head and literal rows only (no tail such as ON
/// DUPLICATE KEY UPDATE).
pub(crate) fn scan(sql: &str) -> Option<FastInsert> {
    let values_end = find_values_keyword(sql)?;
    let rows_start = values_end + skip_space(sql.get(values_end..)?);
    let mut pos = rows_start;
    let mut rows: Vec<Vec<Expr>> = Vec::new();
    let mut first_row_end = rows_start;
    loop {
        let (row, next) = scan_row(sql, pos)?;
        rows.push(row);
        if rows.len() == 1 {
            first_row_end = next;
        }
        pos = next + skip_space(sql.get(next..)?);
        if sql.as_bytes().get(pos) == Some(&b',') {
            pos += 1;
            pos += skip_space(sql.get(pos..)?);
            if sql.as_bytes().get(pos) != Some(&b'(') {
                return None;
            }
        } else {
            break;
        }
    }
    let head = sql.get(..rows_start)?;
    let tail = sql.get(pos..)?;
    if tail.is_empty() {
        let kept = TEMPLATES.read().get(head).cloned();
        if let Some(template) = kept {
            let rows = rows.into_iter().map(Parens::with_empty_span).collect();
            return Some(FastInsert::Kept(template, rows));
        }
    }
    let template = format!(
        "{}{}{}",
        sql.get(..rows_start)?,
        sql.get(rows_start..first_row_end)?,
        sql.get(pos..)?
    );
    let mut stmts = Parser::parse_sql(&MySqlDialect {}, &template).ok()?;
    let mut stmt = match (stmts.pop(), stmts.is_empty()) {
        (Some(s), true) => s,
        _ => return None,
    };
    let values = values_of(&mut stmt)?;
    match values.as_slice() {
        [only] if Some(&only.content) == rows.first() => {}
        _ => return None,
    }
    let mut facts = None;
    if tail.is_empty() {
        values.clear();
        let head_facts = Arc::new(HeadFacts {
            relations: Arc::new(crate::session::relations_of(std::slice::from_ref(&stmt))),
            reads_one_row_set: crate::lone_write::reads_one_row_set(&stmt),
        });
        facts = Some(Arc::clone(&head_facts));
        let mut kept = TEMPLATES.write();
        if kept.len() >= TEMPLATES_KEPT {
            kept.clear();
        }
        let template = Template {
            stmt: stmt.clone(),
            facts: head_facts,
        };
        kept.insert(head.into(), Arc::new(template));
    }
    *values_of(&mut stmt)? = rows.into_iter().map(Parens::with_empty_span).collect();
    Some(FastInsert::Parsed(Box::new(stmt), facts))
}

/// The VALUES rows of an INSERT.
fn values_of(stmt: &mut Statement) -> Option<&mut Rows> {
    let Statement::Insert(insert) = stmt else {
        return None;
    };
    match insert.source.as_mut()?.body.as_mut() {
        SetExpr::Values(values) => Some(&mut values.rows),
        _ => None,
    }
}

/// The rows of an `INSERT ... VALUES` whose every value is a literal (as
/// [`parse`] makes them); `None` for any other statement.
pub(crate) fn literal_rows(stmt: &mut Statement) -> Option<&mut Vec<Parens<Vec<Expr>>>> {
    let Statement::Insert(insert) = stmt else {
        return None;
    };
    let SetExpr::Values(values) = insert.source.as_mut()?.body.as_mut() else {
        return None;
    };
    let literal = |e: &Expr| match e {
        Expr::Value(_) => true,
        Expr::UnaryOp { expr, .. } => matches!(expr.as_ref(), Expr::Value(_)),
        _ => false,
    };
    values
        .rows
        .iter()
        .all(|r| r.content.iter().all(literal))
        .then_some(&mut values.rows)
}

/// The byte offset just past the `VALUES` (or `VALUE`) keyword of an
/// `INSERT`/`REPLACE`; `None` if the statement is not one, or its head
/// holds a string or comment (left to the general parser).
fn find_values_keyword(sql: &str) -> Option<usize> {
    let b = sql.as_bytes();
    let mut i = skip_space(sql);
    let first = word_at(b, i);
    if !(first.eq_ignore_ascii_case(b"INSERT") || first.eq_ignore_ascii_case(b"REPLACE")) {
        return None;
    }
    i += first.len();
    while let Some(&c) = b.get(i) {
        match c {
            b'`' => {
                // A quoted identifier: skip to its closing backtick (a
                // doubled backtick inside is two closings in a row).
                i += 1;
                while *b.get(i)? != b'`' {
                    i += 1;
                }
                i += 1;
            }
            b'\'' | b'"' | b'#' | b'/' | b'-' if is_comment_or_string(b, i) => return None,
            c if is_word_byte(c) => {
                let w = word_at(b, i);
                if w.eq_ignore_ascii_case(b"VALUES") || w.eq_ignore_ascii_case(b"VALUE") {
                    return Some(i + w.len());
                }
                if w.eq_ignore_ascii_case(b"SELECT") || w.eq_ignore_ascii_case(b"SET") {
                    return None;
                }
                i += w.len();
            }
            _ => i += 1,
        }
    }
    None
}

/// A string or comment starts at `i`.
fn is_comment_or_string(b: &[u8], i: usize) -> bool {
    matches!(
        (b.get(i), b.get(i + 1)),
        (Some(b'\'' | b'"' | b'#'), _) | (Some(b'/'), Some(b'*')) | (Some(b'-'), Some(b'-'))
    )
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

fn word_at(b: &[u8], i: usize) -> &[u8] {
    let rest = b.get(i..).unwrap_or_default();
    let n = rest.iter().take_while(|&&c| is_word_byte(c)).count();
    rest.get(..n).unwrap_or_default()
}

/// Bytes of ASCII white space at the start of `s`.
fn skip_space(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_whitespace).count()
}

/// `( literal [, literal]* )` at `pos`: the row and the offset past `)`.
fn scan_row(sql: &str, pos: usize) -> Option<(Vec<Expr>, usize)> {
    let b = sql.as_bytes();
    if b.get(pos) != Some(&b'(') {
        return None;
    }
    let mut i = pos + 1;
    let mut row = Vec::new();
    loop {
        i += skip_space(sql.get(i..)?);
        let (e, next) = scan_literal(sql, i)?;
        row.push(e);
        i = next + skip_space(sql.get(next..)?);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b')') => return Some((row, i + 1)),
            _ => return None,
        }
    }
}

/// One literal at `pos`, ended by white space, `,` or `)`.
fn scan_literal(sql: &str, pos: usize) -> Option<(Expr, usize)> {
    let b = sql.as_bytes();
    let (expr, end) = match *b.get(pos)? {
        b'\'' => {
            let (s, end) = scan_string(sql, pos)?;
            (Expr::value(Value::SingleQuotedString(s)), end)
        }
        b'-' => {
            let end = scan_number(b, pos + 1)?;
            let n = Expr::value(Value::Number(sql.get(pos + 1..end)?.to_owned(), false));
            let e = Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr: Box::new(n),
            };
            (e, end)
        }
        c if c.is_ascii_digit() => {
            let end = scan_number(b, pos)?;
            let v = Value::Number(sql.get(pos..end)?.to_owned(), false);
            (Expr::value(v), end)
        }
        _ => {
            let w = word_at(b, pos);
            let v = if w.eq_ignore_ascii_case(b"NULL") {
                Value::Null
            } else if w.eq_ignore_ascii_case(b"TRUE") {
                Value::Boolean(true)
            } else if w.eq_ignore_ascii_case(b"FALSE") {
                Value::Boolean(false)
            } else {
                return None;
            };
            (Expr::value(v), pos + w.len())
        }
    };
    match b.get(end) {
        Some(c) if c.is_ascii_whitespace() || *c == b',' || *c == b')' => Some((expr, end)),
        _ => None,
    }
}

/// `digits [. digits]` at `pos`: the offset past it. A number running
/// into letters (`1e5`, `0x1F`, MySQL's `1abc` identifiers) is not taken.
fn scan_number(b: &[u8], pos: usize) -> Option<usize> {
    let digits = |from: usize| {
        b.get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let int = digits(pos);
    if int == 0 {
        return None;
    }
    let mut end = pos + int;
    if b.get(end) == Some(&b'.') {
        let frac = digits(end + 1);
        if frac == 0 {
            return None;
        }
        end += 1 + frac;
    }
    match b.get(end) {
        Some(&c) if is_word_byte(c) || c == b'.' => None,
        _ => Some(end),
    }
}

/// A single-quoted string at `pos` (on its opening quote), unescaped as
/// the MySQL dialect's tokenizer does: `''` is a quote; `\` escapes the
/// next character (`\0 \a \b \f \n \r \t \Z` are control characters),
/// except that `\%` and `\_` keep their backslash (LIKE patterns).
fn scan_string(sql: &str, pos: usize) -> Option<(String, usize)> {
    let b = sql.as_bytes();
    let mut out = String::new();
    let mut run = pos + 1;
    let mut i = pos + 1;
    loop {
        match *b.get(i)? {
            b'\'' => {
                out.push_str(sql.get(run..i)?);
                if b.get(i + 1) == Some(&b'\'') {
                    out.push('\'');
                    i += 2;
                    run = i;
                } else {
                    return Some((out, i + 1));
                }
            }
            b'\\' => {
                out.push_str(sql.get(run..i)?);
                let next = sql.get(i + 1..)?.chars().next()?;
                match next {
                    '%' | '_' => {
                        out.push('\\');
                        out.push(next);
                    }
                    other => out.push(match other {
                        '0' => '\0',
                        'a' => '\u{7}',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        'Z' => '\u{1a}',
                        c => c,
                    }),
                }
                i += 1 + next.len_utf8();
                run = i;
            }
            // Straight to the next quote or backslash (no closing quote:
            // not a literal row, the parser reports it).
            _ => i += memchr::memchr2(b'\'', b'\\', b.get(i..)?)?,
        }
    }
}

#[cfg(test)]
mod tests;
