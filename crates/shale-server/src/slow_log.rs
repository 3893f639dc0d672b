//! The slow-query log: statements that ran at least `long_query_time`
//! seconds, appended to a file in MySQL 8's slow-log format, which
//! `mysqldumpslow` / `mariadb-dumpslow` and pt-query-digest read:
//!
//! ```text
//! # Time: 2026-11-25T17:59:15.000368Z
//! # User@Host: root[root] @  [127.0.0.1]  Id:     8
//! # Query_time: 0.000368  Lock_time: 0.000000 Rows_sent: 1  Rows_examined: 0
//! use app;
//! SET timestamp=1795629555;
//! SELECT * FROM t WHERE id = 1;
//! ```
//!
//! `use db;` is written when the statement's database differs from the
//! previous entry's. `Lock_time` and `Rows_examined` are always 0: the SQL
//! layer does not separate row-lock waits from execution nor count the rows
//! it reads (the lock wait is inside `Query_time`). A prepared statement is
//! logged with its text, placeholders as `?`.
//!
//! Off unless the server was started with a file (`shale serve
//! --slow-query-log FILE`); `SET GLOBAL long_query_time = 0.5` and `SET
//! GLOBAL slow_query_log = OFF|ON` (SUPER) change it at run time. While off,
//! statements are not timed at all.

use crate::accounts::{privs, Account};
use crate::backend::{Reply, SqlError};
use crate::utc::Utc;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// MySQL's default `long_query_time`: 10 s.
const DEFAULT_LONG_QUERY_MICROS: u64 = 10_000_000;

/// The server's slow-query log.
pub struct SlowLog {
    enabled: AtomicBool,
    long_query_micros: AtomicU64,
    file: Mutex<Option<LogFile>>,
}

struct LogFile {
    file: File,
    path: PathBuf,
    /// The database of the last entry (`use db;` when it changes).
    last_db: Option<String>,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            enabled: AtomicBool::new(false),
            long_query_micros: AtomicU64::new(DEFAULT_LONG_QUERY_MICROS),
            file: Mutex::new(None),
        }
    }
}

/// One statement to log.
pub struct Entry<'a> {
    pub user: &'a str,
    pub host: &'a str,
    pub connection_id: u32,
    pub db: Option<&'a str>,
    /// When the statement started.
    pub started: SystemTime,
    pub query_time: Duration,
    pub rows_sent: u64,
    pub statement: &'a str,
}

impl SlowLog {
    /// Starts logging to `path` (appended; created if missing) from now on;
    /// `server` names the program in the header MySQL writes at open.
    pub fn open(&self, path: &Path, server: &str) -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        write!(
            file,
            "{server}. started with:\nTcp port: 0  Unix socket: \nTime                 Id Command    Argument\n"
        )?;
        *self.lock() = Some(LogFile {
            file,
            path: path.to_owned(),
            last_db: None,
        });
        self.enabled.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<LogFile>> {
        // An entry is written whole or not at all; a poisoned lock leaves
        // nothing half-done in memory.
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the threshold; negative or non-finite values are refused.
    pub fn set_long_query_time(&self, secs: f64) -> Result<(), SqlError> {
        if !(0.0..=31_536_000.0).contains(&secs) {
            return Err(SqlError::new(
                1231,
                *b"42000",
                format!("Variable 'long_query_time' can't be set to the value of '{secs}'"),
            ));
        }
        // In range: at most 3.2e13 microseconds.
        let micros = (secs * 1e6).round() as u64;
        self.long_query_micros.store(micros, Ordering::Relaxed);
        Ok(())
    }

    /// Turns logging on or off; on needs a file.
    pub fn set_enabled(&self, on: bool) -> Result<(), SqlError> {
        if on && self.lock().is_none() {
            return Err(SqlError::new(
                1231,
                *b"42000",
                "slow_query_log needs a file: start shale serve with --slow-query-log FILE",
            ));
        }
        self.enabled.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// The threshold while logging is on; `None` when off (callers then
    /// skip the clock).
    pub fn threshold(&self) -> Option<Duration> {
        self.enabled
            .load(Ordering::Relaxed)
            .then(|| Duration::from_micros(self.long_query_micros.load(Ordering::Relaxed)))
    }

    /// `(name, value)` of the slow log's system variables.
    pub fn variables(&self) -> [(&'static str, String); 3] {
        let micros = self.long_query_micros.load(Ordering::Relaxed);
        let on = self.enabled.load(Ordering::Relaxed);
        let file = self
            .path()
            .map_or_else(String::new, |p| p.display().to_string());
        [
            (
                "long_query_time",
                format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000),
            ),
            ("slow_query_log", if on { "ON" } else { "OFF" }.to_owned()),
            ("slow_query_log_file", file),
        ]
    }

    /// The log file, if one is open.
    pub fn path(&self) -> Option<PathBuf> {
        self.lock().as_ref().map(|f| f.path.clone())
    }

    /// Appends `e` (one write call per entry, so entries of concurrent
    /// sessions never interleave). A failed write is reported in the
    /// server's log and does not fail the statement.
    pub fn record(&self, e: &Entry<'_>) {
        let mut guard = self.lock();
        let Some(f) = guard.as_mut() else {
            return;
        };
        let mut text = String::new();
        let started = e.started.duration_since(UNIX_EPOCH).unwrap_or_default();
        text.push_str(&format!(
            "# Time: {}\n# User@Host: {}[{}] @  [{}]  Id: {:>6}\n",
            Utc::at(e.started + e.query_time).iso8601_micros(),
            e.user,
            e.user,
            e.host,
            e.connection_id
        ));
        text.push_str(&format!(
            "# Query_time: {:.6}  Lock_time: 0.000000 Rows_sent: {}  Rows_examined: 0\n",
            e.query_time.as_secs_f64(),
            e.rows_sent
        ));
        if let Some(db) = e.db.filter(|d| f.last_db.as_deref() != Some(*d)) {
            text.push_str(&format!("use {db};\n"));
            f.last_db = Some(db.to_owned());
        }
        text.push_str(&format!("SET timestamp={};\n", started.as_secs()));
        let stmt = e.statement.trim_end();
        text.push_str(stmt);
        if !stmt.ends_with(';') {
            text.push(';');
        }
        text.push('\n');
        if let Err(err) = f.file.write_all(text.as_bytes()) {
            tracing::error!(path = %f.path.display(), error = %err, "slow-query log write failed");
        }
    }
}

/// Puts the slow log's variables (`long_query_time`, `slow_query_log`,
/// `slow_query_log_file`) with the server's values into the SQL layer's
/// answer to `SHOW [GLOBAL|SESSION] VARIABLES [LIKE 'p']`, replacing any the
/// SQL layer listed (it knows only the session's own `long_query_time`).
/// Other statements and `... WHERE` forms are left as they are.
pub fn merge_show_variables(stmt: &str, reply: &mut Reply, log: &SlowLog) {
    if !crate::engine_status::starts_with_word(stmt, "SHOW") {
        return;
    }
    let Some(toks) = crate::admin::lex::tokens(stmt) else {
        return;
    };
    let mut rest = toks.get(1..).unwrap_or_default();
    if rest
        .first()
        .is_some_and(|t| t.is("GLOBAL") || t.is("SESSION"))
    {
        rest = rest.get(1..).unwrap_or_default();
    }
    let pattern = match rest {
        [v] if v.is("VARIABLES") => None,
        [v, like, crate::admin::lex::Token::Str(p)] if v.is("VARIABLES") && like.is("LIKE") => {
            Some(p.as_str())
        }
        _ => return,
    };
    let Reply::Rows { rows, .. } = reply else {
        return;
    };
    let ours = log.variables();
    let name_of = |row: &Vec<crate::backend::Value>| match row.first() {
        Some(crate::backend::Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    };
    rows.retain(|r| {
        let n = name_of(r);
        !ours.iter().any(|(o, _)| n.eq_ignore_ascii_case(o))
    });
    for (name, value) in ours {
        if pattern.is_none_or(|p| crate::accounts::like_ci(p, name)) {
            rows.push(vec![
                crate::backend::Value::Bytes(name.as_bytes().to_vec()),
                crate::backend::Value::Bytes(value.into_bytes()),
            ]);
        }
    }
    rows.sort_by_key(|r| name_of(r));
}

/// `SET GLOBAL long_query_time = N` / `SET GLOBAL slow_query_log = ON|OFF`
/// (also spelled `SET @@global.name = v`): applied here, since these are
/// the server's settings. `None` for any other statement.
pub fn set_global(stmt: &str, log: &SlowLog, account: &Account) -> Option<Result<Reply, SqlError>> {
    // Every statement passes here: look closer only at a SET.
    if !crate::engine_status::starts_with_word(stmt, "SET") {
        return None;
    }
    let (target, value) = stmt.split_once('=')?;
    let words: Vec<String> = target
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    let name = match words.as_slice() {
        [set, global, name] if set == "set" && global == "global" => name.as_str(),
        [set, name] if set == "set" => name.strip_prefix("@@global.")?,
        _ => return None,
    };
    if name != "long_query_time" && name != "slow_query_log" {
        return None;
    }
    if account.global & privs::SUPER == 0 {
        return Some(Err(SqlError::new(
            1227,
            *b"42000",
            "Access denied; you need (at least one of) the SUPER privilege(s) for this operation",
        )));
    }
    let value = value.trim().trim_end_matches(';').trim().trim_matches('\'');
    let bad = || {
        SqlError::new(
            1231,
            *b"42000",
            format!("Variable '{name}' can't be set to the value of '{value}'"),
        )
    };
    let r = if name == "long_query_time" {
        value
            .parse::<f64>()
            .map_err(|_| bad())
            .and_then(|secs| log.set_long_query_time(secs))
    } else {
        match value.to_ascii_uppercase().as_str() {
            "1" | "ON" | "TRUE" => log.set_enabled(true),
            "0" | "OFF" | "FALSE" => log.set_enabled(false),
            _ => Err(bad()),
        }
    };
    Some(r.map(|()| Reply::ok()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::mysql::auth::Credentials;

    fn account(global: u64) -> Account {
        Account {
            user: "u".into(),
            host: "%".into(),
            credentials: Credentials::from_password("pw"),
            global,
            grants: Default::default(),
        }
    }

    fn entry<'a>(db: Option<&'a str>, statement: &'a str, micros: u64) -> Entry<'a> {
        Entry {
            user: "root",
            host: "127.0.0.1",
            connection_id: 8,
            db,
            started: UNIX_EPOCH + Duration::from_secs(1_795_629_555),
            query_time: Duration::from_micros(micros),
            rows_sent: 1,
            statement,
        }
    }

    #[test]
    fn entries_in_mysql_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slow.log");
        let log = SlowLog::default();
        assert_eq!(log.threshold(), None);
        log.open(&path, "shale serve, Version: 8.0.36-ShaleDB")
            .unwrap();
        assert_eq!(log.threshold(), Some(Duration::from_secs(10)));
        log.record(&entry(Some("app"), "SELECT 1", 368));
        log.record(&entry(Some("app"), "SELECT 2;", 1_500_000));
        log.record(&entry(None, "SELECT 3", 0));
        let text = std::fs::read_to_string(&path).unwrap();
        let want = "shale serve, Version: 8.0.36-ShaleDB. started with:\n\
            Tcp port: 0  Unix socket: \n\
            Time                 Id Command    Argument\n\
            # Time: 2026-11-25T17:59:15.000368Z\n\
            # User@Host: root[root] @  [127.0.0.1]  Id:      8\n\
            # Query_time: 0.000368  Lock_time: 0.000000 Rows_sent: 1  Rows_examined: 0\n\
            use app;\n\
            SET timestamp=1795629555;\n\
            SELECT 1;\n\
            # Time: 2026-11-25T17:59:16.500000Z\n\
            # User@Host: root[root] @  [127.0.0.1]  Id:      8\n\
            # Query_time: 1.500000  Lock_time: 0.000000 Rows_sent: 1  Rows_examined: 0\n\
            SET timestamp=1795629555;\n\
            SELECT 2;\n\
            # Time: 2026-11-25T17:59:15.000000Z\n\
            # User@Host: root[root] @  [127.0.0.1]  Id:      8\n\
            # Query_time: 0.000000  Lock_time: 0.000000 Rows_sent: 1  Rows_examined: 0\n\
            SET timestamp=1795629555;\n\
            SELECT 3;\n";
        assert_eq!(text, want);
    }

    #[test]
    fn set_global_statements() {
        let log = SlowLog::default();
        let root = account(privs::ALL);
        let user = account(privs::SELECT);
        // Not ours: left to the SQL layer.
        assert!(set_global("SET autocommit = 1", &log, &root).is_none());
        assert!(set_global("SET long_query_time = 1", &log, &root).is_none());
        assert!(set_global("SET GLOBAL max_connections = 1", &log, &root).is_none());
        let r = set_global("SET GLOBAL long_query_time = 0.25", &log, &user).unwrap();
        assert_eq!(r.unwrap_err().code, 1227);
        set_global("SET GLOBAL long_query_time = 0.25", &log, &root)
            .unwrap()
            .unwrap();
        set_global("set @@GLOBAL.long_query_time=0.000001;", &log, &root)
            .unwrap()
            .unwrap();
        let r = set_global("SET GLOBAL long_query_time = -1", &log, &root).unwrap();
        assert_eq!(r.unwrap_err().code, 1231);
        let r = set_global("SET GLOBAL long_query_time = 'x'", &log, &root).unwrap();
        assert_eq!(r.unwrap_err().code, 1231);
        // No file: cannot be switched on.
        let r = set_global("SET GLOBAL slow_query_log = ON", &log, &root).unwrap();
        assert_eq!(r.unwrap_err().code, 1231);
        let dir = tempfile::tempdir().unwrap();
        log.open(&dir.path().join("s.log"), "x").unwrap();
        assert_eq!(log.threshold(), Some(Duration::from_micros(1)));
        set_global("SET GLOBAL slow_query_log = OFF", &log, &root)
            .unwrap()
            .unwrap();
        assert_eq!(log.threshold(), None);
        set_global("SET GLOBAL slow_query_log = 1", &log, &root)
            .unwrap()
            .unwrap();
        assert!(log.threshold().is_some());
    }
}
