//! The SQL layer (`shale-sql`) behind the MySQL protocol.
//!
//! A statement from a client goes: split at `;` ([`admin::lex`]) ->
//! server-level statements ([`admin::run`]: accounts, process list,
//! status) -> privilege check ([`admin::check_privilege`]) -> the SQL
//! session. Replies are translated here: the SQL layer's column metadata
//! and values become protocol [`Column`]s and [`Value`]s, its errors
//! [`SqlError`]s with the same code and SQLSTATE.
//!
//! The account is read once at login and again only after the account
//! store changed (its generation moved), so a `REVOKE` applies to every
//! session's next statement without a store read per statement.

use crate::accounts::{Account, AccountError, AccountStore};
use crate::admin::{self, AdminContext};
use crate::backend::{
    Backend, Column, ConnInfo, DateTime, Executed, Prepared, Reply, Session, SqlError, Value,
};
use crate::binary_sink::BinarySink;
use crate::mysql::auth::Credentials;
use crate::mysql::consts::{charset, colflag, ColumnType};
use shale_sql::{ColumnMeta, Datum, Output, SqlType};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The database behind `shale serve`.
pub struct SqlBackend {
    sql: shale_sql::Database,
    accounts: AccountStore,
}

/// Why the backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("SQL layer: {0}")]
    Sql(#[from] shale_sql::Error),
    #[error("accounts: {0}")]
    Accounts(#[from] AccountError),
}

impl SqlBackend {
    /// The SQL layer over `db`; commits are fsynced when `sync_commits`.
    pub fn open(
        db: shaledb::Db,
        accounts: AccountStore,
        sync_commits: bool,
    ) -> Result<Self, BackendError> {
        let sql = shale_sql::Database::open(db)?;
        sql.set_sync_commits(sync_commits);
        Ok(SqlBackend { sql, accounts })
    }
}

impl Backend for SqlBackend {
    type Session = SqlSession;

    fn credentials(&self, user: &str, host: &str) -> Option<Credentials> {
        match self.accounts.find(user, host) {
            Ok(a) => a.map(|a| a.credentials),
            Err(e) => {
                // A damaged account record never logs anyone in.
                tracing::error!(user, host, error = %e, "account lookup failed");
                None
            }
        }
    }

    fn open_session(&self, info: &ConnInfo) -> Result<SqlSession, SqlError> {
        let generation = self.accounts.generation();
        let account = self
            .accounts
            .find(&info.user, &info.host)
            .map_err(internal)?
            .ok_or_else(|| {
                SqlError::new(
                    1045,
                    *b"28000",
                    format!("Access denied for user '{}'", info.user),
                )
            })?;
        let mut inner = self.sql.session();
        if let Some(db) = &info.database {
            inner.set_database(db).map_err(convert_error)?;
        }
        if let Some(flag) = info.shared.processes.interrupt_flag(info.id) {
            inner.set_interrupt_flag(flag);
        }
        Ok(SqlSession {
            inner,
            engine: self.sql.engine().clone(),
            info: info.clone(),
            accounts: self.accounts.clone(),
            account,
            generation,
            statements: HashMap::new(),
            params: Vec::new(),
            process: info.shared.processes.slot(info.id),
        })
    }
}

/// One connection's session.
pub struct SqlSession {
    inner: shale_sql::Session,
    /// The engine, for `SHOW ENGINE SHALE STATUS`.
    engine: shaledb::Db,
    info: ConnInfo,
    accounts: AccountStore,
    /// The logged-in account as of `generation`.
    account: Account,
    generation: u64,
    statements: HashMap<u32, PreparedEntry>,
    /// The last execution's parameters, emptied: reused by the next.
    params: Vec<Datum>,
    /// The connection's process-list entry (`process.rs`), for its `db`.
    process: Option<crate::process::ProcessSlot>,
}

/// Parameter slots a session keeps between executions (a statement with
/// more gets a fresh list each time).
const KEEP_PARAMS: usize = 256;

/// A prepared statement of a session, with the last successful privilege
/// check: (account generation, current database) it held for.
struct PreparedEntry {
    stmt: shale_sql::PreparedStatement,
    /// `stmt`'s result columns as the protocol sends them, converted once:
    /// an execution whose result has exactly these columns (the usual
    /// case; types conformed to the rows or a changed table can differ)
    /// sends this copy instead of converting its own.
    columns: Arc<[Column]>,
    text: String,
    checked: Option<(u64, Option<String>)>,
    /// The buffers of this statement's result sinks, kept between executions.
    scratch: crate::binary_sink::SinkScratch,
}

impl SqlSession {
    /// The account, re-read if any account changed since it was read.
    fn refresh_account(&mut self) -> Result<(), SqlError> {
        let now = self.accounts.generation();
        if now != self.generation {
            // Read the generation first: a change racing this read bumps
            // it again, so it is picked up by the next statement.
            self.account = self
                .accounts
                .find(&self.info.user, &self.info.host)
                .map_err(internal)?
                .ok_or_else(|| {
                    SqlError::new(1045, *b"28000", "the account was dropped; reconnect")
                })?;
            self.generation = now;
        }
        Ok(())
    }

    fn one(&mut self, stmt: &str) -> Result<Reply, SqlError> {
        self.refresh_account()?;
        let ctx = AdminContext {
            info: &self.info,
            accounts: &self.accounts,
            account: &self.account,
        };
        if let Some(r) = admin::run(stmt, &ctx) {
            return r;
        }
        if let Some(r) =
            crate::engine_status::run(stmt, &self.engine, &self.info.shared, &self.account)
        {
            return r;
        }
        if let Some(r) =
            crate::slow_log::set_global(stmt, &self.info.shared.slow_log, &self.account)
        {
            return r;
        }
        let parsed = shale_sql::ParsedStatement::new(stmt);
        admin::check_privilege_on(
            stmt,
            &self.account,
            self.inner.current_database(),
            parsed.relations(),
        )?;
        let out = self
            .inner
            .execute_parsed(parsed, None)
            .map_err(convert_error)?;
        if let Some(db) = self.inner.current_database() {
            match &self.process {
                Some(p) => p.set_db(Some(db)),
                None => self.info.shared.processes.set_db(self.info.id, Some(db)),
            }
        }
        let mut reply = convert_output(out);
        crate::slow_log::merge_show_variables(stmt, &mut reply, &self.info.shared.slow_log);
        Ok(reply)
    }

    /// `COM_STMT_EXECUTE` without the slow-log timing.
    fn execute_inner(&mut self, id: u32, params: &[Value]) -> Result<Executed, SqlError> {
        self.refresh_account()?;
        let generation = self.generation;
        let db = self.inner.current_database();
        let entry = self.statements.get_mut(&id).ok_or_else(|| {
            SqlError::new(
                1243,
                *b"HY000",
                format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
            )
        })?;
        // The privilege check depends only on the statement, the account
        // (its generation) and the current database: once per change.
        // Compared in place: no copy of the database name per execution.
        let fresh =
            matches!(&entry.checked, Some((g, d)) if *g == generation && d.as_deref() == db);
        if !fresh {
            admin::check_privilege_on(&entry.text, &self.account, db, entry.stmt.relations())?;
            entry.checked = Some((generation, db.map(str::to_owned)));
        }
        // Emptied after the execution, success or not: no parameter value
        // outlives it.
        let mut datums = std::mem::take(&mut self.params);
        datums.extend(params.iter().map(to_datum));
        let mut sink = BinarySink::new(entry.stmt.columns(), &entry.columns, &mut entry.scratch);
        let out = self
            .inner
            .execute_prepared_streaming(&entry.stmt, &datums, &mut sink);
        datums.clear();
        if datums.capacity() <= KEEP_PARAMS {
            self.params = datums;
        }
        let out = out.map_err(convert_error)?;
        if let Some((columns, rows)) = sink.finish() {
            return Ok(Executed::BinaryRows { columns, rows });
        }
        // Not a query: an OK, or rows made without the query pipeline.
        Ok(Executed::Reply(match out {
            Output::Rows { columns, rows } if columns.as_slice() == entry.stmt.columns() => {
                Reply::Rows {
                    columns: entry.columns.clone(),
                    rows: convert_rows(rows),
                }
            }
            other => convert_output(other),
        }))
    }

    /// The start of a statement, if the slow-query log is on.
    fn slow_timer(&self) -> Option<(Duration, SystemTime, Instant)> {
        let limit = self.info.shared.slow_log.threshold()?;
        Some((limit, SystemTime::now(), Instant::now()))
    }

    /// Logs `stmt` if it ran at least the threshold `timer` was taken with.
    fn log_if_slow(
        &self,
        timer: Option<(Duration, SystemTime, Instant)>,
        stmt: &str,
        rows_sent: usize,
    ) {
        let Some((limit, started, clock)) = timer else {
            return;
        };
        let query_time = clock.elapsed();
        if query_time < limit {
            return;
        }
        let rows_sent = rows_sent as u64; // usize -> u64: lossless
        self.info.shared.slow_log.record(&crate::slow_log::Entry {
            user: &self.info.user,
            host: &self.info.host,
            connection_id: self.info.id,
            db: self.inner.current_database(),
            started,
            query_time,
            rows_sent,
            statement: stmt,
        });
    }
}

impl Session for SqlSession {
    fn query(&mut self, sql: &str) -> Vec<Result<Reply, SqlError>> {
        let mut out = Vec::new();
        let stmts = admin::lex::split_statements(sql);
        if stmts.is_empty() {
            out.push(Err(SqlError::new(1065, *b"42000", "Query was empty")));
        }
        for stmt in stmts {
            let timer = self.slow_timer();
            let r = self.one(stmt);
            let rows_sent = match &r {
                Ok(Reply::Rows { rows, .. }) => rows.len(),
                _ => 0,
            };
            self.log_if_slow(timer, stmt, rows_sent);
            let failed = r.is_err();
            out.push(r);
            if failed {
                break;
            }
        }
        out
    }

    fn set_database(&mut self, db: &str) -> Result<(), SqlError> {
        self.inner.set_database(db).map_err(convert_error)
    }

    fn in_transaction(&self) -> bool {
        self.inner.in_transaction()
    }

    fn autocommit(&self) -> bool {
        self.inner.autocommit()
    }

    fn reset(&mut self) -> Result<(), SqlError> {
        self.statements.clear();
        self.inner.reset();
        Ok(())
    }

    fn prepare(&mut self, id: u32, sql: &str) -> Result<Prepared, SqlError> {
        self.refresh_account()?;
        admin::check_privilege_on(
            sql,
            &self.account,
            self.inner.current_database(),
            &shale_sql::relations(sql),
        )?;
        let p = self.inner.prepare(sql).map_err(convert_error)?;
        let columns: Arc<[Column]> = p.columns().iter().map(convert_column).collect();
        let prepared = Prepared {
            params: u16::try_from(p.param_count()).map_err(|_| {
                SqlError::new(
                    1390,
                    *b"HY000",
                    "Prepared statement contains too many placeholders",
                )
            })?,
            columns: columns.to_vec(),
        };
        self.statements.insert(
            id,
            PreparedEntry {
                stmt: p,
                columns,
                text: sql.to_owned(),
                checked: None,
                scratch: Default::default(),
            },
        );
        Ok(prepared)
    }

    fn execute(&mut self, id: u32, params: &[Value]) -> Result<Executed, SqlError> {
        let timer = self.slow_timer();
        let r = self.execute_inner(id, params);
        if timer.is_some() {
            let text = self.statements.get(&id).map(|e| e.text.clone());
            let rows_sent = match &r {
                Ok(Executed::BinaryRows { rows, .. }) => rows.len(),
                Ok(Executed::Reply(Reply::Rows { rows, .. })) => rows.len(),
                _ => 0,
            };
            self.log_if_slow(timer, text.as_deref().unwrap_or_default(), rows_sent);
        }
        r
    }

    fn recycle_rows(&mut self, id: u32, rows: crate::backend::EncodedRows) {
        if let Some(entry) = self.statements.get_mut(&id) {
            entry.scratch.recycle(rows);
        }
    }

    fn close_statement(&mut self, id: u32) {
        self.statements.remove(&id);
    }

    fn field_list(&mut self, table: &str) -> Result<Vec<Column>, SqlError> {
        let cols = self.inner.table_columns(table).map_err(convert_error)?;
        Ok(cols.iter().map(convert_column).collect())
    }
}

fn internal(e: AccountError) -> SqlError {
    SqlError::new(1105, *b"HY000", e.to_string())
}

fn convert_error(e: shale_sql::Error) -> SqlError {
    let mut state = [b'H', b'Y', b'0', b'0', b'0'];
    for (d, s) in state.iter_mut().zip(e.sqlstate().bytes()) {
        *d = s;
    }
    SqlError::new(e.mysql_code(), state, e.to_string())
}

fn convert_output(out: Output) -> Reply {
    match out {
        Output::Affected {
            rows,
            last_insert_id,
            warnings,
        } => Reply::Ok {
            affected_rows: rows,
            last_insert_id,
            warnings,
            info: String::new(),
        },
        Output::Rows { columns, rows } => Reply::Rows {
            columns: columns.iter().map(convert_column).collect(),
            rows: convert_rows(rows),
        },
    }
}

fn convert_rows(rows: Vec<Vec<Datum>>) -> Vec<Vec<Value>> {
    rows.into_iter()
        .map(|r| r.into_iter().map(to_value).collect())
        .collect()
}

/// The protocol column definition of a SQL result column.
pub(crate) fn convert_column(c: &ColumnMeta) -> Column {
    let (col_type, length, decimals) = match &c.ty {
        SqlType::Int { bytes, .. } => (
            match bytes {
                1 => ColumnType::Tiny,
                2 => ColumnType::Short,
                3 => ColumnType::Int24,
                4 => ColumnType::Long,
                _ => ColumnType::LongLong,
            },
            u32::from(*bytes) * 3 + 1,
            0,
        ),
        SqlType::Float => (ColumnType::Float, 12, 31),
        SqlType::Double => (ColumnType::Double, 22, 31),
        SqlType::Decimal { precision, scale } => {
            (ColumnType::NewDecimal, u32::from(*precision) + 2, *scale)
        }
        SqlType::Char(n) | SqlType::Binary(n) => (ColumnType::String, n.saturating_mul(4), 0),
        SqlType::VarChar(n) | SqlType::VarBinary(n) => {
            (ColumnType::VarString, n.saturating_mul(4), 0)
        }
        SqlType::Text(n) | SqlType::Blob(n) => (ColumnType::Blob, *n, 0),
        SqlType::Date => (ColumnType::Date, 10, 0),
        SqlType::DateTime => (ColumnType::DateTime, 26, 6),
        SqlType::Timestamp => (ColumnType::Timestamp, 26, 6),
    };
    let mut flags = 0;
    if !c.nullable {
        flags |= colflag::NOT_NULL;
    }
    if c.primary_key {
        flags |= colflag::PRI_KEY;
    }
    if c.auto_increment {
        flags |= colflag::AUTO_INCREMENT;
    }
    if matches!(c.ty, SqlType::Int { unsigned: true, .. }) {
        flags |= colflag::UNSIGNED;
    }
    if matches!(
        c.ty,
        SqlType::Int { .. } | SqlType::Float | SqlType::Double | SqlType::Decimal { .. }
    ) {
        flags |= colflag::NUM;
    }
    let binary = matches!(
        c.ty,
        SqlType::Binary(_) | SqlType::VarBinary(_) | SqlType::Blob(_)
    );
    if binary {
        flags |= colflag::BINARY;
    }
    if matches!(c.ty, SqlType::Text(_) | SqlType::Blob(_)) {
        flags |= colflag::BLOB;
    }
    Column {
        schema: c.db.clone(),
        table: c.table.clone(),
        org_table: c.org_table.clone(),
        name: c.name.clone(),
        org_name: c.org_name.clone(),
        charset: if c.ty.is_text() {
            charset::UTF8MB4_BIN
        } else {
            charset::BINARY
        },
        length,
        col_type,
        flags,
        decimals,
    }
}

fn protocol_datetime(d: &shale_sql::DateTime) -> DateTime {
    DateTime {
        year: d.year,
        month: d.month,
        day: d.day,
        hour: d.hour,
        minute: d.minute,
        second: d.second,
        micros: d.micros,
    }
}

/// A SQL value as the protocol sends it.
pub(crate) fn to_value(d: Datum) -> Value {
    match d {
        Datum::Null => Value::Null,
        Datum::Int(v) => Value::Int(v),
        Datum::UInt(v) => Value::UInt(v),
        Datum::Double(v) => Value::Double(v),
        Datum::Decimal(v) => Value::Decimal(v.to_string()),
        Datum::Bytes(b) => Value::Bytes(b),
        Datum::Date(d) => Value::Date(protocol_datetime(&d)),
        Datum::DateTime(d) => Value::DateTime(protocol_datetime(&d)),
    }
}

/// A statement parameter as the SQL layer takes it.
fn to_datum(v: &Value) -> Datum {
    match v {
        Value::Null => Datum::Null,
        Value::Int(n) => Datum::Int(*n),
        Value::UInt(n) => Datum::UInt(*n),
        Value::Float(f) => Datum::Double(f64::from(*f)),
        Value::Double(f) => Datum::Double(*f),
        Value::Decimal(s) => {
            shale_sql::Decimal::parse(s).map_or_else(|| Datum::text(s), Datum::Decimal)
        }
        Value::Bytes(b) => Datum::Bytes(b.clone()),
        Value::Date(d) | Value::DateTime(d) => {
            let dt = shale_sql::DateTime {
                year: d.year,
                month: d.month,
                day: d.day,
                hour: d.hour,
                minute: d.minute,
                second: d.second,
                micros: d.micros,
            };
            if matches!(v, Value::Date(_)) {
                Datum::Date(dt)
            } else {
                Datum::DateTime(dt)
            }
        }
        Value::Time(t) => {
            let sign = if t.negative { "-" } else { "" };
            let hours = t.days * 24 + u32::from(t.hour);
            Datum::text(&format!(
                "{sign}{hours:02}:{:02}:{:02}.{:06}",
                t.minute, t.second, t.micros
            ))
        }
    }
}
