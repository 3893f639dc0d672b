//! SLOWLOG (Redis 7.0's `slowlog.c`): commands that ran for at least
//! `slowlog-log-slower-than` microseconds (-1: none, 0: all), the newest
//! `slowlog-max-len` kept.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Arguments kept per entry (the last one says how many more there were).
const MAX_ARGC: usize = 32;
/// Bytes kept per argument.
const MAX_STRING: usize = 128;

/// One logged command.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: u64,
    /// Unix time (s) it was logged.
    pub time: u64,
    pub micros: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

pub struct SlowLog {
    entries: Mutex<VecDeque<Entry>>,
    next_id: AtomicU64,
    pub slower_than: AtomicI64,
    pub max_len: AtomicU64,
}

impl Default for SlowLog {
    fn default() -> SlowLog {
        SlowLog {
            entries: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            slower_than: AtomicI64::new(10_000),
            max_len: AtomicU64::new(128),
        }
    }
}

/// Arguments Redis replaces by `(redacted)`: passwords.
fn redacted(args: &[Vec<u8>]) -> Vec<bool> {
    let name = args
        .first()
        .map(|n| n.to_ascii_lowercase())
        .unwrap_or_default();
    let eq = |i: usize, s: &str| {
        args.get(i)
            .is_some_and(|a| a.eq_ignore_ascii_case(s.as_bytes()))
    };
    let mut out = vec![false; args.len()];
    for (i, hide) in out.iter_mut().enumerate() {
        *hide = match name.as_slice() {
            b"auth" => i >= 1,
            b"hello" => (i >= 2 && eq(i - 1, "auth")) || (i >= 3 && eq(i - 2, "auth")),
            b"config" => eq(1, "set") && i >= 3 && i % 2 == 1 && eq(i - 1, "requirepass"),
            b"acl" => {
                eq(1, "setuser")
                    && i >= 3
                    && args
                        .get(i)
                        .and_then(|a| a.first())
                        .is_some_and(|c| matches!(c, b'>' | b'<' | b'#' | b'!'))
            }
            _ => false,
        };
    }
    out
}

impl SlowLog {
    /// Whether a command that ran `micros` is logged.
    pub fn would_log(&self, micros: u64) -> bool {
        let limit = self.slower_than.load(Ordering::Relaxed);
        limit >= 0 && i64::try_from(micros).unwrap_or(i64::MAX) >= limit
    }

    /// Logs `args` if `micros` reaches the threshold.
    pub fn record(&self, args: &[Vec<u8>], micros: u64, addr: &str, name: &[u8]) {
        if !self.would_log(micros) {
            return;
        }
        let hide = redacted(args);
        let shown = args.len().min(MAX_ARGC);
        let mut kept = Vec::with_capacity(shown);
        for (i, a) in args.iter().take(shown).enumerate() {
            if shown < args.len() && i == shown - 1 {
                kept.push(format!("... ({} more arguments)", args.len() - shown + 1).into_bytes());
            } else if hide.get(i).copied().unwrap_or(false) {
                kept.push(b"(redacted)".to_vec());
            } else if a.len() > MAX_STRING {
                let mut s = a.get(..MAX_STRING).unwrap_or_default().to_vec();
                s.extend(format!("... ({} more bytes)", a.len() - MAX_STRING).into_bytes());
                kept.push(s);
            } else {
                kept.push(a.clone());
            }
        }
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            time: crate::store::now_ms() / 1000,
            micros,
            args: kept,
            addr: addr.to_string(),
            name: name.to_vec(),
        };
        let mut e = self.entries.lock();
        e.push_front(entry);
        let max = usize::try_from(self.max_len.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        e.truncate(max);
    }

    /// The newest `count` entries (all for `None`).
    pub fn get(&self, count: Option<usize>) -> Vec<Entry> {
        let e = self.entries.lock();
        e.iter()
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }

    /// Applies a smaller `slowlog-max-len` at once (Redis trims on set).
    pub fn trim(&self) {
        let max = usize::try_from(self.max_len.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        self.entries.lock().truncate(max);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn args(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn trims_arguments_redacts_passwords_and_keeps_the_newest() {
        let log = SlowLog::default();
        log.slower_than.store(0, Ordering::Relaxed);
        let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let mut a = vec!["RPUSH".to_string(), "k".to_string()];
        a.extend(many);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        log.record(&args(&a), 5, "addr", b"");
        let long = "x".repeat(130);
        log.record(&args(&["SET", "k", &long]), 5, "addr", b"n");
        log.record(&args(&["AUTH", "u", "pw"]), 5, "addr", b"");
        log.record(&args(&["HELLO", "3", "AUTH", "u", "pw"]), 5, "addr", b"");
        let got = log.get(None);
        assert_eq!(got.len(), 4);
        assert_eq!(
            got[0].args,
            args(&["HELLO", "3", "AUTH", "(redacted)", "(redacted)"])
        );
        assert_eq!(got[1].args, args(&["AUTH", "(redacted)", "(redacted)"]));
        assert_eq!(
            got[2].args[2],
            [&long.as_bytes()[..128], b"... (2 more bytes)"].concat()
        );
        assert_eq!(got[3].args.len(), 32);
        assert_eq!(got[3].args[31], b"... (11 more arguments)".to_vec());
        assert_eq!(got[3].id, 0);
        log.max_len.store(2, Ordering::Relaxed);
        log.trim();
        assert_eq!(log.len(), 2);
        log.slower_than.store(-1, Ordering::Relaxed);
        log.record(&args(&["GET", "k"]), 1_000_000, "addr", b"");
        assert_eq!(log.len(), 2);
    }
}
