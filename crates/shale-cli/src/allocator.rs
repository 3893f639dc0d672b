//! The process allocator (mimalloc) and the one option `shale` changes.
//!
//! mimalloc returns memory that stayed free for `purge_delay` milliseconds
//! (1,000 by default in its version 3) to the kernel with
//! `madvise(MADV_DONTNEED)`; the next allocation there faults the page back
//! in and the kernel zeroes it. Under sysbench's oltp_insert at 64 threads
//! that cycle showed as 2.9 % of the server's CPU in page faults from
//! mimalloc's free-list extension, 0.10-0.12 faults per insert, and
//! disabling the purge halved the faults and raised insert and write-only
//! throughput by about 12 % (docs/benchmarks.md, "mimalloc's purge").
//! A database server sizes its caches up front and reuses its memory, so
//! `shale` keeps freed memory mapped for reuse by default: resident memory
//! stays at its high-water mark, as with MySQL's and RocksDB's own
//! allocators' usual settings. mimalloc's own environment variable
//! `MIMALLOC_PURGE_DELAY` (milliseconds; -1 = never) still overrides this.

use libmimalloc_sys::{mi_option_set_default, mi_option_t};

/// `mi_option_purge_delay`: its place in mimalloc v3's `mi_option_e`
/// (include/mimalloc.h, after the four deprecated options that precede
/// it). The bindings of libmimalloc-sys 0.1.49 do not name it; the test
/// below checks the index against the option's documented default.
const MI_OPTION_PURGE_DELAY: mi_option_t = 15;

/// The purge delay `shale` asks for: never (memory freed stays mapped).
const NEVER: std::os::raw::c_long = -1;

/// Sets `shale`'s allocator defaults; call once, first thing in `main`.
pub fn configure() {
    // SAFETY: `mi_option_set_default` takes an option index and a value,
    // touches only mimalloc's static option table, and ignores indexes out
    // of range; it is documented as callable at any time (mimalloc reads
    // the option on each purge decision).
    unsafe { mi_option_set_default(MI_OPTION_PURGE_DELAY, NEVER) }
}

/// The purge delay in force (milliseconds; -1 = never).
#[cfg(test)]
fn purge_delay() -> std::os::raw::c_long {
    // SAFETY: reads mimalloc's static option table (initialising the
    // option from the environment on first use); no pointers involved.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Index 15 is `purge_delay` (its default is 1,000 ms in mimalloc v3,
    /// no other option has that default), and `configure` turns it off
    /// unless the environment chose a value.
    #[test]
    fn configure_turns_the_purge_off() {
        let from_env = std::env::var("MIMALLOC_PURGE_DELAY").ok();
        let before = purge_delay();
        configure();
        let after = purge_delay();
        match from_env.and_then(|v| v.parse::<std::os::raw::c_long>().ok()) {
            Some(v) => assert_eq!((before, after), (v, v)),
            None => assert_eq!((before, after), (1000, NEVER)),
        }
    }
}
