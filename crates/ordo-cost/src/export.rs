//! IR graph -> cost graph, with the roofline rules the sample cost graphs were made with.

use std::collections::BTreeMap;

use ordo_ir::op::TensorParallelPass;
use ordo_ir::{Graph, Node, NodeId, Op, OutletId, Role, node_stats};
use serde_json::{Map, Value};

use crate::cluster::Cluster;
use crate::collective::Collectives;
use crate::costgraph::{CostGraph, CostLink, CostNode, TensorRef};
use crate::model::{CommModel, KernelCost, Roofline};

/// [`costgraph_with`] with [`Roofline::baechi_default`] and [`CommModel::baechi_default`].
pub fn costgraph_from_graph(graph: &Graph) -> CostGraph {
    costgraph_with(graph, &Roofline::baechi_default(), &CommModel::baechi_default())
}

/// [`costgraph_with`] for the devices of `cluster`, with its name as graph metadata `cluster`.
///
/// A cost graph has one weight per node and one per edge, so it assumes that every device
/// computes alike and every link transfers alike:
///
/// * node weights and occupancies come from device 0's roofline ([`Cluster::roofline`]`(0)`),
///   with its launch overhead and parallelism; on a cluster whose devices differ
///   ([`Cluster::is_uniform_compute`] is false) they are device 0's, not the others';
/// * edge weights come from the link from device 0 to device 1 ([`Cluster::comm`]`(0, 1)`);
///   where links differ ([`Cluster::is_uniform_links`] is false, e.g. `v100x8-nvlink`) that
///   one link stands for all. A one-device cluster moves no tensors, and its edges get
///   Baechi's [`CommModel::baechi_default`] so that numbers stay comparable with Baechi's.
pub fn costgraph_for_cluster(graph: &Graph, cluster: &Cluster) -> CostGraph {
    let comm =
        if cluster.device_count() > 1 { cluster.comm(0, 1) } else { CommModel::baechi_default() };
    // A tensor-parallel group sits within a node: its collectives run over the node's links.
    let tensor_parallel = cluster.tensor_parallel_collectives();
    let mut cost = costed(graph, &cluster.roofline(0), &comm, &tensor_parallel);
    cost.graph.insert("cluster".into(), Value::from(cluster.name.clone()));
    cost
}

/// Costs every node of `graph` and writes it as a cost graph.
///
/// Every IR node becomes the cost node of the same id (0..n-1, a topological order for a
/// graph built with the builder) and name; `op_type` is the op's name and `flops` its forward
/// FLOPs. `role` is the node's [`ordo_ir::Node::role`] and `layer` the id of its
/// [`ordo_ir::Node::layer`] (the same id in both graphs), so a training graph's dX, dW and
/// update nodes keep their part of the step and their forward layer. As the format requires,
/// a layer is kept only on a node that is not forward and only when it names a forward node.
///
/// * `weight` and `occupancy` = [`Roofline::kernel`]`(flops, bytes, work_items)`, where
///   `bytes` is the bytes of the node's inputs, outputs and all parameters it reads and
///   `work_items` the number of elements of its outputs (one work item per output element):
///   a kernel that fills only part of the device gets only that part of its throughput.
///   `occupancy` is 1 for every node under a roofline of `parallelism` 1 (Baechi's), and is
///   written only where it is not 1. Exceptions to the bytes and times (the occupancy rule is
///   the same for every node):
///   * `Input` and `Parameter` nodes are nodes too (unlike the ONNX converter, where graph
///     inputs are not nodes): weight 1, their value as their one output.
///   * View ops (`Reshape`) move nothing: 0 bytes, so the op overhead alone (5 µs).
///   * Data movement does no FLOPs: `Concat` and `Transpose` move inputs + outputs, `Slice`
///     moves `2 * output`, `Embedding` (a gather) moves `2 * output + indices`, not the table.
///   * `Lstm` adds [`Roofline::recurrent_time_us`] for its time steps and directions.
/// * `persistent_memory` is the bytes of the parameters the node reads, each parameter charged
///   to its first reader only (so a `Parameter` node holds its own); `temporary_memory` is 0;
///   `output_memory` has the bytes of each output.
/// * One link per (producer, consumer) pair, with one tensor per distinct producer output the
///   consumer reads, named `<producer name>:<slot>`, of weight [`CommModel::time_us`]; the
///   link's weight is their sum. Links are sorted by (source, target).
/// * Graph metadata: `source: "ordo"`, `model` (the graph's name), `cost_model` (the two
///   models' descriptions) and `param_bytes` (all parameters and buffers).
///
/// * A tensor-parallel collective (`Op::TensorParallel`, or its gradient) takes the ring
///   all-gather or reduce-scatter of its whole tensor over its group on links of `comm`
///   ([`costgraph_for_cluster`]: the node's links, as NCCL's ring runs it).
///
/// The graph should have passed `ordo_ir::validate`; an input naming a missing node is
/// skipped, and a cyclic graph gives a cyclic cost graph.
pub fn costgraph_with(graph: &Graph, roofline: &Roofline, comm: &CommModel) -> CostGraph {
    costed(graph, roofline, comm, &Collectives::flat(*comm))
}

/// [`costgraph_with`], the tensor-parallel collectives costed by `tensor_parallel`.
fn costed(
    graph: &Graph,
    roofline: &Roofline,
    comm: &CommModel,
    tensor_parallel: &Collectives,
) -> CostGraph {
    let stats = node_stats(graph);
    let mut nodes = Vec::with_capacity(graph.nodes.len());
    let mut links = Vec::new();
    for (node, stats) in graph.nodes.iter().zip(&stats) {
        let id = u64::from(node.id.0);
        let kernel = match tensor_parallel_pass(&node.op) {
            Some((pass, ranks)) => {
                // The whole tensor: the larger of what the pass reads and writes (a gather
                // writes it, a scatter reads it).
                let facts = |outlets: &[OutletId]| -> u64 {
                    outlets.iter().filter_map(|&o| graph.fact(o)).map(|f| f.bytes()).sum()
                };
                let bytes = facts(&node.inputs).max(node.outputs.iter().map(|f| f.bytes()).sum());
                let time_us = match pass {
                    TensorParallelPass::AllGather => tensor_parallel.all_gather_us(ranks, bytes),
                    TensorParallelPass::ReduceScatter => {
                        tensor_parallel.reduce_scatter_us(ranks, bytes)
                    }
                };
                // The stream waits for the collective: it holds the device.
                KernelCost { time_us: time_us.max(1), occupancy: 1.0 }
            }
            None => kernel_cost(graph, node, stats.flops, roofline),
        };
        let mut cost = CostNode::new(id, node.name.clone(), kernel.time_us);
        cost.occupancy = kernel.occupancy;
        cost.op_type = Some(node.op.name().to_string());
        cost.flops = Some(stats.flops);
        cost.role = node.role;
        if node.role != Role::Forward {
            let forward =
                |l: &NodeId| graph.nodes.get(l.index()).is_some_and(|n| n.role == Role::Forward);
            cost.layer = node.layer.filter(forward).map(|layer| u64::from(layer.0));
        }
        cost.persistent_memory = stats.param_bytes;
        cost.output_memory = node.outputs.iter().map(|f| f.bytes()).collect();
        if let Op::Update(update) = &node.op {
            // The parameter is written in place: its new version takes no new memory.
            cost.output_memory = vec![0; node.outputs.len()];
            cost.persistent_memory = cost.persistent_memory.saturating_add(optimizer_bytes(
                graph,
                node,
                update.optimizer.state_slots(),
            ));
        }
        nodes.push(cost);

        let mut by_producer: BTreeMap<u32, Vec<TensorRef>> = BTreeMap::new();
        let mut seen: Vec<OutletId> = Vec::with_capacity(node.inputs.len());
        for &input in &node.inputs {
            let Some(fact) = graph.fact(input) else { continue };
            if seen.contains(&input) {
                continue;
            }
            seen.push(input);
            let producer = graph.node(input.node);
            let name = format!("{}:{}", producer.name, input.slot);
            by_producer.entry(input.node.0).or_default().push(TensorRef::new(
                name,
                fact.bytes(),
                comm,
            ));
        }
        links.extend(
            by_producer
                .into_iter()
                .map(|(source, tensors)| CostLink::new(u64::from(source), id, tensors)),
        );
    }
    links.sort_by_key(|l| (l.source, l.target));

    let param_bytes: u64 = graph.params.iter().map(|p| p.fact.bytes()).sum();
    let mut meta = Map::new();
    meta.insert("source".into(), Value::from("ordo"));
    meta.insert("model".into(), Value::from(graph.name.clone()));
    meta.insert("cost_model".into(), Value::from(format!("{roofline}; {comm}")));
    meta.insert("param_bytes".into(), Value::from(param_bytes));
    CostGraph { graph: meta, nodes, links, extra: Map::new() }
}

/// The optimizer's memory for the parameters `node` updates: `slots` states of each, in its
/// own precision; a parameter in 16-bit floats (mixed precision) keeps its states and an fp32
/// master copy in fp32, so Adam costs 12 bytes per parameter beside the 16-bit weight (and the
/// 16-bit gradient): ZeRO's 16 bytes per parameter.
fn optimizer_bytes(graph: &Graph, node: &Node, slots: u64) -> u64 {
    node.params
        .iter()
        .map(|&p| {
            let fact = &graph.param(p).fact;
            if fact.dtype.is_half_float() {
                fact.numel().saturating_mul(4).saturating_mul(slots + 1)
            } else {
                fact.bytes().saturating_mul(slots)
            }
        })
        .fold(0, u64::saturating_add)
}

/// Whether `op` is a matrix product (or its gradient), which a GPU's tensor cores run at
/// their own rate in 16-bit floats.
fn is_matmul(op: &Op) -> bool {
    match op {
        Op::Linear(_)
        | Op::MatMul
        | Op::Conv2d(_)
        | Op::ConvTranspose2d(_)
        | Op::Einsum(_)
        | Op::Lstm(_) => true,
        Op::Grad(grad) => is_matmul(&grad.of),
        _ => false,
    }
}

/// What a tensor-parallel collective does in `op`'s pass (the forward op's, or its gradient's)
/// and its group's size; `None` for every other op.
fn tensor_parallel_pass(op: &Op) -> Option<(TensorParallelPass, usize)> {
    match op {
        Op::TensorParallel(t) => Some((t.forward(), t.ranks)),
        Op::Grad(grad) => match &*grad.of {
            Op::TensorParallel(t) => Some((t.backward(), t.ranks)),
            _ => None,
        },
        _ => None,
    }
}

/// Compute time in µs and occupancy of one node by the rules of [`costgraph_with`].
fn kernel_cost(graph: &Graph, node: &Node, flops: u64, roofline: &Roofline) -> KernelCost {
    let half = node.outputs.first().is_some_and(|f| f.dtype.is_half_float());
    let tensor_cores;
    let roofline = if half && is_matmul(&node.op) {
        tensor_cores = roofline.for_half_matmul();
        &tensor_cores
    } else {
        roofline
    };
    let input_bytes: Vec<u64> =
        node.inputs.iter().map(|&o| graph.fact(o).map_or(0, |f| f.bytes())).collect();
    let inputs: u64 = input_bytes.iter().sum();
    let outputs: u64 = node.outputs.iter().map(|f| f.bytes()).sum();
    let output_items = node.outputs.iter().fold(0u64, |sum, f| sum.saturating_add(f.numel()));
    // A reduction (a norm's or a bias's weight gradient, a loss) has few outputs but is
    // parallelised over its input, so a kernel's work items are those of the largest tensor it
    // reads or writes.
    let input_items = node.inputs.iter().filter_map(|&o| graph.fact(o)).map(|f| f.numel());
    let items = input_items.fold(output_items, u64::max);
    let params: u64 = node
        .params
        .iter()
        .filter_map(|p| graph.params.get(p.index()))
        .map(|p| p.fact.bytes())
        .sum();
    match &node.op {
        Op::Input | Op::Parameter => {
            KernelCost { time_us: 1, occupancy: roofline.occupancy(items) }
        }
        op if op.is_view() => roofline.kernel(0, 0, items),
        Op::Concat { .. } | Op::Transpose { .. } => roofline.kernel(0, inputs + outputs, items),
        Op::Slice { .. } => roofline.kernel(0, 2 * outputs, items),
        Op::Embedding(_) => roofline.kernel(0, 2 * outputs + inputs, items),
        op => {
            let mut kernel = roofline.kernel(flops, inputs + outputs + params, items);
            if let Op::Lstm(lstm) = op {
                let steps =
                    node.inputs.first().and_then(|&x| graph.fact(x)).and_then(|f| f.shape.first());
                let steps = steps.map_or(0, |&t| t as u64);
                kernel.time_us += roofline.recurrent_time_us(steps, lstm.directions() as u64);
            }
            kernel
        }
    }
}
