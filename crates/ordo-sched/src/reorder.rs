//! Reordering layers in eager code (Baechi-PyTorch's Assigner): which layers the host thread
//! may call itself, and which must wait on a thread of their own.
//!
//! The host runs the model's own `forward`, reaching its layers in code order; each device must
//! receive its layers' kernels in the placement's order. A layer called from the host that has
//! to wait for a layer the host has not reached yet would deadlock it, so such a layer waits on
//! a thread and the host moves on. Two criteria decide:
//!
//! * **global topological** ([`HostCriterion::GlobalTopo`]): a layer runs on the host when every
//!   layer before it in one global topological order (the placer's) has been reached;
//! * **GPU-wise topological** ([`HostCriterion::GpuTopo`]): a layer runs on the host when it is
//!   *not waiting* (`isNotWaiting`): every layer before it on its own device has been reached,
//!   the layer just before it on its device is not waiting, and none of its graph parents is
//!   waiting. Only the order within a device matters, so far fewer layers wait: a decoder layer
//!   scheduled early on its own device no longer holds back the encoder's layers on another.
//!
//! Neither depends on when the threads actually submit: the host decides from what it has
//! reached, so the decisions are a function of the code order alone, computed here before a
//! step runs. A layer found not waiting stays so (the check is cached); one found waiting is
//! checked again when the host reaches later layers.

use crate::error::SchedError;

/// Which layers may run on the host thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostCriterion {
    /// All the layers before it in the global topological order have been reached.
    GlobalTopo,
    /// `isNotWaiting`: only the order on its own device, and its graph parents, count.
    GpuTopo,
}

/// A placed graph of layers as the Assigner sees it: the order the host reaches the layers in
/// (the model's code), each layer's graph parents, device and the per-device orders of the
/// placement. Layers are indices `0..n`.
#[derive(Clone, Debug)]
pub struct LayerPlacement<'a> {
    /// The layers in the order the host reaches them; every layer once.
    pub code_order: &'a [usize],
    /// Each layer's graph parents (the layers whose outputs it reads).
    pub parents: &'a [Vec<usize>],
    /// Each layer's device.
    pub device_of: &'a [usize],
    /// Each device's layers in the order their kernels must be submitted; together one
    /// topological order per device, and read one device after another as the global order
    /// when it is one (see [`threads`]).
    pub device_order: &'a [Vec<usize>],
}

/// For each layer, whether the host must leave it to wait on a thread under `criterion`.
///
/// [`HostCriterion::GlobalTopo`] uses `global_order`, a topological order of all the layers
/// (the placer's); [`HostCriterion::GpuTopo`] ignores it.
///
/// # Errors
/// [`SchedError::Placement`] when the orders and lists do not describe the same layers (a
/// layer missing from the code order or twice in it, a device order that disagrees with
/// `device_of`, a parent out of range, a global order that is not a permutation).
pub fn threads(
    layers: &LayerPlacement<'_>,
    global_order: &[usize],
    criterion: HostCriterion,
) -> Result<Vec<bool>, SchedError> {
    let n = layers.code_order.len();
    check(layers)?;
    let mut spawned = vec![false; n];
    match criterion {
        HostCriterion::GlobalTopo => {
            let position = permutation(global_order, n, "the global order")?;
            // The longest prefix of the global order that the host has reached.
            let (mut reached, mut prefix) = (vec![false; n], 0);
            for &layer in layers.code_order {
                reached[layer] = true;
                while prefix < n && reached[global_order[prefix]] {
                    prefix += 1;
                }
                spawned[layer] = position[layer] > prefix;
            }
        }
        HostCriterion::GpuTopo => {
            let mut walk = Walk::new(layers);
            for &layer in layers.code_order {
                walk.reach(layer);
                spawned[layer] = !walk.not_waiting(layer);
            }
        }
    }
    Ok(spawned)
}

/// The host's walk under the GPU-wise criterion: what it has reached, and the cache of layers
/// known not to be waiting.
struct Walk<'a> {
    layers: &'a LayerPlacement<'a>,
    /// Each layer's position in its device's order.
    position: Vec<usize>,
    reached: Vec<bool>,
    /// Per device, how many layers at the front of its order have all been reached.
    prefix: Vec<usize>,
    not_waiting: Vec<bool>,
}

impl<'a> Walk<'a> {
    fn new(layers: &'a LayerPlacement<'a>) -> Self {
        let n = layers.code_order.len();
        let mut position = vec![0; n];
        for order in layers.device_order {
            for (p, &layer) in order.iter().enumerate() {
                position[layer] = p;
            }
        }
        let devices = layers.device_order.len();
        Self {
            layers,
            position,
            reached: vec![false; n],
            prefix: vec![0; devices],
            not_waiting: vec![false; n],
        }
    }

    fn reach(&mut self, layer: usize) {
        self.reached[layer] = true;
        let device = self.layers.device_of[layer];
        let order = &self.layers.device_order[device];
        while self.prefix[device] < order.len() && self.reached[order[self.prefix[device]]] {
            self.prefix[device] += 1;
        }
    }

    /// `isNotWaiting(layer)`: (1) every layer before it on its device has been reached, (2)
    /// the one just before it is not waiting, (3) no graph parent is waiting. A depth-first
    /// walk with an explicit stack, so that a long chain cannot overflow the thread's stack; a
    /// layer found not waiting is cached. A dependency met again while its own check is under
    /// way (a cycle, which a valid placement cannot have) counts as waiting: it would wait
    /// forever.
    fn not_waiting(&mut self, layer: usize) -> bool {
        let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut visiting = vec![false; self.reached.len()];
        if !self.enter(layer, &mut stack, &mut visiting) {
            return false;
        }
        while let Some(frame) = stack.last_mut() {
            let v = frame.0;
            match frame.1.pop() {
                Some(dep) => {
                    if !self.enter(dep, &mut stack, &mut visiting) {
                        return false;
                    }
                }
                None => {
                    // Every dependency of `v` is not waiting: nor is `v`.
                    self.not_waiting[v] = true;
                    stack.pop();
                }
            }
        }
        true
    }

    /// Starts the check of `v`: true if it is known not to be waiting or its dependencies are
    /// pushed to be checked, false if it is waiting ((1) fails, or a cycle).
    fn enter(&self, v: usize, stack: &mut Vec<(usize, Vec<usize>)>, visiting: &mut [bool]) -> bool {
        if self.not_waiting[v] {
            return true;
        }
        let device = self.layers.device_of[v];
        let p = self.position[v];
        if !self.reached[v] || self.prefix[device] < p || visiting[v] {
            return false;
        }
        visiting[v] = true;
        let mut deps = self.layers.parents[v].clone();
        if p > 0 {
            deps.push(self.layers.device_order[device][p - 1]);
        }
        stack.push((v, deps));
        true
    }
}

/// Each element's position in `order`, which must be a permutation of `0..n`.
fn permutation(order: &[usize], n: usize, what: &str) -> Result<Vec<usize>, SchedError> {
    let mut position = vec![usize::MAX; n];
    if order.len() != n {
        return Err(SchedError::Placement(format!(
            "{what} has {} layers, the code order {n}",
            order.len()
        )));
    }
    for (p, &layer) in order.iter().enumerate() {
        if layer >= n || position[layer] != usize::MAX {
            return Err(SchedError::Placement(format!(
                "{what} names layer {layer} twice or out of range (there are {n})"
            )));
        }
        position[layer] = p;
    }
    Ok(position)
}

/// The code order, parents and device orders describe the same `n` layers.
fn check(layers: &LayerPlacement<'_>) -> Result<(), SchedError> {
    let n = layers.code_order.len();
    permutation(layers.code_order, n, "the code order")?;
    if layers.parents.len() != n || layers.device_of.len() != n {
        return Err(SchedError::Placement(format!(
            "{n} layers in the code order, {} parent lists, {} devices",
            layers.parents.len(),
            layers.device_of.len()
        )));
    }
    if let Some((layer, _)) =
        layers.parents.iter().enumerate().find(|(_, ps)| ps.iter().any(|&p| p >= n))
    {
        return Err(SchedError::Placement(format!("layer {layer} has a parent out of range")));
    }
    let flat: Vec<usize> = layers.device_order.iter().flatten().copied().collect();
    permutation(&flat, n, "the device orders")?;
    for (device, order) in layers.device_order.iter().enumerate() {
        if let Some(&layer) = order.iter().find(|&&l| layers.device_of[l] != device) {
            return Err(SchedError::Placement(format!(
                "layer {layer} is in device {device}'s order but placed on device {}",
                layers.device_of[layer]
            )));
        }
    }
    Ok(())
}
