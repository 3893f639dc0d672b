//! ACL LOG: the recent permission denials and failed AUTHs, newest first,
//! at most [`MAX_LEN`] (Redis's `acllog-max-len`). A denial equal to a
//! logged one (reason, context, object, user) less than [`GROUP_MS`] old
//! bumps its count instead of adding an entry, as Redis does.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::Instant;

pub const MAX_LEN: usize = 128;
pub const GROUP_MS: u128 = 60_000;

#[derive(Debug, Clone)]
pub struct Entry {
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel` or `multi`.
    pub context: &'static str,
    pub object: String,
    pub username: String,
    pub created: Instant,
    pub client_info: String,
}

#[derive(Default)]
pub struct AclLog {
    entries: Mutex<VecDeque<Entry>>,
}

impl AclLog {
    pub fn add(&self, mut e: Entry) {
        let mut q = self.entries.lock();
        let same = q.iter().position(|o| {
            o.reason == e.reason
                && o.context == e.context
                && o.object == e.object
                && o.username == e.username
                && o.created.elapsed().as_millis() < GROUP_MS
        });
        if let Some(i) = same {
            if let Some(old) = q.remove(i) {
                e.count = old.count + 1;
            }
        }
        q.push_front(e);
        q.truncate(MAX_LEN);
    }

    /// The newest `n` entries (all when None).
    pub fn recent(&self, n: Option<usize>) -> Vec<Entry> {
        let q = self.entries.lock();
        q.iter().take(n.unwrap_or(usize::MAX)).cloned().collect()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}
