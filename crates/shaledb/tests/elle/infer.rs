//! From a history to a dependency graph plus the anomalies that need no cycle.
//!
//! Elements are unique, so every element names the transaction that appended
//! it. A committed transaction's external read of `k` (one made before it
//! appended to `k` itself) observed a *version*; a committed read-modify-write
//! append *wrote* the version "what it read + its own elements". All versions
//! of a key must be prefixes of one another: then the longest is the key's
//! version order, element by element (as in Elle's list-append). Example:
//!
//! ```text
//! T1: r(x)=[]  a(x,1)          wrote [1]
//! T2: r(x)=[1] a(x,2)          wrote [1 2]      version order of x: 1 (T1), 2 (T2)
//! T3: r(x)=[1]                 read [1]
//! edges: T1 -ww-> T2 (2 follows 1), T1 -wr-> T2 and T1 -wr-> T3 (they read [1]),
//!        T3 -rw-> T2 (T3 read [1], T2 installed the next version)
//! ```
//!
//! If two versions are not prefixes of one another (say `[1 2]` and `[1 3]`:
//! two writers read `[1]` and the second overwrote the first) the key has no
//! single version order: that is reported as `incompatible-order`, and a
//! committed element missing from the final value as `lost-update` (P4). The
//! edges then come from the *element tree* (each element's predecessor is
//! the same in every version that holds it): `ww` from the writer of an
//! element's predecessor, `wr` from the writer of the last element read, `rw`
//! from a reader to the writer of each child of what it read (each was
//! installed later), unless the reader wrote a child itself (then its edge
//! to a sibling may be `ww` or `rw`, so none is added). Each such edge
//! stands for a real path: the edge's kind followed by `ww` edges, so a
//! cycle found is backed by a real cycle with no more `rw` edges; but the
//! order of siblings is unknown, so some real cycles go unseen. For a key
//! whose versions form one chain, this is exactly Elle's inference.

use super::graph::{Dep, Graph};
use super::history::{Elem, History, Key, ListFmt, Mop, Outcome, Txn, FINAL_PROCESS};
use super::{Anomaly, Kind};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The inference result.
pub struct Inferred {
    /// The history's transactions (ids renumbered to their index), then the
    /// synthetic final-read transaction if the history has final reads.
    pub txns: Vec<Txn>,
    /// `ok[i]`: transaction `i` committed (or its outcome was unknown and one
    /// of its elements was observed). Only these are graph nodes.
    pub ok: Vec<bool>,
    pub graph: Graph,
    pub anomalies: Vec<Anomaly>,
}

/// An external read: (reader, key, observed list).
type Read<'a> = (usize, Key, &'a [Elem]);

pub fn infer(h: &History) -> Inferred {
    let mut txns = h.txns.clone();
    for (i, t) in txns.iter_mut().enumerate() {
        t.id = i;
    }
    if !h.final_reads.is_empty() {
        let ops = h
            .final_reads
            .iter()
            .map(|(&key, value)| Mop::Read {
                key,
                value: value.clone(),
            })
            .collect();
        txns.push(Txn {
            id: txns.len(),
            process: FINAL_PROCESS,
            ops,
            outcome: Outcome::Committed,
        });
    }
    let mut anomalies = Vec::new();

    // Who appended what, and each transaction's own appends per key.
    let mut writer: HashMap<Elem, (usize, Key)> = HashMap::new();
    let mut appends: BTreeMap<(usize, Key), Vec<Elem>> = BTreeMap::new();
    for t in &txns {
        for op in &t.ops {
            if let Mop::Append { key, elem } = *op {
                if let Some((first, _)) = writer.insert(elem, (t.id, key)) {
                    anomalies.push(Anomaly::new(
                        Kind::Garbage,
                        vec![first, t.id],
                        format!(
                            "element {elem} was appended twice (by T{first} and T{})",
                            t.id
                        ),
                    ));
                }
                appends.entry((t.id, key)).or_default().push(elem);
            }
        }
    }

    let mut ok: Vec<bool> = txns
        .iter()
        .map(|t| t.outcome == Outcome::Committed)
        .collect();
    for t in txns.iter().filter(|t| t.outcome == Outcome::Committed) {
        for op in &t.ops {
            if let Mop::Read { value, .. } = op {
                for e in value {
                    if let Some(&(w, _)) = writer.get(e) {
                        if matches!(txns.get(w).map(|t| &t.outcome), Some(Outcome::Unknown(_))) {
                            if let Some(slot) = ok.get_mut(w) {
                                *slot = true;
                            }
                        }
                    }
                }
            }
        }
    }
    let is_ok = |i: usize| ok.get(i).copied().unwrap_or(false);

    // External reads, written versions, and read-your-own-writes.
    let mut reads: Vec<Read> = Vec::new();
    let mut written: Vec<(usize, Key, Vec<Elem>)> = Vec::new();
    for t in txns.iter().filter(|t| is_ok(t.id)) {
        // The transaction's own view of each key it touched; `None` after a
        // blind append (what it wrote on top of is unknown).
        let mut view: BTreeMap<Key, Option<Vec<Elem>>> = BTreeMap::new();
        let mut wrote: HashSet<Key> = HashSet::new();
        for op in &t.ops {
            match op {
                Mop::Read { key, value } => {
                    if !wrote.contains(key) {
                        reads.push((t.id, *key, value));
                    } else if let Some(Some(expected)) = view.get(key) {
                        if expected != value {
                            anomalies.push(Anomaly::new(
                                Kind::Internal,
                                vec![t.id],
                                format!(
                                    "T{} read key {key} = {} after its own writes made it {}",
                                    t.id,
                                    ListFmt(value),
                                    ListFmt(expected)
                                ),
                            ));
                        }
                    }
                    view.insert(*key, Some(value.clone()));
                }
                Mop::Append { key, elem } => {
                    wrote.insert(*key);
                    match view.get_mut(key) {
                        Some(Some(v)) => v.push(*elem),
                        _ => {
                            view.insert(*key, None);
                        }
                    }
                }
            }
        }
        for (key, v) in view {
            if let (true, Some(v)) = (wrote.contains(&key), v) {
                written.push((t.id, key, v));
            }
        }
    }

    // Anomalies visible in single reads.
    for &(r, key, value) in &reads {
        check_read(
            &txns,
            &writer,
            &appends,
            &is_ok,
            r,
            key,
            value,
            &mut anomalies,
        );
    }

    // All versions of each key; they should form one chain of prefixes.
    let mut versions: BTreeMap<Key, Vec<(&[Elem], usize)>> = BTreeMap::new();
    for &(r, key, value) in &reads {
        versions.entry(key).or_default().push((value, r));
    }
    for (w, key, value) in &written {
        versions.entry(*key).or_default().push((value, *w));
    }
    // The element tree: the element each element follows (None: first).
    let mut parent: BTreeMap<(Key, Elem), Option<Elem>> = BTreeMap::new();
    let mut conflicted: HashSet<(Key, Elem)> = HashSet::new();
    let mut children: HashMap<(Key, Option<Elem>), Vec<Elem>> = HashMap::new();
    for (&key, vs) in versions.iter_mut() {
        vs.sort_by_key(|(v, _)| v.len());
        let clash = vs.windows(2).find_map(|w| match w {
            [(a, ta), (b, tb)] if !b.starts_with(a) => Some((*a, *ta, *b, *tb)),
            _ => None,
        });
        if let Some((a, ta, b, tb)) = clash {
            anomalies.push(Anomaly::new(
                Kind::IncompatibleOrder,
                vec![ta, tb],
                format!(
                    "key {key}: versions {} (seen by T{ta}) and {} (seen by T{tb}) are not \
                     prefixes of one another: one overwrote the other (lost update)",
                    ListFmt(a),
                    ListFmt(b)
                ),
            ));
        }
        for &(v, t) in vs.iter() {
            for (i, &e) in v.iter().enumerate() {
                let p = i.checked_sub(1).and_then(|j| v.get(j)).copied();
                match parent.get(&(key, e)) {
                    None => {
                        parent.insert((key, e), p);
                        children.entry((key, p)).or_default().push(e);
                    }
                    Some(&q) if q != p && conflicted.insert((key, e)) => {
                        let text = format!(
                            "T{t} read key {key} = {}: element {e} follows {} there \
                             but {} in another version",
                            ListFmt(v),
                            after(p),
                            after(q)
                        );
                        anomalies.push(Anomaly::new(Kind::Garbage, vec![t], text));
                    }
                    Some(_) => {}
                }
            }
        }
    }

    // A committed append missing from the final value was overwritten.
    for (&(w, key), elems) in &appends {
        let Some(fin) = h.final_reads.get(&key) else {
            continue;
        };
        if !is_ok(w) {
            continue;
        }
        let lost: Vec<Elem> = elems.iter().copied().filter(|e| !fin.contains(e)).collect();
        if !lost.is_empty() {
            anomalies.push(Anomaly::new(
                Kind::LostUpdate,
                vec![w],
                format!(
                    "T{w} committed its append of {} to key {key}, but the final value {} lacks it",
                    ListFmt(&lost),
                    ListFmt(fin)
                ),
            ));
        }
    }

    // Dependency edges between ok transactions, from the element tree. With
    // one chain per key (always, unless updates were lost) this is exactly
    // Elle's inference: ww between consecutive elements, wr from the writer of
    // the last element read, rw to the writer of the next one.
    let mut graph = Graph::new(txns.len());
    let writer_of = |e: Option<Elem>, key: Key| -> Option<usize> {
        let &(w, k) = writer.get(&e?)?;
        (k == key && is_ok(w)).then_some(w)
    };
    for (&(key, e), &p) in &parent {
        if let (Some(a), Some(b)) = (writer_of(p, key), writer_of(Some(e), key)) {
            graph.add(a, b, Dep::WW, key);
        }
    }
    for &(r, key, value) in &reads {
        let last = value.last().copied();
        if let Some(w) = writer_of(last, key) {
            graph.add(w, r, Dep::WR, key);
        }
        // Each child of what r read was installed after it. If r itself
        // wrote on top of it (a sibling may then precede or follow r's
        // version), the kind of the edge is unknown and none is added.
        let kids = children
            .get(&(key, last))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let r_wrote_here = kids.iter().any(|&c| writer.get(&c).map(|w| w.0) == Some(r));
        if !r_wrote_here {
            for &c in kids {
                if let Some(w) = writer_of(Some(c), key) {
                    graph.add(r, w, Dep::RW, key);
                }
            }
        }
    }

    Inferred {
        txns,
        ok,
        graph,
        anomalies,
    }
}

/// "element 4" or "the start of the list".
fn after(p: Option<Elem>) -> String {
    p.map_or("the start of the list".into(), |e| format!("element {e}"))
}

/// G1a, G1b and garbage in one external read `value` of `key` by `r`.
#[allow(clippy::too_many_arguments)]
fn check_read(
    txns: &[Txn],
    writer: &HashMap<Elem, (usize, Key)>,
    appends: &BTreeMap<(usize, Key), Vec<Elem>>,
    is_ok: &dyn Fn(usize) -> bool,
    r: usize,
    key: Key,
    value: &[Elem],
    out: &mut Vec<Anomaly>,
) {
    let shown = ListFmt(value);
    let mut seen = HashSet::new();
    if let Some(dup) = value.iter().find(|e| !seen.insert(**e)) {
        let text = format!("T{r} read key {key} = {shown}: element {dup} occurs twice");
        out.push(Anomaly::new(Kind::Garbage, vec![r], text));
    }
    let mut garbage = None;
    let mut aborted = None;
    for &e in value {
        match writer.get(&e) {
            None => garbage = garbage.or(Some(format!("element {e} was never appended"))),
            Some(&(_, k)) if k != key => {
                garbage = garbage.or(Some(format!("element {e} was appended to key {k}")))
            }
            Some(&(w, _)) if w == r => {
                garbage = garbage.or(Some(format!("element {e} is its own later append")))
            }
            Some(&(w, _)) => {
                if matches!(txns.get(w).map(|t| &t.outcome), Some(Outcome::Aborted(_))) {
                    aborted = aborted.or(Some((e, w)));
                }
            }
        }
    }
    if let Some(why) = garbage {
        let text = format!("T{r} read key {key} = {shown}: {why}");
        out.push(Anomaly::new(Kind::Garbage, vec![r], text));
    }
    if let Some((e, w)) = aborted {
        let text =
            format!("T{r} read key {key} = {shown}: element {e} was appended by aborted T{w}");
        out.push(Anomaly::new(Kind::G1a, vec![w, r], text));
    }
    // G1b: the last element is not its writer's last append to this key.
    let Some(&last) = value.last() else { return };
    let Some(&(w, k)) = writer.get(&last) else {
        return;
    };
    if k != key || w == r || !is_ok(w) {
        return;
    }
    let own = appends
        .get(&(w, key))
        .map(Vec::as_slice)
        .unwrap_or_default();
    if own.last() != Some(&last) {
        let text = format!(
            "T{r} read key {key} = {shown}, an intermediate state of T{w}, which appended {} to it",
            ListFmt(own)
        );
        out.push(Anomaly::new(Kind::G1b, vec![w, r], text));
    }
}
