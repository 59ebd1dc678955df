//! The checks every cluster passes, however it is built.

use super::schema::LinkOverride;
use super::{
    Cluster, ClusterError, DeviceSpec, LinkSpec, MAX_CLUSTER_DEVICES, MAX_DEVICES, NetworkSpec,
    Topology,
};

/// Checks the devices (numbers, unique names) and links (the default, then `overrides`, then
/// that every ordered pair has one) and builds the cluster.
pub(super) fn assemble(
    name: String,
    devices: Vec<DeviceSpec>,
    default: Option<LinkSpec>,
    overrides: Vec<LinkOverride>,
    origin: &str,
) -> Result<Cluster, ClusterError> {
    let whole = |problem: String| ClusterError::Cluster { origin: origin.into(), problem };
    if devices.is_empty() {
        return Err(whole("no devices".into()));
    }
    if devices.len() > MAX_DEVICES {
        return Err(whole(format!("{} devices; at most {MAX_DEVICES}", devices.len())));
    }
    let label = |i: usize| format!("devices[{i}] ({:?})", devices[i].name);
    for (i, d) in devices.iter().enumerate() {
        check_device(d, origin, &label(i))?;
        if let Some(first) = devices[..i].iter().position(|e| e.name == d.name) {
            let problem = format!("the name is taken by devices[{first}]");
            return Err(ClusterError::Device { origin: origin.into(), device: label(i), problem });
        }
    }
    if let Some(link) = &default {
        check_link(link, origin, "\"interconnect\"")?;
    }
    let n = devices.len();
    let mut links = vec![default; n * n];
    apply_overrides(&devices, &mut links, overrides, origin)?;
    let mut full = Vec::with_capacity(n * n);
    for (k, link) in links.into_iter().enumerate() {
        let (a, b) = (k / n, k % n);
        full.push(match link {
            _ if a == b => LinkSpec::LOCAL,
            Some(link) => link,
            None => {
                let (a, b) = (&devices[a].name, &devices[b].name);
                return Err(whole(format!(
                    "no link from {a} to {b}: give \"interconnect\" (the link between any \
                     two devices) or a \"links\" entry for them"
                )));
            }
        });
    }
    Ok(Cluster {
        name,
        description: None,
        source: None,
        devices,
        links: full,
        nodes: 1,
        network: None,
        tensor_parallel_link: None,
    })
}

/// Sets the links of a file's `links` list, checking each.
fn apply_overrides(
    devices: &[DeviceSpec],
    links: &mut [Option<LinkSpec>],
    list: Vec<LinkOverride>,
    origin: &str,
) -> Result<(), ClusterError> {
    let n = devices.len();
    let mut set_by: Vec<Option<usize>> = vec![None; n * n];
    for (k, entry) in list.into_iter().enumerate() {
        let arrow = if entry.one_way { "->" } else { "<->" };
        let label = format!("links[{k}] ({} {arrow} {})", entry.from, entry.to);
        let fail = |problem: String| ClusterError::Link {
            origin: origin.into(),
            link: label.clone(),
            problem,
        };
        let find = |key: &str, name: &str| {
            devices.iter().position(|d| d.name == name).ok_or_else(|| {
                fail(format!("{key:?} names no device of the cluster ({})", name_list(devices)))
            })
        };
        let (from, to) = (find("from", &entry.from)?, find("to", &entry.to)?);
        if from == to {
            return Err(fail("joins a device to itself".into()));
        }
        let link = LinkSpec {
            latency_us: entry.latency_us,
            bandwidth_bytes_per_s: entry.bandwidth_bytes_per_s,
        };
        check_link(&link, origin, &label)?;
        let pairs = if entry.one_way { vec![(from, to)] } else { vec![(from, to), (to, from)] };
        for (a, b) in pairs {
            if let Some(previous) = set_by[a * n + b] {
                let (a, b) = (&devices[a].name, &devices[b].name);
                return Err(fail(format!("sets {a} -> {b}, which links[{previous}] sets")));
            }
            set_by[a * n + b] = Some(k);
            links[a * n + b] = Some(link);
        }
    }
    Ok(())
}

/// Device names for messages, the first eight.
fn name_list(devices: &[DeviceSpec]) -> String {
    let names: Vec<&str> = devices.iter().take(8).map(|d| d.name.as_str()).collect();
    let more = if devices.len() > 8 { ", ..." } else { "" };
    format!("{}{more}", names.join(", "))
}

/// Checks one device's numbers.
pub(super) fn check_device(d: &DeviceSpec, origin: &str, label: &str) -> Result<(), ClusterError> {
    let problem = if d.memory_bytes == 0 {
        Some("\"memory_bytes\" is 0".to_string())
    } else {
        rate(d.peak_flops, "peak_flops", "FLOP/s", MAX_FLOPS)
            .or_else(|| rate(d.memory_bandwidth, "memory_bandwidth", "bytes/s", MAX_BYTES_PER_S))
            .or_else(|| {
                let half = d.half_precision_flops?;
                rate(half, "half_precision_flops", "FLOP/s", MAX_FLOPS)
            })
            .or_else(|| time(d.launch_overhead_us, "launch_overhead_us"))
            .or_else(|| {
                (d.parallelism == 0).then(|| {
                    "\"parallelism\" is 0; a device keeps at least 1 work item in flight".into()
                })
            })
    };
    match problem {
        None => Ok(()),
        Some(problem) => {
            Err(ClusterError::Device { origin: origin.into(), device: label.into(), problem })
        }
    }
}

/// Checks a node count and the network: more than one node needs a network, and the devices of
/// all nodes are at most [`MAX_CLUSTER_DEVICES`].
pub(super) fn check_nodes(
    nodes: usize,
    network: Option<&NetworkSpec>,
    per_node: usize,
    origin: &str,
) -> Result<(), ClusterError> {
    let whole = |problem: String| ClusterError::Cluster { origin: origin.into(), problem };
    if nodes == 0 {
        return Err(whole("\"nodes\" is 0; a cluster has at least one node".into()));
    }
    if nodes.saturating_mul(per_node) > MAX_CLUSTER_DEVICES {
        return Err(whole(format!(
            "{nodes} nodes of {per_node} devices: {} devices; at most {MAX_CLUSTER_DEVICES}",
            nodes as u128 * per_node as u128
        )));
    }
    let Some(network) = network else {
        if nodes > 1 {
            return Err(whole(format!(
                "{nodes} nodes but no \"network\": give the network between them (topology, \
                 latency_us, bandwidth_bytes_per_s of one device's card)"
            )));
        }
        return Ok(());
    };
    let link = LinkSpec {
        latency_us: network.latency_us,
        bandwidth_bytes_per_s: network.bandwidth_bytes_per_s,
    };
    check_link(&link, origin, "\"network\"")?;
    let Topology::FatTree { oversubscription } = network.topology;
    if !(oversubscription.is_finite() && (1.0..=1000.0).contains(&oversubscription)) {
        let problem = format!(
            "\"oversubscription\" is {}; it must be a number from 1 (non-blocking) to 1000",
            crate::readable(oversubscription)
        );
        return Err(ClusterError::Link {
            origin: origin.into(),
            link: "\"network\"".into(),
            problem,
        });
    }
    Ok(())
}

/// Checks one link's numbers.
pub(super) fn check_link(l: &LinkSpec, origin: &str, label: &str) -> Result<(), ClusterError> {
    match time(l.latency_us, "latency_us").or_else(|| {
        rate(l.bandwidth_bytes_per_s, "bandwidth_bytes_per_s", "bytes/s", MAX_BYTES_PER_S)
    }) {
        None => Ok(()),
        Some(problem) => {
            Err(ClusterError::Link { origin: origin.into(), link: label.into(), problem })
        }
    }
}

/// The fastest device ordo accepts: 10^21 FLOP/s (a thousand times today's largest).
const MAX_FLOPS: f64 = 1e21;
/// The fastest memory or link ordo accepts: 10^18 bytes/s.
const MAX_BYTES_PER_S: f64 = 1e18;

/// A rate of at least 1 per second and at most `max`.
fn rate(x: f64, field: &str, unit: &str, max: f64) -> Option<String> {
    (!(x.is_finite() && (1.0..=max).contains(&x))).then(|| {
        let x = crate::readable(x);
        format!("\"{field}\" is {x}; it must be a number of {unit} from 1 to {max:e}")
    })
}

/// A time from 0 to [`crate::MAX_TIME_US`] µs.
fn time(x: f64, field: &str) -> Option<String> {
    crate::time_problem(x, "µs").map(|problem| format!("\"{field}\" {problem}"))
}
