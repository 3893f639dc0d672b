//! Small shared helpers: encoding, sharded counters.
pub mod coding;
pub(crate) mod counter;
