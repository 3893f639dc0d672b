//! # shale-redis
//!
//! A Redis-protocol (RESP2 / RESP3) endpoint on the ShaleDB engine:
//! strings, hashes, lists, sets and sorted sets stored Kvrocks-style
//! (docs/redis.md), MULTI/EXEC/WATCH, event-loop I/O threads (a thread of
//! its own for a connection that may block),
//! Redis's reply types and error strings.

pub mod acl;
pub mod clients;
pub mod commands;
pub mod dbmap;
mod device_reads;
pub mod durability;
pub mod expire;
pub mod glob;
pub mod ldouble;
pub mod outbuf;
pub mod pubsub;
mod reactor;
mod reclaim;
mod requests;
pub mod resp;
pub mod server;
pub mod slowlog;
pub mod store;
pub mod tls;
pub mod tracking;
pub mod tx;
pub mod watches;

/// Engine options for a Redis data set: values of 64 KiB or more go to
/// value files (key-value separation), so strings and hash fields up to
/// Redis's 512 MB bulk limit are accepted (the engine's default caps values
/// at 1 MiB). Keys stay under the engine's 64 KiB `max_key_size`.
pub fn engine_options() -> shaledb::Options {
    shaledb::Options {
        min_blob_size: 64 << 10,
        max_value_size: resp::MAX_BULK_LEN as usize + 64,
        ..shaledb::Options::default()
    }
}
