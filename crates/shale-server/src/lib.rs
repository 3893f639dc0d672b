//! ShaleDB's network servers.
//!
//! The MySQL protocol ([`mysql`]) speaks to any MySQL/MariaDB client over
//! a [`Backend`](backend::Backend): the database behind it (the SQL layer,
//! or a test fixture). [`server::Server`] accepts connections on a
//! loopback address by default, does their I/O on a few event-driven
//! threads and runs their statements on a bounded executor pool.
//!
//! Layering: engine (`shaledb`) -> SQL -> `backend` traits -> `mysql`
//! protocol -> `server` (sockets, threads, shutdown).

pub mod accounts;
pub mod admin;
pub mod backend;
mod binary_sink;
pub mod engine_status;
pub mod metrics;
pub mod mysql;
pub mod process;
pub mod server;
pub mod slow_log;
pub mod sql_backend;
pub mod stats;
pub mod tls;
pub mod utc;
