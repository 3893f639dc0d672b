//! Small shared helpers: encoding, sharded counters.
pub(crate) mod buf_pool;
pub mod coding;
pub(crate) mod counter;
