//! client-output-buffer-limit (Redis's `normal`, `replica` and `pubsub`
//! classes; docs/redis.md, "Output buffers"): how much output may wait for
//! a client that does not read before it is disconnected.

use std::sync::atomic::{AtomicU64, Ordering};

/// One class: hard limit (bytes), soft limit (bytes), soft seconds; 0
/// turns a limit off.
#[derive(Default)]
pub struct Class {
    pub hard: AtomicU64,
    pub soft: AtomicU64,
    pub soft_secs: AtomicU64,
}

impl Class {
    fn new(hard: u64, soft: u64, secs: u64) -> Class {
        Class {
            hard: AtomicU64::new(hard),
            soft: AtomicU64::new(soft),
            soft_secs: AtomicU64::new(secs),
        }
    }

    pub fn get(&self) -> (u64, u64, u64) {
        (
            self.hard.load(Ordering::Relaxed),
            self.soft.load(Ordering::Relaxed),
            self.soft_secs.load(Ordering::Relaxed),
        )
    }

    fn set(&self, (hard, soft, secs): (u64, u64, u64)) {
        self.hard.store(hard, Ordering::Relaxed);
        self.soft.store(soft, Ordering::Relaxed);
        self.soft_secs.store(secs, Ordering::Relaxed);
    }
}

/// The three classes, with Redis 7.0's defaults.
pub struct Limits {
    pub normal: Class,
    pub replica: Class,
    pub pubsub: Class,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            normal: Class::new(0, 0, 0),
            replica: Class::new(256 << 20, 64 << 20, 60),
            pubsub: Class::new(32 << 20, 8 << 20, 60),
        }
    }
}

/// Redis's `memtoull`: a byte count with an optional unit (`k` 1000,
/// `kb` 1024, `m`, `mb`, `g`, `gb`), any case.
fn bytes(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?.to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

impl Limits {
    /// CONFIG GET's value: `normal h s t slave h s t pubsub h s t`.
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        for (name, c) in [
            ("normal", &self.normal),
            ("slave", &self.replica),
            ("pubsub", &self.pubsub),
        ] {
            let (h, s, t) = c.get();
            out.push(format!("{name} {h} {s} {t}"));
        }
        out.join(" ")
    }

    /// CONFIG SET's value: `class hard soft secs` groups, all checked
    /// before any is applied; the error text is Redis 7.0's.
    pub fn set(&self, value: &[u8]) -> Result<(), &'static str> {
        let words: Vec<&[u8]> = value
            .split(|c| c.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        if !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.");
        }
        let mut parsed = Vec::new();
        for g in words.chunks(4) {
            let [class, hard, soft, secs] = g else {
                return Err("Wrong number of arguments in buffer limit configuration.");
            };
            let class = match class.to_ascii_lowercase().as_slice() {
                b"normal" => &self.normal,
                b"slave" | b"replica" => &self.replica,
                b"pubsub" => &self.pubsub,
                _ => return Err("Invalid client class specified in buffer limit configuration."),
            };
            let secs = std::str::from_utf8(secs)
                .ok()
                .and_then(|s| s.parse::<u64>().ok());
            let (Some(h), Some(s), Some(t)) = (bytes(hard), bytes(soft), secs) else {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
                );
            };
            parsed.push((class, (h, s, t)));
        }
        for (class, v) in parsed {
            class.set(v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn parses_units_and_classes_like_redis() {
        let l = Limits::default();
        assert_eq!(
            l.describe(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        l.set(b"pubsub 1mb 256kb 10 Normal 2k 0 0").unwrap();
        assert_eq!(l.pubsub.get(), (1 << 20, 256 << 10, 10));
        assert_eq!(l.normal.get(), (2000, 0, 0));
        assert!(l.set(b"pubsub 1mb 256kb").is_err());
        l.set(b"").unwrap(); // nothing to change, as Redis
        assert!(l.set(b"master 1 1 1").is_err());
        assert!(l.set(b"pubsub 1xb 1 1").is_err());
        assert!(l.set(b"normal 1 1 1 pubsub x 1 1").is_err());
        assert_eq!(l.normal.get(), (2000, 0, 0), "a failed set changed a class");
    }
}
