//! Cluster descriptions: the devices a graph is placed on and the links between them.
//!
//! A [`Cluster`] has devices ([`DeviceSpec`]: memory, peak FLOP/s, memory bandwidth, launch
//! overhead, parallelism) and a link ([`LinkSpec`]: latency and bandwidth) for every ordered pair of
//! devices. It gives each device's [`Roofline`] for compute times and each pair's
//! [`CommModel`] for transfer times, so the rest of the cost model works unchanged.
//!
//! Clusters are JSON files with `"format": "ordo.cluster/1"` (the schema is in
//! `doc/cluster.md`); ordo ships descriptions of V100, A100 and H100 servers and of CPU cores
//! ([`Cluster::builtin`]), and [`Cluster::baechi`] gives Baechi's default model.
//!
//! ```
//! use ordo_cost::Cluster;
//! let text = r#"{"format": "ordo.cluster/1", "name": "two",
//!   "device": {"kind": "gpu", "memory_bytes": "16GiB", "peak_flops": 15.7e12,
//!              "memory_bandwidth": 900e9},
//!   "count": 2,
//!   "interconnect": {"latency_us": 10, "bandwidth_bytes_per_s": 12e9}}"#;
//! let cluster = Cluster::parse(text, "two.json")?;
//! assert_eq!(cluster.memory_limits(), [16 << 30, 16 << 30]);
//! assert_eq!(cluster.device(1).name, "gpu1");
//! // 10 µs + 12e6 bytes / 12e9 bytes/s = 1010 µs.
//! assert_eq!(cluster.comm(0, 1).time_us(12_000_000), 1010);
//! # Ok::<(), ordo_cost::ClusterError>(())
//! ```

mod builtin;
mod check;
mod error;
mod schema;
mod spec;
mod write;

use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::model::{CommModel, Roofline};
pub use error::ClusterError;
use schema::ClusterFile;
pub use spec::{DeviceKind, DeviceSpec, LinkSpec, NetworkSpec, Topology};

use crate::collective::{Collectives, InterNode};

/// The `format` of cluster files this build reads and writes.
pub(crate) const FORMAT: &str = "ordo.cluster/1";

/// The most devices a node may have (its link table has one entry per ordered pair), and the
/// most devices a placement may use.
pub const MAX_DEVICES: usize = 1024;

/// The most devices a cluster of nodes may have in all: 2^20 (1,048,576).
pub const MAX_CLUSTER_DEVICES: usize = 1 << 20;

/// A cluster: nodes of identical devices, the link between every ordered pair of a node's
/// devices, and the network between nodes.
///
/// Devices are numbered node by node: device `d` is device `d % G` of node `d / G`, where `G`
/// is [`Cluster::devices_per_node`]. A cluster without `nodes` is one node.
///
/// Built by reading a description ([`Cluster::read`], [`Cluster::parse`], serde), from a
/// shipped one ([`Cluster::builtin`]), or in code ([`Cluster::new`], [`Cluster::uniform`],
/// [`Cluster::baechi`]); every way checks the numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// Name (`a100x8-nvlink`).
    pub name: String,
    /// What the cluster is, in words.
    pub description: Option<String>,
    /// Where the numbers come from (data sheets, measurements).
    pub source: Option<String>,
    /// One node's devices.
    devices: Vec<DeviceSpec>,
    /// `links[from * n + to]` inside a node; the diagonal holds [`LinkSpec::LOCAL`].
    links: Vec<LinkSpec>,
    /// Nodes, at least 1.
    nodes: usize,
    /// The network between nodes (required for more than one node).
    network: Option<NetworkSpec>,
    /// For the cluster seen by tensor-parallel groups ([`Cluster::tensor_parallel_groups`]):
    /// the link between a group's ranks, inside a node (`None` for a cluster of devices).
    tensor_parallel_link: Option<LinkSpec>,
}

impl Cluster {
    /// A cluster of `devices` joined pairwise by `link`. Errors name the cluster as the
    /// origin.
    ///
    /// # Errors
    /// No devices, more than [`MAX_DEVICES`], a repeated name, or a number out of range.
    pub fn new(
        name: impl Into<String>,
        devices: Vec<DeviceSpec>,
        link: LinkSpec,
    ) -> Result<Self, ClusterError> {
        let name = name.into();
        let origin = name.clone();
        check::assemble(name, devices, Some(link), Vec::new(), &origin)
    }

    /// The same cluster with `memory_bytes` of memory on every device (a smaller card of the
    /// same kind, or a budget below what the card has).
    pub fn with_memory(mut self, memory_bytes: u64) -> Self {
        for device in &mut self.devices {
            device.memory_bytes = memory_bytes;
        }
        self
    }

    /// `count` copies of `device` named `<device.name><i>` (`gpu0`, `gpu1`, ...), joined
    /// pairwise by `link`.
    ///
    /// # Errors
    /// As [`Cluster::new`].
    pub fn uniform(
        name: impl Into<String>,
        device: DeviceSpec,
        count: usize,
        link: LinkSpec,
    ) -> Result<Self, ClusterError> {
        let name = name.into();
        if count > MAX_DEVICES {
            let problem = format!("{count} devices; at most {MAX_DEVICES}");
            return Err(ClusterError::Cluster { origin: name, problem });
        }
        let devices = (0..count)
            .map(|i| DeviceSpec { name: format!("{}{i}", device.name), ..device.clone() })
            .collect();
        Self::new(name, devices, link)
    }

    /// Baechi's default model: `n_devices` identical GPUs `gpu0`, `gpu1`, ... with
    /// `memory_bytes` each (unlimited, `u64::MAX`, for `None`), computing as
    /// [`Roofline::baechi_default`] and linked as [`CommModel::baechi_default`], so that costs
    /// match Baechi's.
    ///
    /// # Panics
    /// If `n_devices` is 0 or more than [`MAX_DEVICES`].
    pub fn baechi(n_devices: usize, memory_bytes: Option<u64>) -> Self {
        assert!((1..=MAX_DEVICES).contains(&n_devices), "{n_devices} devices");
        let roofline = Roofline::baechi_default();
        let devices = (0..n_devices)
            .map(|i| DeviceSpec {
                name: format!("gpu{i}"),
                kind: DeviceKind::Gpu,
                memory_bytes: memory_bytes.unwrap_or(u64::MAX),
                peak_flops: roofline.flops_per_s,
                memory_bandwidth: roofline.bytes_per_s,
                launch_overhead_us: roofline.overhead_us,
                parallelism: roofline.parallelism,
                half_precision_flops: None,
            })
            .collect();
        let n = n_devices;
        let links = (0..n * n)
            .map(|k| if k / n == k % n { LinkSpec::LOCAL } else { LinkSpec::baechi_default() })
            .collect();
        Cluster {
            name: format!("baechi-{n}"),
            description: Some(format!(
                "{n} device{} with Baechi's default cost model",
                if n == 1 { "" } else { "s" }
            )),
            source: Some(
                "Baechi's defaults: V100 fp32 roofline (15.7e12 FLOP/s, 900e9 B/s, 5 us per op); \
                 --comm_cost_coeffs=0.0001754,134"
                    .into(),
            ),
            devices,
            links,
            nodes: 1,
            network: None,
            tensor_parallel_link: None,
        }
    }

    /// The same node `nodes` times, joined by `network` (the cluster's network for `None`).
    /// Errors name the cluster as the origin.
    ///
    /// # Errors
    /// No nodes, more than [`MAX_CLUSTER_DEVICES`] devices in all, several nodes and no
    /// network, or a network number out of range.
    pub fn with_nodes(
        mut self,
        nodes: usize,
        network: Option<NetworkSpec>,
    ) -> Result<Self, ClusterError> {
        let network = network.or(self.network);
        check::check_nodes(nodes, network.as_ref(), self.devices.len(), &self.name)?;
        self.nodes = nodes;
        self.network = network;
        Ok(self)
    }

    /// The cluster seen by groups of `ranks` consecutive devices of a node (tensor-parallel
    /// groups): each node keeps devices `0, ranks, 2 ranks, ...`, one for each group, with the
    /// links among them, the same nodes and network; named `<name>/tp<ranks>`. A pipeline of
    /// tensor-parallel stages is planned on it, one device standing for each stage's group
    /// (each rank computes alike).
    ///
    /// # Errors
    /// `ranks` of 0, or not dividing a node's devices.
    pub fn tensor_parallel_groups(&self, ranks: usize) -> Result<Self, ClusterError> {
        let g = self.devices.len();
        if ranks == 0 || !g.is_multiple_of(ranks) {
            let problem =
                format!("{ranks} tensor-parallel ranks do not divide a node's {g} devices");
            return Err(ClusterError::Cluster { origin: self.name.clone(), problem });
        }
        if ranks == 1 {
            return Ok(self.clone());
        }
        let kept: Vec<usize> = (0..g).step_by(ranks).collect();
        let links = kept
            .iter()
            .flat_map(|&from| kept.iter().map(move |&to| (from, to)))
            .map(|(from, to)| self.links[from * g + to])
            .collect();
        Ok(Cluster {
            name: format!("{}/tp{ranks}", self.name),
            devices: kept.iter().map(|&d| self.devices[d].clone()).collect(),
            links,
            tensor_parallel_link: Some(self.links[1]),
            ..self.clone()
        })
    }

    /// How a tensor-parallel group's collectives run: over a node's links (the link between
    /// a group's ranks for the cluster seen by the groups, which keeps one device of each),
    /// in a ring as NCCL runs them inside a node.
    pub fn tensor_parallel_collectives(&self) -> Collectives {
        match self.tensor_parallel_link {
            Some(link) => Collectives::flat(link.comm()),
            None => self.collectives(self.devices.len(), 1),
        }
    }

    /// Replaces the link from device `from` to device `to` of every node (one direction;
    /// indices within a node).
    ///
    /// # Errors
    /// `from == to`, or a number out of range.
    ///
    /// # Panics
    /// If either index is not a device of a node.
    pub fn set_link(&mut self, from: usize, to: usize, link: LinkSpec) -> Result<(), ClusterError> {
        let n = self.devices.len();
        assert!(from < n && to < n, "link {from} -> {to} in a node of {n} devices");
        let label = format!("link {} -> {}", self.devices[from].name, self.devices[to].name);
        if from == to {
            let problem = "joins a device to itself".to_string();
            return Err(ClusterError::Link { origin: self.name.clone(), link: label, problem });
        }
        check::check_link(&link, &self.name, &label)?;
        self.links[from * n + to] = link;
        Ok(())
    }

    /// Reads and checks a cluster file. Errors name the file as `path` shows it.
    ///
    /// # Errors
    /// [`crate::FileError::Read`] when the file cannot be read; otherwise as [`Cluster::parse`].
    pub fn read(path: impl AsRef<Path>) -> Result<Self, ClusterError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| crate::FileError::Read { origin: origin.clone(), source })?;
        Self::parse(&text, &origin)
    }

    /// Parses and checks a cluster description. `origin` (usually the file name) starts every
    /// message.
    ///
    /// # Errors
    /// Malformed JSON, a wrong type or unknown key ([`ClusterError::Json`], with the line); a
    /// missing or unknown `format`; no devices; a device or link with a number out of range, a
    /// repeated device name, a link naming an unknown device, a pair of devices with no link.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ClusterError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| ClusterError::json(origin, &e))?;
        let Value::Object(map) = &value else {
            let problem = format!("the top level is {}, not an object", describe(&value));
            return Err(ClusterError::Cluster { origin: origin.into(), problem });
        };
        // Checked before the rest, so that a file of a later version says so.
        match map.get("format") {
            Some(Value::String(format)) if format == FORMAT => {}
            found => {
                let found = found.map(Value::to_string);
                return Err(ClusterError::Format { origin: origin.into(), found });
            }
        }
        let file: ClusterFile =
            serde_json::from_str(text).map_err(|e| ClusterError::json(origin, &e))?;
        file.into_cluster(origin)
    }

    /// A shipped cluster by name (see [`Cluster::builtin_names`]), or `None`.
    pub fn builtin(name: &str) -> Option<Self> {
        let text = builtin::text(name)?;
        let origin = format!("shipped cluster {name}");
        Some(Self::parse(text, &origin).expect("shipped clusters are valid"))
    }

    /// The names of the shipped clusters: `v100x4-nvlink`, ..., `h100x8-pcie`, `cpu`.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        builtin::names()
    }

    /// The description as JSON laid out as the shipped files are: the compact form when all
    /// devices are alike and named `<prefix><i>`, the most common link as `interconnect` and
    /// the others under `links`, one per line.
    pub fn to_json_string(&self) -> String {
        write::to_string(&ClusterFile::from_cluster(self)) + "\n"
    }

    /// Writes the description to `path` as [`Cluster::to_json_string`] formats it.
    ///
    /// # Errors
    /// [`crate::FileError::Write`] when the file cannot be written.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), ClusterError> {
        let path = path.as_ref();
        let text = self.to_json_string();
        let origin = path.display().to_string();
        crate::write_atomically(path, |out| out.write_all(text.as_bytes()))
            .map_err(|source| crate::FileError::Write { origin, source })?;
        Ok(())
    }

    /// Number of devices on all nodes (at least 1).
    pub fn device_count(&self) -> usize {
        self.devices.len() * self.nodes
    }

    /// Number of nodes (at least 1).
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// Devices on each node (at least 1).
    pub fn devices_per_node(&self) -> usize {
        self.devices.len()
    }

    /// The network between nodes, where the cluster has one.
    pub fn network(&self) -> Option<&NetworkSpec> {
        self.network.as_ref()
    }

    /// One node's devices, in order (every node's are alike).
    pub fn node_devices(&self) -> &[DeviceSpec] {
        &self.devices
    }

    /// Device `d` of the cluster: device `d % G` of node `d / G`, named as on its node in a
    /// one-node cluster and `node<k>.<name>` otherwise.
    ///
    /// # Panics
    /// If `d` is not a device.
    pub fn device(&self, d: usize) -> DeviceSpec {
        let n = self.device_count();
        assert!(d < n, "device {d} in a cluster of {n} devices");
        let (node, local) = (d / self.devices.len(), d % self.devices.len());
        let spec = self.devices[local].clone();
        if self.nodes == 1 {
            spec
        } else {
            DeviceSpec { name: format!("node{node}.{}", spec.name), ..spec }
        }
    }

    /// The index of the device called `name` ([`Cluster::device`]'s names).
    pub fn device_index(&self, name: &str) -> Option<usize> {
        let (node, local) = match name.strip_prefix("node").and_then(|rest| rest.split_once('.')) {
            Some((node, local)) if self.nodes > 1 => (node.parse::<usize>().ok()?, local),
            _ if self.nodes == 1 => (0, name),
            _ => return None,
        };
        let local = self.devices.iter().position(|d| d.name == local)?;
        (node < self.nodes).then(|| node * self.devices.len() + local)
    }

    /// Each device's memory in bytes (`u64::MAX` for unlimited), all nodes'.
    pub fn memory_limits(&self) -> Vec<u64> {
        let node: Vec<u64> = self.devices.iter().map(|d| d.memory_bytes).collect();
        node.repeat(self.nodes)
    }

    /// The link from device `from` to device `to`: the node's link between them when they
    /// share a node ([`LinkSpec::LOCAL`] when they are the same), the network's
    /// ([`NetworkSpec::link`]) otherwise.
    ///
    /// # Panics
    /// If either index is not a device.
    pub fn link(&self, from: usize, to: usize) -> LinkSpec {
        let n = self.device_count();
        assert!(from < n && to < n, "link {from} -> {to} in a cluster of {n} devices");
        let g = self.devices.len();
        match &self.network {
            Some(network) if from / g != to / g => network.link(),
            _ => self.links[(from % g) * g + to % g],
        }
    }

    /// The links of a collective group of `ranks` ranks, consecutive ranks `stride` devices
    /// apart (1 for data-parallel replicas; the copies of one stage of `stride`-device
    /// pipelines laid one after another): `G / stride` of them share a node of `G` devices (1
    /// when a stride spans nodes), and a group that fits on one node never touches the
    /// network. A rank's link to the next on its node is device 0's to device 1; the
    /// all-reduce is [`crate::AllReduceAlgorithm::Ring`].
    pub fn collectives(&self, ranks: usize, stride: usize) -> Collectives {
        let g = self.devices.len();
        let stride = stride.max(1);
        let per_node = (g / stride).max(1);
        let intra = if g > 1 { self.comm(0, 1) } else { self.network_comm() };
        let on_one_node = stride <= g && ranks <= per_node;
        let inter = self.network.filter(|_| !on_one_node).map(|network| InterNode {
            per_node: per_node.min(ranks.max(1)),
            link: network.link().comm(),
        });
        Collectives { inter, ..Collectives::flat(intra) }
    }

    /// The network's link as a [`CommModel`], or Baechi's default link for a cluster of one
    /// device and no network.
    fn network_comm(&self) -> CommModel {
        self.network.map_or_else(CommModel::baechi_default, |network| network.link().comm())
    }

    /// Transfer time model from device `from` to device `to` ([`LinkSpec::comm`]); free from a
    /// device to itself.
    ///
    /// # Panics
    /// If either index is not a device.
    pub fn comm(&self, from: usize, to: usize) -> CommModel {
        self.link(from, to).comm()
    }

    /// Compute time model of `device` ([`DeviceSpec::roofline`]).
    ///
    /// # Panics
    /// If `device` is not a device.
    pub fn roofline(&self, device: usize) -> Roofline {
        let n = self.device_count();
        assert!(device < n, "device {device} in a cluster of {n} devices");
        self.devices[device % self.devices.len()].roofline()
    }

    /// Whether every link between two different devices is the same (the network's too).
    pub fn is_uniform_links(&self) -> bool {
        let n = self.devices.len();
        let network = self.network.filter(|_| self.nodes > 1).map(|network| network.link());
        let mut others =
            (0..n * n).filter(|k| k / n != k % n).map(|k| self.links[k]).chain(network);
        match others.next() {
            Some(first) => others.all(|l| l == first),
            None => true,
        }
    }

    /// Whether every device computes alike (same FLOP/s, bandwidth, launch overhead and
    /// parallelism; memory may differ).
    pub fn is_uniform_compute(&self) -> bool {
        let first = self.roofline(0);
        (1..self.device_count()).all(|d| self.roofline(d) == first)
    }
}

impl Serialize for Cluster {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ClusterFile::from_cluster(self).serialize(serializer)
    }
}

/// Reads the file form and checks it as [`Cluster::parse`] does, with `cluster` as the origin
/// in messages.
impl<'de> Deserialize<'de> for Cluster {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let file = ClusterFile::deserialize(deserializer)?;
        file.into_cluster("cluster").map_err(serde::de::Error::custom)
    }
}

/// `a list`, `a number`, ... for messages.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
