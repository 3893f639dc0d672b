//! The SQL layer's errors: each maps to the MySQL error code and SQLSTATE a
//! MySQL client expects for the same failure (`mysql_code`, `sqlstate`).

/// A failed SQL statement.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("You have an error in your SQL syntax: {0}")]
    Syntax(String),
    #[error("This version of ShaleDB doesn't yet support '{0}'")]
    Unsupported(String),
    /// A transaction wrote a table whose indexes changed before it
    /// committed (its rows would lack the new index's entries).
    #[error("Table definition has changed, please retry transaction")]
    TableDefinitionChanged,
    #[error("Unknown database '{0}'")]
    UnknownDatabase(String),
    #[error("No database selected")]
    NoDatabase,
    #[error("Can't create database '{0}'; database exists")]
    DatabaseExists(String),
    #[error("Table '{0}' doesn't exist")]
    UnknownTable(String),
    #[error("Unknown table '{0}' in information_schema")]
    UnknownSystemTable(String),
    #[error("Table '{0}' already exists")]
    TableExists(String),
    #[error("Unknown column '{0}' in '{1}'")]
    UnknownColumn(String, String),
    #[error("Column '{0}' in {1} is ambiguous")]
    AmbiguousColumn(String, String),
    #[error("Duplicate column name '{0}'")]
    DuplicateColumn(String),
    #[error("Duplicate key name '{0}'")]
    DuplicateIndex(String),
    #[error("Can't DROP '{0}'; check that column/key exists")]
    CantDrop(String),
    #[error("Duplicate entry '{value}' for key '{key}'")]
    DuplicateKey { value: String, key: String },
    #[error("Column '{0}' cannot be null")]
    NotNull(String),
    #[error("Field '{0}' doesn't have a default value")]
    NoDefault(String),
    #[error("Out of range value for column '{0}' at row {1}")]
    OutOfRange(String, u64),
    #[error("{0} value is out of range")]
    ValueOutOfRange(String),
    #[error("Data too long for column '{0}' at row {1}")]
    DataTooLong(String, u64),
    #[error("Incorrect {kind} value: '{value}' for column '{column}' at row {row}")]
    BadValue {
        kind: &'static str,
        value: String,
        column: String,
        row: u64,
    },
    #[error("Truncated incorrect {0} value: '{1}'")]
    BadConversion(&'static str, String),
    #[error("Column count doesn't match value count at row {0}")]
    ColumnCount(u64),
    #[error("Operand should contain {0} column(s)")]
    OperandColumns(usize),
    #[error("Subquery returns more than 1 row")]
    SubqueryRows,
    #[error("Division by 0")]
    DivisionByZero,
    #[error("Invalid use of group function")]
    GroupFunction,
    #[error("Incorrect arguments to {0}")]
    WrongArguments(String),
    #[error("Unknown system variable '{0}'")]
    UnknownVariable(String),
    #[error("Variable '{0}' can't be set to the value of '{1}'")]
    BadVariableValue(String, String),
    /// A value of the wrong type for a variable (a string for a number).
    #[error("Incorrect argument type to variable '{0}'")]
    WrongTypeForVariable(String),
    #[error("Incorrect table definition; {0}")]
    BadTableDefinition(String),
    #[error("Too big precision {0} specified; maximum is 38")]
    TooBigPrecision(u64),
    #[error("Incorrect number of arguments for {0}")]
    PlaceholderCount(String),
    #[error("Cannot execute statement in a READ ONLY transaction")]
    ReadOnlyTransaction,
    #[error("Lock wait timeout exceeded; try restarting transaction")]
    LockWaitTimeout,
    #[error("Deadlock found when trying to get lock; try restarting transaction")]
    Deadlock,
    #[error("Query execution was interrupted")]
    Interrupted,
    #[error("Unknown XID")]
    UnknownXid,
    #[error("XAER_OUTSIDE: {0}")]
    XaState(String),
    #[error("corrupt data dictionary entry for {what}: {reason}")]
    DictionaryCorrupt { what: String, reason: String },
    #[error("corrupt row in table {table}: {reason}")]
    RowCorrupt { table: String, reason: String },
    /// A temporary file of a spilled sort, grouping or join failed or
    /// came back damaged (MySQL's ER_ERROR_ON_READ/WRITE family).
    #[error("Error on temporary file '{path}': {reason}")]
    TempFile { path: String, reason: String },
    #[error("storage engine: {0}")]
    Engine(#[from] shaledb::Error),
}

/// Results of the SQL layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The MySQL error number a client sees for this error.
    pub fn mysql_code(&self) -> u16 {
        match self {
            Error::Syntax(_) => 1064,
            Error::Unsupported(_) => 1235,
            Error::TableDefinitionChanged => 1412,
            Error::UnknownDatabase(_) => 1049,
            Error::NoDatabase => 1046,
            Error::DatabaseExists(_) => 1007,
            Error::UnknownTable(_) => 1146,
            Error::UnknownSystemTable(_) => 1109,
            Error::TableExists(_) => 1050,
            Error::UnknownColumn(..) => 1054,
            Error::AmbiguousColumn(..) => 1052,
            Error::DuplicateColumn(_) => 1060,
            Error::DuplicateIndex(_) => 1061,
            Error::CantDrop(_) => 1091,
            Error::DuplicateKey { .. } => 1062,
            Error::NotNull(_) => 1048,
            Error::NoDefault(_) => 1364,
            Error::OutOfRange(..) => 1264,
            Error::DataTooLong(..) => 1406,
            Error::ValueOutOfRange(_) => 1690,
            // MySQL: a bad date is ER_TRUNCATED_WRONG_VALUE, other values
            // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD.
            Error::BadValue { kind, .. } if kind.starts_with("date") || *kind == "time" => 1292,
            Error::BadValue { .. } => 1366,
            Error::BadConversion(..) => 1292,
            Error::ColumnCount(_) => 1136,
            Error::OperandColumns(_) => 1241,
            Error::SubqueryRows => 1242,
            Error::DivisionByZero => 1365,
            Error::GroupFunction => 1111,
            Error::WrongArguments(_) => 1210,
            Error::UnknownVariable(_) => 1193,
            Error::BadVariableValue(..) => 1231,
            Error::WrongTypeForVariable(_) => 1232,
            Error::BadTableDefinition(_) => 1075,
            Error::TooBigPrecision(_) => 1426,
            Error::PlaceholderCount(_) => 1210,
            Error::ReadOnlyTransaction => 1792,
            Error::LockWaitTimeout => 1205,
            Error::Deadlock => 1213,
            Error::Interrupted => 1317,
            Error::UnknownXid => 1397,
            Error::XaState(_) => 1399,
            Error::DictionaryCorrupt { .. } | Error::RowCorrupt { .. } => 1105,
            Error::TempFile { .. } => 1105,
            Error::Engine(e) => match e {
                shaledb::Error::LockTimeout { .. } => 1205,
                shaledb::Error::Deadlock { .. }
                | shaledb::Error::WriteConflict { .. }
                | shaledb::Error::SerializationFailure { .. } => 1213,
                _ => 1105,
            },
        }
    }

    /// The SQLSTATE (five characters) for this error.
    pub fn sqlstate(&self) -> &'static str {
        match self.mysql_code() {
            1064 | 1235 | 1046 | 1049 | 1146 | 1050 | 1060 | 1061 | 1091 | 1075 | 1426 => {
                match self.mysql_code() {
                    1049 | 1046 => "3D000",
                    1146 => "42S02",
                    1050 => "42S01",
                    1060 => "42S21",
                    _ => "42000",
                }
            }
            1054 => "42S22",
            1109 => "42S02",
            1052 => "23000",
            1062 | 1048 => "23000",
            1364 | 1406 | 1366 | 1292 | 1365 => "22000",
            1264 | 1690 => "22003",
            1136 => "21S01",
            1241 | 1242 => "21000",
            1213 => "40001",
            1231 | 1232 => "42000",
            1317 => "70100",
            1397 | 1399 => "XAE04",
            1792 => "25006",
            _ => "HY000",
        }
    }

    /// True if the engine rolled the whole transaction back (MySQL does so
    /// on a deadlock; a lock wait timeout undoes only the statement).
    pub fn aborts_transaction(&self) -> bool {
        self.mysql_code() == 1213
    }
}
