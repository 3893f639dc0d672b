//! What the wire protocol asks of the database behind it.
//!
//! The protocol layer (`mysql/`) knows packets, not SQL. A [`Backend`]
//! checks accounts and opens a [`Session`] per connection; the session runs
//! statements and answers with [`Reply`]s made of protocol-level
//! [`Column`]s and [`Value`]s. The SQL layer implements these traits; the
//! protocol tests implement them with small fixtures.

use crate::mysql::auth::Credentials;
use crate::mysql::consts::{charset, ColumnType};

/// An error as the client sees it: MySQL error code, SQLSTATE, message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ERROR {code} ({}): {message}", String::from_utf8_lossy(state))]
pub struct SqlError {
    pub code: u16,
    pub state: [u8; 5],
    pub message: String,
}

impl SqlError {
    /// An error with this code, SQLSTATE and message.
    pub fn new(code: u16, state: [u8; 5], message: impl Into<String>) -> Self {
        SqlError {
            code,
            state,
            message: message.into(),
        }
    }
}

/// A value in a result row. The text protocol sends its text form; the
/// binary protocol (prepared statements) its typed form.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    /// Exact decimal, already formatted (`-12.50`).
    Decimal(String),
    /// Strings and byte strings.
    Bytes(Vec<u8>),
    /// DATE (the time fields are zero).
    Date(DateTime),
    /// DATETIME / TIMESTAMP.
    DateTime(DateTime),
    /// TIME: a signed duration.
    Time(Duration),
}

/// A calendar date and time of day, as the protocol carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DateTime {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

/// A TIME value: `[-]days hh:mm:ss.micros`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Duration {
    pub negative: bool,
    pub days: u32,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

impl Value {
    /// Appends the text-protocol form (NULL is handled by the caller).
    pub fn write_text(&self, out: &mut Vec<u8>) {
        use std::io::Write as _;
        // Writing to a Vec cannot fail.
        let _ = match self {
            Value::Null => Ok(()),
            Value::Int(n) => write!(out, "{n}"),
            Value::UInt(n) => write!(out, "{n}"),
            Value::Float(f) => {
                write_float_text(out, f64::from(*f));
                Ok(())
            }
            Value::Double(d) => {
                write_float_text(out, *d);
                Ok(())
            }
            Value::Date(d) => write!(out, "{:04}-{:02}-{:02}", d.year, d.month, d.day),
            Value::DateTime(d) => write!(
                out,
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                d.year, d.month, d.day, d.hour, d.minute, d.second
            )
            .and_then(|()| match d.micros {
                0 => Ok(()),
                m => write!(out, ".{m:06}"),
            }),
            Value::Time(t) => {
                let hours = u64::from(t.days) * 24 + u64::from(t.hour);
                let sign = if t.negative { "-" } else { "" };
                write!(out, "{sign}{hours:02}:{:02}:{:02}", t.minute, t.second).and_then(|()| {
                    match t.micros {
                        0 => Ok(()),
                        m => write!(out, ".{m:06}"),
                    }
                })
            }
            Value::Decimal(s) => {
                out.extend_from_slice(s.as_bytes());
                Ok(())
            }
            Value::Bytes(b) => {
                out.extend_from_slice(b);
                Ok(())
            }
        };
    }
}

/// Appends a floating-point value as MySQL/MariaDB's text protocol shows
/// it: the shortest digits that read back as the same value, written out
/// in full while the decimal exponent is within -15..=14 (`0.000001234`,
/// `12345678901234.5`) and in exponent form beyond (`1.5e300`, `1e-16`,
/// `1.2345678901234568e17`), the rule MariaDB 10.11 follows (checked
/// side by side). Plain `{}` would spell 1.5e300 with 301 digits.
fn write_float_text(out: &mut Vec<u8>, v: f64) {
    use std::io::Write as _;
    let start = out.len();
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{v:e}");
    let written = out.get(start..).unwrap_or_default();
    let exponent = written
        .iter()
        .rposition(|&b| b == b'e')
        .and_then(|i| written.get(i + 1..))
        .and_then(|e| std::str::from_utf8(e).ok())
        .and_then(|e| e.parse::<i32>().ok());
    if v.is_finite() && exponent.is_some_and(|e| (-15..=14).contains(&e)) {
        out.truncate(start);
        let _ = write!(out, "{v}");
    }
}

/// A result-set column as column definitions describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub schema: String,
    pub table: String,
    pub org_table: String,
    pub name: String,
    pub org_name: String,
    pub charset: u16,
    /// Maximum display length.
    pub length: u32,
    pub col_type: ColumnType,
    /// `consts::colflag` bits.
    pub flags: u16,
    pub decimals: u8,
}

impl Column {
    /// A computed column (no table) of `col_type`, with defaults clients
    /// accept: utf8mb4 for strings, binary for numbers.
    pub fn new(name: &str, col_type: ColumnType) -> Self {
        let text = matches!(
            col_type,
            ColumnType::VarChar | ColumnType::VarString | ColumnType::String | ColumnType::Blob
        );
        Column {
            schema: String::new(),
            table: String::new(),
            org_table: String::new(),
            name: name.to_owned(),
            org_name: name.to_owned(),
            charset: if text {
                charset::UTF8MB4_BIN
            } else {
                charset::BINARY
            },
            length: if text { 1 << 16 } else { 21 },
            col_type,
            flags: 0,
            decimals: if matches!(col_type, ColumnType::Double | ColumnType::Float) {
                31
            } else {
                0
            },
        }
    }
}

/// The answer to one statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// A statement without a result set.
    Ok {
        affected_rows: u64,
        last_insert_id: u64,
        warnings: u16,
        info: String,
    },
    /// A result set.
    Rows {
        /// Shared, so a prepared statement's columns, converted once, go
        /// out with each execution without a copy (`sql_backend.rs`).
        columns: std::sync::Arc<[Column]>,
        rows: Vec<Vec<Value>>,
    },
}

impl Reply {
    /// OK with nothing affected.
    pub fn ok() -> Self {
        Reply::Ok {
            affected_rows: 0,
            last_insert_id: 0,
            warnings: 0,
            info: String::new(),
        }
    }
}

/// What `COM_STMT_EXECUTE` answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Executed {
    /// As a text query's answer; a result set's rows are encoded by the
    /// protocol layer.
    Reply(Reply),
    /// A result set whose rows the session encoded as it produced them
    /// (no row is held as [`Value`]s: docs/benchmarks.md, "Rows projected
    /// into reused buffers").
    BinaryRows {
        columns: std::sync::Arc<[Column]>,
        rows: EncodedRows,
    },
}

/// Binary-protocol result rows (each a packet payload: `0x00`, the NULL
/// bitmap, the values), stored one after another.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EncodedRows {
    bytes: Vec<u8>,
    /// Where each row ends in `bytes`.
    ends: Vec<usize>,
}

impl EncodedRows {
    /// Appends a row of `values` for columns of `types`; a value that does
    /// not fit its column's type is an error and leaves nothing behind.
    pub fn push(
        &mut self,
        types: &[ColumnType],
        values: &[Value],
    ) -> Result<(), crate::mysql::ProtocolError> {
        let start = self.bytes.len();
        if let Err(e) = crate::mysql::binary::binary_row_into(&mut self.bytes, types, values) {
            self.bytes.truncate(start);
            return Err(e);
        }
        self.ends.push(self.bytes.len());
        Ok(())
    }

    /// Drops the rows, keeping the buffers' memory for the next result.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Bytes of memory the buffers hold.
    pub fn capacity_bytes(&self) -> usize {
        self.bytes.capacity() + self.ends.capacity() * std::mem::size_of::<usize>()
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The row payloads in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| self.bytes.get(start..end).unwrap_or_default())
    }
}

/// What preparing a statement tells the client.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// Number of `?` placeholders.
    pub params: u16,
    /// The result columns (empty for statements without a result set).
    pub columns: Vec<Column>,
}

/// One client connection's state in the database (current database,
/// transaction, session variables). Used by one thread at a time.
pub trait Session: Send {
    /// Runs the statement(s) in `sql`; one reply per statement, stopping
    /// at the first error (`COM_QUERY` with multi-statements).
    fn query(&mut self, sql: &str) -> Vec<Result<Reply, SqlError>>;
    /// `COM_INIT_DB` / `USE db`.
    fn set_database(&mut self, db: &str) -> Result<(), SqlError>;
    /// True inside an explicit transaction (status flag `IN_TRANS`).
    fn in_transaction(&self) -> bool;
    /// True with autocommit on (status flag `AUTOCOMMIT`).
    fn autocommit(&self) -> bool;
    /// `COM_RESET_CONNECTION`: roll back, drop session state.
    fn reset(&mut self) -> Result<(), SqlError>;
    /// `COM_STMT_PREPARE`: prepares `sql` as statement `id` (ids are the
    /// connection's, unique until closed).
    fn prepare(&mut self, id: u32, sql: &str) -> Result<Prepared, SqlError>;
    /// `COM_STMT_EXECUTE`: runs statement `id` with `params`.
    fn execute(&mut self, id: u32, params: &[Value]) -> Result<Executed, SqlError>;
    /// Hands back the rows of statement `id`'s last [`Executed::BinaryRows`]
    /// once they are sent, so a session may encode the next result into
    /// their buffers. Dropping them is always correct.
    fn recycle_rows(&mut self, _id: u32, _rows: EncodedRows) {}
    /// `COM_STMT_CLOSE`.
    fn close_statement(&mut self, id: u32);
    /// `COM_FIELD_LIST` (deprecated, still sent by the mysql client for
    /// name completion): the columns of `table` in the current database.
    fn field_list(&mut self, table: &str) -> Result<Vec<Column>, SqlError> {
        Err(SqlError::new(
            1146,
            *b"42S02",
            format!("Table '{table}' doesn't exist"),
        ))
    }
}

/// Who a new session is for, and the server it runs in.
#[derive(Clone)]
pub struct ConnInfo {
    /// The connection id (`CONNECTION_ID()`, the process list's `Id`).
    pub id: u32,
    pub user: String,
    /// The client's address as accounts name it (`127.0.0.1`).
    pub host: String,
    /// The database named at login, if any.
    pub database: Option<String>,
    /// Server-wide state: status counters, histograms, the process list
    /// (`SHOW STATUS`, `SHOW PROCESSLIST`, `KILL`).
    pub shared: std::sync::Arc<crate::server::Shared>,
}

/// The database behind the server.
pub trait Backend: Send + Sync + 'static {
    type Session: Session;
    /// The stored verifiers of `user` connecting from `host`, if the
    /// account exists.
    fn credentials(&self, user: &str, host: &str) -> Option<Credentials>;
    /// A new session for an authenticated user.
    fn open_session(&self, info: &ConnInfo) -> Result<Self::Session, SqlError>;
}

#[cfg(test)]
mod tests {
    use super::Value;

    fn text(v: Value) -> String {
        let mut out = Vec::new();
        v.write_text(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn doubles_as_mariadb_writes_them() {
        // Pairs taken from MariaDB 10.11's answers to the same SELECT.
        for (v, want) in [
            (1.5e300, "1.5e300"),
            (1e15, "1e15"),
            (1e14, "100000000000000"),
            (1.2345678901234568e17, "1.2345678901234568e17"),
            (0.0001, "0.0001"),
            (1e-7, "0.0000001"),
            (1e-15, "0.000000000000001"),
            (1e-16, "1e-16"),
            (1.234e-12, "0.000000000001234"),
            (-2.5e-20, "-2.5e-20"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100.0, "100"),
            (12345678901234.5, "12345678901234.5"),
            (-1e15, "-1e15"),
            (0.0, "0"),
        ] {
            assert_eq!(text(Value::Double(v)), want, "{v:e}");
        }
        assert_eq!(text(Value::Float(0.5)), "0.5");
    }
}
