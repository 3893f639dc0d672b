//! # shale-redis
//!
//! A Redis-protocol (RESP2) endpoint on the ShaleDB engine: strings and
//! hashes stored Kvrocks-style (docs/redis.md), a thread-per-connection
//! server, Redis's reply types and error strings.

pub mod commands;
pub mod glob;
pub mod resp;
pub mod server;
pub mod store;
