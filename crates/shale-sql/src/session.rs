//! A SQL session: current database, transaction state, session variables,
//! prepared statements; statement dispatch.
//!
//! Transactions: with autocommit on, each statement runs in its own engine
//! transaction, committed when it succeeds. `BEGIN` (or autocommit off)
//! keeps one open across statements; each statement inside it is wrapped
//! in a savepoint, so a failing statement undoes only its own writes
//! (a deadlock or write conflict rolls the whole transaction back, as
//! MySQL does). DDL commits the open transaction first (implicit commit).

mod extra;
mod vars;

use crate::catalog::Catalog;
use crate::ddl::Ddl;
use crate::dml::Dml;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::expr::{ident_name, SessionFacts};
use crate::output::{ColumnMeta, Output};
use crate::plan_cache::{cached_or_planned, PlanCache};
use crate::result::ResultSink;
use crate::select::{LockKind, Planner, SelectPlan};
use crate::show;
use crate::sort::Limits;
use crate::types::{Datum, SqlType};
use shaledb::txn::{Isolation, Txn, TxnOptions};
use shaledb::WriteOptions;
use sqlparser::ast::{self, Expr, Parens, Statement};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The server version clients see.
pub const VERSION: &str = "8.0.35-ShaleDB-0.1";

/// Largest statement text accepted (MySQL's max_allowed_packet default).
pub const MAX_STATEMENT_BYTES: usize = 64 << 20;

pub use vars::default_variable;

/// What sessions of one database share.
pub struct Shared {
    pub catalog: Catalog,
    pub sync_commits: AtomicBool,
    /// Aggregate scans run as parallel partitions (a statistic).
    pub parallel_scans: AtomicU64,
    /// Executions of a prepared query that ran its cached plan (a
    /// statistic; plan_cache.rs).
    pub plans_reused: AtomicU64,
    next_connection: AtomicU64,
}

impl Shared {
    pub fn new(catalog: Catalog) -> Shared {
        Shared {
            catalog,
            sync_commits: AtomicBool::new(false),
            parallel_scans: AtomicU64::new(0),
            plans_reused: AtomicU64::new(0),
            next_connection: AtomicU64::new(1),
        }
    }
}

/// A statement parsed once and run many times with `?` parameters.
#[derive(Clone, Debug)]
pub struct PreparedStatement {
    stmt: Arc<Statement>,
    params: usize,
    columns: Arc<Vec<ColumnMeta>>,
    relations: Arc<Vec<(Option<String>, String)>>,
    plan: Arc<PlanCache>,
}

impl PreparedStatement {
    /// Number of `?` placeholders.
    pub fn param_count(&self) -> usize {
        self.params
    }

    /// The result columns (empty for statements without a result set).
    pub fn columns(&self) -> &[ColumnMeta] {
        &self.columns
    }

    /// The tables the statement names, as [`relations`] gives them
    /// (computed once, at prepare time).
    pub fn relations(&self) -> &[(Option<String>, String)] {
        &self.relations
    }
}

/// A table the open transaction wrote: the index generation its rows were
/// written under, and the pin that keeps the table's schema versions from
/// being swept until the transaction ends (schema_upgrade.rs).
struct Written {
    generation: u64,
    _pin: crate::schema_upgrade::WriterPin,
}

/// One client's session.
pub struct Session {
    shared: Arc<Shared>,
    facts: SessionFacts,
    txn: Option<Txn>,
    /// The open transaction was started by BEGIN (or autocommit off).
    explicit: bool,
    read_only_txn: bool,
    autocommit: bool,
    isolation: Isolation,
    /// SET TRANSACTION (without SESSION): the next transaction only.
    next_isolation: Option<Isolation>,
    lock_wait: Duration,
    /// Tables written by the open transaction, with their index generation.
    written: HashMap<u32, Written>,
    interrupt: Option<Arc<AtomicBool>>,
    /// The statement being run is `SET SESSION TRANSACTION ...`.
    session_scope_set: bool,
    /// Row buffers lent to each SELECT's executor (exec_scratch.rs).
    scratch: crate::exec_scratch::ExecScratch,
}

fn isolation_name(i: Isolation) -> &'static str {
    match i {
        Isolation::ReadCommitted => "READ-COMMITTED",
        Isolation::SnapshotIsolation => "REPEATABLE-READ",
        Isolation::Serializable => "SERIALIZABLE",
    }
}

/// The tables a statement names, as (database if qualified, table); empty
/// if it does not parse (executing it reports the syntax error). The
/// server checks privileges against these.
pub fn relations(sql: &str) -> Vec<(Option<String>, String)> {
    Arc::unwrap_or_clone(ParsedStatement::new(sql).relations)
}

/// One statement's text, parsed once: a caller that must see what it names
/// before running it (the server checks privileges) passes it on to
/// [`Session::execute_parsed`] instead of having the text parsed twice.
pub struct ParsedStatement<'a> {
    sql: &'a str,
    /// The parser's answer for the normalized text (statements the session
    /// recognizes from their text, XA and some SHOWs, never look at it).
    stmts: Result<Vec<Statement>>,
    /// Shared with the kept head's facts when made from one (no copy per
    /// statement).
    relations: Arc<Vec<(Option<String>, String)>>,
    /// Facts of a kept INSERT head (fast_insert.rs), when the statement
    /// was made from one: they replace walks of the whole statement.
    head: Option<Arc<crate::fast_insert::HeadFacts>>,
    /// A statement made from a kept INSERT head, in two parts: the head's
    /// statement (no rows) and this text's rows. `stmts` is then empty.
    kept: Option<(Arc<crate::fast_insert::Template>, crate::fast_insert::Rows)>,
}

impl<'a> ParsedStatement<'a> {
    pub fn new(sql: &'a str) -> ParsedStatement<'a> {
        let (mut stmts, head, kept) = match parse_keeping_heads(&normalize(sql)) {
            Ok(Parsed::Statements(stmts, head)) => (Ok(stmts), head, None),
            Ok(Parsed::Kept(template, rows)) => {
                let head = Some(Arc::clone(&template.facts));
                (Ok(Vec::new()), head, Some((template, rows)))
            }
            Err(e) => (Err(e), None, None),
        };
        let relations = match (crate::maintenance::table_list(sql), &mut stmts, &head) {
            (Some((_, tables)), ..) => Arc::new(tables),
            (None, Ok(_), Some(head)) => Arc::clone(&head.relations),
            (None, Ok(stmts), None) => {
                // Rows of literals name no table: leave them out of the
                // walk (a bulk INSERT has thousands).
                let rows = stmts.first_mut().and_then(crate::fast_insert::literal_rows);
                let kept = rows.map(std::mem::take);
                let relations = relations_of(stmts);
                if let (Some(kept), Some(rows)) = (
                    kept,
                    stmts.first_mut().and_then(crate::fast_insert::literal_rows),
                ) {
                    *rows = kept;
                }
                Arc::new(relations)
            }
            (None, Err(_), _) => Arc::default(),
        };
        ParsedStatement {
            sql,
            stmts,
            relations,
            head,
            kept,
        }
    }

    /// The tables the statement names, as [`relations`] gives them.
    pub fn relations(&self) -> &[(Option<String>, String)] {
        &self.relations
    }
}

pub(crate) fn relations_of(stmts: &[Statement]) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for s in stmts {
        let _ = ast::visit_relations(s, |name| {
            let parts = ident_name(name);
            match parts.as_slice() {
                [t] => out.push((None, t.clone())),
                [d, t] => out.push((Some(d.clone()), t.clone())),
                _ => {}
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
    }
    out
}

/// Numbers the `?` placeholders of `sql` (`?1`, `?2`, ...) in text order.
fn number_placeholders(sql: &str) -> Result<(String, usize)> {
    let tokens = Tokenizer::new(&MySqlDialect {}, sql)
        .tokenize()
        .map_err(|e| Error::Syntax(e.to_string()))?;
    let mut n = 0;
    let mut out = String::with_capacity(sql.len() + 8);
    for t in tokens {
        match t {
            Token::Placeholder(p) if p == "?" => {
                n += 1;
                out.push_str(&format!("?{n}"));
            }
            other => out.push_str(&other.to_string()),
        }
    }
    Ok((out, n))
}

/// MySQL syntax the parser lacks, rewritten to what it knows.
fn normalize(sql: &str) -> std::borrow::Cow<'_, str> {
    const LISM: &str = "LOCK IN SHARE MODE";
    let trimmed = sql.trim().trim_end_matches(';').trim_end();
    // Only the tail can hold the clause: upper-case just that much (a bulk
    // INSERT can be megabytes).
    if let Some(p) = trimmed.len().checked_sub(LISM.len()) {
        if trimmed
            .get(p..)
            .is_some_and(|t| t.eq_ignore_ascii_case(LISM))
        {
            let head = trimmed.get(..p).unwrap_or_default();
            return std::borrow::Cow::Owned(format!("{head}FOR SHARE"));
        }
    }
    // Borrowed: copying every statement's text was an allocation per query.
    std::borrow::Cow::Borrowed(trimmed)
}

fn parse(sql: &str) -> Result<Vec<Statement>> {
    match parse_keeping_heads(sql)? {
        Parsed::Statements(stmts, _) => Ok(stmts),
        Parsed::Kept(template, rows) => crate::fast_insert::FastInsert::Kept(template, rows)
            .into_statement()
            .map(|(stmt, _)| vec![stmt])
            .ok_or_else(|| Error::Syntax("a kept INSERT head lost its VALUES".into())),
    }
}

/// What [`parse_keeping_heads`] made of a text.
enum Parsed {
    /// The statements, with a kept INSERT head's facts when the fast path
    /// parsed the statement and kept its head.
    Statements(Vec<Statement>, Option<Arc<crate::fast_insert::HeadFacts>>),
    /// An INSERT made from a kept head (fast_insert.rs), in two parts.
    Kept(Arc<crate::fast_insert::Template>, crate::fast_insert::Rows),
}

/// [`parse`], leaving an INSERT made from a kept head in two parts.
fn parse_keeping_heads(sql: &str) -> Result<Parsed> {
    if sql.len() > MAX_STATEMENT_BYTES {
        return Err(Error::Syntax(format!(
            "statement of {} bytes is larger than max_allowed_packet",
            sql.len()
        )));
    }
    match crate::fast_insert::scan(sql) {
        Some(crate::fast_insert::FastInsert::Parsed(stmt, head)) => {
            return Ok(Parsed::Statements(vec![*stmt], head))
        }
        Some(crate::fast_insert::FastInsert::Kept(template, rows)) => {
            return Ok(Parsed::Kept(template, rows))
        }
        None => {}
    }
    Parser::parse_sql(&MySqlDialect {}, sql)
        .map(|stmts| Parsed::Statements(stmts, None))
        .map_err(|e| Error::Syntax(e.to_string()))
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>) -> Session {
        let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
        Session {
            shared,
            facts: SessionFacts {
                connection_id: id,
                ..Default::default()
            },
            txn: None,
            explicit: false,
            read_only_txn: false,
            autocommit: true,
            isolation: Isolation::SnapshotIsolation,
            next_isolation: None,
            lock_wait: Duration::from_secs(50),
            written: HashMap::new(),
            interrupt: None,
            session_scope_set: false,
            scratch: Default::default(),
        }
    }

    fn cat(&self) -> &Catalog {
        &self.shared.catalog
    }

    pub fn current_database(&self) -> Option<&str> {
        self.facts.database.as_deref()
    }

    pub fn set_database(&mut self, db: &str) -> Result<()> {
        if !self.cat().database_exists(db) {
            return Err(Error::UnknownDatabase(db.to_owned()));
        }
        self.facts.database = Some(db.to_owned());
        Ok(())
    }

    /// True inside a transaction opened by BEGIN or with autocommit off.
    pub fn in_transaction(&self) -> bool {
        self.explicit && self.txn.is_some()
    }

    pub fn autocommit(&self) -> bool {
        self.autocommit
    }

    /// A flag that, once set, interrupts the running statement (KILL QUERY).
    pub fn set_interrupt_flag(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = Some(flag);
    }

    /// Rolls back and returns to a fresh session state (keeps the id).
    pub fn reset(&mut self) {
        if let Some(t) = self.txn.take() {
            t.rollback();
        }
        let id = self.facts.connection_id;
        self.facts = SessionFacts {
            connection_id: id,
            ..Default::default()
        };
        self.explicit = false;
        self.read_only_txn = false;
        self.autocommit = true;
        self.isolation = Isolation::SnapshotIsolation;
        self.next_isolation = None;
        self.written.clear();
    }

    /// The columns of `table` in the current database (COM_FIELD_LIST).
    pub fn table_columns(&self, table: &str) -> Result<Vec<ColumnMeta>> {
        let db = self.current_database().ok_or(Error::NoDatabase)?;
        let def = self.cat().table(db, table)?;
        Ok(def
            .columns
            .iter()
            .map(|c| ColumnMeta {
                name: c.name.clone(),
                org_name: c.name.clone(),
                table: def.name.clone(),
                org_table: def.name.clone(),
                db: def.db.clone(),
                ty: c.ty.clone(),
                nullable: c.nullable,
                primary_key: def.primary().is_some_and(|p| p.columns.contains(&c.id)),
                auto_increment: c.auto_increment,
            })
            .collect())
    }

    /// Runs one statement.
    pub fn execute(&mut self, sql: &str) -> Result<Output> {
        self.execute_to(sql, None)
    }

    /// Runs one statement; a SELECT hands its columns and rows to `sink`
    /// as they are produced (a spilled sort streams from its merge, so
    /// the result is never held whole) and returns `Output::Rows` with no
    /// columns and no rows. Other statements return what
    /// [`Session::execute`] returns.
    pub fn execute_streaming(&mut self, sql: &str, sink: &mut dyn ResultSink) -> Result<Output> {
        self.execute_to(sql, Some(sink))
    }

    fn execute_to(&mut self, sql: &str, sink: Option<&mut dyn ResultSink>) -> Result<Output> {
        self.execute_parsed(ParsedStatement::new(sql), sink)
    }

    /// Runs a statement parsed by [`ParsedStatement::new`]; `sink` as for
    /// [`Session::execute_streaming`].
    pub fn execute_parsed(
        &mut self,
        parsed: ParsedStatement<'_>,
        sink: Option<&mut dyn ResultSink>,
    ) -> Result<Output> {
        let sql = parsed.sql;
        if let Some(out) = self.xa(sql)? {
            return Ok(out);
        }
        if let Some(out) = self.show_extra(sql)? {
            return Ok(out);
        }
        // The parser drops SET SESSION TRANSACTION's scope; note it here.
        let lead = sql.trim_start();
        self.session_scope_set = lead.get(..3).is_some_and(|w| w.eq_ignore_ascii_case("SET")) && {
            let upper: String = lead
                .chars()
                .take(40)
                .collect::<String>()
                .to_ascii_uppercase();
            let words: Vec<&str> = upper.split_whitespace().collect();
            matches!(
                words.as_slice(),
                ["SET", "SESSION" | "LOCAL", "TRANSACTION", ..]
            )
        };
        let lone = parsed.head.as_ref().map(|h| h.reads_one_row_set);
        if let Some((template, rows)) = &parsed.kept {
            let values = Some(rows.as_slice());
            return self.row_statement(&template.stmt, &[], sink, None, lone, values);
        }
        match parsed.stmts?.as_slice() {
            [s] => self.dispatch(s, &[], sink, lone),
            [] => Err(Error::Syntax("Query was empty".into())),
            _ => Err(Error::Syntax(
                "more than one statement; use execute_script".into(),
            )),
        }
    }

    /// Runs every statement of a script, stopping at the first error.
    pub fn execute_script(&mut self, sql: &str) -> Result<Vec<Output>> {
        let mut out = Vec::new();
        for s in parse(sql)? {
            out.push(self.dispatch(&s, &[], None, None)?);
        }
        Ok(out)
    }

    pub fn prepare(&mut self, sql: &str) -> Result<PreparedStatement> {
        let (numbered, params) = number_placeholders(&normalize(sql))?;
        let mut stmts = parse(&numbered)?;
        let stmt = match (stmts.pop(), stmts.is_empty()) {
            (Some(s), true) => s,
            _ => {
                return Err(Error::Syntax(
                    "a prepared statement must be exactly one statement".into(),
                ))
            }
        };
        let columns = match &stmt {
            Statement::Query(q) => {
                // No values yet: a `?` in the select list types as
                // VARCHAR, one in LIMIT as no limit (select.rs).
                let planner = Planner {
                    cat: self.cat(),
                    facts: &self.facts,
                    params: &[],
                    snapshot: None,
                    outer: None,
                };
                planner
                    .plan_query(q)?
                    .projection
                    .iter()
                    .map(|c| c.meta.clone())
                    .collect()
            }
            _ => Vec::new(),
        };
        let relations = Arc::new(relations_of(std::slice::from_ref(&stmt)));
        Ok(PreparedStatement {
            plan: Arc::new(PlanCache::new(&stmt)),
            stmt: Arc::new(stmt),
            params,
            columns: Arc::new(columns),
            relations,
        })
    }

    pub fn execute_prepared(
        &mut self,
        stmt: &PreparedStatement,
        params: &[Datum],
    ) -> Result<Output> {
        self.run_prepared(stmt, params, None)
    }

    /// [`Session::execute_prepared`] with a query's columns and rows handed
    /// to `sink` as they are produced, as [`Session::execute_streaming`].
    pub fn execute_prepared_streaming(
        &mut self,
        stmt: &PreparedStatement,
        params: &[Datum],
        sink: &mut dyn ResultSink,
    ) -> Result<Output> {
        self.run_prepared(stmt, params, Some(sink))
    }

    fn run_prepared(
        &mut self,
        stmt: &PreparedStatement,
        params: &[Datum],
        sink: Option<&mut dyn ResultSink>,
    ) -> Result<Output> {
        if params.len() != stmt.params {
            return Err(Error::PlaceholderCount("mysqld_stmt_execute".into()));
        }
        match stmt.stmt.as_ref() {
            // A query, UPDATE or DELETE may run the plan its last
            // execution made.
            q @ (Statement::Query(_) | Statement::Update(_) | Statement::Delete(_)) => {
                self.row_statement(q, params, sink, Some(&stmt.plan), None, None)
            }
            other => self.dispatch(other, params, sink, None),
        }
    }

    fn txn_options(&self) -> TxnOptions {
        TxnOptions {
            isolation: self.next_isolation.unwrap_or(self.isolation),
            lock_wait_timeout: self.lock_wait,
            write_options: WriteOptions {
                sync: self.shared.sync_commits.load(Ordering::Relaxed),
                ..Default::default()
            },
        }
    }

    fn begin(&mut self, read_only: bool) -> Result<()> {
        self.commit()?;
        let txn = self.cat().engine().begin(self.txn_options());
        self.next_isolation = None;
        self.txn = Some(txn);
        self.explicit = true;
        self.read_only_txn = read_only;
        Ok(())
    }

    /// Commits the open transaction, if any. Refused (and rolled back) if a
    /// table it wrote had its indexes changed meanwhile.
    pub fn commit(&mut self) -> Result<()> {
        let written = std::mem::take(&mut self.written);
        self.explicit = false;
        self.read_only_txn = false;
        let Some(txn) = self.txn.take() else {
            return Ok(());
        };
        let shared = self.shared.clone();
        let _schema = shared.catalog.schema.read();
        Self::commit_checked(&shared.catalog, txn, &written)
    }

    /// Commits `txn` unless a table it wrote (with the index generation it
    /// wrote under) has had its indexes changed since. The caller holds
    /// the schema lock shared, so no index DDL runs between check and commit.
    fn commit_checked(
        catalog: &crate::catalog::Catalog,
        txn: Txn,
        written: &HashMap<u32, Written>,
    ) -> Result<()> {
        for (table, w) in written {
            if catalog.index_generation(*table) != Some(w.generation) {
                txn.rollback();
                return Err(Error::TableDefinitionChanged);
            }
        }
        txn.commit()?;
        Ok(())
    }

    pub fn rollback(&mut self) {
        self.written.clear();
        self.explicit = false;
        self.read_only_txn = false;
        if let Some(t) = self.txn.take() {
            t.rollback();
        }
    }

    /// Runs one statement. `reads_one_row_set`: `lone_write::reads_one_row_set`
    /// of `stmt` when the caller already knows it (a kept INSERT head's
    /// facts); `None` = work it out if needed.
    fn dispatch(
        &mut self,
        stmt: &Statement,
        params: &[Datum],
        sink: Option<&mut dyn ResultSink>,
        reads_one_row_set: Option<bool>,
    ) -> Result<Output> {
        match stmt {
            Statement::Query(_)
            | Statement::Insert(_)
            | Statement::Update(_)
            | Statement::Delete(_) => {
                self.row_statement(stmt, params, sink, None, reads_one_row_set, None)
            }
            Statement::StartTransaction { modes, .. } => {
                let read_only = modes.iter().any(|m| {
                    matches!(
                        m,
                        ast::TransactionMode::AccessMode(ast::TransactionAccessMode::ReadOnly)
                    )
                });
                for m in modes {
                    if let ast::TransactionMode::IsolationLevel(l) = m {
                        self.next_isolation = Some(map_isolation(l));
                    }
                }
                self.begin(read_only)?;
                Ok(Output::affected(0))
            }
            Statement::Commit { .. } => {
                self.commit()?;
                Ok(Output::affected(0))
            }
            Statement::Rollback {
                savepoint: None, ..
            } => {
                self.rollback();
                Ok(Output::affected(0))
            }
            Statement::Set(s) => self.set(s, params),
            Statement::Use(u) => {
                let name = match u {
                    ast::Use::Object(n) | ast::Use::Database(n) | ast::Use::Schema(n) => {
                        ident_name(n).join(".")
                    }
                    other => return Err(Error::Unsupported(other.to_string())),
                };
                self.set_database(&name)?;
                Ok(Output::affected(0))
            }
            Statement::ShowDatabases { show_options, .. } => Ok(show::databases(
                self.cat(),
                like_filter(show_options).as_deref(),
            )),
            Statement::ShowTables {
                full, show_options, ..
            } => {
                let db = match show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.as_ref())
                {
                    Some(n) => ident_name(n).join("."),
                    None => self.current_database().ok_or(Error::NoDatabase)?.to_owned(),
                };
                if !self.cat().database_exists(&db) {
                    return Err(Error::UnknownDatabase(db));
                }
                Ok(show::tables(
                    self.cat(),
                    &db,
                    *full,
                    like_filter(show_options).as_deref(),
                ))
            }
            Statement::ShowColumns { show_options, .. } => {
                let name = show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.as_ref())
                    .ok_or_else(|| Error::Syntax("SHOW COLUMNS needs a table".into()))?;
                let def = self.planner(&[]).table(name)?;
                Ok(show::columns(&def, like_filter(show_options).as_deref()))
            }
            Statement::ExplainTable { table_name, .. } => {
                let def = self.planner(&[]).table(table_name)?;
                Ok(show::columns(&def, None))
            }
            Statement::ShowCreate {
                obj_type: ast::ShowCreateObject::Table,
                obj_name,
            } => {
                let def = self.planner(&[]).table(obj_name)?;
                Ok(show::create_table(&def))
            }
            Statement::ShowVariables { filter, .. } => {
                let pattern = match filter {
                    Some(ast::ShowStatementFilter::Like(p)) => Some(p.clone()),
                    None => None,
                    Some(other) => {
                        return Err(Error::Unsupported(format!("SHOW VARIABLES {other}")))
                    }
                };
                show::variables(&self.variables(), pattern.as_deref())
            }
            Statement::Explain { statement, .. } => self.explain(statement, params),
            Statement::Savepoint { .. }
            | Statement::ReleaseSavepoint { .. }
            | Statement::Rollback { .. } => Err(Error::Unsupported("named savepoints".into())),
            _ => self.ddl(stmt),
        }
    }

    fn planner<'a>(&'a self, params: &'a [Datum]) -> Planner<'a> {
        Planner {
            cat: &self.shared.catalog,
            facts: &self.facts,
            params,
            snapshot: None,
            outer: None,
        }
    }

    /// Runs a SELECT/INSERT/UPDATE/DELETE in the session's transaction
    /// (`reads_one_row_set` as for [`Self::dispatch`]; `values`: the rows
    /// of an INSERT made from a kept head, whose `stmt` has none).
    fn row_statement(
        &mut self,
        stmt: &Statement,
        params: &[Datum],
        sink: Option<&mut dyn ResultSink>,
        plan_cache: Option<&PlanCache>,
        reads_one_row_set: Option<bool>,
        values: Option<&[Parens<Vec<Expr>>]>,
    ) -> Result<Output> {
        let writes = !matches!(stmt, Statement::Query(_));
        if writes && self.read_only_txn {
            return Err(Error::ReadOnlyTransaction);
        }
        if self.txn.is_none() {
            let mut options = self.txn_options();
            if self.autocommit
                && options.isolation == Isolation::SnapshotIsolation
                && reads_one_row_set.unwrap_or_else(|| crate::lone_write::reads_one_row_set(stmt))
            {
                // See lone_write.rs: what InnoDB's REPEATABLE READ does
                // for a write statement that runs alone.
                options.isolation = Isolation::ReadCommitted;
            }
            let txn = self.cat().engine().begin(options);
            self.next_isolation = None;
            self.txn = Some(txn);
            self.explicit = !self.autocommit;
        }
        let in_explicit = self.explicit;
        let shared = self.shared.clone();
        let schema = shared.catalog.schema.read();
        let result = {
            let Some(txn) = self.txn.as_mut() else {
                return Err(Error::Syntax("no transaction".into()));
            };
            if in_explicit {
                txn.set_savepoint();
            }
            let r = run_row_statement(
                &shared,
                &self.facts,
                txn,
                (stmt, values),
                params,
                self.interrupt.as_deref(),
                !in_explicit,
                sink,
                plan_cache,
                &mut self.scratch,
            );
            if in_explicit {
                match &r {
                    Ok(_) => txn.release_savepoint()?,
                    Err(e) if !e.aborts_transaction() => txn.rollback_to_savepoint()?,
                    Err(_) => {}
                }
            }
            r
        };
        // Autocommit: commit under the same shared schema lock, so no index
        // DDL comes between the statement and its commit.
        let result = match result {
            Ok(r) if !in_explicit => match self.txn.take() {
                Some(txn) => txn.commit().map(|()| r).map_err(Error::from),
                None => Ok(r),
            },
            other => other,
        };
        // Pinned under the schema lock, so a sweep never misses a
        // transaction whose rows it has not seen (schema_upgrade.rs).
        if let (true, Ok((_, tables))) = (in_explicit, &result) {
            for (t, g) in tables {
                self.written.entry(*t).or_insert_with(|| Written {
                    generation: *g,
                    _pin: shared.catalog.upgrade.pin_writer(*t),
                });
            }
        }
        drop(schema);
        if let Some(f) = &self.interrupt {
            f.store(false, Ordering::Relaxed);
        }
        let (out, _) = match result {
            Ok(r) => r,
            Err(e) => {
                if !in_explicit || e.aborts_transaction() {
                    self.rollback();
                }
                return Err(e);
            }
        };
        if let Some(id) = match &out {
            Output::Affected { last_insert_id, .. } if *last_insert_id != 0 => {
                Some(*last_insert_id)
            }
            _ => None,
        } {
            self.facts.last_insert_id = id;
        }
        Ok(out)
    }

    fn ddl(&mut self, stmt: &Statement) -> Result<Output> {
        // DDL commits the open transaction first, as MySQL does.
        self.commit()?;
        let facts = self.facts.clone();
        let shared = self.shared.clone();
        let ddl = Ddl {
            cat: &shared.catalog,
            facts: &facts,
        };
        match stmt {
            Statement::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => {
                let created =
                    ddl.create_database(&ident_name(db_name).join("."), *if_not_exists)?;
                Ok(Output::affected(u64::from(created)))
            }
            Statement::CreateSchema {
                schema_name: ast::SchemaName::Simple(n),
                if_not_exists,
                ..
            } => {
                let created = ddl.create_database(&ident_name(n).join("."), *if_not_exists)?;
                Ok(Output::affected(u64::from(created)))
            }
            Statement::CreateTable(ct) => ddl.create_table(ct).map(|_| Output::affected(0)),
            Statement::CreateIndex(ci) => {
                let name = ci.name.as_ref().map(|n| ident_name(n).join("."));
                ddl.create_index(&ci.table_name, name, &ci.columns, ci.unique)
                    .map(|_| Output::affected(0))
            }
            Statement::AlterTable(at) => ddl.alter_table(at).map(|_| Output::affected(0)),
            Statement::Truncate(t) => {
                for target in &t.table_names {
                    ddl.truncate(&target.name)?;
                }
                Ok(Output::affected(0))
            }
            Statement::RenameTable(list) => {
                for r in list {
                    ddl.rename_table(&r.old_name, &r.new_name)?;
                }
                Ok(Output::affected(0))
            }
            Statement::Drop {
                object_type,
                if_exists,
                names,
                table,
                ..
            } => match object_type {
                ast::ObjectType::Table => ddl
                    .drop_tables(names, *if_exists)
                    .map(|_| Output::affected(0)),
                ast::ObjectType::Database | ast::ObjectType::Schema => {
                    let mut n = 0;
                    for name in names {
                        let db = ident_name(name).join(".");
                        n += ddl.drop_database(&db, *if_exists)?;
                        if self.facts.database.as_deref() == Some(db.as_str()) {
                            self.facts.database = None;
                        }
                    }
                    Ok(Output::affected(n))
                }
                ast::ObjectType::Index => {
                    let t = table
                        .as_ref()
                        .ok_or_else(|| Error::Syntax("DROP INDEX needs ON table".into()))?;
                    for n in names {
                        ddl.drop_index(t, &ident_name(n).join("."))?;
                    }
                    Ok(Output::affected(0))
                }
                other => Err(Error::Unsupported(format!("DROP {other}"))),
            },
            other => Err(Error::Unsupported(first_words(&other.to_string()))),
        }
    }

    fn explain(&mut self, stmt: &Statement, params: &[Datum]) -> Result<Output> {
        let Statement::Query(q) = stmt else {
            return Err(Error::Unsupported(
                "EXPLAIN of a statement other than SELECT".into(),
            ));
        };
        let plan = self.planner(params).plan_query(q)?;
        let mut rows = Vec::new();
        explain_rows(&plan, &mut rows);
        Ok(Output::text_rows(
            &[
                "id",
                "select_type",
                "table",
                "type",
                "possible_keys",
                "key",
                "key_len",
                "ref",
                "rows",
                "Extra",
            ],
            rows,
        ))
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn like_filter(o: &ast::ShowStatementOptions) -> Option<String> {
    match &o.filter_position {
        Some(ast::ShowStatementFilterPosition::Infix(ast::ShowStatementFilter::Like(p)))
        | Some(ast::ShowStatementFilterPosition::Suffix(ast::ShowStatementFilter::Like(p))) => {
            Some(p.clone())
        }
        _ => None,
    }
}

fn map_isolation(l: &ast::TransactionIsolationLevel) -> Isolation {
    match l {
        ast::TransactionIsolationLevel::ReadUncommitted
        | ast::TransactionIsolationLevel::ReadCommitted => Isolation::ReadCommitted,
        ast::TransactionIsolationLevel::Serializable => Isolation::Serializable,
        _ => Isolation::SnapshotIsolation,
    }
}

fn explain_rows(plan: &SelectPlan, rows: &mut Vec<Vec<Datum>>) {
    for (arm, _) in &plan.unions {
        explain_rows(arm, rows);
    }
    for (i, t) in plan.tables.iter().enumerate() {
        let (kind, key) = match &t.path {
            Some(p) => (
                p.kind(&t.def),
                t.def.indexes.get(p.index).map(|i| i.name.clone()),
            ),
            None => ("ALL", None),
        };
        let mut extra = Vec::new();
        if !t.filters.is_empty() || !plan.filter.is_empty() {
            extra.push("Using where");
        }
        if t.path.as_ref().is_some_and(|p| p.covering) {
            extra.push("Using index");
        }
        if t.hash.is_some() {
            extra.push("Using join buffer (hash join)");
        }
        if t.path.as_ref().is_some_and(|p| p.reverse) {
            extra.push("Backward index scan");
        }
        if i == 0 && !plan.order_by.is_empty() && !plan.ordered {
            extra.push("Using filesort");
        }
        if plan.lock == Some(LockKind::Update) {
            extra.push("FOR UPDATE");
        }
        rows.push(vec![
            Datum::Int(1),
            Datum::text("SIMPLE"),
            Datum::text(&t.alias),
            Datum::text(kind),
            key.as_deref().map_or(Datum::Null, Datum::text),
            key.as_deref().map_or(Datum::Null, Datum::text),
            Datum::Null,
            Datum::Null,
            Datum::Null,
            Datum::text(&extra.join("; ")),
        ]);
    }
    if plan.tables.is_empty() && plan.unions.is_empty() {
        rows.push(vec![
            Datum::Int(1),
            Datum::text("SIMPLE"),
            Datum::Null,
            Datum::Null,
            Datum::Null,
            Datum::Null,
            Datum::Null,
            Datum::Null,
            Datum::Null,
            Datum::text("No tables used"),
        ]);
    }
}

/// Runs one row statement; returns its output and the tables it wrote
/// with their index generations.
#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
fn run_row_statement(
    shared: &Shared,
    facts: &SessionFacts,
    txn: &mut Txn,
    (stmt, values): (&Statement, Option<&[Parens<Vec<Expr>>]>),
    params: &[Datum],
    interrupt: Option<&AtomicBool>,
    alone: bool,
    sink: Option<&mut dyn ResultSink>,
    plan_cache: Option<&PlanCache>,
    scratch: &mut crate::exec_scratch::ExecScratch,
) -> Result<(Output, Vec<(u32, u64)>)> {
    let cat = &shared.catalog;
    let snapshot = txn.snapshot_sequence();
    let planner = Planner {
        cat,
        facts,
        params,
        snapshot,
        outer: None,
    };
    let dml = Dml {
        cat,
        facts,
        params,
        interrupt,
        snapshot,
    };
    // What a kept plan must have been made for (plan_cache.rs).
    let keyed = (cat, facts.database.as_deref(), snapshot);
    match stmt {
        Statement::Query(q) => {
            let plan = cached_or_planned(plan_cache, keyed, &shared.plans_reused, || {
                planner.plan_query(q)
            })?;
            let locked = match plan.lock {
                Some(kind) if plan.tables.len() == 1 && plan.unions.is_empty() => {
                    // Lock the rows first, then answer from their latest versions.
                    Some(dml.locked_rows(txn, &plan, &[], None, kind == LockKind::Update)?)
                }
                // Never answer FOR UPDATE without the locks it promises.
                Some(_) => {
                    return Err(Error::Unsupported(
                        "FOR UPDATE / FOR SHARE over a join or UNION".into(),
                    ))
                }
                None => None,
            };
            let mut ex = Executor::new(cat, txn, params, interrupt);
            // Alone in its transaction, a read may scan a fresh snapshot
            // in parallel partitions (seed 003's aggregate pushdown).
            ex.allow_parallel = alone && locked.is_none();
            ex.parallel_scans = Some(&shared.parallel_scans);
            ex.limits = Limits::from_vars(&facts.vars);
            if let Some(sink) = sink {
                ex.scratch = std::cell::RefCell::new(std::mem::take(scratch));
                let r = ex.stream(&plan, locked.as_ref(), sink);
                *scratch = ex.scratch.take();
                scratch.trim();
                r?;
                let streamed = Output::Rows {
                    columns: Vec::new(),
                    rows: Vec::new(),
                };
                return Ok((streamed, Vec::new()));
            }
            let (columns, rows) = ex.run_with(&plan, locked.as_ref())?;
            Ok((Output::Rows { columns, rows }, Vec::new()))
        }
        Statement::Insert(ins) => {
            let r = dml.insert(txn, ins, values)?;
            let t = match &ins.table {
                ast::TableObject::TableName(n) => planner.table(n).ok(),
                _ => None,
            };
            Ok((
                Output::Affected {
                    rows: r.affected,
                    last_insert_id: r.first_insert_id.unwrap_or(0),
                    warnings: 0,
                },
                t.map(|d| vec![(d.id, d.index_generation)])
                    .unwrap_or_default(),
            ))
        }
        Statement::Update(u) => {
            let tp = cached_or_planned(plan_cache, keyed, &shared.plans_reused, || {
                dml.plan_update(u)
            })?;
            let (_, changed) = dml.run_update(txn, &tp)?;
            let wrote = vec![(tp.def.id, tp.def.index_generation)];
            Ok((Output::affected(changed), wrote))
        }
        Statement::Delete(d) => {
            let tp = cached_or_planned(plan_cache, keyed, &shared.plans_reused, || {
                dml.plan_delete(d)
            })?;
            let n = dml.run_delete(txn, &tp)?;
            let wrote = vec![(tp.def.id, tp.def.index_generation)];
            Ok((Output::affected(n), wrote))
        }
        _ => Err(Error::Unsupported(first_words(&stmt.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_in_text_order() {
        let (s, n) = number_placeholders("SELECT c FROM t WHERE id = ? AND k IN (?, '?')")
            .expect("tokenizes");
        assert_eq!(n, 2);
        assert_eq!(s, "SELECT c FROM t WHERE id = ?1 AND k IN (?2, '?')");
    }

    #[test]
    fn lock_in_share_mode_becomes_for_share() {
        assert_eq!(
            normalize("SELECT * FROM t lock in share mode;"),
            "SELECT * FROM t FOR SHARE"
        );
    }
}
