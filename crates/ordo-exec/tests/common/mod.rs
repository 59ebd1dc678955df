//! Shared by the engine's tests: random trainable graphs, their placement problems, random
//! placements, and the sequential reference to compare with.

#![allow(dead_code)]

use ordo_cost::StepMode;
use ordo_exec::sequential::run_step;
use ordo_exec::{Feeds, Program, RunSettings, StepOutputs, TrainState};
use ordo_ir::op::{Optimizer, UnaryOp};
use ordo_ir::training::training_graph;
use ordo_ir::{DType, Graph, GraphBuilder, OutletId, TensorFact};
use ordo_place::{Devices, PlaceProblem, Placement};

/// A random trainable graph of `n` layers on `[batch, width]` activations: linear layers,
/// activations, residual adds, concatenations, layer norms and dropout, with every
/// dangling value summed into the logits of a cross-entropy loss.
pub fn random_forward(n: usize, seed: u64) -> Graph {
    let mut rng = fastrand::Rng::with_seed(seed);
    let (batch, width, classes) = (3, 5, 4);
    let mut b = GraphBuilder::new("random");
    let x = b.input("x", TensorFact::f32([batch, 7])).unwrap();
    let first = b.linear("embed", x, width).unwrap();
    let mut live: Vec<OutletId> = vec![first];
    let mut read = vec![false];
    for i in 0..n {
        let k = rng.usize(..live.len());
        let a = live[k];
        read[k] = true;
        let name = format!("n{i}");
        let out = match rng.u8(0..7) {
            0 | 1 => b.linear(&name, a, width).unwrap(),
            2 => {
                let f =
                    [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Gelu][rng.usize(..4)];
                b.unary(&name, f, a).unwrap()
            }
            3 => {
                let j = rng.usize(..live.len());
                read[j] = true;
                b.add(&name, a, live[j]).unwrap()
            }
            4 => {
                let j = rng.usize(..live.len());
                read[j] = true;
                let c = b.concat(&format!("{name}.cat"), &[a, live[j]], 1).unwrap();
                b.linear(&name, c, width).unwrap()
            }
            5 => b.layer_norm(&name, a, 1e-5).unwrap(),
            _ => b.dropout(&name, a, 0.25).unwrap(),
        };
        live.push(out);
        read.push(false);
    }
    let dangling: Vec<OutletId> =
        live.iter().zip(&read).filter(|(_, r)| !**r).map(|(o, _)| *o).collect();
    let mut sum = dangling[0];
    for (i, &o) in dangling.iter().enumerate().skip(1) {
        sum = b.add(&format!("sum{i}"), sum, o).unwrap();
    }
    let logits = b.linear("head", sum, classes).unwrap();
    let labels = b.input("labels", TensorFact::new(DType::I64, [batch])).unwrap();
    let loss = b.cross_entropy("loss", logits, labels).unwrap();
    b.output(loss);
    b.finish()
}

/// The training graph of `forward` (whose loss is the node named `loss`).
pub fn training(forward: &Graph, optimizer: Optimizer) -> Graph {
    let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
    training_graph(forward, loss, optimizer).unwrap()
}

/// The placement problem of a training graph on `devices` devices with unlimited memory.
pub fn problem(graph: &Graph, devices: usize) -> PlaceProblem {
    let cost = ordo_cost::costgraph_from_graph(graph);
    PlaceProblem::new(&cost, Devices::uniform(devices, u64::MAX), StepMode::TrainingGraph).unwrap()
}

/// Each node on a random device, each device's nodes in id order (a topological order).
pub fn random_placement(nodes: usize, devices: usize, seed: u64) -> Placement {
    let mut rng = fastrand::Rng::with_seed(seed);
    let device_of = (0..nodes).map(|_| rng.usize(..devices)).collect();
    Placement::in_id_order("random", device_of, devices)
}

/// Settings with a learning rate that makes small models learn quickly.
pub fn settings() -> RunSettings {
    RunSettings {
        seed: 11,
        hyper: ordo_exec::cpu::Hyper { lr: 0.05, ..Default::default() },
        ..Default::default()
    }
}

/// `steps` steps of the sequential reference: each step's outputs and the final state.
pub fn reference(program: &Program, feeds: &Feeds, steps: usize) -> (Vec<StepOutputs>, TrainState) {
    let mut state = TrainState::new(program, 5).unwrap();
    let outs =
        (0..steps).map(|_| run_step(program, &mut state, feeds, &settings()).unwrap()).collect();
    (outs, state)
}

/// Whether two lists of tensors are bitwise equal.
pub fn bitwise(a: &[ordo_exec::cpu::Tensor], b: &[ordo_exec::cpu::Tensor]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.shape() == y.shape()
                && match (x.as_f32(), y.as_f32()) {
                    (Some(p), Some(q)) => p.iter().zip(q).all(|(u, v)| u.to_bits() == v.to_bits()),
                    _ => x == y,
                }
        })
}
