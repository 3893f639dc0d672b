//! A per-thread cache of the published [`SuperVersion`] (RocksDB's
//! thread-local super version), so that a read takes neither the `sv` read
//! lock nor a reference on the shared `Arc`: both are writes to a cache line
//! every reading thread shares, and with two threads reading they bounce
//! between the cores on every get and every iterator built.
//!
//! Each (thread, database) pair has a [`Slot`]: a mutex only its thread and
//! the installer of a new super version ever take, holding the super version
//! the thread used last. A read takes it out of the slot (the slot is empty
//! meanwhile, so a nested read on the same thread just takes the slow path),
//! checks its `number` against the database's current number, and puts it
//! back afterwards.
//!
//! Obsolete extents must not stay alive in an idle thread's slot (their
//! space is freed only when the last reference goes). So installing a super
//! version bumps the number (under the `sv` write lock) and then empties
//! every slot ([`SvCache::scrape`]). A reader puts its super version back
//! only if, under the slot lock, its number is still the current one.
//! Either the reader's put-back precedes the installer's visit of the slot
//! (and the visit empties it), or it follows it and then sees the new number
//! (the bump happens before the installer's unlock of the slot, which
//! happens before the reader's lock) and drops the old one instead. A
//! dropped database empties every slot too, so threads that outlive it keep
//! nothing of it.

use super::SuperVersion;
use parking_lot::{Mutex, RwLock};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Source of [`SvCache::id`]s: one per database instance in the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One thread's cached super version of one database.
#[derive(Default)]
struct Slot {
    sv: Mutex<Option<Arc<SuperVersion>>>,
    /// The database is gone: the thread drops its entry at its next lookup.
    dead: AtomicBool,
}

thread_local! {
    /// This thread's slots, by database id.
    static SLOTS: RefCell<Vec<(u64, Arc<Slot>)>> = const { RefCell::new(Vec::new()) };
}

/// The published super version and the slots caching it.
pub(crate) struct SvCache {
    id: u64,
    current: RwLock<Arc<SuperVersion>>,
    /// `current.number`, readable without the lock.
    number: AtomicU64,
    /// Every thread's slot for this database (weak: a thread's exit drops
    /// its slot and what it holds).
    slots: Mutex<Vec<Weak<Slot>>>,
}

impl SvCache {
    pub(crate) fn new(sv: SuperVersion) -> Self {
        SvCache {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            number: AtomicU64::new(sv.number),
            current: RwLock::new(Arc::new(sv)),
            slots: Mutex::new(Vec::new()),
        }
    }

    /// A reference on the current super version (the slow path: the lock
    /// and the shared count). For readers that keep it, like iterators.
    pub(crate) fn get(&self) -> Arc<SuperVersion> {
        self.current.read().clone()
    }

    /// Publishes `sv` (numbered one past the current one) and empties every
    /// thread's slot.
    pub(crate) fn install(&self, mut sv: SuperVersion) {
        {
            let mut cur = self.current.write();
            sv.number = cur.number + 1;
            self.number.store(sv.number, Ordering::Release);
            *cur = Arc::new(sv);
        }
        self.scrape(false);
    }

    /// Empties every live slot (dropping what they hold outside their
    /// locks) and forgets the slots of threads that exited. `dead`: marks
    /// them for their threads to forget too.
    fn scrape(&self, dead: bool) {
        let mut released = Vec::new();
        self.slots.lock().retain(|w| match w.upgrade() {
            Some(slot) => {
                released.extend(slot.sv.lock().take());
                if dead {
                    slot.dead.store(true, Ordering::Release);
                }
                !dead
            }
            None => false,
        });
        drop(released);
    }

    /// This thread's slot, registered on first use (forgetting the slots of
    /// dropped databases meanwhile); `None` while the thread is exiting.
    fn slot(&self) -> Option<Arc<Slot>> {
        SLOTS
            .try_with(|cell| {
                let mut slots = cell.try_borrow_mut().ok()?;
                if let Some((_, s)) = slots.iter().find(|(id, _)| *id == self.id) {
                    return Some(s.clone());
                }
                slots.retain(|(_, s)| !s.dead.load(Ordering::Acquire));
                let s = Arc::new(Slot::default());
                self.slots.lock().push(Arc::downgrade(&s));
                slots.push((self.id, s.clone()));
                Some(s)
            })
            .ok()
            .flatten()
    }

    /// Runs `f` on the current super version, from this thread's slot when
    /// it holds the current one. `f` may read again (that nested read takes
    /// the slow path: the slot is empty while `f` runs).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Arc<SuperVersion>) -> R) -> R {
        match self.slot() {
            Some(slot) => self.with_slot(&slot, f),
            None => f(&self.get()),
        }
    }

    fn with_slot<R>(&self, slot: &Slot, f: impl FnOnce(&Arc<SuperVersion>) -> R) -> R {
        let current = self.number.load(Ordering::Acquire);
        let cached = slot.sv.lock().take();
        let sv = match cached {
            Some(sv) if sv.number == current => sv,
            _ => self.get(),
        };
        let r = f(&sv);
        let stale = {
            let mut g = slot.sv.lock();
            if g.is_none() && sv.number == self.number.load(Ordering::Acquire) {
                *g = Some(sv);
                None
            } else {
                Some(sv)
            }
        };
        drop(stale);
        r
    }
}

impl Drop for SvCache {
    fn drop(&mut self) {
        self.scrape(true);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use std::collections::BTreeMap;

    fn sv() -> SuperVersion {
        SuperVersion {
            cfs: BTreeMap::new(),
            number: 0,
        }
    }

    /// A reader gets the installed version, a second read reuses the
    /// cached one (no new reference on the shared `Arc`), and an install
    /// takes the cached reference out of the slot at once.
    #[test]
    fn cached_until_an_install_empties_the_slot() {
        let cache = SvCache::new(sv());
        let first = cache.with(|s| (s.number, Arc::strong_count(s)));
        // One reference in `current`, one taken out of the slot by `with`.
        assert_eq!(first, (0, 2));
        let old = cache.get();
        assert_eq!(Arc::strong_count(&old), 3, "current + slot + old");
        cache.install(sv());
        assert_eq!(
            Arc::strong_count(&old),
            1,
            "install released the slot's reference"
        );
        assert_eq!(cache.with(|s| s.number), 1);
    }

    /// A thread that read once and went idle keeps nothing after an
    /// install; a thread that exits keeps nothing either.
    #[test]
    fn idle_and_exited_threads_release_old_versions() {
        let cache = Arc::new(SvCache::new(sv()));
        let old = cache.get();
        let (c2, (tx, rx)) = (cache.clone(), std::sync::mpsc::channel::<()>());
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let idle = std::thread::spawn(move || {
            c2.with(|_| ());
            done_tx.send(()).unwrap();
            rx.recv().unwrap();
        });
        done_rx.recv().unwrap();
        assert_eq!(Arc::strong_count(&old), 3, "current + idle slot + old");
        cache.install(sv());
        assert_eq!(Arc::strong_count(&old), 1);
        tx.send(()).unwrap();
        idle.join().unwrap();
        let c3 = cache.clone();
        std::thread::spawn(move || c3.with(|_| ())).join().unwrap();
        let cur = cache.get();
        assert_eq!(
            Arc::strong_count(&cur),
            2,
            "current + cur: the exited thread's slot is gone"
        );
        assert_eq!(
            cache
                .slots
                .lock()
                .iter()
                .filter(|w| w.upgrade().is_some())
                .count(),
            0
        );
    }

    /// A read that spans an install does not put the old version back.
    #[test]
    fn a_read_across_an_install_drops_its_version() {
        let cache = SvCache::new(sv());
        let old = cache.get();
        cache.with(|_| cache.install(sv()));
        assert_eq!(Arc::strong_count(&old), 1, "not cached after the install");
        // Nested reads take the slow path and see the same version.
        let (a, b) = cache.with(|s| (s.number, cache.with(|t| t.number)));
        assert_eq!((a, b), (1, 1));
    }

    /// Dropping the cache empties the slots of threads that outlive it.
    #[test]
    fn dropping_the_database_empties_every_slot() {
        let cache = SvCache::new(sv());
        let held = cache.get();
        cache.with(|_| ());
        assert_eq!(Arc::strong_count(&held), 3);
        drop(cache);
        assert_eq!(Arc::strong_count(&held), 1);
        SLOTS.with(|s| {
            assert!(s
                .borrow()
                .iter()
                .all(|(_, s)| s.dead.load(Ordering::Acquire)))
        });
    }

    /// Many threads reading while versions are installed: every read sees
    /// a version at least as new as the one installed before it started,
    /// and at the end only the current version is alive.
    #[test]
    fn readers_racing_installs() {
        let cache = Arc::new(SvCache::new(sv()));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (cache, stop) = (cache.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) && n < 200_000 {
                        let before = cache.number.load(Ordering::Acquire);
                        let seen = cache.with(|s| s.number);
                        assert!(seen >= before);
                        n += 1;
                    }
                })
            })
            .collect();
        let mut olds = Vec::new();
        for _ in 0..200 {
            olds.push(Arc::downgrade(&cache.get()));
            cache.install(sv());
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        cache.install(sv());
        assert!(
            olds.iter().all(|w| w.upgrade().is_none()),
            "an old version stayed alive"
        );
    }
}
