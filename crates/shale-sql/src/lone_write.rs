//! Write statements that run alone under REPEATABLE READ (docs/tables.md,
//! "Statements in transactions").
//!
//! REPEATABLE READ is the engine's snapshot isolation: a transaction that
//! updates a row changed after its snapshot fails with a write conflict
//! (1213). For an autocommit UPDATE of a hot row that is a failure InnoDB
//! never gives: its REPEATABLE READ reads the rows to change at their
//! newest version under the row lock ("current read"). The SQL layer's
//! UPDATE and DELETE already lock each row it found and re-read it at its
//! newest version, re-checking WHERE; under the engine's READ COMMITTED
//! that re-read is allowed to see a newer version than the scan did, which
//! is exactly InnoDB's behaviour, and a statement that runs alone has no
//! earlier reads whose snapshot it would break.
//!
//! ```text
//! autocommit, REPEATABLE READ:
//!   UPDATE t SET n = n + 1 WHERE id = 1     -> engine READ COMMITTED: never 1213
//!   DELETE FROM t WHERE k < 10              -> engine READ COMMITTED
//!   INSERT INTO t VALUES (...)              -> engine READ COMMITTED (a racing
//!                                              duplicate is 1062, as in InnoDB)
//!   UPDATE t SET a = (SELECT ...)           -> snapshot isolation (reads two tables)
//!   INSERT INTO t SELECT ... / SELECT ...   -> snapshot isolation
//! ```
//!
//! Only statements that read one table once qualify: a subquery, a join or
//! INSERT ... SELECT reads more than once, and under READ COMMITTED each
//! read could see a different moment.

use sqlparser::ast::{self, Expr, Statement};
use std::ops::ControlFlow;

/// Whether `stmt` is an INSERT ... VALUES, or an UPDATE or DELETE of one
/// table, with no subquery anywhere.
pub fn reads_one_row_set(stmt: &Statement) -> bool {
    let shape = match stmt {
        Statement::Update(u) => u.from.is_none() && u.table.joins.is_empty(),
        Statement::Delete(d) => {
            let tables = match &d.from {
                ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
            };
            d.using.is_none()
                && d.tables.is_empty()
                && tables.len() == 1
                && tables.iter().all(|t| t.joins.is_empty())
        }
        Statement::Insert(i) => i
            .source
            .as_ref()
            .is_some_and(|q| matches!(q.body.as_ref(), ast::SetExpr::Values(_))),
        _ => false,
    };
    shape && !has_subquery(stmt)
}

fn has_subquery(stmt: &Statement) -> bool {
    ast::visit_expressions(stmt, |e| match e {
        Expr::Subquery(_) | Expr::Exists { .. } => ControlFlow::Break(()),
        Expr::In {
            target: ast::InTarget::Subquery(_),
            ..
        } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure
    use super::reads_one_row_set;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn lone(sql: &str) -> bool {
        let stmt = Parser::parse_sql(&MySqlDialect {}, sql).unwrap().remove(0);
        reads_one_row_set(&stmt)
    }

    #[test]
    fn only_single_read_writes_qualify() {
        assert!(lone("UPDATE t SET n = n + 1 WHERE id = 1"));
        assert!(lone("DELETE FROM t WHERE k < 10 ORDER BY k LIMIT 2"));
        assert!(lone("INSERT INTO t VALUES (1, 2), (3, 4)"));
        assert!(lone(
            "INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE n = n + 1"
        ));
        assert!(!lone("UPDATE t SET a = (SELECT MAX(b) FROM u)"));
        assert!(!lone("DELETE FROM t WHERE id IN (SELECT id FROM u)"));
        assert!(!lone("UPDATE t JOIN u ON u.id = t.id SET t.a = u.a"));
        assert!(!lone("INSERT INTO t SELECT * FROM u"));
        assert!(!lone("INSERT INTO t VALUES ((SELECT 1))"));
        assert!(!lone("SELECT * FROM t"));
    }
}
