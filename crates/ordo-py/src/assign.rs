//! The Assigner's reordering decision (`ordo.reorder_threads`): which layers of a placed
//! model the host thread leaves to wait on threads, under the global or the GPU-wise
//! criterion ([`ordo::assigner::threads`]).

use std::collections::HashMap;

use ordo::assigner::{HostCriterion, LayerPlacement, threads};
use pyo3::prelude::*;

use crate::{error, usage};

/// The layers that must wait on threads when the host reaches them in `code_order`, each
/// layer reading its `parents`, placed by `device_of` with `device_order` per device.
/// `criterion`: `gpu-topo` (Baechi-PyTorch's `isNotWaiting`, the default) or `global-topo`
/// (then `global_order`, a topological order of all the layers, is required).
#[pyfunction]
#[pyo3(signature = (code_order, parents, device_of, device_order, *, criterion = "gpu-topo", global_order = None))]
pub fn reorder_threads(
    code_order: Vec<String>,
    parents: HashMap<String, Vec<String>>,
    device_of: HashMap<String, usize>,
    device_order: Vec<Vec<String>>,
    criterion: &str,
    global_order: Option<Vec<String>>,
) -> PyResult<Vec<String>> {
    let index: HashMap<&str, usize> =
        code_order.iter().enumerate().map(|(i, name)| (name.as_str(), i)).collect();
    if index.len() != code_order.len() {
        return Err(usage("code_order names a layer twice"));
    }
    let id = |name: &str, what: &str| {
        index.get(name).copied().ok_or_else(|| {
            usage(format!("{what} names layer `{name}`, which is not in code_order"))
        })
    };
    let n = code_order.len();
    let mut parent_ids = vec![Vec::new(); n];
    for (layer, ps) in &parents {
        let layer = id(layer, "parents")?;
        parent_ids[layer] = ps.iter().map(|p| id(p, "parents")).collect::<PyResult<_>>()?;
    }
    let mut device_ids = vec![usize::MAX; n];
    for (layer, &device) in &device_of {
        device_ids[id(layer, "device_of")?] = device;
    }
    if let Some(missing) = device_ids.iter().position(|&d| d == usize::MAX) {
        return Err(usage(format!("device_of has no device for layer `{}`", code_order[missing])));
    }
    let orders: Vec<Vec<usize>> = device_order
        .iter()
        .map(|order| order.iter().map(|l| id(l, "device_order")).collect())
        .collect::<PyResult<_>>()?;
    let criterion = host_criterion(criterion)?;
    let global: Vec<usize> = match (&global_order, criterion) {
        (Some(order), _) => order.iter().map(|l| id(l, "global_order")).collect::<PyResult<_>>()?,
        (None, HostCriterion::GpuTopo) => (0..n).collect(),
        (None, HostCriterion::GlobalTopo) => {
            return Err(usage("criterion global-topo needs global_order"));
        }
    };
    let code: Vec<usize> = (0..n).collect();
    let layers = LayerPlacement {
        code_order: &code,
        parents: &parent_ids,
        device_of: &device_ids,
        device_order: &orders,
    };
    let spawned = threads(&layers, &global, criterion).map_err(error)?;
    Ok(code_order.into_iter().zip(spawned).filter(|(_, s)| *s).map(|(name, _)| name).collect())
}

/// The Assigner's criterion by its name: `gpu-topo` or `global-topo`.
pub(crate) fn host_criterion(name: &str) -> PyResult<HostCriterion> {
    match name {
        "gpu-topo" => Ok(HostCriterion::GpuTopo),
        "global-topo" => Ok(HostCriterion::GlobalTopo),
        other => Err(usage(format!("criterion `{other}`: expected gpu-topo or global-topo"))),
    }
}
