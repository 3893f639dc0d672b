//! Which connections make an event loop wait for the device.
//!
//! One event loop per two cores serves in-memory data best (a loop that
//! shares a core with another loop loses the turns it waits for; at
//! redis-benchmark -P 16 one loop served GET 28% faster than four on 2
//! cores, docs/benchmarks.md). But a GET whose value is not cached reads the
//! device (a value file read with O_DIRECT, a data block missing from the
//! page cache), and the loop waits for it: one loop then keeps one read in
//! flight. So a connection whose requests took long on the loop *and* made
//! the loop's thread read from the device moves to a thread of its own (the
//! reactor's hand-off), where its reads wait without holding up anyone;
//! fifty such connections keep fifty reads in flight, as a thread per
//! connection does.
//!
//! How a device read is recognised: the thread's `read_bytes` in
//! `/proc/thread-self/io` (the kernel's count of bytes this thread had the
//! block layer read; page-cache hits do not count, O_DIRECT reads do) grew
//! since the last look. It is looked at only after a slow run (at least
//! [`SLOW_RUN`]) and at most once per [`CHECK_EVERY`], so in-memory work
//! pays one clock read per connection and turn. Where `/proc` has no such
//! file nothing moves (the loop keeps the connection, as before).
//!
//! Example: 50 clients GET random names of a data set ten times the cache.
//! Each turn, a connection whose 16 pipelined GETs took 1.2 ms is checked;
//! the loop's `read_bytes` grew by 64 KiB, so it moves to a thread. Within
//! a second every connection has moved; a benchmark on in-memory keys never
//! sees `read_bytes` grow, and no connection moves.

use std::time::{Duration, Instant};

/// A connection's requests in one turn that took at least this long may
/// have waited for the device (an in-memory GET takes a few microseconds,
/// a 4 KiB device read ~70 us here).
pub const SLOW_RUN: Duration = Duration::from_micros(100);

/// At most one look at `/proc` per loop this often (a slow in-memory
/// command, LRANGE of a long range, then costs nothing measurable).
pub const CHECK_EVERY: Duration = Duration::from_millis(10);

/// One loop's record of its thread's device reads.
#[derive(Default)]
pub struct DeviceReads {
    /// `read_bytes` at the last look (None before the first).
    last_bytes: Option<u64>,
    last_check: Option<Instant>,
}

impl DeviceReads {
    /// A baseline for the loop's thread, read once at its start.
    pub fn for_this_thread() -> DeviceReads {
        DeviceReads {
            last_bytes: thread_read_bytes(),
            last_check: None,
        }
    }

    /// Whether a connection whose requests ran for `ran_for` should leave
    /// the loop: the run was slow and the thread has read from the device
    /// since the last look.
    pub fn waited_for_device(&mut self, ran_for: Duration) -> bool {
        if ran_for < SLOW_RUN {
            return false;
        }
        let now = Instant::now();
        if self
            .last_check
            .is_some_and(|t| now.duration_since(t) < CHECK_EVERY)
        {
            return false;
        }
        self.last_check = Some(now);
        let Some(bytes) = thread_read_bytes() else {
            return false;
        };
        let grew = self.last_bytes.is_some_and(|b| bytes > b);
        self.last_bytes = Some(bytes);
        grew
    }
}

/// This thread's `read_bytes` from `/proc/thread-self/io`.
fn thread_read_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    parse_read_bytes(&text)
}

fn parse_read_bytes(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io() {
        let text = "rchar: 10\nwchar: 2\nsyscr: 1\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 0\n";
        assert_eq!(parse_read_bytes(text), Some(4096));
        assert_eq!(parse_read_bytes("rchar: 1\n"), None);
        assert_eq!(parse_read_bytes("read_bytes: x\n"), None);
    }

    #[test]
    fn fast_runs_never_look() {
        let mut d = DeviceReads::default();
        assert!(!d.waited_for_device(Duration::from_micros(5)));
        assert!(d.last_check.is_none(), "a fast run must not read /proc");
    }

    /// A slow run with no device read since the baseline stays; the second
    /// look within CHECK_EVERY is skipped.
    #[test]
    fn slow_runs_without_device_reads_stay() {
        let mut d = DeviceReads::for_this_thread();
        assert!(!d.waited_for_device(Duration::from_millis(1)));
        assert!(d.last_check.is_some());
        assert!(!d.waited_for_device(Duration::from_millis(1)));
    }
}
