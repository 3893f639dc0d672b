//! A history checker in the spirit of Jepsen's Elle (Kingsbury & Alvaro,
//! "Elle: Inferring Isolation Anomalies from Experimental Observations").
//!
//! Input: a [`History`] of list-append transactions (see [`history`]): every
//! value is a list of unique elements and every write appends one, so each
//! read names the exact writes it saw and in which order. From that the
//! checker infers, without knowing anything about the engine:
//!
//! * a version order per key and the `ww` / `wr` / `rw` dependency graph
//!   ([`infer`]); anomalies visible in single reads: **G1a** (read an aborted
//!   append), **G1b** (read an intermediate state), **garbage** (an element
//!   nobody appended to that key, or a duplicate), **internal** (a
//!   transaction not seeing its own appends), **incompatible-order** and
//!   **lost-update** (P4: a committed append overwritten);
//! * cycles in the graph ([`cycles`]): **G0** (`ww` only), **G1c** (`ww` +
//!   `wr`), **G-single** (exactly one `rw`), **G2** (two or more `rw`).
//!
//! Worked example (write skew, allowed under Snapshot Isolation):
//!
//! ```text
//! T0: r(1)=[] r(2)=[] a(1,10)      T1: r(1)=[] r(2)=[] a(2,20)      final: 1=[10] 2=[20]
//! T0 -rw(key 2)-> T1  (T0 read 2 empty, T1 installed the next version of 2)
//! T1 -rw(key 1)-> T0  (likewise for key 1)      => one G2 cycle
//! ```
//!
//! What a level forbids is decided by the caller ([`Report::of_kinds`]).

#![allow(dead_code)] // shared by test binaries that each use a part

pub mod cycles;
pub mod graph;
pub mod history;
pub mod infer;
#[cfg(test)]
mod selftest;

pub use history::{Elem, History, Key, Mop, Outcome, Txn};

use std::collections::BTreeMap;
use std::fmt;

/// A class of anomaly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Write cycle (`ww` edges only).
    G0,
    /// Aborted read.
    G1a,
    /// Intermediate read.
    G1b,
    /// Circular information flow (`ww` + `wr`, at least one `wr`).
    G1c,
    /// A cycle with exactly one anti-dependency (read skew).
    GSingle,
    /// A cycle with two or more anti-dependencies (write skew).
    G2,
    /// A committed append missing from the final value (P4).
    LostUpdate,
    /// Two versions of a key that are not prefixes of one another.
    IncompatibleOrder,
    /// An element nobody appended to that key, or a duplicate.
    Garbage,
    /// A transaction did not read its own appends.
    Internal,
}

impl Kind {
    /// Every kind, for tables.
    pub const ALL: [Kind; 10] = [
        Kind::G0,
        Kind::G1a,
        Kind::G1b,
        Kind::G1c,
        Kind::GSingle,
        Kind::G2,
        Kind::LostUpdate,
        Kind::IncompatibleOrder,
        Kind::Garbage,
        Kind::Internal,
    ];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::G0 => "G0",
            Kind::G1a => "G1a",
            Kind::G1b => "G1b",
            Kind::G1c => "G1c",
            Kind::GSingle => "G-single",
            Kind::G2 => "G2",
            Kind::LostUpdate => "lost-update",
            Kind::IncompatibleOrder => "incompatible-order",
            Kind::Garbage => "garbage-read",
            Kind::Internal => "internal",
        })
    }
}

/// One found anomaly, with a readable explanation.
#[derive(Clone, Debug)]
pub struct Anomaly {
    pub kind: Kind,
    /// The transactions involved (for a cycle: in cycle order).
    pub txns: Vec<usize>,
    pub text: String,
}

impl Anomaly {
    pub fn new(kind: Kind, txns: Vec<usize>, text: String) -> Anomaly {
        Anomaly { kind, txns, text }
    }
}

/// Sizes of what was checked.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub committed: usize,
    pub aborted: usize,
    pub unknown: usize,
    pub ww: usize,
    pub wr: usize,
    pub rw: usize,
}

/// The checker's verdict.
#[derive(Clone, Debug)]
pub struct Report {
    pub anomalies: Vec<Anomaly>,
    pub stats: Stats,
}

impl Report {
    pub fn count(&self, kind: Kind) -> usize {
        self.anomalies.iter().filter(|a| a.kind == kind).count()
    }

    /// Count per kind found (kinds not found are absent).
    pub fn counts(&self) -> BTreeMap<Kind, usize> {
        let mut m = BTreeMap::new();
        for a in &self.anomalies {
            *m.entry(a.kind).or_default() += 1;
        }
        m
    }

    /// The anomalies of the given kinds (e.g. the ones a level forbids).
    pub fn of_kinds(&self, kinds: &[Kind]) -> Vec<&Anomaly> {
        self.anomalies
            .iter()
            .filter(|a| kinds.contains(&a.kind))
            .collect()
    }

    /// One line: sizes and the count of each anomaly kind.
    pub fn summary(&self) -> String {
        let s = &self.stats;
        let mut out = format!(
            "{} committed, {} aborted, {} unknown; edges ww {} wr {} rw {}; anomalies:",
            s.committed, s.aborted, s.unknown, s.ww, s.wr, s.rw
        );
        let counts = self.counts();
        if counts.is_empty() {
            out.push_str(" none");
        }
        for (k, n) in counts {
            out.push_str(&format!(" {k} x{n}"));
        }
        out
    }
}

/// Checks a history: everything in the module docs.
pub fn check(h: &History) -> Report {
    let inf = infer::infer(h);
    let nodes: Vec<usize> = (0..inf.txns.len())
        .filter(|&i| inf.ok.get(i).copied().unwrap_or(false))
        .collect();
    let mut anomalies = inf.anomalies;
    for c in cycles::find_cycles(&inf.graph, &nodes) {
        anomalies.push(Anomaly::new(c.kind(), c.nodes(), c.render(&inf.txns)));
    }
    let mut stats = Stats {
        ww: inf.graph.count(graph::Dep::WW),
        wr: inf.graph.count(graph::Dep::WR),
        rw: inf.graph.count(graph::Dep::RW),
        ..Stats::default()
    };
    for t in &h.txns {
        match t.outcome {
            Outcome::Committed => stats.committed += 1,
            Outcome::Aborted(_) => stats.aborted += 1,
            Outcome::Unknown(_) => stats.unknown += 1,
        }
    }
    Report { anomalies, stats }
}
