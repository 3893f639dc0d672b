//! A statistics counter that many threads bump without sharing a cache line.
//!
//! A plain `AtomicU64` bumped by every point read makes its cache line
//! bounce between the cores that read (an RMW on a line another core just
//! wrote costs a cross-core transfer, tens of ns each time). Here each
//! thread adds to one of `SLOTS` cache-line-padded slots, chosen once per
//! thread round-robin, so with up to `SLOTS` threads no two share a line;
//! reading the total sums the slots (a figure, not a synchronization point:
//! relaxed ordering, a concurrent read may miss in-flight adds).
//!
//! Example: threads 0 and 1 add 3 and 4 to slots 0 and 1; `get()` = 7.

use crossbeam::utils::CachePadded;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots per counter (a power of two).
const SLOTS: usize = 16;

/// Round-robin source of per-thread slot numbers.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS;
}

/// A sharded relaxed counter.
#[derive(Default)]
pub(crate) struct ShardedCounter {
    slots: [CachePadded<AtomicU64>; SLOTS],
}

impl ShardedCounter {
    /// Adds `n` to this thread's slot.
    #[inline]
    pub fn add(&self, n: u64) {
        let i = SLOT.try_with(|s| *s).unwrap_or(0);
        if let Some(slot) = self.slots.get(i) {
            slot.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The sum of all slots.
    pub fn get(&self) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.load(Ordering::Relaxed)))
    }
}

impl std::fmt::Debug for ShardedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_adds_from_many_threads() {
        let c = ShardedCounter::default();
        std::thread::scope(|s| {
            for t in 0..40u64 {
                let c = &c;
                s.spawn(move || {
                    for _ in 0..1000 {
                        c.add(t);
                    }
                });
            }
        });
        assert_eq!(c.get(), 1000 * (0..40u64).sum::<u64>());
    }
}
