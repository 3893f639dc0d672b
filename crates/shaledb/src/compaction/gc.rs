//! Which versions a merge may drop (snapshot-aware garbage collection).
//!
//! Snapshots cut the sequence space into *stripes*: stripe `i` holds the
//! sequences in `(snap[i-1], snap[i]]`, and the last stripe everything newer
//! than the newest snapshot. A reader at any snapshot sees, per key, the
//! newest version of the stripes at or below it, so per key and stripe only the
//! newest version must survive.
//!
//! Example, snapshots {5}: versions a@9, a@7, a@4, a@2 -> keep a@9 (stripe 1)
//! and a@4 (stripe 0); drop a@7 and a@2.

use crate::types::{SequenceNumber, ValueKind};

/// Per-key decision state of a merge.
pub struct Gc {
    snapshots: Vec<SequenceNumber>,
    bottommost: bool,
    current_key: Vec<u8>,
    has_key: bool,
    last_stripe: usize,
}

impl Gc {
    /// `snapshots` sorted ascending; `bottommost` when nothing older lies below the output.
    pub fn new(snapshots: Vec<SequenceNumber>, bottommost: bool) -> Gc {
        Gc {
            snapshots,
            bottommost,
            current_key: Vec::new(),
            has_key: false,
            last_stripe: usize::MAX,
        }
    }

    /// Stripe of a sequence.
    pub fn stripe(&self, seq: SequenceNumber) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    /// Largest sequence of the stripe of `seq` (what a covering tombstone must not exceed).
    pub fn stripe_bound(&self, seq: SequenceNumber) -> SequenceNumber {
        self.snapshots
            .get(self.stripe(seq))
            .copied()
            .unwrap_or(SequenceNumber::MAX)
    }

    /// Decides for the next entry (entries arrive in internal-key order).
    /// `covering` is the newest range-tombstone sequence covering the key
    /// within the entry's stripe (0 if none).
    pub fn keep(
        &mut self,
        user_key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        covering: SequenceNumber,
    ) -> bool {
        if !self.has_key || self.current_key.as_slice() != user_key {
            self.current_key.clear();
            self.current_key.extend_from_slice(user_key);
            self.has_key = true;
            self.last_stripe = usize::MAX;
        }
        let stripe = self.stripe(seq);
        if stripe == self.last_stripe {
            return false; // shadowed by a newer version of the same stripe
        }
        self.last_stripe = stripe;
        if covering > seq {
            return false; // under a range tombstone of its stripe
        }
        !(kind == ValueKind::Delete && self.bottommost && stripe == 0)
    }

    /// Whether a range tombstone at `seq` must be kept.
    #[cfg(test)]
    pub fn keep_tombstone(&self, seq: SequenceNumber) -> bool {
        !(self.bottommost && self.stripe(seq) == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_newest_per_stripe() {
        let mut gc = Gc::new(vec![5], false);
        let kept: Vec<u64> = [9u64, 7, 4, 2]
            .into_iter()
            .filter(|&s| gc.keep(b"a", s, ValueKind::Put, 0))
            .collect();
        assert_eq!(kept, vec![9, 4]);
    }

    #[test]
    fn bottommost_drops_old_deletes_only_below_all_snapshots() {
        let mut gc = Gc::new(vec![5], true);
        assert!(gc.keep(b"a", 8, ValueKind::Delete, 0)); // visible to latest readers
        assert!(!gc.keep(b"a", 3, ValueKind::Delete, 0)); // stripe 0, bottommost
        let mut gc = Gc::new(vec![], false);
        assert!(gc.keep(b"b", 3, ValueKind::Delete, 0)); // not bottommost: must shadow older data
        assert!(!gc.keep(b"c", 3, ValueKind::Put, 4)); // covered by a tombstone
        assert!(gc.keep_tombstone(4));
        assert!(!Gc::new(vec![], true).keep_tombstone(4));
    }
}
