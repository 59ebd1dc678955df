//! A module's layers as a profiler measured them (the Python package's `ordo.torch.profile`):
//! each layer's times and memory, the edges between layers, the layers that share parameters
//! colocated. A shell builds it layer by layer; ordo plans it as a cost graph, either one node
//! per layer or, for schedules that split the backward, the training graph of the layers
//! (each layer's forward, input gradient, weight gradient and update apart).

use ordo_cost::{ColocationGroup, CostGraph, CostLink, CostNode, ProfileLink, TensorRef};
use ordo_ir::Role;
use serde_json::{Map, Value};

use crate::Model;
use crate::error::{Result, usage};

/// One layer as profiled: times in µs (medians), sizes in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfiledLayer {
    /// The layer's name (a module's qualified name; `name#k` for its `k`-th further call).
    pub name: String,
    /// What it is (a module's class name); informational.
    pub op_type: String,
    /// The forward pass.
    pub forward_us: f64,
    /// The whole backward pass.
    pub backward_us: f64,
    /// The input gradient alone (0 unless the profile timed the backward split).
    pub input_grad_us: f64,
    /// The weight gradient alone (0 unless the profile timed the backward split).
    pub weight_grad_us: f64,
    /// Scratch memory while it runs.
    pub temporary_bytes: u64,
    /// Its parameters (0 for a further call of a layer: they live with the first).
    pub persistent_bytes: u64,
    /// Its output.
    pub output_bytes: u64,
}

/// Whether and how a profile timed each layer's input and weight gradients apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitBackward {
    /// The backward timed whole.
    No,
    /// Timed as ordo's split layers compute them.
    Split,
    /// Timed as PyTorch's pipeline runtime computes its `I` and `W` actions.
    Pipelining,
}

/// How a profile was made, recorded in its cost graph.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileInfo {
    /// The device it ran on, in words (`cpu`, `cuda:0`).
    pub device: String,
    /// Timed repetitions per layer.
    pub reps: usize,
    /// Whether a layer's node costs its forward and backward time (a training step), or its
    /// forward time alone.
    pub training: bool,
    /// Whether the backward was timed split.
    pub split_backward: SplitBackward,
    /// The transfer between two devices: fixed time and time per byte.
    pub link: ProfileLink,
}

/// A profiled module's layers in execution order, the edges between them and their
/// colocation groups (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerGraph {
    name: String,
    info: ProfileInfo,
    layers: Vec<ProfiledLayer>,
    /// Per layer, the layer whose name is its colocation group (itself unless colocated).
    group: Vec<usize>,
    edges: Vec<(usize, usize)>,
}

/// `x` rounded to 3 decimals, as a profile records times.
fn round3(x: f64) -> f64 {
    format!("{x:.3}").parse().expect("a formatted float parses")
}

/// Microseconds as a node's or a tensor's whole weight: rounded half to even (as the Python
/// package always has), at least `min`.
fn whole_us(x: f64, min: u64) -> u64 {
    (x.round_ties_even().max(0.0) as u64).max(min)
}

impl LayerGraph {
    /// An empty graph named `name`, profiled as `info` says.
    ///
    /// # Errors
    /// [`crate::Error::Usage`] for an empty name, or a link whose times are negative or not
    /// finite.
    pub fn new(name: impl Into<String>, info: ProfileInfo) -> Result<Self> {
        let name = name.into();
        if name.is_empty() {
            usage!("a layer graph needs a name");
        }
        let ProfileLink { fixed_us, us_per_byte } = info.link;
        if !(fixed_us.is_finite()
            && fixed_us >= 0.0
            && us_per_byte.is_finite()
            && us_per_byte >= 0.0)
        {
            usage!(
                "comm=({fixed_us}, {us_per_byte}): a transfer's fixed time and time per byte are \
                 finite numbers, 0 or more"
            );
        }
        Ok(Self { name, info, layers: Vec::new(), group: Vec::new(), edges: Vec::new() })
    }

    /// Adds `layer` after the others and returns its index.
    ///
    /// # Errors
    /// [`crate::Error::Usage`] for an empty or repeated name, or a time that is negative or
    /// not finite.
    pub fn add_layer(&mut self, layer: ProfiledLayer) -> Result<usize> {
        if layer.name.is_empty() {
            usage!("layer {}: a layer needs a name", self.layers.len());
        }
        if self.layers.iter().any(|l| l.name == layer.name) {
            usage!("layer `{}` is added twice", layer.name);
        }
        let times = [
            ("forward_us", layer.forward_us),
            ("backward_us", layer.backward_us),
            ("input_grad_us", layer.input_grad_us),
            ("weight_grad_us", layer.weight_grad_us),
        ];
        for (what, us) in times {
            if !(us.is_finite() && us >= 0.0) {
                usage!("layer `{}`: {what}={us}: a time is a finite number, 0 or more", layer.name);
            }
        }
        self.group.push(self.layers.len());
        self.layers.push(layer);
        Ok(self.layers.len() - 1)
    }

    /// The layer at `index`, or an error naming the index.
    fn check(&self, index: usize) -> Result<()> {
        if index >= self.layers.len() {
            usage!("layer {index}: the graph has {} layers", self.layers.len());
        }
        Ok(())
    }

    /// Adds the edge from `producer` to `consumer` (layer indices): `consumer` reads
    /// `producer`'s output.
    ///
    /// # Errors
    /// [`crate::Error::Usage`] for an index out of range, an edge from a layer to itself or
    /// one added before.
    pub fn add_edge(&mut self, producer: usize, consumer: usize) -> Result<()> {
        self.check(producer)?;
        self.check(consumer)?;
        let name = |i: usize| &self.layers[i].name;
        if producer == consumer {
            usage!("an edge from layer `{}` to itself", name(producer));
        }
        if self.edges.contains(&(producer, consumer)) {
            usage!("the edge `{}` -> `{}` is added twice", name(producer), name(consumer));
        }
        self.edges.push((producer, consumer));
        Ok(())
    }

    /// Places `layer` in `owner`'s colocation group (they share parameters, which live on
    /// one device).
    ///
    /// # Errors
    /// [`crate::Error::Usage`] for an index out of range.
    pub fn colocate(&mut self, layer: usize, owner: usize) -> Result<()> {
        self.check(layer)?;
        self.check(owner)?;
        self.group[layer] = self.group[owner];
        Ok(())
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cost graph of one node per layer: a layer costs its forward time, plus its
    /// backward time when profiled for training; an edge carries the producer's output at the
    /// profile's transfer cost. This is the profile's file (`ordo place FILE` reads it).
    pub fn cost_graph(&self) -> CostGraph {
        let ProfileLink { fixed_us, us_per_byte } = self.info.link;
        self.layer_cost_graph(
            |layer| {
                let step = layer.forward_us + layer.backward_us;
                whole_us(if self.info.training { step } else { layer.forward_us }, 1)
            },
            |bytes| whole_us(fixed_us + us_per_byte * bytes as f64, 0),
        )
    }

    /// The cost graph of the forward pass on logical devices that share memory (CPU logical
    /// devices, or several on one GPU): a layer costs its forward time, no transfer costs
    /// anything.
    pub fn shared_memory_forward(&self) -> CostGraph {
        self.layer_cost_graph(|layer| whole_us(round3(layer.forward_us), 1), |_| 0)
    }

    fn layer_cost_graph(
        &self,
        weight: impl Fn(&ProfiledLayer) -> u64,
        transfer: impl Fn(u64) -> u64,
    ) -> CostGraph {
        let nodes = self.layers.iter().enumerate().map(|(i, layer)| {
            let mut extra = Map::new();
            for (key, us) in [
                ("forward_us", layer.forward_us),
                ("backward_us", layer.backward_us),
                ("input_grad_us", layer.input_grad_us),
                ("weight_grad_us", layer.weight_grad_us),
            ] {
                extra.insert(key.into(), Value::from(round3(us)));
            }
            CostNode {
                id: i as u64,
                name: layer.name.clone(),
                weight: weight(layer),
                temporary_memory: layer.temporary_bytes,
                persistent_memory: layer.persistent_bytes,
                output_memory: vec![layer.output_bytes],
                colocation_group: ColocationGroup::Name(self.layers[self.group[i]].name.clone()),
                op_type: Some(layer.op_type.clone()),
                flops: None,
                occupancy: 1.0,
                role: Role::Forward,
                layer: None,
                extra,
            }
        });
        let links = self.edges.iter().map(|&(producer, consumer)| {
            let bytes = self.layers[producer].output_bytes;
            let name = format!("{}:0", self.layers[producer].name);
            link(producer as u64, consumer as u64, name, bytes, transfer(bytes))
        });
        CostGraph {
            graph: self.metadata(),
            nodes: nodes.collect(),
            links: links.collect(),
            extra: Map::new(),
        }
    }

    /// The graph's metadata, as the profile's file records it.
    fn metadata(&self) -> Map<String, Value> {
        let info = &self.info;
        let split = match info.split_backward {
            SplitBackward::No => Value::Bool(false),
            SplitBackward::Split => Value::Bool(true),
            SplitBackward::Pipelining => Value::from("pipelining"),
        };
        let mut graph = Map::new();
        graph.insert("name".into(), Value::from(self.name.clone()));
        graph.insert("source".into(), Value::from("ordo.torch.profile"));
        graph.insert("device".into(), Value::from(info.device.clone()));
        graph.insert("reps".into(), Value::from(info.reps));
        graph.insert("training".into(), Value::Bool(info.training));
        graph.insert("comm_fixed_us".into(), Value::from(info.link.fixed_us));
        graph.insert("comm_us_per_byte".into(), Value::from(info.link.us_per_byte));
        graph.insert("split_backward".into(), split);
        graph
    }

    /// The training graph of the layers: each layer's forward (`L`), input gradient
    /// (`L.dx`), weight gradient (`L.dw`, for a layer with parameters or a weight-gradient
    /// time) and update (`L.update`) as nodes of their own, so that ordo schedules them apart
    /// (pipelines, out-of-order backprop). Per layer `L` reading producers `P` and read by
    /// consumers `C`:
    ///
    /// * `L` after each `P`, as profiled;
    /// * `L.dx` after `L` (its saved activations) and each `C.dx` (the gradient of `L`'s
    ///   output, its size at the profile's transfer cost); a layer nobody reads starts the
    ///   backward (the loss is part of it);
    /// * `L.dw` after `L` and the same upstream gradients as `L.dx`; it produces its
    ///   parameters' size in gradients;
    /// * `L.update` after `L.dw`, all updates after the whole backward (as `optimizer.step()`
    ///   after `loss.backward()`).
    ///
    /// Backward nodes are numbered from the last layer to the first, so that every consumer's
    /// `dx` exists before its producers read it.
    ///
    /// # Errors
    /// [`crate::Error::Usage`] for a profile that did not time the input and weight gradients
    /// apart.
    pub fn training_cost_graph(&self) -> Result<CostGraph> {
        if self.info.split_backward == SplitBackward::No {
            usage!(
                "the training graph needs each layer's input and weight gradients timed apart: \
                 profile with split_backward=True"
            );
        }
        let mut graph = self.cost_graph();
        graph.graph.insert("training_graph".into(), Value::Bool(true));
        for (node, layer) in graph.nodes.iter_mut().zip(&self.layers) {
            node.weight = whole_us(round3(layer.forward_us), 1);
        }
        let n = self.layers.len();
        let mut consumers = vec![Vec::new(); n];
        let mut producers = vec![Vec::new(); n];
        for &(p, c) in &self.edges {
            consumers[p].push(c);
            producers[c].push(p);
        }
        let ProfileLink { fixed_us, us_per_byte } = self.info.link;
        let gradient = |bytes: u64| {
            if bytes == 0 { 0 } else { whole_us(fixed_us + us_per_byte * bytes as f64, 0) }
        };
        let mut links = std::mem::take(&mut graph.links);
        let mut connect = |source: u64, target: u64, tensor: String, bytes: u64| {
            links.push(link(source, target, tensor, bytes, gradient(bytes)));
        };
        let mut dx_of = vec![0u64; n];
        let mut updates = Vec::new();
        for i in (0..n).rev() {
            let layer = &self.layers[i];
            let grad_bytes = producers[i].iter().map(|&p| self.layers[p].output_bytes).sum();
            let dx = push_node(&mut graph, layer, i, Role::Dx, layer.input_grad_us, grad_bytes);
            dx_of[i] = dx;
            let upstream: Vec<(u64, String)> = consumers[i]
                .iter()
                .map(|&c| (dx_of[c], format!("{}.dx:{}", self.layers[c].name, layer.name)))
                .collect();
            let saved = format!("{}:saved", layer.name);
            connect(i as u64, dx, saved.clone(), 0);
            for (source, tensor) in &upstream {
                connect(*source, dx, tensor.clone(), layer.output_bytes);
            }
            if layer.persistent_bytes > 0 || layer.weight_grad_us > 0.0 {
                let size = layer.persistent_bytes;
                let dw = push_node(&mut graph, layer, i, Role::Dw, layer.weight_grad_us, size);
                connect(i as u64, dw, saved, 0);
                for (source, tensor) in upstream {
                    connect(source, dw, tensor, layer.output_bytes);
                }
                updates.push((dw, i));
            }
        }
        for (dw, i) in updates {
            let layer = &self.layers[i];
            let update = push_node(&mut graph, layer, i, Role::Update, 1.0, 0);
            connect(dw, update, format!("{}.dw:0", layer.name), layer.persistent_bytes);
        }
        graph.links = links;
        Ok(graph)
    }

    /// The model of [`LayerGraph::cost_graph`].
    ///
    /// # Errors
    /// [`crate::Error::CostGraph`] for layers that do not make a valid cost graph (a cycle).
    pub fn model(&self) -> Result<Model> {
        self.model_of(self.cost_graph())
    }

    /// The model of [`LayerGraph::training_cost_graph`].
    ///
    /// # Errors
    /// As [`LayerGraph::training_cost_graph`] and [`LayerGraph::model`].
    pub fn training_model(&self) -> Result<Model> {
        self.model_of(self.training_cost_graph()?)
    }

    /// The model of [`LayerGraph::shared_memory_forward`].
    ///
    /// # Errors
    /// As [`LayerGraph::model`].
    pub fn shared_memory_forward_model(&self) -> Result<Model> {
        self.model_of(self.shared_memory_forward())
    }

    fn model_of(&self, graph: CostGraph) -> Result<Model> {
        graph.validate(&self.name)?;
        Ok(Model::from_cost_graph(graph, self.name.clone()))
    }
}

/// Adds the `role` node of `layer` (index `i`) to `graph`, costing `us` and producing
/// `output` bytes, in the layer's colocation group; returns its id.
fn push_node(
    graph: &mut CostGraph,
    layer: &ProfiledLayer,
    i: usize,
    role: Role,
    us: f64,
    output: u64,
) -> u64 {
    let kind = match role {
        Role::Dx => "dx",
        Role::Dw => "dw",
        _ => "update",
    };
    let id = graph.nodes.len() as u64;
    let group = graph.nodes[i].colocation_group.clone();
    graph.nodes.push(CostNode {
        id,
        name: format!("{}.{kind}", layer.name),
        weight: whole_us(round3(us), 1),
        temporary_memory: 0,
        persistent_memory: 0,
        output_memory: vec![output],
        colocation_group: group,
        op_type: Some(kind.into()),
        flops: None,
        occupancy: 1.0,
        role,
        layer: Some(i as u64),
        extra: Map::new(),
    });
    id
}

/// A link carrying one tensor of `bytes` that costs `weight` µs to send.
fn link(source: u64, target: u64, name: String, bytes: u64, weight: u64) -> CostLink {
    let tensor = TensorRef { name, num_bytes: bytes, weight, extra: Map::new() };
    CostLink { source, target, weight, tensor: vec![tensor], extra: Map::new() }
}
