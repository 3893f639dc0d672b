//! Pacing of background value-file GC (`Options::blob_gc_bytes_per_sec`):
//! a pass accounts the bytes it reads and sleeps until they are due.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Paces a pass to `rate` bytes per second (0 = unpaced). Sleeps in steps
/// of at most 20 ms and gives up with `Error::Closed` at shutdown.
pub(crate) struct Limiter {
    rate: u64,
    start: Instant,
    bytes: u64,
}

impl Limiter {
    pub fn new(rate: u64) -> Limiter {
        Limiter {
            rate,
            start: Instant::now(),
            bytes: 0,
        }
    }

    /// Accounts `n` bytes, sleeping until they are due; `stop` (shutdown)
    /// ends the wait with `Error::Closed`.
    pub(crate) fn take(&mut self, n: u64, stop: &AtomicBool) -> Result<()> {
        if stop.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.rate == 0 {
            return Ok(());
        }
        self.bytes = self.bytes.saturating_add(n);
        let due = Duration::from_secs_f64(self.bytes as f64 / self.rate as f64);
        while let Some(wait) = due.checked_sub(self.start.elapsed()) {
            if wait.is_zero() {
                break;
            }
            if stop.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            std::thread::sleep(wait.min(Duration::from_millis(20)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn limiter_paces_and_stops() {
        let stop = AtomicBool::new(false);
        let mut l = Limiter::new(1 << 20);
        let t = Instant::now();
        for _ in 0..4 {
            l.take(64 << 10, &stop).unwrap();
        }
        // 256 KiB at 1 MiB/s cannot be done in less than 250 ms.
        assert!(
            t.elapsed() >= Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
        let mut unpaced = Limiter::new(0);
        unpaced.take(u64::MAX, &stop).unwrap();
        stop.store(true, Ordering::Release);
        assert!(matches!(l.take(1, &stop), Err(Error::Closed)));
    }
}
