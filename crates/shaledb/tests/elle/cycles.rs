//! Cycle search and classification (Adya's G0 / G1c / G-single / G2).
//!
//! For each strongly connected component of the whole graph:
//!
//! 1. **G0**: every SCC of its `ww`-only subgraph holds a cycle of writes.
//! 2. **G1c**: in every SCC of the `ww`+`wr` subgraph, a `wr`-only edge
//!    `a → b` closed by a `ww`/`wr` path `b ⇝ a`.
//! 3. **G-single**: an `rw`-only edge `a → b` closed by a `ww`/`wr` path
//!    `b ⇝ a` (a shortest path, so the cycle is simple and has exactly one
//!    `rw`). This test is exact: it fails only if no such cycle exists.
//! 4. **G2**: if 1-3 found nothing, every cycle of the component has two or
//!    more `rw` edges, so any cycle through an `rw` edge is a witness. If they
//!    found something, a G2 cycle is still looked for (bounded search over
//!    (node, seen-rw) states, kept only if the cycle is simple).
//!
//! Each class is counted at most once per component (G0 and G1c once per
//! sub-component), and one concrete cycle is kept for printing, e.g.:
//!
//! ```text
//! G-single cycle:
//!   T4 (p1, committed): r(2)=[] r(3)=[7]
//!     -rw(key 2)-> T6 (p0, committed): r(2)=[] a(2,8) r(3)=[] a(3,7)
//!     -wr(key 3)-> T4
//! ```

use super::graph::{Dep, Deps, Graph};
use super::history::{Key, Txn};
use super::Kind;
use std::collections::HashSet;
use std::fmt::Write;

/// How many `rw` edges per component the G2 search tries once a weaker
/// cycle was already found there.
const G2_ATTEMPTS: usize = 64;

/// A cycle: `steps[i] = (node, kind and key of the edge to the next node)`;
/// the last step leads back to the first node.
#[derive(Clone, Debug)]
pub struct Cycle {
    pub steps: Vec<(usize, Dep, Key)>,
}

impl Cycle {
    /// Builds the cycle `nodes[0] → nodes[1] → … → nodes[0]`, labelling each
    /// edge with its weakest kind; `None` if an edge is missing.
    fn from_nodes(g: &Graph, nodes: &[usize]) -> Option<Cycle> {
        let mut steps = Vec::with_capacity(nodes.len());
        for (i, &v) in nodes.iter().enumerate() {
            let w = *nodes.get((i + 1) % nodes.len())?;
            let label = g.label(v, w)?;
            let dep = label.weakest(Deps::ALL)?;
            steps.push((v, dep, label.key(dep)?));
        }
        Some(Cycle { steps })
    }

    /// The cycle closed by edge `a → b` and path `b ⇝ a`.
    fn closing(g: &Graph, a: usize, path: &[usize]) -> Option<Cycle> {
        let mut nodes = vec![a];
        nodes.extend(path.iter().copied().take(path.len().saturating_sub(1)));
        Cycle::from_nodes(g, &nodes)
    }

    fn count(&self, d: Dep) -> usize {
        self.steps.iter().filter(|s| s.1 == d).count()
    }

    /// Adya's class from the edge kinds.
    pub fn kind(&self) -> Kind {
        match self.count(Dep::RW) {
            0 if self.count(Dep::WR) == 0 => Kind::G0,
            0 => Kind::G1c,
            1 => Kind::GSingle,
            _ => Kind::G2,
        }
    }

    pub fn nodes(&self) -> Vec<usize> {
        self.steps.iter().map(|s| s.0).collect()
    }

    fn is_simple(&self) -> bool {
        let nodes = self.nodes();
        nodes.iter().collect::<HashSet<_>>().len() == nodes.len()
    }

    /// Multi-line text: each transaction with its ops, and the edges.
    pub fn render(&self, txns: &[Txn]) -> String {
        let mut s = format!("{} cycle:\n", self.kind());
        let name = |v: usize| match txns.get(v) {
            Some(t) => t.to_string(),
            None => format!("T{v}"),
        };
        if let Some(&(first, _, _)) = self.steps.first() {
            let _ = writeln!(s, "  {}", name(first));
        }
        for (i, &(_, dep, key)) in self.steps.iter().enumerate() {
            let next = self.steps.get(i + 1).map(|s| s.0);
            let why = match dep {
                Dep::WW => "appended after",
                Dep::WR => "was read by",
                Dep::RW => "read a state overwritten by",
            };
            match next {
                Some(n) => {
                    let _ = writeln!(s, "    -{dep}(key {key}; {why})-> {}", name(n));
                }
                None => {
                    let first = self.steps.first().map(|s| s.0).unwrap_or_default();
                    let _ = writeln!(s, "    -{dep}(key {key}; {why})-> T{first}");
                }
            }
        }
        s
    }
}

/// Edges `a → b` inside `set` whose weakest kind is `dep`.
fn edges_of(g: &Graph, nodes: &[usize], set: &HashSet<usize>, dep: Dep) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for &a in nodes {
        for (b, label) in g.out_edges(a) {
            if set.contains(&b) && label.weakest(Deps::ALL) == Some(dep) {
                out.push((a, b));
            }
        }
    }
    out
}

/// One witness cycle per class per strongly connected component of `g`
/// restricted to `nodes`.
pub fn find_cycles(g: &Graph, nodes: &[usize]) -> Vec<Cycle> {
    let mut found = Vec::new();
    for scc in g.sccs(nodes, Deps::ALL) {
        let set: HashSet<usize> = scc.iter().copied().collect();
        let in_scc = |v: usize| set.contains(&v);
        let before = found.len();
        for sub in g.sccs(&scc, Deps::WW) {
            let sub_set: HashSet<usize> = sub.iter().copied().collect();
            let in_sub = |v: usize| sub_set.contains(&v);
            let first = sub.first().copied();
            let cycle = first.and_then(|a| {
                let (b, _) = g
                    .out_edges(a)
                    .find(|(b, l)| in_sub(*b) && l.key(Dep::WW).is_some())?;
                Cycle::closing(g, a, &g.path(b, a, Deps::WW, &in_sub)?)
            });
            found.extend(cycle);
        }
        for sub in g.sccs(&scc, Deps::WW_WR) {
            let sub_set: HashSet<usize> = sub.iter().copied().collect();
            let in_sub = |v: usize| sub_set.contains(&v);
            let cycle = edges_of(g, &sub, &sub_set, Dep::WR)
                .into_iter()
                .find_map(|(a, b)| Cycle::closing(g, a, &g.path(b, a, Deps::WW_WR, &in_sub)?));
            found.extend(cycle);
        }
        let rw_edges = edges_of(g, &scc, &set, Dep::RW);
        let single = rw_edges
            .iter()
            .find_map(|&(a, b)| Cycle::closing(g, a, &g.path(b, a, Deps::WW_WR, &in_scc)?));
        found.extend(single);
        let g2 = if found.len() == before {
            // Every cycle here has >= 2 rw edges: any cycle through one will do.
            rw_edges
                .iter()
                .find_map(|&(a, b)| Cycle::closing(g, a, &g.path(b, a, Deps::ALL, &in_scc)?))
        } else {
            rw_edges.iter().take(G2_ATTEMPTS).find_map(|&(a, b)| {
                let c = Cycle::closing(g, a, &g.path_with_rw(b, a, &in_scc)?)?;
                (c.is_simple() && c.kind() == Kind::G2).then_some(c)
            })
        };
        found.extend(g2);
    }
    found
}
