//! Server-level statements: the ones about the server rather than about
//! tables, answered here before a statement reaches the SQL layer.
//!
//! - accounts: `CREATE USER`, `DROP USER`, `ALTER USER ... IDENTIFIED BY`,
//!   `SET PASSWORD`, `GRANT`, `REVOKE`, `SHOW GRANTS`, `FLUSH PRIVILEGES`;
//! - the process list: `SHOW [FULL] PROCESSLIST`, `KILL [QUERY|CONNECTION]`;
//! - `SHOW [GLOBAL|SESSION] STATUS [LIKE 'pattern']`;
//! - `SELECT CONNECTION_ID()`, `SELECT USER()` / `CURRENT_USER()`.
//!
//! [`run`] returns `None` for anything else, which then goes to the SQL
//! layer after [`check_privilege`] has checked the statement's class
//! (SELECT, INSERT, ...) against the account's grants.
//!
//! Privileges (MySQL's rules, simplified): account statements need
//! `CREATE USER` (`GRANT`/`REVOKE` need `GRANT OPTION`); seeing other
//! users' threads and killing them needs `PROCESS` / `SUPER`. A table
//! statement needs its privilege globally or on the current database;
//! table-level grants are stored and shown but not yet consulted, so they
//! grant nothing (a denial, never an unintended permission).

pub mod lex;

use crate::accounts::{privs, Account, AccountError, AccountStore, Level};
use crate::backend::{Column, ConnInfo, Reply, SqlError, Value};
use crate::mysql::consts::ColumnType;
use lex::Token;

/// What a server-level statement runs with.
pub struct AdminContext<'a> {
    pub info: &'a ConnInfo,
    pub accounts: &'a AccountStore,
    /// The logged-in account, as stored now (grants may have changed
    /// since login).
    pub account: &'a Account,
}

/// Runs `stmt` if it is a server-level statement.
pub fn run(stmt: &str, ctx: &AdminContext<'_>) -> Option<Result<Reply, SqlError>> {
    // Every statement passes here: lex it whole only if its first words
    // name a statement handled below.
    let words = lex::FirstWords::<2>::of(stmt);
    let word = |i: usize| words.get(i);
    let ours = match word(0) {
        "SHOW" | "KILL" | "GRANT" | "REVOKE" | "SELECT" => true,
        "CREATE" | "DROP" | "ALTER" => word(1) == "USER",
        "SET" => word(1) == "PASSWORD",
        "FLUSH" => word(1) == "PRIVILEGES",
        _ => false,
    };
    if !ours {
        return None;
    }
    let toks = lex::tokens(stmt)?;
    let mut p = Parser {
        toks: &toks,
        pos: 0,
    };
    let first = p.peek()?.clone();
    let r = if first.is("SHOW") {
        p.pos += 1;
        show(&mut p, ctx)?
    } else if first.is("KILL") {
        p.pos += 1;
        kill(&mut p, ctx)
    } else if first.is("CREATE") && p.peek_at(1).is_some_and(|t| t.is("USER")) {
        p.pos += 2;
        create_user(&mut p, ctx)
    } else if first.is("DROP") && p.peek_at(1).is_some_and(|t| t.is("USER")) {
        p.pos += 2;
        drop_user(&mut p, ctx)
    } else if first.is("ALTER") && p.peek_at(1).is_some_and(|t| t.is("USER")) {
        p.pos += 2;
        alter_user(&mut p, ctx)
    } else if first.is("SET") && p.peek_at(1).is_some_and(|t| t.is("PASSWORD")) {
        p.pos += 2;
        set_password(&mut p, ctx)
    } else if first.is("GRANT") || first.is("REVOKE") {
        p.pos += 1;
        grant_or_revoke(&mut p, ctx, first.is("GRANT"))
    } else if first.is("FLUSH") && p.peek_at(1).is_some_and(|t| t.is("PRIVILEGES")) {
        // Grants are read from the engine on every statement: nothing to
        // reload.
        Ok(Reply::ok())
    } else if first.is("SELECT") {
        select_function(&mut p, ctx)?
    } else {
        return None;
    };
    Some(r)
}

/// Checks the privilege a SQL-layer statement needs; `Ok` for statements
/// that need none (SET, BEGIN, USE, ...).
pub fn check_privilege(
    stmt: &str,
    account: &Account,
    current_db: Option<&str>,
) -> Result<(), SqlError> {
    let Some((bit, name)) = needed_privilege(stmt) else {
        return Ok(());
    };
    // A SELECT without FROM reads no table (only a SELECT is lexed whole).
    if bit == privs::SELECT && lex::FirstWords::<1>::of(stmt).get(0) == "SELECT" {
        let Some(toks) = lex::tokens(stmt) else {
            return Ok(()); // the SQL layer reports the syntax error
        };
        if !toks.iter().any(|t| t.is("FROM")) {
            return Ok(());
        }
    }
    if account.allows(bit, current_db, None) {
        return Ok(());
    }
    deny(account, name, current_db)
}

/// [`check_privilege`] for a statement whose tables are known: the
/// privilege must hold in the database of every table it names (a table
/// without a database is in `current_db`).
pub fn check_privilege_on(
    stmt: &str,
    account: &Account,
    current_db: Option<&str>,
    tables: &[(Option<String>, String)],
) -> Result<(), SqlError> {
    if tables.is_empty() || tables.iter().all(|(d, _)| d.is_none()) {
        return check_privilege(stmt, account, current_db);
    }
    let Some((bit, name)) = needed_privilege(stmt) else {
        return Ok(());
    };
    for (db, _) in tables {
        let db = db.as_deref().or(current_db);
        if !account.allows(bit, db, None) {
            return deny(account, name, db);
        }
    }
    Ok(())
}

/// The privilege a table statement needs, by its first words.
fn needed_privilege(stmt: &str) -> Option<(u64, &'static str)> {
    let words = lex::FirstWords::<3>::of(stmt);
    let word = |i: usize| words.get(i);
    let first = word(0);
    Some(match first {
        "SELECT" | "WITH" | "EXPLAIN" | "DESCRIBE" | "DESC" | "TABLE" | "VALUES" | "CHECK" => {
            (privs::SELECT, "SELECT")
        }
        // MySQL's OPTIMIZE TABLE needs SELECT and INSERT; it rewrites rows.
        "INSERT" | "REPLACE" | "OPTIMIZE" => (privs::INSERT, "INSERT"),
        "UPDATE" => (privs::UPDATE, "UPDATE"),
        "DELETE" => (privs::DELETE, "DELETE"),
        "TRUNCATE" => (privs::DROP, "DROP"),
        "ALTER" => (privs::ALTER, "ALTER"),
        "CREATE" | "DROP" => {
            let what = word(1);
            let index = what == "INDEX" || (what == "UNIQUE" && word(2) == "INDEX");
            match (first, index) {
                (_, true) => (privs::INDEX, "INDEX"),
                ("CREATE", false) => (privs::CREATE, "CREATE"),
                _ => (privs::DROP, "DROP"),
            }
        }
        _ => return None,
    })
}

fn deny(account: &Account, name: &str, current_db: Option<&str>) -> Result<(), SqlError> {
    Err(match current_db {
        Some(db) => SqlError::new(
            1142,
            *b"42000",
            format!(
                "{name} command denied to user '{}'@'{}' for database '{db}'",
                account.user, account.host
            ),
        ),
        None => SqlError::new(
            1227,
            *b"42000",
            format!("Access denied; you need (at least one of) the {name} privilege(s) for this operation"),
        ),
    })
}

struct Parser<'t> {
    toks: &'t [Token],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }
    fn peek_at(&self, ahead: usize) -> Option<&Token> {
        self.toks.get(self.pos + ahead)
    }
    fn next(&mut self) -> Option<&Token> {
        let t = self.toks.get(self.pos);
        self.pos += 1;
        t
    }
    /// Consumes keyword `kw` if it comes next.
    fn eat(&mut self, kw: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.is(kw));
        if hit {
            self.pos += 1;
        }
        hit
    }
    fn eat_punct(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(&Token::Punct(c));
        if hit {
            self.pos += 1;
        }
        hit
    }
    fn expect(&mut self, kw: &str) -> Result<(), SqlError> {
        if self.eat(kw) {
            Ok(())
        } else {
            Err(self.syntax())
        }
    }
    fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }
    fn end(&self) -> Result<(), SqlError> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.syntax())
        }
    }
    fn syntax(&self) -> SqlError {
        let near = self
            .toks
            .get(self.pos)
            .map_or_else(String::new, |t| format!("{t:?}"));
        SqlError::new(
            1064,
            *b"42000",
            format!("You have an error in your SQL syntax near {near}"),
        )
    }
    /// `'user'@'host'`, `user@host` or `'user'` (host `%`).
    fn account_name(&mut self) -> Result<(String, String), SqlError> {
        let user = self
            .next()
            .and_then(Token::text)
            .map(str::to_owned)
            .ok_or_else(|| self.syntax())?;
        if !self.eat_punct('@') {
            return Ok((user, "%".into()));
        }
        let host = match self.next() {
            Some(Token::Word(w) | Token::Str(w) | Token::Ident(w)) => w.clone(),
            Some(Token::Number(n)) => {
                // 127.0.0.1 arrives as numbers and dots.
                let mut h = n.to_string();
                while self.eat_punct('.') {
                    match self.next() {
                        Some(Token::Number(m)) => h.push_str(&format!(".{m}")),
                        _ => return Err(self.syntax()),
                    }
                }
                h
            }
            _ => return Err(self.syntax()),
        };
        Ok((user, host))
    }
    /// A string literal (a password).
    fn string(&mut self) -> Result<String, SqlError> {
        match self.next() {
            Some(Token::Str(s)) => Ok(s.clone()),
            _ => Err(self.syntax()),
        }
    }
}

fn need(ctx: &AdminContext<'_>, bit: u64, name: &str) -> Result<(), SqlError> {
    if ctx.account.global & bit == bit {
        Ok(())
    } else {
        Err(SqlError::new(
            1227,
            *b"42000",
            format!("Access denied; you need (at least one of) the {name} privilege(s) for this operation"),
        ))
    }
}

fn account_error(e: AccountError) -> SqlError {
    match e {
        AccountError::CannotUser { .. } => SqlError::new(1396, *b"HY000", e.to_string()),
        AccountError::NoSuchGrant { .. } => SqlError::new(1141, *b"42000", e.to_string()),
        AccountError::Corrupt { .. } | AccountError::Engine(_) => {
            SqlError::new(1105, *b"HY000", e.to_string())
        }
    }
}

fn text(s: &str) -> Value {
    Value::Bytes(s.as_bytes().to_vec())
}

fn rows(names: &[&str], rows: Vec<Vec<Value>>) -> Reply {
    Reply::Rows {
        columns: names
            .iter()
            .map(|n| Column::new(n, ColumnType::VarString))
            .collect(),
        rows,
    }
}

/// `SHOW ...`: `None` when it is a SHOW for the SQL layer.
fn show(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Option<Result<Reply, SqlError>> {
    let full = p.eat("FULL");
    if p.eat("PROCESSLIST") {
        return Some(p.end().map(|()| processlist(ctx, full)));
    }
    if full {
        return None;
    }
    let global = p.eat("GLOBAL");
    if !global {
        p.eat("SESSION");
    }
    if p.eat("STATUS") {
        return Some(status(p, ctx));
    }
    if p.eat("GRANTS") {
        return Some(show_grants(p, ctx));
    }
    None
}

fn processlist(ctx: &AdminContext<'_>, full: bool) -> Reply {
    let see_all = ctx.account.global & privs::PROCESS != 0;
    let list = ctx
        .info
        .shared
        .processes
        .rows()
        .into_iter()
        .filter(|r| see_all || r.user == ctx.account.user)
        .map(|r| {
            let info = r.info.map(|i| match full {
                true => i,
                false => i.chars().take(100).collect(),
            });
            vec![
                Value::UInt(u64::from(r.id)),
                text(&r.user),
                text(&r.host),
                r.db.as_deref().map_or(Value::Null, text),
                text(r.command),
                Value::UInt(r.time),
                Value::Null,
                info.as_deref().map_or(Value::Null, text),
            ]
        })
        .collect();
    let mut reply = rows(
        &[
            "Id", "User", "Host", "db", "Command", "Time", "State", "Info",
        ],
        list,
    );
    if let Reply::Rows { columns, .. } = &mut reply {
        let mut cols = columns.to_vec();
        for i in [0usize, 5] {
            if let Some(c) = cols.get_mut(i) {
                *c = Column::new(&c.name.clone(), ColumnType::LongLong);
            }
        }
        *columns = cols.into();
    }
    reply
}

fn kill(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Result<Reply, SqlError> {
    let query_only = p.eat("QUERY");
    if !query_only {
        p.eat("CONNECTION");
    }
    let id = match p.next() {
        Some(Token::Number(n)) => *n,
        _ => return Err(p.syntax()),
    };
    p.end()?;
    let unknown = || SqlError::new(1094, *b"HY000", format!("Unknown thread id: {id}"));
    let id = u32::try_from(id).map_err(|_| unknown())?;
    let owner = ctx
        .info
        .shared
        .processes
        .rows()
        .into_iter()
        .find(|r| r.id == id)
        .ok_or_else(unknown)?
        .user;
    if owner != ctx.account.user && ctx.account.global & privs::SUPER == 0 {
        return Err(SqlError::new(
            1095,
            *b"HY000",
            format!("You are not owner of thread {id}"),
        ));
    }
    if ctx.info.shared.processes.kill(id, !query_only) {
        Ok(Reply::ok())
    } else {
        Err(unknown())
    }
}

fn status(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Result<Reply, SqlError> {
    let pattern = if p.eat("LIKE") {
        Some(p.string()?)
    } else {
        None
    };
    p.end()?;
    let stats = &ctx.info.shared.stats;
    let list = stats
        .status_rows()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .chain(stats.stage_rows())
        .filter(|(k, _)| {
            pattern
                .as_deref()
                .is_none_or(|pat| crate::accounts::like_ci(pat, k))
        })
        .map(|(k, v)| vec![text(&k), text(&v.to_string())])
        .collect();
    Ok(rows(&["Variable_name", "Value"], list))
}

fn show_grants(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Result<Reply, SqlError> {
    let target = if p.eat("FOR") {
        if p.eat("CURRENT_USER") {
            if p.eat_punct('(') && !p.eat_punct(')') {
                return Err(p.syntax());
            }
            None
        } else {
            Some(p.account_name()?)
        }
    } else {
        None
    };
    p.end()?;
    let account = match target {
        None => ctx.account.clone(),
        Some((user, host)) => {
            if user != ctx.account.user || host != ctx.account.host {
                need(ctx, privs::SELECT, "SELECT")?;
            }
            ctx.accounts
                .list()
                .map_err(account_error)?
                .into_iter()
                .find(|a| a.user == user && a.host == host)
                .ok_or_else(|| {
                    SqlError::new(
                        1141,
                        *b"42000",
                        format!(
                            "There is no such grant defined for user '{user}' on host '{host}'"
                        ),
                    )
                })?
        }
    };
    let title = format!("Grants for {}@{}", account.user, account.host);
    Ok(rows(
        &[title.as_str()],
        account
            .grant_statements()
            .iter()
            .map(|g| vec![text(g)])
            .collect(),
    ))
}

fn create_user(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Result<Reply, SqlError> {
    need(ctx, privs::CREATE_USER, "CREATE USER")?;
    let if_not_exists = p.eat("IF");
    if if_not_exists {
        p.expect("NOT")?;
        p.expect("EXISTS")?;
    }
    let (user, host) = p.account_name()?;
    let password = if p.eat("IDENTIFIED") {
        if p.eat("WITH") {
            p.next(); // the plugin name: every account gets both verifiers
        }
        p.expect("BY")?;
        p.string()?
    } else {
        String::new()
    };
    p.end()?;
    if password.is_empty() {
        // The server is never open without a password.
        return Err(SqlError::new(
            1819,
            *b"HY000",
            "Your password does not satisfy the current policy requirements: \
             an account needs a password (IDENTIFIED BY '...')",
        ));
    }
    ctx.accounts
        .create(&user, &host, &password, if_not_exists)
        .map_err(account_error)?;
    Ok(Reply::ok())
}

fn drop_user(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Result<Reply, SqlError> {
    need(ctx, privs::CREATE_USER, "CREATE USER")?;
    let if_exists = p.eat("IF");
    if if_exists {
        p.expect("EXISTS")?;
    }
    let mut names = vec![p.account_name()?];
    while p.eat_punct(',') {
        names.push(p.account_name()?);
    }
    p.end()?;
    for (user, host) in names {
        ctx.accounts
            .drop(&user, &host, if_exists)
            .map_err(account_error)?;
    }
    Ok(Reply::ok())
}

fn alter_user(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Result<Reply, SqlError> {
    let (user, host) = p.account_name()?;
    p.expect("IDENTIFIED")?;
    if p.eat("WITH") {
        p.next();
    }
    p.expect("BY")?;
    let pw = p.string()?;
    p.end()?;
    change_password(ctx, &user, &host, &pw)
}

fn set_password(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Result<Reply, SqlError> {
    let (user, host) = if p.eat("FOR") {
        p.account_name()?
    } else {
        (ctx.account.user.clone(), ctx.account.host.clone())
    };
    if !p.eat_punct('=') {
        return Err(p.syntax());
    }
    let pw = if p.eat("PASSWORD") {
        // SET PASSWORD = PASSWORD('x'): the old function form.
        if !p.eat_punct('(') {
            return Err(p.syntax());
        }
        let pw = p.string()?;
        if !p.eat_punct(')') {
            return Err(p.syntax());
        }
        pw
    } else {
        p.string()?
    };
    p.end()?;
    change_password(ctx, &user, &host, &pw)
}

fn change_password(
    ctx: &AdminContext<'_>,
    user: &str,
    host: &str,
    pw: &str,
) -> Result<Reply, SqlError> {
    if user != ctx.account.user || host != ctx.account.host {
        need(ctx, privs::CREATE_USER, "CREATE USER")?;
    }
    if pw.is_empty() {
        return Err(SqlError::new(
            1819,
            *b"HY000",
            "Your password does not satisfy the current policy requirements: it is empty",
        ));
    }
    ctx.accounts
        .set_password(user, host, pw)
        .map_err(account_error)?;
    Ok(Reply::ok())
}

/// `GRANT priv[, priv] ON level TO account [WITH GRANT OPTION]` and
/// `REVOKE priv[, priv] ON level FROM account`.
fn grant_or_revoke(
    p: &mut Parser<'_>,
    ctx: &AdminContext<'_>,
    grant: bool,
) -> Result<Reply, SqlError> {
    need(ctx, privs::GRANT_OPTION, "GRANT OPTION")?;
    let mut bits = 0u64;
    loop {
        let mut name = p
            .next()
            .and_then(Token::text)
            .map(str::to_owned)
            .ok_or_else(|| p.syntax())?;
        // Two-word names: ALL PRIVILEGES, CREATE USER, GRANT OPTION.
        if let Some(second) = p.peek().and_then(Token::text) {
            let two = format!("{name} {second}");
            if privs::parse(&two).is_some() {
                name = two;
                p.pos += 1;
            }
        }
        bits |= privs::parse(&name)
            .ok_or_else(|| SqlError::new(1064, *b"42000", format!("Unknown privilege {name}")))?;
        if !p.eat_punct(',') {
            break;
        }
    }
    p.expect("ON")?;
    let level = grant_level(p)?;
    if grant {
        p.expect("TO")?;
    } else {
        p.expect("FROM")?;
    }
    let (user, host) = p.account_name()?;
    if grant && p.eat("WITH") {
        p.expect("GRANT")?;
        p.expect("OPTION")?;
        bits |= privs::GRANT_OPTION;
    }
    p.end()?;
    if bits & privs::ALL == privs::ALL && level != Level::Global {
        bits = (bits & !privs::ALL) | privs::ALL_OBJECT;
    }
    let r = if grant {
        ctx.accounts.grant(&user, &host, bits, level)
    } else {
        ctx.accounts.revoke(&user, &host, bits, level)
    };
    r.map_err(account_error)?;
    Ok(Reply::ok())
}

/// `*.*`, `*` (the current database), `db.*` or `db.table`.
fn grant_level(p: &mut Parser<'_>) -> Result<Level, SqlError> {
    let name = |p: &mut Parser<'_>| -> Result<Option<String>, SqlError> {
        match p.next() {
            Some(Token::Punct('*')) => Ok(None),
            Some(t) => t
                .text()
                .map(|s| Some(s.to_owned()))
                .ok_or_else(|| p.syntax()),
            None => Err(p.syntax()),
        }
    };
    let first = name(p)?;
    if !p.eat_punct('.') {
        return Err(SqlError::new(
            1046,
            *b"3D000",
            "No database selected (name the level as db.* or *.*)",
        ));
    }
    let second = name(p)?;
    Ok(match (first, second) {
        (None, None) => Level::Global,
        (Some(db), None) => Level::Database(db),
        (Some(db), Some(t)) => Level::Table(db, t),
        (None, Some(_)) => return Err(p.syntax()),
    })
}

/// `SELECT CONNECTION_ID()`, `SELECT USER()`, `SELECT CURRENT_USER()`
/// (optionally `AS name`); `None` for any other SELECT.
fn select_function(p: &mut Parser<'_>, ctx: &AdminContext<'_>) -> Option<Result<Reply, SqlError>> {
    p.pos = 1;
    let func = p.next()?.text()?.to_ascii_uppercase();
    let value = match func.as_str() {
        "CONNECTION_ID" => Value::UInt(u64::from(ctx.info.id)),
        "USER" | "SESSION_USER" | "SYSTEM_USER" => {
            text(&format!("{}@{}", ctx.info.user, ctx.info.host))
        }
        "CURRENT_USER" => text(&format!("{}@{}", ctx.account.user, ctx.account.host)),
        _ => return None,
    };
    if !(p.eat_punct('(') && p.eat_punct(')')) {
        return None;
    }
    let label = if p.eat("AS") {
        p.next()?.text()?.to_owned()
    } else {
        format!("{func}()")
    };
    if !p.at_end() {
        return None;
    }
    let col_type = match value {
        Value::UInt(_) => ColumnType::LongLong,
        _ => ColumnType::VarString,
    };
    Some(Ok(Reply::Rows {
        columns: vec![Column::new(&label, col_type)].into(),
        rows: vec![vec![value]],
    }))
}

#[cfg(test)]
mod tests;
