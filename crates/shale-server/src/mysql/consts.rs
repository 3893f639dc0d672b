//! Protocol constants: capability flags, commands, status flags, column
//! types and flags, character sets (values as the MySQL/MariaDB servers
//! define them; docs/mysql-protocol.md lists the ones ShaleDB uses).

/// Capability flags (`CLIENT_*`).
pub mod cap {
    pub const LONG_PASSWORD: u32 = 1;
    pub const FOUND_ROWS: u32 = 1 << 1;
    pub const LONG_FLAG: u32 = 1 << 2;
    pub const CONNECT_WITH_DB: u32 = 1 << 3;
    pub const NO_SCHEMA: u32 = 1 << 4;
    pub const ODBC: u32 = 1 << 6;
    pub const LOCAL_FILES: u32 = 1 << 7;
    pub const IGNORE_SPACE: u32 = 1 << 8;
    pub const PROTOCOL_41: u32 = 1 << 9;
    pub const INTERACTIVE: u32 = 1 << 10;
    pub const SSL: u32 = 1 << 11;
    pub const TRANSACTIONS: u32 = 1 << 13;
    pub const SECURE_CONNECTION: u32 = 1 << 15;
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    pub const MULTI_RESULTS: u32 = 1 << 17;
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    pub const PLUGIN_AUTH_LENENC_DATA: u32 = 1 << 21;
    pub const SESSION_TRACK: u32 = 1 << 23;
    pub const DEPRECATE_EOF: u32 = 1 << 24;

    /// What the server offers. `LOCAL_FILES` is not offered (LOAD DATA
    /// LOCAL lets a server read client files); `SESSION_TRACK` and
    /// `DEPRECATE_EOF` are not offered either, so every client gets the
    /// classic EOF-terminated result sets that all of them understand.
    pub const SERVER: u32 = LONG_PASSWORD
        | FOUND_ROWS
        | LONG_FLAG
        | CONNECT_WITH_DB
        | NO_SCHEMA
        | ODBC
        | IGNORE_SPACE
        | PROTOCOL_41
        | INTERACTIVE
        | TRANSACTIONS
        | SECURE_CONNECTION
        | MULTI_STATEMENTS
        | MULTI_RESULTS
        | PS_MULTI_RESULTS
        | PLUGIN_AUTH
        | CONNECT_ATTRS
        | PLUGIN_AUTH_LENENC_DATA;
}

/// Command bytes (`COM_*`), the first byte of every client command.
pub mod com {
    pub const QUIT: u8 = 0x01;
    pub const INIT_DB: u8 = 0x02;
    pub const QUERY: u8 = 0x03;
    pub const FIELD_LIST: u8 = 0x04;
    pub const STATISTICS: u8 = 0x09;
    pub const PROCESS_KILL: u8 = 0x0c;
    pub const PING: u8 = 0x0e;
    pub const CHANGE_USER: u8 = 0x11;
    pub const STMT_PREPARE: u8 = 0x16;
    pub const STMT_EXECUTE: u8 = 0x17;
    pub const STMT_SEND_LONG_DATA: u8 = 0x18;
    pub const STMT_CLOSE: u8 = 0x19;
    pub const STMT_RESET: u8 = 0x1a;
    pub const SET_OPTION: u8 = 0x1b;
    pub const RESET_CONNECTION: u8 = 0x1f;
}

/// Server status flags (`SERVER_STATUS_*`) in OK and EOF packets.
pub mod status {
    pub const IN_TRANS: u16 = 1;
    pub const AUTOCOMMIT: u16 = 1 << 1;
    pub const MORE_RESULTS_EXISTS: u16 = 1 << 3;
    pub const NO_INDEX_USED: u16 = 1 << 5;
    pub const CURSOR_EXISTS: u16 = 1 << 6;
    pub const LAST_ROW_SENT: u16 = 1 << 7;
}

/// Column types (`MYSQL_TYPE_*`) of column definitions and binary values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ColumnType {
    Decimal = 0x00,
    Tiny = 0x01,
    Short = 0x02,
    Long = 0x03,
    Float = 0x04,
    Double = 0x05,
    Null = 0x06,
    Timestamp = 0x07,
    LongLong = 0x08,
    Int24 = 0x09,
    Date = 0x0a,
    Time = 0x0b,
    DateTime = 0x0c,
    Year = 0x0d,
    VarChar = 0x0f,
    Bit = 0x10,
    NewDecimal = 0xf6,
    Enum = 0xf7,
    Set = 0xf8,
    TinyBlob = 0xf9,
    MediumBlob = 0xfa,
    LongBlob = 0xfb,
    Blob = 0xfc,
    VarString = 0xfd,
    String = 0xfe,
    Geometry = 0xff,
}

/// Column definition flags (`*_FLAG`).
pub mod colflag {
    pub const NOT_NULL: u16 = 1;
    pub const PRI_KEY: u16 = 1 << 1;
    pub const UNIQUE_KEY: u16 = 1 << 2;
    pub const MULTIPLE_KEY: u16 = 1 << 3;
    pub const BLOB: u16 = 1 << 4;
    pub const UNSIGNED: u16 = 1 << 5;
    pub const ZEROFILL: u16 = 1 << 6;
    pub const BINARY: u16 = 1 << 7;
    pub const AUTO_INCREMENT: u16 = 1 << 9;
    pub const NUM: u16 = 1 << 15;
}

/// Character set / collation ids used in the handshake and column
/// definitions.
pub mod charset {
    /// utf8mb4_bin: ShaleDB compares strings bytewise.
    pub const UTF8MB4_BIN: u16 = 46;
    /// utf8mb4_general_ci: what clients usually announce.
    pub const UTF8MB4_GENERAL_CI: u16 = 45;
    /// binary: numbers and byte strings.
    pub const BINARY: u16 = 63;
}

/// Error codes and SQLSTATEs the protocol layer itself raises.
pub mod err {
    /// ER_ACCESS_DENIED_ERROR, SQLSTATE 28000.
    pub const ACCESS_DENIED: u16 = 1045;
    /// ER_UNKNOWN_COM_ERROR, SQLSTATE 08S01.
    pub const UNKNOWN_COM: u16 = 1047;
    /// ER_NET_PACKET_TOO_LARGE, SQLSTATE 08S01.
    pub const NET_PACKET_TOO_LARGE: u16 = 1153;
    /// ER_HANDSHAKE_ERROR, SQLSTATE 08S01.
    pub const HANDSHAKE: u16 = 1043;
    /// ER_NET_READ_ERROR (malformed packet), SQLSTATE 08S01.
    pub const MALFORMED_PACKET: u16 = 1835;
    /// ER_CON_COUNT_ERROR, SQLSTATE 08004.
    pub const TOO_MANY_CONNECTIONS: u16 = 1040;
    /// ER_UNKNOWN_STMT_HANDLER, SQLSTATE HY000.
    pub const UNKNOWN_STMT_HANDLER: u16 = 1243;
    /// ER_WRONG_ARGUMENTS, SQLSTATE HY000.
    pub const WRONG_ARGUMENTS: u16 = 1210;
    /// ER_QUERY_INTERRUPTED, SQLSTATE 70100.
    pub const QUERY_INTERRUPTED: u16 = 1317;
    /// ER_UNKNOWN_ERROR, SQLSTATE HY000.
    pub const UNKNOWN_ERROR: u16 = 1105;
}
