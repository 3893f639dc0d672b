//! The memtable: the in-memory write buffer every write lands in first.
//!
//! - [`arena`]: a chunked, thread-safe bump allocator; all node memory comes
//!   from it and is freed at once when the memtable drops.
//! - [`skiplist`]: a concurrent skiplist of internal keys with values stored
//!   inline in the arena (lock-free reads, CAS-based concurrent inserts);
//!   `node` holds its node layout and the unsafe accessors.
//! - [`MemTable`]: the skiplist plus range tombstones and counters, and
//!   `filter` (a bloom filter over the user keys, so a get of an absent
//!   key skips the skiplist walk).
//!
//! Worked example:
//!
//! ```
//! use std::sync::Arc;
//! // Internal layers are reachable from outside only through the
//! // `test-hooks` feature (the crate's own tests and doc-tests have it).
//! use shaledb::test_hooks::{InternalIterator, MemTable, ValueKind};
//!
//! let mem = Arc::new(MemTable::new(7));
//! mem.add(1, ValueKind::Put, b"apple", b"red");
//! mem.add(2, ValueKind::Put, b"apple", b"green");
//! mem.add(3, ValueKind::Delete, b"pear", b"");
//! assert_eq!(mem.get(b"apple", 1).map(|g| g.value), Some(&b"red"[..]));
//! assert_eq!(mem.get(b"apple", 9).map(|g| g.value), Some(&b"green"[..]));
//! assert_eq!(mem.get(b"pear", 9).map(|g| g.kind), Some(ValueKind::Delete));
//!
//! // Iteration is in internal-key order: apple@2, apple@1, pear@3.
//! let mut it = mem.iter();
//! it.seek_to_first().unwrap();
//! let mut n = 0;
//! while it.valid() {
//!     n += 1;
//!     it.next().unwrap();
//! }
//! assert_eq!(n, 3);
//! ```

pub mod arena;
mod filter;
#[allow(clippy::module_inception)] // file layout fixed by the design: memtable/memtable.rs
mod memtable;
mod node;
pub mod skiplist;

pub use memtable::MemTable;
