//! The plan of a prepared SELECT, UPDATE or DELETE, kept between its
//! executions.
//!
//! Planning a short OLTP query (resolve the tables, bind every name,
//! choose the access path, build the projection's metadata) costs about
//! as much as running it: ~11% of the server's CPU under sysbench's
//! `oltp_read_only`, whose statements are all prepared. A plan depends on
//! the parameter values only where the planner reads them (LIMIT/OFFSET and
//! a `?` in the select list, whose type becomes the column's); everything
//! else (`WHERE id BETWEEN ? AND ?`) stays a `BExpr::Param` read when the
//! plan runs. So a plan can be reused while what it was made from holds:
//!
//! | the plan was made from            | checked on reuse by                       |
//! |-----------------------------------|-------------------------------------------|
//! | the dictionary (tables, indexes)  | `Catalog::plan_epoch`, bumped by every dictionary change |
//! | the current database              | kept beside the plan, compared            |
//! | the indexes the snapshot may read | reuse only when the snapshot reads every published index (`Catalog::all_indexes_visible_to`) |
//! | parameter values                  | never cached: a `?` in LIMIT/OFFSET (a SELECT's, an UPDATE's or DELETE's) or a select list |
//! | session state (`@x`, `@@var`, `DATABASE()`, `LAST_INSERT_ID()`, ...), information_schema | never cached |
//!
//! The last two rows are decided once, from the statement's syntax, when it
//! is prepared ([`PlanCache::new`]).

use crate::catalog::Catalog;
use crate::dml::TargetPlan;
use crate::error::Result;
use crate::select::SelectPlan;
use parking_lot::Mutex;
use sqlparser::ast::{self, Visit, Visitor};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Functions whose value the binder folds from the session at plan time.
const SESSION_FUNCTIONS: &[&str] = &[
    "DATABASE",
    "SCHEMA",
    "LAST_INSERT_ID",
    "CONNECTION_ID",
    "USER",
    "CURRENT_USER",
    "SESSION_USER",
    "SYSTEM_USER",
];

/// One prepared statement's cached plan (shared by the clones of the
/// statement; the mutex is held only to copy the `Arc` in or out).
#[derive(Debug)]
pub(crate) struct PlanCache {
    cacheable: bool,
    slot: Mutex<Option<Entry>>,
}

#[derive(Debug)]
struct Entry {
    epoch: u64,
    database: Option<String>,
    plan: Cached,
}

/// A kept plan: a query's, or an UPDATE's or DELETE's.
#[derive(Debug, Clone)]
pub(crate) enum Cached {
    Select(Arc<SelectPlan>),
    Target(Arc<TargetPlan>),
}

/// A plan type the cache keeps.
pub(crate) trait Plan: Sized {
    fn wrap(plan: Arc<Self>) -> Cached;
    fn unwrap(cached: Cached) -> Option<Arc<Self>>;
}

impl Plan for SelectPlan {
    fn wrap(plan: Arc<Self>) -> Cached {
        Cached::Select(plan)
    }
    fn unwrap(cached: Cached) -> Option<Arc<Self>> {
        match cached {
            Cached::Select(p) => Some(p),
            Cached::Target(_) => None,
        }
    }
}

impl Plan for TargetPlan {
    fn wrap(plan: Arc<Self>) -> Cached {
        Cached::Target(plan)
    }
    fn unwrap(cached: Cached) -> Option<Arc<Self>> {
        match cached {
            Cached::Target(p) => Some(p),
            Cached::Select(_) => None,
        }
    }
}

/// Where a statement's plan comes from: `cache`'s when it has one for
/// this dictionary, database and snapshot (counted in `reused`), else
/// `make`'s, which is then kept for the next execution.
pub(crate) fn cached_or_planned<P: Plan>(
    cache: Option<&PlanCache>,
    (cat, database, snapshot): (&Catalog, Option<&str>, Option<u64>),
    reused: &AtomicU64,
    make: impl FnOnce() -> Result<P>,
) -> Result<Arc<P>> {
    if let Some(plan) = cache
        .and_then(|c| c.get(cat, database, snapshot))
        .and_then(P::unwrap)
    {
        reused.fetch_add(1, Ordering::Relaxed);
        return Ok(plan);
    }
    let epoch = cat.plan_epoch();
    let plan = Arc::new(make()?);
    if let Some(c) = cache {
        c.put(cat, epoch, database, snapshot, P::wrap(plan.clone()));
    }
    Ok(plan)
}

impl PlanCache {
    /// A cache for `stmt`, which stays empty unless `stmt` is a query whose
    /// plan depends on nothing but the dictionary and the database.
    pub(crate) fn new(stmt: &ast::Statement) -> PlanCache {
        PlanCache {
            cacheable: cacheable(stmt),
            slot: Mutex::new(None),
        }
    }

    /// The plan made for the same dictionary and database, if any and if
    /// a reader at `snapshot` may use it.
    fn get(&self, cat: &Catalog, database: Option<&str>, snapshot: Option<u64>) -> Option<Cached> {
        if !self.usable(cat, database, snapshot) {
            return None;
        }
        let slot = self.slot.lock();
        let e = slot.as_ref()?;
        (e.epoch == cat.plan_epoch() && e.database.as_deref() == database).then(|| e.plan.clone())
    }

    /// Keeps `plan`, made at dictionary epoch `epoch` (read before
    /// planning, so a change during planning leaves a stale epoch that
    /// never matches).
    fn put(
        &self,
        cat: &Catalog,
        epoch: u64,
        database: Option<&str>,
        snapshot: Option<u64>,
        plan: Cached,
    ) {
        if !self.usable(cat, database, snapshot) {
            return;
        }
        *self.slot.lock() = Some(Entry {
            epoch,
            database: database.map(str::to_owned),
            plan,
        });
    }

    fn usable(&self, cat: &Catalog, database: Option<&str>, snapshot: Option<u64>) -> bool {
        // A plan may leave out an index the snapshot must not read (it was
        // published after the snapshot): only plans for snapshots that
        // read every index are shared.
        self.cacheable
            && cat.all_indexes_visible_to(snapshot)
            && !database.is_some_and(|d| d.eq_ignore_ascii_case(crate::infoschema::NAME))
    }
}

/// A query, UPDATE or DELETE whose plan does not depend on parameter
/// values or session state.
fn cacheable(stmt: &ast::Statement) -> bool {
    let limit = match stmt {
        ast::Statement::Query(_) => None,
        ast::Statement::Update(u) => u.limit.as_ref(),
        ast::Statement::Delete(d) => d.limit.as_ref(),
        _ => return false,
    };
    // UPDATE's and DELETE's LIMIT is read when the statement is planned.
    !limit.is_some_and(has_placeholder) && stmt.visit(&mut Check).is_continue()
}

struct Check;

impl Visitor for Check {
    type Break = ();

    fn pre_visit_query(&mut self, q: &ast::Query) -> ControlFlow<()> {
        if let Some(limit) = &q.limit_clause {
            if has_placeholder(limit) {
                return ControlFlow::Break(());
            }
        }
        if select_lists_have_placeholder(&q.body) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &ast::ObjectName) -> ControlFlow<()> {
        let schema = name.0.first().and_then(|p| p.as_ident());
        if name.0.len() > 1
            && schema.is_some_and(|s| s.value.eq_ignore_ascii_case(crate::infoschema::NAME))
        {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
        let session = match e {
            ast::Expr::Identifier(id) => id.value.starts_with('@'),
            ast::Expr::CompoundIdentifier(parts) => {
                parts.first().is_some_and(|p| p.value.starts_with('@'))
            }
            ast::Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_uppercase();
                SESSION_FUNCTIONS.contains(&name.as_str())
            }
            _ => false,
        };
        if session {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

fn select_lists_have_placeholder(body: &ast::SetExpr) -> bool {
    match body {
        ast::SetExpr::Select(s) => s.projection.iter().any(has_placeholder),
        ast::SetExpr::SetOperation { left, right, .. } => {
            select_lists_have_placeholder(left) || select_lists_have_placeholder(right)
        }
        ast::SetExpr::Query(q) => select_lists_have_placeholder(&q.body),
        _ => false,
    }
}

fn has_placeholder<T: Visit>(node: &T) -> bool {
    struct Find;
    impl Visitor for Find {
        type Break = ();
        fn pre_visit_value(&mut self, v: &ast::ValueWithSpan) -> ControlFlow<()> {
            if matches!(v.value, ast::Value::Placeholder(_)) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    node.visit(&mut Find).is_break()
}

#[cfg(test)]
mod tests {
    use super::cacheable;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn check(sql: &str) -> bool {
        let mut v = Parser::parse_sql(&MySqlDialect {}, sql).unwrap_or_default();
        v.pop().is_some_and(|s| cacheable(&s))
    }

    #[test]
    fn which_statements_keep_their_plan() {
        assert!(check("SELECT c FROM t WHERE id = ?1"));
        assert!(check(
            "SELECT DISTINCT c FROM t WHERE id BETWEEN ?1 AND ?2 ORDER BY c"
        ));
        assert!(check(
            "SELECT SUM(k) FROM t WHERE id IN (SELECT id FROM u WHERE a = ?1)"
        ));
        assert!(check("SELECT c FROM t LIMIT 10"));
        assert!(!check("SELECT c FROM t LIMIT ?1"));
        assert!(!check("SELECT c FROM t LIMIT 5 OFFSET ?1"));
        assert!(!check("SELECT ?1, c FROM t"));
        assert!(!check("SELECT c FROM t UNION SELECT ?1"));
        assert!(!check("SELECT @@version"));
        assert!(!check("SELECT c FROM t WHERE a = @x"));
        assert!(!check("SELECT DATABASE()"));
        assert!(!check("SELECT c FROM t WHERE id = LAST_INSERT_ID()"));
        assert!(!check("SELECT * FROM information_schema.tables"));
        assert!(check("UPDATE t SET c = ?2 WHERE id = ?1"));
        assert!(check(
            "UPDATE t SET k = k + 1 WHERE id = ?1 ORDER BY id LIMIT 3"
        ));
        assert!(check("DELETE FROM t WHERE id = ?1"));
        assert!(check(
            "DELETE FROM t WHERE id IN (SELECT id FROM u WHERE a = ?1)"
        ));
        assert!(!check("UPDATE t SET c = 1 WHERE id = ?1 LIMIT ?2"));
        assert!(!check("DELETE FROM t WHERE id > ?1 LIMIT ?2"));
        assert!(!check("UPDATE t SET c = @x WHERE id = ?1"));
        assert!(!check("UPDATE t SET c = USER() WHERE id = ?1"));
        assert!(!check("DELETE FROM t WHERE a = DATABASE()"));
        assert!(!check(
            "DELETE FROM t WHERE a IN (SELECT b FROM u LIMIT ?1)"
        ));
        assert!(!check("INSERT INTO t VALUES (?1)"));
    }
}
