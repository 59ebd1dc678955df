//! What the two sides of a split segment must keep, given how long the split may take.
//!
//! When a segment's ends `a` and `b` are on different devices `A` and `B`, let `R` be `a` and
//! the inner nodes that `a` reaches by paths staying on `A`, and `Q` be `b` and the inner nodes
//! that reach `b` by paths staying on `B`. `R` and `Q` are on different devices, so they are
//! disjoint, and:
//!
//! * every tensor that leaves `R` for another node of the segment goes to another device (a
//!   consumer on `A` would be in `R`): `A`'s one channel sends them one at a time, after `a`
//!   ends and before `b` starts, so their total transfer time is at most the gap;
//! * likewise every tensor that enters `Q` from another node of the segment comes from another
//!   device, and `B`'s channel receives them one at a time within the gap;
//! * `A` keeps `R` resident, `B` keeps `Q`.
//!
//! So a split whose gap is `G` puts on `a`'s device at least the fewest bytes of a set `R`
//! whose tensors out cost at most `G`, and on `b`'s device the fewest of a set `Q` whose
//! tensors in cost at most `G`. A split that is cheap because a small tensor crosses early (a
//! ResNet stage's pooled input) must carry everything after that tensor to `b`'s device.
//!
//! In training, a received copy stays on its receiver to the end of the step, so `b`'s side
//! also keeps the tensors it receives.
//!
//! The fewest bytes under a budget `G` of transfer time is a knapsack-like problem. Two
//! relaxations bound it from below, each by minimum cuts (project selection: a side's nodes
//! cost their bytes, its crossing tensors their transfer time), and the larger is taken:
//!
//! * Lagrangian: for every `λ`, no set lies below the line `bytes + λ · (time - G) >= min over
//!   sets of (bytes + λ · time)`; the `λ`s are those of the lower convex hull of (transfer time,
//!   bytes), found by Eisner and Severance's bisection of the hull, and each line is a valid
//!   bound by itself, whatever the rounding of `λ`;
//! * branching: no tensor of more than `G` crosses, and at most one of more than `G / 2`;
//!   each choice of that one (or none) is a branch with every other such tensor kept from
//!   crossing, in which the chosen one's time is spent and the rule applies again to what is
//!   left; each branch's own hull bounds its sets, and the smallest over the branches holds.
//!   Exact where the hull is not: a few large tensors (a ResNet stage's input, where a split
//!   must send the stage's input or carry its whole first block; an Inception module's input,
//!   after which only one narrow branch output fits what is left).
//!
//! The same cuts bound each side's compute: `B` runs the inner nodes of `Q` within the gap,
//! each after a tensor into `Q` arrived (every path from `a` enters `Q` somewhere), so the gap
//! is at least the smallest tensor that any split within `G` sends into an inner node, plus
//! the least compute of a `Q`; likewise `A` runs those of `R` before the last tensor out of
//! them leaves. A module that a split carries whole to `b`'s device costs its input's transfer
//! and then all its compute.
//!
//! Each segment's menu computes at most [`CUTS_PER_SEGMENT`] minimum cuts; a bound not
//! computed stays at what it is without it, so the menu only gets less tight.

use super::tensor_cut::{Flow, UNLIMITED};
use ordo_problem::PlaceProblem;

/// The most minimum cuts per side for the hull.
const MAX_CUTS: usize = 12;
/// Gaps of a split tried between the least and the largest cut: each this much above the last
/// (in per mille), besides the cuts of the hull's corners and the tensors' transfer times.
const STEP_PER_MILLE: u64 = 1_250;
/// The most entries a split's menu keeps.
const MENU: usize = 32;
/// The most tensors of more than half the time left branched on; with more, only those above
/// the time left are kept from crossing.
const MAX_BRANCH: usize = 8;
/// The most branches per side and budget.
const MAX_LEAVES: usize = 32;
/// The most minimum cuts one segment's menu computes; past them its bounds stay as they are.
const CUTS_PER_SEGMENT: usize = 150;

/// An arc of a segment's network.
#[derive(Clone, Copy)]
enum Arc {
    /// A producer to one of its tensors' nodes.
    Send { from: usize, tensor: usize },
    /// A tensor's node to a consumer, or a colocated edge: never cut.
    Never { from: usize, to: usize },
}

/// A tensor of a segment's network.
#[derive(Clone, Copy)]
struct TensorNode {
    /// Its node in the network.
    node: usize,
    producer: usize,
    comm_us: u64,
    /// Memory units its copy keeps on the receiver to the end of the step (0 unless its producer's
    /// outputs are retained).
    kept_mem: u64,
}

/// A segment as a network of its nodes (`0` is `a`, then the inner nodes, the last `b`) and
/// one node per tensor.
pub(super) struct Sides {
    /// Each member's place in the network.
    index: std::collections::HashMap<usize, usize>,
    arcs: Vec<Arc>,
    /// Edges without tensors between nodes that may be apart: they cross for free.
    free: Vec<(usize, usize)>,
    /// Per [`Kind`], each node's weight: resident memory units, or compute in µs (0 for `a`
    /// and `b`, which the caller counts).
    weights: [Vec<u64>; 2],
    tensors: Vec<TensorNode>,
    /// Bytes per memory unit.
    unit: u64,
    /// Minimum cuts left to compute ([`CUTS_PER_SEGMENT`]).
    cuts_left: std::cell::Cell<usize>,
    /// The network at transfer times, built by the first [`Sides::separating`].
    transfers: std::cell::OnceCell<Flow>,
}

/// A line `weight >= (value - n · G) / d` below which no side of gap `G` lies.
#[derive(Clone, Copy, Debug)]
struct Line {
    value: u128,
    n: u128,
    d: u128,
}

/// Which end's side: `R` around `a` (the network's source side), or `Q` around `b` (its sink
/// side).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    A = 0,
    B = 1,
}

/// What a side's nodes weigh: their resident memory (and, on `b`'s side, the copies received),
/// or their compute.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Memory = 0,
    Work = 1,
}

/// A tensor sent to one of its consumers in some split (see [`Sides::entries`]).
struct Entry {
    comm_us: u64,
    /// The least total transfer time of a split that sends it to that consumer.
    least_cut: u64,
    /// Whether its producer is an inner node (not `a`).
    producer_inner: bool,
    /// Whether the consumer is an inner node (not `b`).
    consumer_inner: bool,
}

/// What a minimum cut found.
enum Solved {
    Cut(Cut),
    /// No set: every one crosses a tensor it may not.
    Infeasible,
    /// Not computed (out of cuts, or sums too large): nothing is known.
    Unknown,
}

/// A minimum cut: its value, and the transfer time and weight of a set that attains it.
struct Cut {
    value: u128,
    comm_us: u64,
    weight: u64,
}

impl Sides {
    /// The network of the edges among `a`, `inner` and `b`.
    pub(super) fn new(p: &PlaceProblem, a: usize, inner: &[usize], b: usize) -> Self {
        let members: Vec<usize> =
            std::iter::once(a).chain(inner.iter().copied()).chain([b]).collect();
        let index: std::collections::HashMap<usize, usize> =
            members.iter().enumerate().map(|(k, &v)| (v, k)).collect();
        let mut mem: Vec<u64> = members.iter().map(|&v| super::resident(p, v)).collect();
        mem[0] = 0;
        *mem.last_mut().expect("b is a member") = 0;
        let mut arcs = Vec::new();
        let mut free = Vec::new();
        let mut tensors: Vec<TensorNode> = Vec::new();
        let mut tensor_node = std::collections::HashMap::new();
        for (from, &v) in members.iter().enumerate().filter(|&(_, &v)| v != b) {
            for &e in &p.out_edges[v] {
                let edge = &p.edges[e];
                let Some(&to) = index.get(&edge.target) else { continue };
                if p.group_of[v] == p.group_of[edge.target] {
                    arcs.push(Arc::Never { from, to });
                    continue;
                }
                if edge.tensors.is_empty() {
                    free.push((from, to));
                }
                for &t in &edge.tensors {
                    let node = *tensor_node.entry(t).or_insert_with(|| {
                        let tensor = &p.tensors[t];
                        let kept = p.memory[tensor.producer].retain_outputs;
                        let node = members.len() + tensors.len();
                        tensors.push(TensorNode {
                            node,
                            producer: from,
                            comm_us: tensor.comm_us,
                            kept_mem: if kept { tensor.bytes } else { 0 },
                        });
                        arcs.push(Arc::Send { from, tensor: tensors.len() - 1 });
                        node
                    });
                    arcs.push(Arc::Never { from: node, to });
                }
            }
        }
        // Bytes rounded down to a unit that keeps the flows' sums well within range.
        let copies = tensors.iter().map(|t| t.kept_mem);
        let total = mem.iter().copied().chain(copies).fold(0u64, u64::saturating_add);
        let unit = (total >> 24).max(1);
        for m in mem.iter_mut().chain(tensors.iter_mut().map(|t| &mut t.kept_mem)) {
            *m /= unit;
        }
        let mut work: Vec<u64> = members.iter().map(|&v| p.weights[v]).collect();
        work[0] = 0;
        *work.last_mut().expect("b is a member") = 0;
        let cuts_left = std::cell::Cell::new(CUTS_PER_SEGMENT);
        let transfers = std::cell::OnceCell::new();
        Self { index, arcs, free, weights: [mem, work], tensors, unit, cuts_left, transfers }
    }

    /// The split's menu for gaps of at least `least`: `(gap, bytes on a's device, bytes on
    /// b's device)`, by increasing gap. Each placement that splits the segment with a gap of
    /// at least `least` matches an entry with no larger gap and no more bytes on either side
    /// (`u64::MAX` bytes: no split has a gap in that entry's band).
    pub(super) fn menu(&self, least: u64, cheapest: u64) -> Vec<(u64, u64, u64)> {
        if self.weights[0].len() == 2 {
            // No inner nodes: `b`'s device receives every tensor from `a`.
            let copies: u64 = self.tensors.iter().map(|t| t.kept_mem).sum();
            return vec![(least, 0, copies.saturating_mul(self.unit))];
        }
        let all = |_: usize| true;
        let hulls = [
            [Side::A, Side::B].map(|side| self.hull(side, Kind::Memory, &all)),
            [Side::A, Side::B].map(|side| self.hull(side, Kind::Work, &all)),
        ];
        let corners = hulls.iter().flatten().flatten().flat_map(|h| h.corners.iter().copied());
        let comms = self.tensors.iter().map(|t| t.comm_us);
        let mut gaps: Vec<u64> = corners.chain(comms).collect();
        let largest = gaps.iter().copied().max().unwrap_or(least);
        let mut g = least;
        while g < largest {
            gaps.push(g);
            g = (g.saturating_mul(STEP_PER_MILLE) / 1_000).max(g + 1);
        }
        let entries = self.entries();
        let mut branched = Branched::default();
        let every: Vec<usize> = (0..self.tensors.len()).collect();
        for (kind, pair) in hulls.iter().enumerate() {
            for (side, hull) in pair.iter().enumerate() {
                branched.hulls.insert((side, kind, every.clone()), hull.clone());
            }
        }
        // The corners of the branches' hulls are gaps where the fewest bytes change too.
        for &gap in gaps.iter().filter(|&&g| g > least) {
            for side in [Side::A, Side::B] {
                branched.fewest(self, side, Kind::Memory, gap - 1);
            }
        }
        gaps.extend(branched.hulls.values().flatten().flat_map(|h| h.corners.iter().copied()));
        gaps.retain(|&g| g > least);
        gaps.push(least);
        gaps.sort_unstable();
        gaps.dedup();
        let per = gaps.len().div_ceil(MENU).max(1);
        let starts: Vec<u64> = gaps.iter().step_by(per).copied().collect();
        // Each band [starts[k], starts[k + 1]) keeps at least what its largest gap needs.
        starts
            .iter()
            .enumerate()
            .map(|(k, &gap)| {
                let limit = starts.get(k + 1).map_or(u64::MAX, |&next| next - 1);
                let mut fewest = |side: Side, kind: Kind| {
                    let hull = &hulls[kind as usize][side as usize];
                    let relaxed = hull.as_ref().map_or(u64::MAX, |h| h.fewest_within(limit));
                    relaxed.max(branched.fewest(self, side, kind, limit))
                };
                // Each side's inner nodes run on its device within the gap, after the first
                // tensor into them arrives (before the last one out of them leaves).
                let entry = |inner: &dyn Fn(&Entry) -> bool| {
                    let sent = entries.iter().filter(|e| inner(e) && e.least_cut <= limit);
                    sent.map(|e| e.comm_us).min().unwrap_or(0).max(cheapest)
                };
                let into_b =
                    entry(&|e| e.consumer_inner).saturating_add(fewest(Side::B, Kind::Work));
                let out_of_a =
                    entry(&|e| e.producer_inner).saturating_add(fewest(Side::A, Kind::Work));
                let gap = gap.max(into_b).max(out_of_a);
                let bytes = |units: u64| units.saturating_mul(self.unit);
                (gap, bytes(fewest(Side::A, Kind::Memory)), bytes(fewest(Side::B, Kind::Memory)))
            })
            .collect()
    }

    /// Every tensor and consumer of it in the segment, with the least transfer time of a split
    /// that sends the tensor to that consumer.
    fn entries(&self) -> Vec<Entry> {
        let last = self.weights[0].len() - 1;
        let all = |_: usize| true;
        let mut entries = Vec::new();
        for arc in &self.arcs {
            let Arc::Never { from, to } = *arc else { continue };
            // Tensor nodes follow the members.
            let tensor = from.checked_sub(self.weights[0].len());
            let Some(t) = tensor.and_then(|k| self.tensors.get(k)) else { continue };
            let forced = Some((t.producer, to));
            let least_cut = match self.cut_forcing(Side::A, Kind::Work, (1, 0), &all, forced) {
                Solved::Cut(cut) => cut.comm_us,
                Solved::Infeasible => continue,
                // Not known: as if any split could send it.
                Solved::Unknown => 0,
            };
            entries.push(Entry {
                comm_us: t.comm_us,
                least_cut,
                producer_inner: t.producer != 0,
                consumer_inner: to != last,
            });
        }
        // An edge without tensors crosses for free.
        entries.extend(self.free.iter().map(|&(from, to)| Entry {
            comm_us: 0,
            least_cut: 0,
            producer_inner: from != 0,
            consumer_inner: to != last,
        }));
        entries
    }

    /// The least total transfer time of a set of tensors cutting every path from `u` to `v`
    /// (nodes of the segment; [`super::tensor_cut`]); [`UNLIMITED`] or more when none can.
    pub(super) fn separating(&self, u: usize, v: usize) -> u64 {
        let transfers = self.transfers.get_or_init(|| self.network(&|t| self.tensors[t].comm_us));
        transfers.clone().max_flow(self.index[&u], self.index[&v])
    }

    /// The segment's network: each producer to its tensors' nodes at `capacity(tensor)`, each
    /// tensor's node to its consumers and each colocated edge never cut (an edge without
    /// tensors crosses for free: no arc).
    fn network(&self, capacity: &dyn Fn(usize) -> u64) -> Flow {
        let mut flow = Flow::new(self.weights[0].len() + self.tensors.len());
        for arc in &self.arcs {
            match *arc {
                Arc::Send { from, tensor } => {
                    flow.add(from, self.tensors[tensor].node, capacity(tensor));
                }
                Arc::Never { from, to } => flow.add(from, to, UNLIMITED),
            }
        }
        flow
    }

    /// The lower hull of one side's sets (transfer time, weight) among those that no tensor
    /// outside `crosses` leaves or enters; `None` when there is none. Out of cuts, a hull
    /// that bounds nothing.
    fn hull(&self, side: Side, kind: Kind, crosses: &dyn Fn(usize) -> bool) -> Option<Hull> {
        let nothing = Hull { lines: Vec::new(), least_comm: 0, fewest: 0, corners: Vec::new() };
        let kept = self.tensors.iter().map(|t| &t.kept_mem);
        let total_mem: u128 =
            self.weights[kind as usize].iter().chain(kept).map(|&k| u128::from(k)).sum();
        let total_comm: u128 = self.tensors.iter().map(|t| u128::from(t.comm_us)).sum();
        let mut lines = Vec::new();
        let mut cut = |n: u128, d: u128| match self.cut(side, kind, n, d, crosses) {
            Solved::Cut(cut) => {
                lines.push(Line { value: cut.value, n, d });
                Ok((cut.comm_us, cut.weight, cut.value))
            }
            Solved::Infeasible => Err(None),
            Solved::Unknown => Err(Some(())),
        };
        // Transfer time first (the fewest units among the least cuts), then units first.
        let (first, last) = match (cut(total_mem + 1, 1), cut(1, total_comm + 1)) {
            (Ok(first), Ok(last)) => (first, last),
            (Err(None), _) | (_, Err(None)) => return None,
            _ => return Some(nothing),
        };
        // Every set's `(total_comm + 1) · units + transfer time` is at least the last cut's
        // value, and its transfer time is below `total_comm + 1`.
        let fewest = (last.2 / (total_comm + 1)) as u64;
        let mut corners = vec![first.0, last.0];
        let mut pending = vec![((first.0, first.1), (last.0, last.1))];
        while let Some(((k1, b1), (k2, b2))) = pending.pop() {
            if corners.len() >= MAX_CUTS || k2 <= k1 || b1 <= b2 {
                continue;
            }
            let (n, d) = (u128::from(b1 - b2), u128::from(k2 - k1));
            let Ok((k, b, value)) = cut(n, d) else { continue };
            if value < d * u128::from(b1) + n * u128::from(k1) {
                corners.push(k);
                pending.push(((k1, b1), (k, b)));
                pending.push(((k, b), (k2, b2)));
            }
        }
        Some(Hull { lines, least_comm: first.0, fewest, corners })
    }

    /// The minimum of `d · weight + n · transfer time` over the sets of `side` that no tensor
    /// outside `crosses` leaves (or enters), the weight of `kind` (on `b`'s side, memory
    /// counts the copies received too).
    fn cut(
        &self,
        side: Side,
        kind: Kind,
        n: u128,
        d: u128,
        crosses: &dyn Fn(usize) -> bool,
    ) -> Solved {
        self.cut_forcing(side, kind, (n, d), crosses, None)
    }

    /// [`Sides::cut`] with `force = (u, v)` keeping `u` on the source side and `v` on the sink
    /// side.
    fn cut_forcing(
        &self,
        side: Side,
        kind: Kind,
        (n, d): (u128, u128),
        crosses: &dyn Fn(usize) -> bool,
        force: Option<(usize, usize)>,
    ) -> Solved {
        let Some(left) = self.cuts_left.get().checked_sub(1) else { return Solved::Unknown };
        self.cuts_left.set(left);
        // Copies stay on the receiver: b's side keeps those it receives.
        let copies = side == Side::B && kind == Kind::Memory;
        let weights = &self.weights[kind as usize];
        let tensor_cost = |t: &TensorNode| {
            n * u128::from(t.comm_us) + if copies { d * u128::from(t.kept_mem) } else { 0 }
        };
        let total: u128 = weights.iter().map(|&k| d * u128::from(k)).sum::<u128>()
            + self.tensors.iter().map(tensor_cost).sum::<u128>();
        if total >= u128::from(UNLIMITED) {
            return Solved::Unknown;
        }
        let (source, sink) = (0, weights.len() - 1);
        let mut flow = self.network(&|tensor| {
            if crosses(tensor) { tensor_cost(&self.tensors[tensor]) as u64 } else { UNLIMITED }
        });
        for (v, &weight) in weights.iter().enumerate().filter(|&(_, &weight)| weight > 0) {
            let capacity = (d * u128::from(weight)) as u64;
            match side {
                // A node on the source side is cut from the sink, one on the sink side from
                // the source.
                Side::A => flow.add(v, sink, capacity),
                Side::B => flow.add(source, v, capacity),
            }
        }
        if let Some((u, v)) = force {
            flow.add(source, u, UNLIMITED);
            flow.add(v, sink, UNLIMITED);
        }
        let value = flow.max_flow(source, sink);
        if value >= UNLIMITED {
            return Solved::Infeasible;
        }
        let near = flow.reachable(source);
        let crossing = || self.tensors.iter().filter(|t| near[t.producer] && !near[t.node]);
        let comm_us = crossing().map(|t| t.comm_us).sum();
        let received: u64 = if copies { crossing().map(|t| t.kept_mem).sum() } else { 0 };
        let kept = |v: &usize| if side == Side::B { !near[*v] } else { near[*v] };
        let weight = received + (0..weights.len()).filter(kept).map(|v| weights[v]).sum::<u64>();
        Solved::Cut(Cut { value: u128::from(value), comm_us, weight })
    }
}

/// The branching bound of each side, its hulls kept by the tensors they let cross.
#[derive(Default)]
struct Branched {
    hulls: std::collections::HashMap<(usize, usize, Vec<usize>), Option<Hull>>,
}

impl Branched {
    /// The least weight of a set of `side` whose crossing tensors take at most `limit`
    /// (`u64::MAX` when no set can): a set crosses no tensor above the time left, and at most
    /// one above half of it; each choice of that one (or none) is a branch, the time left
    /// shrinks by the one chosen, and each branch's own hull bounds the sets in it.
    fn fewest(&mut self, sides: &Sides, side: Side, kind: Kind, limit: u64) -> u64 {
        let mut leaves = 0;
        let measure = (side, kind);
        self.explore(sides, measure, limit, (&mut Vec::new(), &mut Vec::new()), limit, &mut leaves)
    }

    /// The branch that lets `chosen` cross, keeps `barred` from crossing, and has `left` of
    /// the time for the other tensors.
    fn explore(
        &mut self,
        sides: &Sides,
        measure: (Side, Kind),
        limit: u64,
        (chosen, barred): (&mut Vec<usize>, &mut Vec<usize>),
        left: u64,
        leaves: &mut usize,
    ) -> u64 {
        let comm = |t: usize| sides.tensors[t].comm_us;
        let open = |t: usize| !chosen.contains(&t) && !barred.contains(&t);
        let count = sides.tensors.len();
        let big: Vec<usize> =
            (0..count).filter(|&t| open(t) && (left / 2 + 1..=left).contains(&comm(t))).collect();
        let crossing = |most: u64, not: &[usize]| -> Vec<usize> {
            let may =
                |t: usize| chosen.contains(&t) || (open(t) && comm(t) <= most && !not.contains(&t));
            (0..count).filter(|&t| may(t)).collect()
        };
        if big.is_empty() || big.len() > MAX_BRANCH || *leaves >= MAX_LEAVES {
            *leaves += 1;
            return self.leaf(sides, measure, limit, crossing(left, &[]));
        }
        *leaves += 1;
        let mut fewest = self.leaf(sides, measure, limit, crossing(left / 2, &big));
        for &one in &big {
            chosen.push(one);
            let before = barred.len();
            barred.extend(big.iter().filter(|&&t| t != one));
            let branch = (&mut *chosen, &mut *barred);
            let one_left = left - comm(one);
            fewest = fewest.min(self.explore(sides, measure, limit, branch, one_left, leaves));
            barred.truncate(before);
            chosen.pop();
        }
        fewest
    }

    /// What the hull of the sets that cross only `crossing` allows within `limit`.
    fn leaf(
        &mut self,
        sides: &Sides,
        (side, kind): (Side, Kind),
        limit: u64,
        crossing: Vec<usize>,
    ) -> u64 {
        let key = (side as usize, kind as usize, crossing);
        let hull = self.hulls.entry(key).or_insert_with_key(|(.., may)| {
            let may: std::collections::HashSet<usize> = may.iter().copied().collect();
            sides.hull(side, kind, &|t| may.contains(&t))
        });
        hull.as_ref().map_or(u64::MAX, |h| h.fewest_within(limit))
    }
}

/// The lower hull of a side's sets in (transfer time, weight).
#[derive(Clone)]
struct Hull {
    /// Lines below which no set lies.
    lines: Vec<Line>,
    /// The least transfer time of any set.
    least_comm: u64,
    /// The least weight of any set.
    fewest: u64,
    /// Transfer times of the hull's corners.
    corners: Vec<u64>,
}

impl Hull {
    /// The least weight of a set whose transfer time is at most `limit` (`u64::MAX`
    /// when no set's is).
    fn fewest_within(&self, limit: u64) -> u64 {
        if self.least_comm > limit {
            return u64::MAX;
        }
        bound(&self.lines, limit).max(self.fewest)
    }
}

/// The least weight any side of transfer time at most `gap` holds, by `lines`.
fn bound(lines: &[Line], gap: u64) -> u64 {
    lines
        .iter()
        .map(|l| {
            let spent = l.n * u128::from(gap);
            if l.value > spent { ((l.value - spent) / l.d) as u64 } else { 0 }
        })
        .max()
        .unwrap_or(0)
}
