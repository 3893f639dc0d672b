//! The MySQL client/server protocol, server side (docs/mysql-protocol.md).
//!
//! One file per layer: [`wire`] (basic types), [`packet`] (framing),
//! [`frame`] (framing on the I/O threads), [`handshake`] and [`auth`]
//! (connection phase, run by `login.rs`), [`results`] (replies), [`conn`]
//! (one connection's command phase, on an executor thread), `task` (one
//! connection's I/O task tying them together).

pub mod auth;
pub mod binary;
pub(crate) mod blocking;
pub mod conn;
pub mod consts;
pub mod frame;
pub mod handshake;
pub mod literals;
pub(crate) mod login;
pub mod packet;
pub mod results;
mod stmt;
pub(crate) mod task;
pub mod wire;

use crate::backend::SqlError;
use consts::err;

/// Why a connection ends.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The socket failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection in the middle of the connection phase.
    #[error("connection closed by the client")]
    Closed,
    /// A packet that does not parse; names the field being read.
    #[error("malformed packet: {0}")]
    Malformed(&'static str),
    /// A packet's sequence id is not the next one.
    #[error("packets out of order: expected sequence {expected}, got {got}")]
    OutOfOrder { expected: u8, got: u8 },
    /// A (joined) packet larger than `max_allowed_packet`.
    #[error("packet of {size} bytes exceeds max_allowed_packet ({max})")]
    PacketTooLarge { size: usize, max: usize },
    /// Something this server does not implement.
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// Wrong user or password.
    #[error("{0}")]
    AccessDenied(SqlError),
    /// The backend refused the session (unknown database, ...).
    #[error("{0}")]
    Refused(SqlError),
    /// The executor thread running this connection's command panicked; the
    /// connection is closed (its session went with the thread's unwinding).
    #[error("the statement's executor thread failed")]
    Executor,
}

impl ProtocolError {
    /// The ERR packet to send before closing, if any.
    pub fn to_sql_error(&self) -> Option<SqlError> {
        Some(match self {
            ProtocolError::Io(_) | ProtocolError::Closed => return None,
            ProtocolError::Executor => SqlError::new(
                err::UNKNOWN_ERROR,
                *b"HY000",
                "Internal error: the statement's executor thread failed",
            ),
            ProtocolError::Malformed(what) => SqlError::new(
                err::MALFORMED_PACKET,
                *b"08S01",
                format!("Malformed communication packet ({what})"),
            ),
            ProtocolError::OutOfOrder { .. } => {
                SqlError::new(err::MALFORMED_PACKET, *b"08S01", "Got packets out of order")
            }
            ProtocolError::PacketTooLarge { .. } => SqlError::new(
                err::NET_PACKET_TOO_LARGE,
                *b"08S01",
                "Got a packet bigger than 'max_allowed_packet' bytes",
            ),
            ProtocolError::Unsupported(what) => {
                SqlError::new(err::HANDSHAKE, *b"08S01", format!("Bad handshake ({what})"))
            }
            ProtocolError::AccessDenied(e) | ProtocolError::Refused(e) => e.clone(),
        })
    }
}
