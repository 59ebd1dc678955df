//! The file form of a cluster description (`"format": "ordo.cluster/1"`) and the conversions
//! between it and [`Cluster`].

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::check::{assemble, check_device, check_nodes};
use super::{
    Cluster, ClusterError, DeviceKind, DeviceSpec, FORMAT, LinkSpec, MAX_DEVICES, NetworkSpec,
    Topology,
};
use crate::bytes::{exact_bytes_text, parse_bytes};

/// Launch overhead of a device whose spec leaves it out: Baechi's 5 µs per op.
const DEFAULT_LAUNCH_OVERHEAD_US: f64 = 5.0;

/// Parallelism of a device whose spec leaves it out: 1, so that every kernel fills the device
/// and a file written before occupancy was modelled costs ops as it did then.
const DEFAULT_PARALLELISM: u64 = 1;

/// A whole file. Either `device` + `count` (the compact form) or `devices` (the explicit form).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClusterFile {
    format: String,
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    device: Option<DeviceEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    devices: Option<Vec<DeviceEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interconnect: Option<LinkEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    links: Vec<LinkOverride>,
    /// Nodes like the one the devices above make (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nodes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    network: Option<NetworkEntry>,
}

/// The network between nodes: `"topology": "fat-tree"`, with an optional oversubscription.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkEntry {
    topology: TopologyName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    oversubscription: Option<f64>,
    latency_us: f64,
    bandwidth_bytes_per_s: f64,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
enum TopologyName {
    #[serde(rename = "fat-tree")]
    FatTree,
}

impl NetworkEntry {
    fn spec(self) -> NetworkSpec {
        let TopologyName::FatTree = self.topology;
        NetworkSpec {
            topology: Topology::FatTree { oversubscription: self.oversubscription.unwrap_or(1.0) },
            latency_us: self.latency_us,
            bandwidth_bytes_per_s: self.bandwidth_bytes_per_s,
        }
    }

    fn from_spec(network: &NetworkSpec) -> Self {
        let Topology::FatTree { oversubscription } = network.topology;
        NetworkEntry {
            topology: TopologyName::FatTree,
            oversubscription: (oversubscription != 1.0).then_some(oversubscription),
            latency_us: network.latency_us,
            bandwidth_bytes_per_s: network.bandwidth_bytes_per_s,
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    kind: DeviceKind,
    memory_bytes: ByteCount,
    peak_flops: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    half_precision_flops: Option<f64>,
    memory_bandwidth: f64,
    #[serde(default = "default_launch_overhead", alias = "kernel_overhead_us")]
    launch_overhead_us: f64,
    #[serde(default = "default_parallelism")]
    parallelism: u64,
}

fn default_launch_overhead() -> f64 {
    DEFAULT_LAUNCH_OVERHEAD_US
}

fn default_parallelism() -> u64 {
    DEFAULT_PARALLELISM
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkEntry {
    latency_us: f64,
    bandwidth_bytes_per_s: f64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LinkOverride {
    pub(super) from: String,
    pub(super) to: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) one_way: bool,
    pub(super) latency_us: f64,
    pub(super) bandwidth_bytes_per_s: f64,
}

impl ClusterFile {
    /// Checks the file and builds the cluster; messages start with `origin`.
    pub(super) fn into_cluster(self, origin: &str) -> Result<Cluster, ClusterError> {
        if self.format != FORMAT {
            let found = Some(Value::from(self.format).to_string());
            return Err(ClusterError::Format { origin: origin.into(), found });
        }
        let whole = |problem: String| ClusterError::Cluster { origin: origin.into(), problem };
        if self.name.trim().is_empty() {
            return Err(whole("\"name\" is empty".into()));
        }
        let devices = match (self.device, self.count, self.devices) {
            (Some(entry), Some(count), None) => {
                if count == 0 {
                    return Err(whole("no devices: \"count\" is 0".into()));
                }
                if count > MAX_DEVICES as u64 {
                    return Err(whole(format!("\"count\" is {count}; at most {MAX_DEVICES}")));
                }
                let prefix = entry.name.clone().unwrap_or_else(|| entry.kind.to_string());
                let spec = entry.into_spec(String::new());
                check_device(&spec, origin, "\"device\"")?;
                (0..count)
                    .map(|i| DeviceSpec { name: format!("{prefix}{i}"), ..spec.clone() })
                    .collect()
            }
            (None, None, Some(list)) => {
                if list.is_empty() {
                    return Err(whole("no devices: \"devices\" is empty".into()));
                }
                let mut devices = Vec::with_capacity(list.len());
                for (i, entry) in list.into_iter().enumerate() {
                    let Some(name) = entry.name.clone() else {
                        let problem = "has no \"name\"".to_string();
                        let device = format!("devices[{i}]");
                        return Err(ClusterError::Device {
                            origin: origin.into(),
                            device,
                            problem,
                        });
                    };
                    devices.push(entry.into_spec(name));
                }
                devices
            }
            (Some(_), None, None) => return Err(whole("\"device\" needs a \"count\"".into())),
            (None, None, None) => {
                return Err(whole(
                    "no devices: give \"device\" and \"count\", or \"devices\"".into(),
                ));
            }
            _ => {
                return Err(whole(
                    "give either \"device\" and \"count\" (identical devices) or \"devices\" (a \
                     list), not both"
                        .into(),
                ));
            }
        };
        let default = self.interconnect.map(LinkEntry::spec);
        let mut cluster = assemble(self.name, devices, default, self.links, origin)?;
        cluster.description = self.description;
        cluster.source = self.source;
        let nodes = usize::try_from(self.nodes.unwrap_or(1)).unwrap_or(usize::MAX);
        let network = self.network.map(NetworkEntry::spec);
        check_nodes(nodes, network.as_ref(), cluster.devices.len(), origin)?;
        cluster.nodes = nodes;
        cluster.network = network;
        Ok(cluster)
    }

    /// The file form of `cluster`: compact when its devices are alike and named `<prefix><i>`,
    /// the most common link as `interconnect` and the others as `links`.
    pub(super) fn from_cluster(cluster: &Cluster) -> Self {
        let devices = cluster.node_devices();
        let first = &devices[0];
        let prefix = first.name.strip_suffix('0').filter(|prefix| {
            devices.iter().enumerate().all(|(i, d)| {
                d.name == format!("{prefix}{i}")
                    && DeviceSpec { name: first.name.clone(), ..d.clone() } == *first
            })
        });
        let (device, count, list) = match prefix {
            Some(prefix) => {
                let mut entry = DeviceEntry::from_spec(first);
                entry.name = (prefix != first.kind.to_string()).then(|| prefix.to_string());
                (Some(entry), Some(devices.len() as u64), None)
            }
            None => (None, None, Some(devices.iter().map(DeviceEntry::from_spec).collect())),
        };
        let n = devices.len();
        let default = most_common_link(cluster);
        let mut links = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                let (there, back) = (cluster.link(i, j), cluster.link(j, i));
                let entry = |from: usize, to: usize, link: LinkSpec, one_way: bool| LinkOverride {
                    from: devices[from].name.clone(),
                    to: devices[to].name.clone(),
                    one_way,
                    latency_us: link.latency_us,
                    bandwidth_bytes_per_s: link.bandwidth_bytes_per_s,
                };
                if there == back {
                    if Some(there) != default {
                        links.push(entry(i, j, there, false));
                    }
                    continue;
                }
                if Some(there) != default {
                    links.push(entry(i, j, there, true));
                }
                if Some(back) != default {
                    links.push(entry(j, i, back, true));
                }
            }
        }
        ClusterFile {
            format: FORMAT.into(),
            name: cluster.name.clone(),
            description: cluster.description.clone(),
            source: cluster.source.clone(),
            device,
            count,
            devices: list,
            interconnect: default.map(|l| LinkEntry {
                latency_us: l.latency_us,
                bandwidth_bytes_per_s: l.bandwidth_bytes_per_s,
            }),
            links,
            nodes: (cluster.node_count() > 1).then_some(cluster.node_count() as u64),
            network: cluster.network().map(NetworkEntry::from_spec),
        }
    }
}

/// The link between the most ordered pairs of a node's devices (the first such in row order on
/// a tie); `None` for one device.
fn most_common_link(cluster: &Cluster) -> Option<LinkSpec> {
    let n = cluster.devices_per_node();
    let mut tally: Vec<(LinkSpec, usize)> = Vec::new();
    for i in 0..n {
        for j in (0..n).filter(|&j| j != i) {
            let link = cluster.link(i, j);
            match tally.iter_mut().find(|(l, _)| *l == link) {
                Some((_, count)) => *count += 1,
                None => tally.push((link, 1)),
            }
        }
    }
    let best = tally.iter().map(|&(_, count)| count).max()?;
    tally.into_iter().find(|&(_, count)| count == best).map(|(link, _)| link)
}

impl DeviceEntry {
    fn into_spec(self, name: String) -> DeviceSpec {
        DeviceSpec {
            name,
            kind: self.kind,
            memory_bytes: self.memory_bytes.0,
            peak_flops: self.peak_flops,
            memory_bandwidth: self.memory_bandwidth,
            launch_overhead_us: self.launch_overhead_us,
            parallelism: self.parallelism,
            half_precision_flops: self.half_precision_flops,
        }
    }

    fn from_spec(d: &DeviceSpec) -> Self {
        DeviceEntry {
            name: Some(d.name.clone()),
            kind: d.kind,
            memory_bytes: ByteCount(d.memory_bytes),
            peak_flops: d.peak_flops,
            memory_bandwidth: d.memory_bandwidth,
            launch_overhead_us: d.launch_overhead_us,
            parallelism: d.parallelism,
            half_precision_flops: d.half_precision_flops,
        }
    }
}

impl LinkEntry {
    fn spec(self) -> LinkSpec {
        LinkSpec { latency_us: self.latency_us, bandwidth_bytes_per_s: self.bandwidth_bytes_per_s }
    }
}

/// `memory_bytes`: a whole number of bytes, or a text [`parse_bytes`] reads (`"16GiB"`,
/// `"unlimited"`). Written as text when a binary unit holds it exactly.
#[derive(Clone, Copy)]
struct ByteCount(u64);

impl Serialize for ByteCount {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            u64::MAX => serializer.serialize_str("unlimited"),
            n => match exact_bytes_text(n) {
                Some(text) => serializer.serialize_str(&text),
                None => serializer.serialize_u64(n),
            },
        }
    }
}

impl<'de> Deserialize<'de> for ByteCount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ByteCountVisitor)
    }
}

struct ByteCountVisitor;

impl Visitor<'_> for ByteCountVisitor {
    type Value = ByteCount;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a byte count: a whole number of bytes or a text such as \"16GiB\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteCount, E> {
        Ok(ByteCount(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteCount, E> {
        u64::try_from(v)
            .map(ByteCount)
            .map_err(|_| E::custom(format!("a byte count cannot be negative: {v}")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<ByteCount, E> {
        if v >= 0.0 && v.fract() == 0.0 && v < u64::MAX as f64 {
            Ok(ByteCount(v as u64))
        } else {
            Err(E::custom(format!("a byte count must be a whole number of bytes, not {v}")))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteCount, E> {
        parse_bytes(v).map(ByteCount).map_err(E::custom)
    }
}
