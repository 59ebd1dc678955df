//! Measuring what a transfer between two CPU devices costs the engine: the hand-over from one
//! device's threads to the other's, plus the copy.
//!
//! [`measure_link`] runs a chain of `Scale` nodes whose consecutive nodes sit on alternate
//! devices, so that every node waits for a transfer, and the same chain on one device; the
//! difference of their median step times, per transfer, is what a transfer costs. Two tensor
//! sizes give a fixed cost and a cost per byte.

use ordo_cost::{CommModel, StepMode};
use ordo_ir::{GraphBuilder, TensorFact};
use ordo_problem::{Devices, PlaceProblem, Placement};

use crate::engine::{EngineOptions, Executable};
use crate::error::ExecError;
use crate::program::Program;
use crate::state::{TrainState, synthetic_feeds};

/// Transfers in each measured chain.
const HOPS: usize = 64;

/// Median step time in µs of a chain of [`HOPS`] `Scale` nodes over `elements` floats, on two
/// devices in turn (`alternate`) or all on one.
fn chain_step_us(elements: usize, alternate: bool, steps: usize) -> Result<f64, ExecError> {
    let setup = |e: ordo_ir::IrError| ExecError::Config(format!("link measurement: {e}"));
    let mut b = GraphBuilder::new("link");
    let mut x = b.input("x", TensorFact::f32([elements])).map_err(setup)?;
    for i in 0..HOPS {
        x = b.scale(&format!("s{i}"), x, 1.0).map_err(setup)?;
    }
    b.output(x);
    let graph = b.finish();
    let cost = ordo_cost::costgraph_from_graph(&graph);
    let problem = PlaceProblem::new(&cost, Devices::uniform(2, u64::MAX), StepMode::ForwardOnly)
        .map_err(|e| ExecError::Config(format!("link measurement: {e}")))?;
    let device_of = (0..graph.nodes.len()).map(|v| if alternate { v % 2 } else { 0 }).collect();
    let placement = Placement::in_id_order("link", device_of, 2);
    let plan = ordo_sched::build_plan(&problem, &placement)?;
    let program = Program::new(graph)?;
    let feeds = synthetic_feeds(program.graph(), 0)?;
    let exe = Executable::new(program.clone(), &plan, EngineOptions::default())?;
    let mut state = TrainState::new(&program, 0)?;
    let mut times = (0..steps)
        .map(|_| exe.run_step(&mut state, std::slice::from_ref(&feeds)).map(|r| r.wall_us))
        .collect::<Result<Vec<_>, _>>()?;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// The cost of one transfer between two CPU devices of the engine, as a communication model:
/// a fixed cost (the hand-over between threads) and a cost per byte (the copy), each at least
/// 0, from the median of `steps` steps of chains of 64 KiB-per-hop and 4 MiB-per-hop tensors.
///
/// # Errors
/// [`ExecError`] if the measuring plans cannot be built or run (a bug).
pub fn measure_link(steps: usize) -> Result<CommModel, ExecError> {
    let steps = steps.max(1);
    let (small, large) = (256usize, 1usize << 20);
    let per_transfer = |elements: usize| -> Result<f64, ExecError> {
        let alternate = chain_step_us(elements, true, steps)?;
        let one = chain_step_us(elements, false, steps)?;
        Ok(((alternate - one) / (HOPS as f64)).max(0.0))
    };
    let (c_small, c_large) = (per_transfer(small)?, per_transfer(large)?);
    let bytes = |elements: usize| (elements * 4) as f64;
    let us_per_byte = ((c_large - c_small) / (bytes(large) - bytes(small))).max(0.0);
    let fixed_us = (c_small - us_per_byte * bytes(small)).max(0.0);
    Ok(CommModel { us_per_byte, fixed_us })
}
