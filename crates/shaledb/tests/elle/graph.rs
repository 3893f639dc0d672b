//! The transaction dependency graph (Adya): nodes are transactions, edges
//! carry one or more dependency kinds, each with the key that produced it.
//!
//! * `ww` T1 → T2: T2 installed the next version of a key after T1's.
//! * `wr` T1 → T2: T2 read a version T1 installed.
//! * `rw` T1 → T2: T1 read a version, T2 installed the next one (anti-dependency).
//!
//! Searches: strongly connected components (Tarjan, iterative so that long
//! chains do not overflow the stack) and a shortest path (BFS), both limited
//! to a node set and to a set of allowed kinds. An edge with several kinds is
//! usable if any of them is allowed; when a cycle is printed it is labelled
//! with its weakest kind (`ww` < `wr` < `rw`), as Elle does.

use super::history::Key;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;

/// A dependency kind, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dep {
    WW,
    WR,
    RW,
}

impl Dep {
    const ALL: [Dep; 3] = [Dep::WW, Dep::WR, Dep::RW];

    fn bit(self) -> u8 {
        match self {
            Dep::WW => 1,
            Dep::WR => 2,
            Dep::RW => 4,
        }
    }
}

impl fmt::Display for Dep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dep::WW => "ww",
            Dep::WR => "wr",
            Dep::RW => "rw",
        })
    }
}

/// A set of dependency kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deps(u8);

impl Deps {
    pub const WW: Deps = Deps(1);
    pub const WW_WR: Deps = Deps(1 | 2);
    pub const ALL: Deps = Deps(1 | 2 | 4);

    pub fn contains(self, d: Dep) -> bool {
        self.0 & d.bit() != 0
    }
}

/// The kinds on one edge, each with the first key that produced it.
#[derive(Clone, Debug, Default)]
pub struct Label {
    keys: [Option<Key>; 3],
}

impl Label {
    fn slot(d: Dep) -> usize {
        match d {
            Dep::WW => 0,
            Dep::WR => 1,
            Dep::RW => 2,
        }
    }

    /// The key behind kind `d`, if the edge has it.
    pub fn key(&self, d: Dep) -> Option<Key> {
        self.keys.get(Self::slot(d)).copied().flatten()
    }

    /// The weakest kind of this edge that is in `allowed`.
    pub fn weakest(&self, allowed: Deps) -> Option<Dep> {
        Dep::ALL
            .into_iter()
            .find(|&d| allowed.contains(d) && self.key(d).is_some())
    }
}

/// Directed multigraph over transaction ids `0..n`.
#[derive(Debug, Default)]
pub struct Graph {
    out: Vec<Vec<usize>>,
    labels: HashMap<(usize, usize), Label>,
}

impl Graph {
    pub fn new(n: usize) -> Graph {
        Graph {
            out: vec![Vec::new(); n],
            labels: HashMap::new(),
        }
    }

    /// Adds `from -dep-> to` (self-edges are ignored: a transaction does not
    /// depend on itself).
    pub fn add(&mut self, from: usize, to: usize, dep: Dep, key: Key) {
        if from == to || from >= self.out.len() || to >= self.out.len() {
            return;
        }
        let label = self.labels.entry((from, to)).or_insert_with(|| {
            if let Some(v) = self.out.get_mut(from) {
                v.push(to);
            }
            Label::default()
        });
        if let Some(slot) = label.keys.get_mut(Label::slot(dep)) {
            slot.get_or_insert(key);
        }
    }

    pub fn label(&self, from: usize, to: usize) -> Option<&Label> {
        self.labels.get(&(from, to))
    }

    /// Number of edges carrying kind `d`.
    pub fn count(&self, d: Dep) -> usize {
        self.labels.values().filter(|l| l.key(d).is_some()).count()
    }

    /// The edges leaving `v`, in insertion order.
    pub fn out_edges(&self, v: usize) -> impl Iterator<Item = (usize, &Label)> {
        self.out
            .get(v)
            .into_iter()
            .flatten()
            .filter_map(move |&w| Some((w, self.label(v, w)?)))
    }

    fn succ<'a>(
        &'a self,
        v: usize,
        allowed: Deps,
        member: &'a dyn Fn(usize) -> bool,
    ) -> impl Iterator<Item = usize> + 'a {
        self.out
            .get(v)
            .into_iter()
            .flatten()
            .copied()
            .filter(move |&w| {
                member(w)
                    && self
                        .label(v, w)
                        .is_some_and(|l| l.weakest(allowed).is_some())
            })
    }

    /// Strongly connected components with at least two nodes, of the subgraph
    /// induced by `nodes` and the kinds in `allowed` (Tarjan's algorithm).
    pub fn sccs(&self, nodes: &[usize], allowed: Deps) -> Vec<Vec<usize>> {
        let set: HashSet<usize> = nodes.iter().copied().collect();
        let member = |v: usize| set.contains(&v);
        let mut index: HashMap<usize, usize> = HashMap::new();
        let mut low: HashMap<usize, usize> = HashMap::new();
        let mut on_stack: HashSet<usize> = HashSet::new();
        let mut stack: Vec<usize> = Vec::new();
        let mut out = Vec::new();
        let mut counter = 0;
        for &root in nodes {
            if index.contains_key(&root) {
                continue;
            }
            // Explicit call stack: (node, its remaining successors).
            let mut calls: Vec<(usize, Vec<usize>)> = Vec::new();
            index.insert(root, counter);
            low.insert(root, counter);
            counter += 1;
            stack.push(root);
            on_stack.insert(root);
            calls.push((root, self.succ(root, allowed, &member).collect()));
            while let Some((v, pending)) = calls.last_mut() {
                let v = *v;
                if let Some(w) = pending.pop() {
                    if let Some(&iw) = index.get(&w) {
                        if on_stack.contains(&w) {
                            let lv = low.entry(v).or_default();
                            *lv = (*lv).min(iw);
                        }
                    } else {
                        index.insert(w, counter);
                        low.insert(w, counter);
                        counter += 1;
                        stack.push(w);
                        on_stack.insert(w);
                        calls.push((w, self.succ(w, allowed, &member).collect()));
                    }
                    continue;
                }
                calls.pop();
                let lv = low.get(&v).copied().unwrap_or_default();
                if let Some((parent, _)) = calls.last() {
                    let lp = low.entry(*parent).or_default();
                    *lp = (*lp).min(lv);
                }
                if Some(&lv) == index.get(&v) {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack.remove(&w);
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if comp.len() > 1 {
                        comp.sort_unstable();
                        out.push(comp);
                    }
                }
            }
        }
        out
    }

    /// A shortest path `from .. to` (both included) over edges with a kind in
    /// `allowed`, through nodes accepted by `member`.
    pub fn path(
        &self,
        from: usize,
        to: usize,
        allowed: Deps,
        member: &dyn Fn(usize) -> bool,
    ) -> Option<Vec<usize>> {
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([from]);
        parent.insert(from, from);
        while let Some(v) = queue.pop_front() {
            if v == to {
                let mut path = vec![to];
                let mut cur = to;
                while cur != from {
                    cur = *parent.get(&cur)?;
                    path.push(cur);
                }
                path.reverse();
                return Some(path);
            }
            for w in self.succ(v, allowed, member) {
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(w) {
                    e.insert(v);
                    queue.push_back(w);
                }
            }
        }
        None
    }

    /// A path `from .. to` that uses at least one edge whose only allowed
    /// kind is `rw`, or `None`. Searched over (node, seen-rw) states, so the
    /// walk may repeat a node; callers check that the cycle is simple.
    pub fn path_with_rw(
        &self,
        from: usize,
        to: usize,
        member: &dyn Fn(usize) -> bool,
    ) -> Option<Vec<usize>> {
        let mut parent: HashMap<(usize, bool), (usize, bool)> = HashMap::new();
        let start = (from, false);
        let mut queue = VecDeque::from([start]);
        parent.insert(start, start);
        while let Some(state) = queue.pop_front() {
            if state == (to, true) {
                let mut path = vec![to];
                let mut cur = state;
                while cur != start {
                    cur = *parent.get(&cur)?;
                    path.push(cur.0);
                }
                path.reverse();
                return Some(path);
            }
            let (v, seen) = state;
            for w in self.succ(v, Deps::ALL, member) {
                let rw_only = self
                    .label(v, w)
                    .is_some_and(|l| l.weakest(Deps::ALL) == Some(Dep::RW));
                let next = (w, seen || rw_only);
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(next) {
                    e.insert(state);
                    queue.push_back(next);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sccs_and_paths() {
        // 0 -ww-> 1 -wr-> 2 -rw-> 0, 3 -ww-> 4 (acyclic tail), 4 -rw-> 3.
        let mut g = Graph::new(5);
        g.add(0, 1, Dep::WW, 1);
        g.add(1, 2, Dep::WR, 1);
        g.add(2, 0, Dep::RW, 1);
        g.add(3, 4, Dep::WW, 2);
        g.add(4, 3, Dep::RW, 2);
        g.add(2, 2, Dep::WW, 2); // ignored
        let all: Vec<usize> = (0..5).collect();
        let mut sccs = g.sccs(&all, Deps::ALL);
        sccs.sort();
        assert_eq!(sccs, vec![vec![0, 1, 2], vec![3, 4]]);
        assert!(g.sccs(&all, Deps::WW_WR).is_empty());
        let any = |_: usize| true;
        assert_eq!(g.path(1, 0, Deps::ALL, &any), Some(vec![1, 2, 0]));
        assert_eq!(g.path(1, 0, Deps::WW_WR, &any), None);
        // A walk, not a simple path: the caller checks simplicity.
        assert_eq!(g.path_with_rw(0, 2, &any), Some(vec![0, 1, 2, 0, 1, 2]));
        assert_eq!(g.path_with_rw(3, 4, &|v| v != 4), None);
        assert_eq!(g.path_with_rw(1, 0, &any), Some(vec![1, 2, 0]));
        assert_eq!(g.count(Dep::RW), 2);
    }

    #[test]
    fn long_chain_does_not_overflow() {
        let n = 200_000;
        let mut g = Graph::new(n);
        for i in 0..n {
            g.add(i, (i + 1) % n, Dep::WW, 0);
        }
        let all: Vec<usize> = (0..n).collect();
        let sccs = g.sccs(&all, Deps::WW);
        assert_eq!(sccs.len(), 1);
        assert_eq!(sccs.first().map(Vec::len), Some(n));
    }
}
