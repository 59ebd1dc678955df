//! Reordering layers in eager code (Baechi-PyTorch's Assigner): which layers the host thread
//! may call itself, and which must wait on a thread of their own.
//!
//! The host runs the model's own `forward`, reaching its layers in code order; each device must
//! receive its layers' kernels in the placement's order. A layer called from the host that has
//! to wait for a layer the host has not reached yet would deadlock it, so such a layer waits on
//! a thread and the host moves on. Two criteria decide:
//!
//! * **global topological** ([`HostCriterion::GlobalTopo`]): a layer runs on the host when every
//!   layer before it in one global topological order (the placer's) has been reached, and so
//!   has every layer it waits for;
//! * **GPU-wise topological** ([`HostCriterion::GpuTopo`]): a layer runs on the host when it is
//!   *not waiting* (`isNotWaiting`): every layer before it on its own device has been reached,
//!   the layer just before it on its device is not waiting, and none of its graph parents is
//!   waiting. Only the order within a device matters, so far fewer layers wait: a decoder layer
//!   scheduled early on its own device no longer holds back the encoder's layers on another.
//!
//! Neither depends on when the threads actually submit: the host decides from what it has
//! reached, so the decisions are a function of the code order alone. [`HostWalk`] makes them
//! one layer at a time, as the host reaches the layers (the Python Assigner calls it for every
//! layer call); [`threads`] makes them for a whole code order known in advance. A layer found
//! not waiting stays so (the check is cached); one found waiting is checked again when the host
//! reaches later layers.

use std::sync::Arc;

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
    /// topological order per device.
    pub device_order: &'a [Vec<usize>],
}

/// For each layer, whether the host must leave it to wait on a thread under `criterion` when
/// it reaches the layers in `layers.code_order`.
///
/// `global_order` is a topological order of all the layers (the placer's); only
/// [`HostCriterion::GlobalTopo`] reads it, but it must be a permutation of the layers either way.
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
    let n = layers.device_of.len();
    permutation(layers.code_order, n, "the code order")?;
    let placed = PlacedLayers::new(
        layers.parents.to_vec(),
        layers.device_of.to_vec(),
        layers.device_order.to_vec(),
        global_order.to_vec(),
    )?;
    let mut walk = HostWalk::new(Arc::new(placed), Some(criterion));
    let mut spawned = vec![false; n];
    for &layer in layers.code_order {
        spawned[layer] = !walk.reach(layer, &[])?;
    }
    Ok(spawned)
}

/// A placement's layers, checked and indexed for [`HostWalk`]: each layer's graph parents and
/// device, each device's order and the global (placer's) order, with every layer's position in
/// both. Made once per placement and shared by the walks of every step.
#[derive(Clone, Debug)]
pub struct PlacedLayers {
    parents: Vec<Vec<usize>>,
    device_of: Vec<usize>,
    device_order: Vec<Vec<usize>>,
    global_order: Vec<usize>,
    /// Each layer's position in its device's order.
    position: Vec<usize>,
    /// Each layer's position in the global order.
    global_position: Vec<usize>,
}

impl PlacedLayers {
    /// The layers `0..n`, `n` = `device_of.len()`: `parents[l]` the layers whose outputs `l`
    /// reads, `device_of[l]` its device, `device_order[d]` device `d`'s layers in submission
    /// order, `global_order` a topological order of all of them.
    ///
    /// # Errors
    /// [`SchedError::Placement`] when the lists do not describe the same layers: a parent out
    /// of range, device orders that are not a permutation of the layers or disagree with
    /// `device_of`, a global order that is not a permutation.
    pub fn new(
        parents: Vec<Vec<usize>>,
        device_of: Vec<usize>,
        device_order: Vec<Vec<usize>>,
        global_order: Vec<usize>,
    ) -> Result<Self, SchedError> {
        let n = device_of.len();
        if parents.len() != n {
            return Err(SchedError::Placement(format!(
                "{n} layers placed on devices, {} parent lists",
                parents.len()
            )));
        }
        if let Some((layer, _)) =
            parents.iter().enumerate().find(|(_, ps)| ps.iter().any(|&p| p >= n))
        {
            return Err(SchedError::Placement(format!("layer {layer} has a parent out of range")));
        }
        let flat: Vec<usize> = device_order.iter().flatten().copied().collect();
        let flat_position = permutation(&flat, n, "the device orders")?;
        let mut position = vec![0; n];
        let mut start = 0;
        for (device, order) in device_order.iter().enumerate() {
            if let Some(&layer) = order.iter().find(|&&l| device_of[l] != device) {
                return Err(SchedError::Placement(format!(
                    "layer {layer} is in device {device}'s order but placed on device {}",
                    device_of[layer]
                )));
            }
            for &layer in order {
                position[layer] = flat_position[layer] - start;
            }
            start += order.len();
        }
        let global_position = permutation(&global_order, n, "the global order")?;
        Ok(Self { parents, device_of, device_order, global_order, position, global_position })
    }

    /// How many layers there are.
    pub fn len(&self) -> usize {
        self.device_of.len()
    }

    /// Whether there are no layers.
    pub fn is_empty(&self) -> bool {
        self.device_of.is_empty()
    }

    /// The layer just before `layer` on its device, if any.
    fn device_prev(&self, layer: usize) -> Option<usize> {
        let p = self.position[layer];
        (p > 0).then(|| self.device_order[self.device_of[layer]][p - 1])
    }
}

/// The host's walk through one step: the layers it has reached so far, what each waits for,
/// and the decisions. `reach` is called for each layer as the host reaches it; a layer is
/// reached at most once per walk.
#[derive(Clone, Debug)]
pub struct HostWalk {
    layers: Arc<PlacedLayers>,
    /// `None`: no reordering (the seed's debugging switch): every layer runs on the host in
    /// code order, waiting for its graph parents only.
    criterion: Option<HostCriterion>,
    reached: Vec<bool>,
    code_order: Vec<usize>,
    /// Per device, how many layers at the front of its order have all been reached.
    prefix: Vec<usize>,
    /// How many layers at the front of the global order have all been reached.
    global_prefix: usize,
    /// The `isNotWaiting` cache: true once a layer is known not to be waiting.
    not_waiting: Vec<bool>,
    /// What each reached layer waits for before it submits (empty until reached).
    waits: Vec<Vec<usize>>,
    /// `isNotWaiting`'s marks of the layers its current check is visiting (a stamp per check,
    /// so that the marks need no clearing) and its explicit stack.
    visiting: Vec<u32>,
    stamp: u32,
    stack: Vec<(usize, usize)>,
}

impl HostWalk {
    /// A walk that has reached nothing yet. `criterion` `None` turns reordering off.
    pub fn new(layers: Arc<PlacedLayers>, criterion: Option<HostCriterion>) -> Self {
        let n = layers.len();
        let devices = layers.device_order.len();
        Self {
            layers,
            criterion,
            reached: vec![false; n],
            code_order: Vec::with_capacity(n),
            prefix: vec![0; devices],
            global_prefix: 0,
            not_waiting: vec![false; n],
            waits: vec![Vec::new(); n],
            visiting: vec![0; n],
            stamp: 0,
            stack: Vec::new(),
        }
    }

    /// The host reaches `layer`, whose actual arguments were computed by the layers `came_from`
    /// (usually its graph parents; any others, which a profile may have missed, are waited for
    /// too). Returns whether the host submits it itself (true) or leaves it to wait on a
    /// thread (false). Algorithm 1 of the seed: the layer waits for its graph parents, the
    /// layer before it on its device and, under the global criterion, the layer before it in
    /// the global order.
    ///
    /// # Errors
    /// [`SchedError::Placement`] when `layer` or a layer of `came_from` is out of range, or
    /// `layer` was reached before in this walk.
    pub fn reach(&mut self, layer: usize, came_from: &[usize]) -> Result<bool, SchedError> {
        let n = self.reached.len();
        if let Some(&bad) = came_from.iter().chain([&layer]).find(|&&l| l >= n) {
            return Err(SchedError::Placement(format!("layer {bad} out of range (there are {n})")));
        }
        if self.reached[layer] {
            return Err(SchedError::Placement(format!("layer {layer} reached twice")));
        }
        let layers = &*self.layers;
        let mut waits = layers.parents[layer].clone();
        if self.criterion.is_some() {
            waits.extend(layers.device_prev(layer));
        }
        let global = layers.global_position[layer];
        if self.criterion == Some(HostCriterion::GlobalTopo) && global > 0 {
            waits.push(layers.global_order[global - 1]);
        }
        waits.extend(came_from.iter().filter(|&&l| l != layer));
        waits.sort_unstable();
        waits.dedup();
        self.waits[layer] = waits;
        self.reached[layer] = true;
        self.code_order.push(layer);
        let device = layers.device_of[layer];
        let order = &layers.device_order[device];
        while self.prefix[device] < order.len() && self.reached[order[self.prefix[device]]] {
            self.prefix[device] += 1;
        }
        while self.global_prefix < n && self.reached[layers.global_order[self.global_prefix]] {
            self.global_prefix += 1;
        }
        Ok(match self.criterion {
            None => true,
            // Every layer before it in the global order has been reached, and so has every
            // layer it waits for: all of them submit without the host going further.
            Some(HostCriterion::GlobalTopo) => {
                let position = &layers.global_position;
                let inside = |l: usize| position[l] < self.global_prefix;
                inside(layer) && self.waits[layer].iter().all(|&w| inside(w))
            }
            Some(HostCriterion::GpuTopo) => self.not_waiting(layer),
        })
    }

    /// What `layer` waits for before it submits, as fixed when the host reached it (empty
    /// before).
    pub fn waits(&self, layer: usize) -> &[usize] {
        &self.waits[layer]
    }

    /// Whether the host has reached `layer` in this walk.
    pub fn is_reached(&self, layer: usize) -> bool {
        self.reached[layer]
    }

    /// The layers reached so far, in the order the host reached them.
    pub fn code_order(&self) -> &[usize] {
        &self.code_order
    }

    /// A layer of `roots` that cannot submit until the host goes further, with the unreached
    /// layer it (transitively) waits for; `None` when every one of them will submit without
    /// the host. `submitted` says which layers have submitted already.
    pub fn unreached_dependency(
        &self,
        roots: &[usize],
        submitted: impl Fn(usize) -> bool,
    ) -> Option<(usize, usize)> {
        let mut seen = vec![false; self.reached.len()];
        for &root in roots {
            let mut stack = vec![root];
            while let Some(v) = stack.pop() {
                if std::mem::replace(&mut seen[v], true) || submitted(v) {
                    continue;
                }
                if !self.reached[v] {
                    return Some((root, v));
                }
                stack.extend(&self.waits[v]);
            }
        }
        None
    }

    /// `isNotWaiting(layer)`: (1) every layer before it on its device has been reached, (2)
    /// the one just before it is not waiting, (3) nothing else it waits for is waiting. A
    /// depth-first walk with an explicit stack, so that a long chain cannot overflow the
    /// thread's stack; a layer found not waiting is cached. A dependency met again while its
    /// own check is under way (a cycle, which a valid placement cannot have) counts as
    /// waiting: it would wait forever.
    fn not_waiting(&mut self, layer: usize) -> bool {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // The stamps wrapped: old marks could match again.
            self.visiting.fill(0);
            self.stamp = 1;
        }
        self.stack.clear();
        if !self.enter(layer) {
            return false;
        }
        while let Some(&(v, next)) = self.stack.last() {
            match self.waits[v].get(next) {
                Some(&dep) => {
                    self.stack.last_mut().expect("not empty").1 += 1;
                    if !self.enter(dep) {
                        return false;
                    }
                }
                None => {
                    // Everything `v` waits for is not waiting: nor is `v`.
                    self.not_waiting[v] = true;
                    self.stack.pop();
                }
            }
        }
        true
    }

    /// Starts the check of `v`: true if it is known not to be waiting or its dependencies are
    /// pushed to be checked, false if it is waiting ((1) fails, or a cycle).
    fn enter(&mut self, v: usize) -> bool {
        if self.not_waiting[v] {
            return true;
        }
        let device = self.layers.device_of[v];
        if !self.reached[v]
            || self.prefix[device] < self.layers.position[v]
            || self.visiting[v] == self.stamp
        {
            return false;
        }
        self.visiting[v] = self.stamp;
        self.stack.push((v, 0));
        true
    }
}

/// Each element's position in `order`, which must be a permutation of `0..n`.
fn permutation(order: &[usize], n: usize, what: &str) -> Result<Vec<usize>, SchedError> {
    let mut position = vec![usize::MAX; n];
    if order.len() != n {
        return Err(SchedError::Placement(format!(
            "{what} has {} layers, the placement {n}",
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
