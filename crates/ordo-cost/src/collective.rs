//! Collective operations costed as NCCL runs them: ring and tree all-reduce, hierarchical
//! all-reduce across nodes, reduce-scatter and all-gather.
//!
//! A group of `R` ranks either sits on one node (every rank's link to the next is
//! [`Collectives::intra`]) or spreads over `m` nodes with `g` ranks each
//! ([`Collectives::inter`]: `g` ranks per node, each with its own link to the network, as on
//! servers with one network card per GPU). Times come from counting the bytes each link
//! carries:
//!
//! * **Ring** (NCCL's ring, one channel per network card): `2 (R - 1)` steps, each moving
//!   `bytes / R` from every rank to the next. On one node a step costs `lat + bytes / R /
//!   bw_intra`. Across nodes NCCL runs `g` rings side by side, each leaving a node through a
//!   different rank's card, so a rank sends `(g - 1) / g` of its traffic over the node's
//!   links and `1 / g` over its card: a step costs `lat_inter + bytes / R * max((g - 1) / g /
//!   bw_intra, 1 / (g bw_inter))`. That is NCCL's bus bandwidth: `busbw = algbw * 2 (R - 1)
//!   / R` equals `bw_intra` on one node and `min(g / (g - 1) bw_intra, g bw_inter)` across
//!   nodes (`nccl-tests`' `doc/PERFORMANCE.md`).
//! * **Tree** (NCCL's double binary tree across nodes, a chain inside each node): the data is
//!   reduced up and broadcast down, each half along one of two trees, so each rank's node links
//!   carry `2 bytes` and each node's `g` cards `2 bytes` together; the latency is that of
//!   `2 ceil(log2 m)` network hops and `2 (g - 1)` node hops. It wins on small messages,
//!   where the ring's `2 (R - 1)` latencies dominate.
//! * **Hierarchical**: reduce-scatter among a node's `g` ranks, ring all-reduce of each
//!   rank's `bytes / g` among the `m` nodes (one ring per card), all-gather inside the node.
//! * [`AllReduceAlgorithm::Nccl`] takes the faster of ring and tree for each size, as NCCL's
//!   tuner does.
//!
//! Reduce-scatter and all-gather run the ring's first or second half: `R - 1` steps of `bytes
//! / R`, where `bytes` is the whole buffer (before scattering, after gathering): `busbw =
//! algbw * (R - 1) / R`.

use std::fmt;

use crate::model::{CommModel, round_us};

/// How an all-reduce runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AllReduceAlgorithm {
    /// NCCL's ring (the only algorithm on one node before ordo modelled nodes).
    #[default]
    Ring,
    /// NCCL's double binary tree across nodes, a chain inside each.
    Tree,
    /// Reduce-scatter inside each node, all-reduce across nodes, all-gather inside each node.
    Hierarchical,
    /// The faster of ring and tree for each size, as NCCL's tuner picks.
    Nccl,
}

impl AllReduceAlgorithm {
    /// Every algorithm, in the order above.
    pub const ALL: [AllReduceAlgorithm; 4] =
        [Self::Ring, Self::Tree, Self::Hierarchical, Self::Nccl];

    /// `ring`, `tree`, `hierarchical`, `nccl`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ring => "ring",
            Self::Tree => "tree",
            Self::Hierarchical => "hierarchical",
            Self::Nccl => "nccl",
        }
    }

    /// The algorithm called `name` ([`AllReduceAlgorithm::as_str`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl fmt::Display for AllReduceAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The ranks of a group on several nodes: `per_node` on each, each with `link` to the
/// network.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InterNode {
    /// Ranks of the group on each node, at least 1.
    pub per_node: usize,
    /// One rank's path to a rank on another node: its network card's bandwidth (divided by the
    /// network's oversubscription) and the network's latency.
    pub link: CommModel,
}

/// The links a collective group runs over and the all-reduce algorithm it uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Collectives {
    /// A rank's link to another rank on its node.
    pub intra: CommModel,
    /// Where the group spans nodes: ranks per node and the network; `None`: every rank on one
    /// node (or nodes joined as well as the ranks of one).
    pub inter: Option<InterNode>,
    /// The all-reduce algorithm.
    pub algorithm: AllReduceAlgorithm,
}

impl From<CommModel> for Collectives {
    fn from(intra: CommModel) -> Self {
        Self::flat(intra)
    }
}

impl Collectives {
    /// A group on one node, every rank linked to the next by `intra`, all-reducing by ring.
    pub fn flat(intra: CommModel) -> Self {
        Self { intra, inter: None, algorithm: AllReduceAlgorithm::Ring }
    }

    /// The same links with `algorithm`.
    pub fn with_algorithm(self, algorithm: AllReduceAlgorithm) -> Self {
        Self { algorithm, ..self }
    }

    /// `(g, m)`: ranks per node and nodes of a group of `ranks` (`(ranks, 1)` on one node);
    /// the last node may hold fewer.
    pub fn layout(&self, ranks: usize) -> (usize, usize) {
        match self.inter {
            Some(inter) if ranks > inter.per_node.max(1) => {
                let g = inter.per_node.max(1);
                (g, ranks.div_ceil(g))
            }
            _ => (ranks, 1),
        }
    }

    /// Time in µs of an all-reduce of `bytes` on each of `ranks` ranks; 0 for one rank.
    pub fn all_reduce_us(&self, ranks: usize, bytes: u64) -> u64 {
        match self.algorithm {
            AllReduceAlgorithm::Ring => self.ring_us(ranks, bytes, 2),
            AllReduceAlgorithm::Tree => self.tree_us(ranks, bytes),
            AllReduceAlgorithm::Hierarchical => self.hierarchical_us(ranks, bytes),
            AllReduceAlgorithm::Nccl => {
                self.ring_us(ranks, bytes, 2).min(self.tree_us(ranks, bytes))
            }
        }
    }

    /// Time in µs of a reduce-scatter of a `bytes` buffer on each of `ranks` ranks (each
    /// keeps `bytes / ranks` of the sum): the ring's first half.
    pub fn reduce_scatter_us(&self, ranks: usize, bytes: u64) -> u64 {
        self.ring_us(ranks, bytes, 1)
    }

    /// Time in µs of an all-gather into a `bytes` buffer on each of `ranks` ranks (each gives
    /// `bytes / ranks`): the ring's second half.
    pub fn all_gather_us(&self, ranks: usize, bytes: u64) -> u64 {
        self.ring_us(ranks, bytes, 1)
    }

    /// `halves * (R - 1)` ring steps of `bytes / R`.
    fn ring_us(&self, ranks: usize, bytes: u64, halves: usize) -> u64 {
        if ranks < 2 {
            return 0;
        }
        let steps = (halves * (ranks - 1)) as f64;
        let chunk = bytes as f64 / ranks as f64;
        let (g, m) = self.layout(ranks);
        let step_us = match self.inter {
            Some(inter) if m > 1 => {
                let g = g as f64;
                let per_byte =
                    ((g - 1.0) / g * self.intra.us_per_byte).max(inter.link.us_per_byte / g);
                inter.link.fixed_us.max(self.intra.fixed_us) + chunk * per_byte
            }
            // The expression of `CommModel::ring_all_reduce_us`, so that one node costs as
            // before nodes were modelled.
            _ => self.intra.fixed_us + self.intra.us_per_byte * chunk,
        };
        round_us(steps * step_us)
    }

    /// Double binary tree across nodes, a chain of `g` ranks inside each. The chain and the
    /// trees are pipelined: their bandwidth terms overlap, their latencies add.
    fn tree_us(&self, ranks: usize, bytes: u64) -> u64 {
        if ranks < 2 {
            return 0;
        }
        let (g, m) = self.layout(ranks);
        let bytes = bytes as f64;
        let (mut latency, mut chain, mut network) = (0.0, 0.0, 0.0);
        if g > 1 {
            latency += 2.0 * (g - 1) as f64 * self.intra.fixed_us;
            chain = 2.0 * bytes * self.intra.us_per_byte;
        }
        if let Some(inter) = self.inter.filter(|_| m > 1) {
            latency += 2.0 * (m as f64).log2().ceil() * inter.link.fixed_us;
            network = 2.0 * bytes * inter.link.us_per_byte / g as f64;
        }
        round_us(latency + chain.max(network))
    }

    /// Reduce-scatter on each node, all-reduce across nodes, all-gather on each node.
    fn hierarchical_us(&self, ranks: usize, bytes: u64) -> u64 {
        let (g, m) = self.layout(ranks);
        let on_node = Collectives::flat(self.intra);
        let inside = on_node.ring_us(g, bytes, 2);
        let across = match self.inter {
            Some(inter) if m > 1 => {
                Collectives::flat(inter.link).ring_us(m, bytes.div_ceil(g as u64), 2)
            }
            _ => 0,
        };
        inside + across
    }
}

impl fmt::Display for Collectives {
    /// The intra-node link as [`CommModel`] shows it (all of it for a flat ring group), then
    /// the network and the algorithm where they differ.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.intra)?;
        if let Some(inter) = self.inter {
            write!(f, " on a node; {} per node, network {}", inter.per_node, inter.link)?;
        }
        if self.algorithm != AllReduceAlgorithm::Ring {
            write!(f, "; {} all-reduce", self.algorithm)?;
        }
        Ok(())
    }
}
