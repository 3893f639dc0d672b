//! One key's lock state: the granted holders and the FIFO queue of waiters.
//!
//! This file is pure bookkeeping (no blocking, no graph); the caller holds the
//! partition mutex that owns the entry. Invariants, restored by [`LockEntry::promote`]
//! after every change:
//!
//! 1. `holders` is empty, or all `Shared` with distinct transactions, or a single
//!    `Exclusive`.
//! 2. If `waiters` is non-empty, its head is *not* grantable (so `holders` is
//!    non-empty): requests are granted strictly in queue order, and a request
//!    that could be granted now is never left waiting.
//! 3. A transaction appears at most once in `waiters`; a waiter that is also a
//!    holder is an *upgrade* (holds `Shared`, wants `Exclusive`).
//!
//! Queue order is FIFO except for upgrades, which go in front of all plain
//! waiters (behind earlier upgrades): an upgrader already holds `Shared`, so
//! every `Exclusive` waiter is waiting for it anyway, and queueing it behind
//! them would create a deadlock that FIFO order alone caused.
//!
//! Example: holders `{T1:S}`, queue `[T2:X]`. T3 asks `S`: compatible with T1
//! but T2 is ahead, so T3 queues (`[T2:X, T3:S]`) instead of starving T2.
//! T1 releases: T2 is granted; T3 stays (head, not grantable) until T2 releases.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Condvar;

use super::{LockMode, TxnId};

/// `true` if locks in modes `a` and `b` held by different transactions can coexist.
pub(super) fn compatible(a: LockMode, b: LockMode) -> bool {
    a == LockMode::Shared && b == LockMode::Shared
}

/// What a sleeping waiter shares with whoever grants it.
#[derive(Debug, Default)]
pub(super) struct WaitSlot {
    /// Set (under the partition mutex) when the request is granted.
    granted: AtomicBool,
    /// Signalled after `granted` is set. Always used with the same partition mutex.
    pub(super) cv: Condvar,
}

impl WaitSlot {
    /// True once the request has been granted.
    pub(super) fn is_granted(&self) -> bool {
        // Relaxed suffices: both sides access the flag under the partition mutex.
        self.granted.load(Ordering::Relaxed)
    }

    fn grant(&self) {
        self.granted.store(true, Ordering::Relaxed);
        self.cv.notify_one();
    }
}

/// A granted lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Holder {
    pub(super) txn: TxnId,
    pub(super) mode: LockMode,
}

/// A queued request.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) txn: TxnId,
    pub(super) mode: LockMode,
    /// The requester already holds `Shared` on this key and wants `Exclusive`.
    pub(super) upgrade: bool,
    pub(super) slot: Arc<WaitSlot>,
}

/// Outcome of a new request against the current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Acquire {
    /// Granted (or already held in a sufficient mode); nothing to wait for.
    Granted,
    /// Must queue; `upgrade` tells where.
    Wait { upgrade: bool },
}

/// Lock state of one `(cf, key)`.
#[derive(Debug, Default)]
pub(super) struct LockEntry {
    holders: Vec<Holder>,
    waiters: VecDeque<Waiter>,
}

impl LockEntry {
    /// An entry created for, and granted to, its first requester.
    pub(super) fn granted_to(txn: TxnId, mode: LockMode) -> Self {
        LockEntry {
            holders: vec![Holder { txn, mode }],
            waiters: VecDeque::new(),
        }
    }

    /// The mode `txn` holds, if any.
    pub(super) fn held_mode(&self, txn: TxnId) -> Option<LockMode> {
        self.holders.iter().find(|h| h.txn == txn).map(|h| h.mode)
    }

    #[cfg(test)]
    pub(super) fn num_holders(&self) -> usize {
        self.holders.len()
    }

    #[cfg(test)]
    pub(super) fn num_waiters(&self) -> usize {
        self.waiters.len()
    }

    pub(super) fn has_waiters(&self) -> bool {
        !self.waiters.is_empty()
    }

    pub(super) fn is_waiting(&self, txn: TxnId) -> bool {
        self.waiters.iter().any(|w| w.txn == txn)
    }

    /// No holders and no waiters: the entry can be dropped from the table.
    pub(super) fn is_idle(&self) -> bool {
        self.holders.is_empty() && self.waiters.is_empty()
    }

    /// Every holder other than `txn` is compatible with `mode`.
    fn compatible_with_holders(&self, txn: TxnId, mode: LockMode) -> bool {
        self.holders
            .iter()
            .all(|h| h.txn == txn || compatible(h.mode, mode))
    }

    /// Applies a new request by `txn` if it can be granted without waiting.
    pub(super) fn try_acquire(&mut self, txn: TxnId, mode: LockMode) -> Acquire {
        match (self.held_mode(txn), mode) {
            // Re-entrant: X covers everything, S covers S.
            (Some(LockMode::Exclusive), _) | (Some(LockMode::Shared), LockMode::Shared) => {
                Acquire::Granted
            }
            (Some(LockMode::Shared), LockMode::Exclusive) => {
                if self.holders.len() == 1 {
                    // Sole holder: upgrade in place. Waiters (if any) were
                    // already blocked by this transaction.
                    self.set_mode(txn, LockMode::Exclusive);
                    Acquire::Granted
                } else {
                    Acquire::Wait { upgrade: true }
                }
            }
            (None, _) => {
                if self.waiters.is_empty() && self.compatible_with_holders(txn, mode) {
                    self.holders.push(Holder { txn, mode });
                    Acquire::Granted
                } else {
                    Acquire::Wait { upgrade: false }
                }
            }
        }
    }

    fn set_mode(&mut self, txn: TxnId, mode: LockMode) {
        if let Some(h) = self.holders.iter_mut().find(|h| h.txn == txn) {
            h.mode = mode;
        }
    }

    /// Queues a request that [`try_acquire`](Self::try_acquire) refused.
    pub(super) fn enqueue(&mut self, waiter: Waiter) {
        if waiter.upgrade {
            let pos = self.waiters.iter().take_while(|w| w.upgrade).count();
            self.waiters.insert(pos, waiter);
        } else {
            self.waiters.push_back(waiter);
        }
    }

    /// Removes `txn`'s queued request (timeout or deadlock victim). Call
    /// [`promote`](Self::promote) afterwards: the head may now be grantable.
    pub(super) fn remove_waiter(&mut self, txn: TxnId) -> bool {
        let before = self.waiters.len();
        self.waiters.retain(|w| w.txn != txn);
        self.waiters.len() != before
    }

    /// Drops `txn`'s granted lock. Call [`promote`](Self::promote) afterwards.
    pub(super) fn release(&mut self, txn: TxnId) -> bool {
        let before = self.holders.len();
        self.holders.retain(|h| h.txn != txn);
        self.holders.len() != before
    }

    /// Grants queued requests from the head while they are compatible with the
    /// holders, stopping at the first that is not (strict FIFO). Wakes each
    /// granted waiter and returns their transactions.
    pub(super) fn promote(&mut self) -> Vec<TxnId> {
        let mut granted = Vec::new();
        while let Some(head) = self.waiters.front() {
            if !self.compatible_with_holders(head.txn, head.mode) {
                break;
            }
            let Some(w) = self.waiters.pop_front() else {
                break;
            };
            if w.upgrade {
                self.set_mode(w.txn, w.mode);
            } else {
                self.holders.push(Holder {
                    txn: w.txn,
                    mode: w.mode,
                });
            }
            w.slot.grant();
            granted.push(w.txn);
        }
        granted
    }

    /// For every waiter, the transactions it waits for: holders (other than
    /// itself) with a conflicting mode, and the *nearest* waiter queued ahead
    /// of it with a conflicting mode. The nearest one is enough (chain
    /// edges): the conflicting waiters further ahead are reachable through
    /// it, or (when the nearest is X and one further ahead is S, both
    /// conflicting with an X waiter here) everything that blocks the far one
    /// blocks the near one too, so no cycle through this waiter is missed. A
    /// compatible waiter ahead is no edge: whatever blocks it also blocks
    /// this waiter directly. One pass, O(waiters x conflicting holders),
    /// where the all-ahead edges cost O(waiters²) on hot keys.
    pub(super) fn waiter_blockers(&self) -> Vec<(TxnId, Vec<TxnId>)> {
        let mut out = Vec::with_capacity(self.waiters.len());
        // The most recent waiter so far, and the most recent exclusive one.
        let mut last_any: Option<TxnId> = None;
        let mut last_x: Option<TxnId> = None;
        for w in &self.waiters {
            let mut blockers: Vec<TxnId> = self
                .holders
                .iter()
                .filter(|h| h.txn != w.txn && !compatible(h.mode, w.mode))
                .map(|h| h.txn)
                .collect();
            let ahead = match w.mode {
                LockMode::Exclusive => last_any,
                LockMode::Shared => last_x,
            };
            if let Some(a) = ahead.filter(|&a| a != w.txn) {
                if !blockers.contains(&a) {
                    blockers.push(a);
                }
            }
            out.push((w.txn, blockers));
            last_any = Some(w.txn);
            if w.mode == LockMode::Exclusive {
                last_x = Some(w.txn);
            }
        }
        out
    }

    /// Checks invariants 1–3 (tests only).
    #[cfg(test)]
    pub(super) fn check_invariants(&self) -> std::result::Result<(), String> {
        let x = self
            .holders
            .iter()
            .filter(|h| h.mode == LockMode::Exclusive)
            .count();
        if x > 0 && self.holders.len() != 1 {
            return Err(format!("exclusive shared with others: {:?}", self.holders));
        }
        let mut txns: Vec<TxnId> = self.holders.iter().map(|h| h.txn).collect();
        txns.sort_unstable();
        txns.dedup();
        if txns.len() != self.holders.len() {
            return Err(format!("duplicate holder: {:?}", self.holders));
        }
        if let Some(head) = self.waiters.front() {
            if self.compatible_with_holders(head.txn, head.mode) {
                return Err(format!("grantable head left waiting: {head:?}"));
            }
        }
        let mut w: Vec<TxnId> = self.waiters.iter().map(|w| w.txn).collect();
        w.sort_unstable();
        w.dedup();
        if w.len() != self.waiters.len() {
            return Err("transaction queued twice".into());
        }
        for waiter in &self.waiters {
            let holds = self.held_mode(waiter.txn);
            if waiter.upgrade != (holds == Some(LockMode::Shared)) {
                return Err(format!("upgrade flag wrong for {waiter:?}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use proptest::prelude::*;
    use LockMode::{Exclusive as X, Shared as S};

    /// Single-threaded request: grant or enqueue, like the manager does.
    fn request(e: &mut LockEntry, txn: TxnId, mode: LockMode) -> Acquire {
        let r = e.try_acquire(txn, mode);
        if let Acquire::Wait { upgrade } = r {
            e.enqueue(Waiter {
                txn,
                mode,
                upgrade,
                slot: Arc::default(),
            });
        }
        r
    }

    fn holders(e: &LockEntry) -> Vec<(TxnId, LockMode)> {
        e.holders.iter().map(|h| (h.txn, h.mode)).collect()
    }

    #[test]
    fn shared_compatible_exclusive_not() {
        let mut e = LockEntry::granted_to(1, S);
        assert_eq!(request(&mut e, 2, S), Acquire::Granted);
        assert_eq!(request(&mut e, 3, X), Acquire::Wait { upgrade: false });
        let mut e = LockEntry::granted_to(1, X);
        assert_eq!(request(&mut e, 2, S), Acquire::Wait { upgrade: false });
        assert_eq!(request(&mut e, 3, X), Acquire::Wait { upgrade: false });
        e.check_invariants().unwrap();
    }

    #[test]
    fn shared_does_not_jump_waiting_exclusive() {
        let mut e = LockEntry::granted_to(1, S);
        request(&mut e, 2, X);
        assert_eq!(request(&mut e, 3, S), Acquire::Wait { upgrade: false });
        e.release(1);
        assert_eq!(e.promote(), vec![2]);
        assert_eq!(holders(&e), vec![(2, X)]);
        e.release(2);
        assert_eq!(e.promote(), vec![3]);
        e.check_invariants().unwrap();
    }

    #[test]
    fn promote_grants_run_of_shared_then_stops() {
        let mut e = LockEntry::granted_to(1, X);
        request(&mut e, 2, S);
        request(&mut e, 3, S);
        request(&mut e, 4, X);
        request(&mut e, 5, S);
        e.release(1);
        assert_eq!(e.promote(), vec![2, 3]);
        assert_eq!(e.num_waiters(), 2);
        e.check_invariants().unwrap();
    }

    #[test]
    fn reentrant_and_upgrade() {
        let mut e = LockEntry::granted_to(1, X);
        assert_eq!(request(&mut e, 1, S), Acquire::Granted);
        assert_eq!(request(&mut e, 1, X), Acquire::Granted);
        assert_eq!(holders(&e), vec![(1, X)]);

        let mut e = LockEntry::granted_to(1, S);
        request(&mut e, 9, X); // plain waiter
        assert_eq!(
            request(&mut e, 1, X),
            Acquire::Granted,
            "sole holder upgrades"
        );
        assert_eq!(holders(&e), vec![(1, X)]);
        e.check_invariants().unwrap();
    }

    #[test]
    fn upgrade_goes_ahead_of_plain_waiters() {
        let mut e = LockEntry::granted_to(1, S);
        request(&mut e, 2, S);
        request(&mut e, 3, X);
        assert_eq!(request(&mut e, 1, X), Acquire::Wait { upgrade: true });
        let order: Vec<TxnId> = e.waiters.iter().map(|w| w.txn).collect();
        assert_eq!(order, vec![1, 3]);
        // 1 waits only for 2; 3 waits for 1 and 2.
        let b = e.waiter_blockers();
        assert_eq!(b, vec![(1, vec![2]), (3, vec![1, 2])]);
        e.release(2);
        assert_eq!(e.promote(), vec![1]);
        assert_eq!(holders(&e), vec![(1, X)]);
        e.check_invariants().unwrap();
    }

    #[test]
    fn removing_blocking_head_promotes_followers() {
        let mut e = LockEntry::granted_to(1, S);
        request(&mut e, 2, X);
        request(&mut e, 3, S);
        assert!(e.remove_waiter(2));
        assert_eq!(e.promote(), vec![3]);
        assert!(!e.has_waiters());
        assert!(!e.remove_waiter(2));
    }

    #[test]
    fn blockers_skip_compatible_waiters_ahead() {
        let mut e = LockEntry::granted_to(1, X);
        request(&mut e, 2, S);
        request(&mut e, 3, S);
        request(&mut e, 4, X);
        request(&mut e, 5, S);
        // 4 waits for the holder and the nearest waiter ahead (3), not for
        // 2 too: 3 is blocked by everything that blocks 2. 5 (S) skips the
        // S waiters and points at the nearest X, 4.
        assert_eq!(
            e.waiter_blockers(),
            vec![(2, vec![1]), (3, vec![1]), (4, vec![1, 3]), (5, vec![1, 4])]
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Req(TxnId, bool),
        Release(TxnId),
        Cancel(TxnId),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u64..6, any::<bool>()).prop_map(|(t, x)| Op::Req(t, x)),
            (1u64..6).prop_map(Op::Release),
            (1u64..6).prop_map(Op::Cancel),
        ]
    }

    proptest! {
        /// Any sequence of requests, releases and cancellations keeps the
        /// invariants, and everything queued is eventually granted once all
        /// holders release.
        #[test]
        fn invariants_hold(ops in proptest::collection::vec(op(), 1..60)) {
            let mut e = LockEntry::default();
            for op in ops {
                match op {
                    Op::Req(t, x) => {
                        // One outstanding request per transaction.
                        if !e.is_waiting(t) {
                            request(&mut e, t, if x { X } else { S });
                        }
                    }
                    Op::Release(t) => {
                        // A waiting transaction is blocked in `lock`; it cannot release.
                        if !e.is_waiting(t) {
                            e.release(t);
                        }
                    }
                    Op::Cancel(t) => {
                        e.remove_waiter(t);
                    }
                }
                e.promote();
                prop_assert_eq!(e.check_invariants(), Ok(()));
            }
            // Drain: release holders until the queue is empty. Two upgraders
            // deadlock here (the manager would have refused the second); cancel
            // the head then, as a victim would be.
            let mut rounds = 0;
            while !e.is_idle() {
                let txns: Vec<TxnId> = e.holders.iter().map(|h| h.txn).collect();
                let mut released = false;
                for t in txns {
                    if !e.is_waiting(t) {
                        released |= e.release(t);
                    }
                }
                if e.promote().is_empty() && !released {
                    if let Some(t) = e.waiters.front().map(|w| w.txn) {
                        e.remove_waiter(t);
                        e.promote();
                    }
                }
                prop_assert_eq!(e.check_invariants(), Ok(()));
                rounds += 1;
                prop_assert!(rounds < 100, "queue never drained: {:?}", e);
            }
        }
    }
}
