//! Targets: the devices a model is planned for, how its nodes are costed on them, and the
//! memory mode a plan must fit.

use std::path::Path;

use ordo_cost::{Cluster, CommModel, CostGraph, Profile};
use ordo_ir::Graph;
use ordo_problem::Devices;

use crate::error::{Result, usage};
use crate::parameter::{Parameter, refuse};

/// The devices to plan for and the costs of running on them: memory limits, the link model
/// between devices, the roofline that costs each node, and measured times that replace it.
#[derive(Clone, Debug)]
pub struct Target {
    /// Memory and links of the devices.
    pub devices: Devices,
    /// The cluster whose device 0 costs the nodes (roofline); `None`: ordo's default roofline.
    pub cluster: Option<Cluster>,
    /// Measured node times (and link cost, where measured) that replace the roofline.
    pub profile: Option<Profile>,
}

impl Target {
    /// `n` devices of `memory` bytes each (`u64::MAX`: unlimited), linked by Baechi's default
    /// model, nodes costed by ordo's default roofline.
    ///
    /// # Errors
    /// [`crate::Error::Parameter`] for zero devices.
    pub fn uniform(n: usize, memory: u64) -> Result<Self> {
        if n == 0 {
            refuse!(Parameter::Devices, " must be at least 1");
        }
        Ok(Self { devices: Devices::uniform(n, memory), cluster: None, profile: None })
    }

    /// The first `n` devices of `cluster` (all of them for `None`): their memory, the link
    /// between devices 0 and 1, nodes costed by device 0's roofline.
    ///
    /// # Errors
    /// [`crate::Error::Parameter`] for zero devices, more than the cluster has, or more than
    /// [`crate::MAX_DEVICES`].
    pub fn cluster(cluster: Cluster, n: Option<usize>) -> Result<Self> {
        let n = match n {
            Some(0) => refuse!(Parameter::Devices, " must be at least 1"),
            Some(n) if n > cluster.device_count() => refuse!(
                Parameter::Devices => n,
                format!(
                    ": cluster `{}` has only {} devices",
                    cluster.name,
                    cluster.device_count()
                )
            ),
            Some(n) if n > crate::MAX_DEVICES => refuse!(
                Parameter::Devices => n,
                format!(": a placement uses at most {} devices", crate::MAX_DEVICES)
            ),
            Some(n) => n,
            None if cluster.device_count() > crate::MAX_DEVICES => refuse!(
                Parameter::Devices,
                format!(
                    ": cluster `{}` has {} devices and a placement uses at most {}; give how many",
                    cluster.name,
                    cluster.device_count(),
                    crate::MAX_DEVICES
                )
            ),
            None => cluster.device_count(),
        };
        let comm = if n > 1 { cluster.comm(0, 1) } else { CommModel::baechi_default() };
        let memory = cluster.memory_limits()[..n].to_vec();
        Ok(Self { devices: Devices { memory, comm }, cluster: Some(cluster), profile: None })
    }

    /// Nodes costed by `cluster`'s device 0 roofline; devices and links unchanged.
    pub fn costed_by(self, cluster: Cluster) -> Self {
        Self { cluster: Some(cluster), ..self }
    }

    /// The same devices linked by `comm`.
    pub fn with_comm(mut self, comm: CommModel) -> Self {
        self.devices.comm = comm;
        self
    }

    /// Node times from `profile` instead of the roofline, and its measured link model when it
    /// has one.
    pub fn with_profile(mut self, profile: Profile) -> Self {
        if let Some(comm) = profile.comm() {
            self.devices.comm = comm;
        }
        self.profile = Some(profile);
        self
    }

    /// The number of devices.
    pub fn count(&self) -> usize {
        self.devices.count()
    }

    /// Where `model`'s node times come from on this target, in words: the profile's
    /// measurements (with how many timed steps and their spread), a cost graph's own times, or
    /// a roofline's estimates.
    pub fn costs_description(&self, model: &crate::Model) -> String {
        if let Some(profile) = &self.profile {
            let spread =
                profile.spread.map_or(String::new(), |s| format!(", spread {:.1}%", s * 100.0));
            return format!(
                "measured: profile of `{}` on {} ({} timed steps{spread})",
                profile.model, profile.device, profile.reps
            );
        }
        if model.graph().is_none() {
            return "the cost graph's own times".into();
        }
        let roofline = match &self.cluster {
            Some(cluster) => format!("roofline of cluster `{}`", cluster.name),
            None => "ordo's default roofline".into(),
        };
        format!(
            "{roofline}: estimated from FLOPs and bytes, not measured (`ordo profile` measures)"
        )
    }

    /// `graph` costed for these devices: the cluster's roofline (or the default one), then
    /// the profile's times where it has them.
    pub(crate) fn cost(&self, model: &crate::Model) -> Result<CostGraph> {
        let roofline = |graph: &Graph| match &self.cluster {
            Some(cluster) => ordo_cost::costgraph_for_cluster(graph, cluster),
            None => ordo_cost::costgraph_from_graph(graph),
        };
        let mut costed = model.costed(roofline);
        if let Some(profile) = &self.profile {
            ordo_cost::apply_profile(&mut costed, profile)?;
        }
        Ok(costed)
    }
}

/// `cluster` resized to `nodes` nodes, its network unchanged ([`Cluster::with_nodes`]).
///
/// # Errors
/// [`crate::Error::Parameter`] naming [`Parameter::Nodes`]: zero nodes, more devices than a
/// cluster holds, or several nodes of a cluster without a network.
pub fn with_nodes(cluster: Cluster, nodes: usize) -> Result<Cluster> {
    match cluster.with_nodes(nodes, None) {
        Ok(cluster) => Ok(cluster),
        Err(e) => refuse!(Parameter::Nodes => nodes, format!(": {e}")),
    }
}

/// A shipped cluster by name (e.g. `a100x8-nvlink`) or a cluster file.
///
/// # Errors
/// [`crate::Error::Usage`] for an unknown name (listing the shipped ones);
/// [`crate::Error::Cluster`] for a file that cannot be read.
pub fn cluster(name_or_path: &str) -> Result<Cluster> {
    if crate::model::is_file(name_or_path) {
        return Ok(Cluster::read(Path::new(name_or_path))?);
    }
    match Cluster::builtin(name_or_path) {
        Some(cluster) => Ok(cluster),
        None => usage!(
            "unknown cluster `{name_or_path}`; shipped: {}",
            Cluster::builtin_names().collect::<Vec<_>>().join(", ")
        ),
    }
}
