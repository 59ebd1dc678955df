//! The files ordo reads and writes besides models: plans (`ordo.plan/1`) and Baechi's cost
//! graphs (NetworkX node-link JSON), which are a file format only: a model's costs are made
//! for a [`crate::Target`] when a [`crate::Problem`] is built.

use std::path::Path;

use ordo_cost::CostGraph;
use ordo_ir::Graph;
use ordo_sched::Plan;

use crate::Problem;
use crate::error::Result;

pub use ordo_cost::write_atomically;

/// Reads a plan file (`ordo.plan/1`) and checks that it is well formed.
///
/// # Errors
/// [`crate::Error::Sched`] naming the file and what is wrong with it.
pub fn read_plan(path: impl AsRef<Path>) -> Result<Plan> {
    Ok(ordo_sched::read_plan(path)?)
}

impl Problem {
    /// Checks that `plan` runs this problem's graph on at most its devices: every compute
    /// task names a node of the graph, and every node has exactly one compute task.
    ///
    /// # Errors
    /// [`crate::Error::Sched`] naming the first unknown node, the first node run twice, the
    /// first node the plan leaves out, or a plan with more devices than the problem.
    pub fn check_plan(&self, plan: &Plan) -> Result<()> {
        Ok(ordo_sched::check_against(plan, &self.place)?)
    }
}

/// `graph` costed by the default roofline, as Baechi's cost graph, for a cost-graph file.
pub fn roofline_cost_graph(graph: &Graph) -> CostGraph {
    ordo_cost::costgraph_from_graph(graph)
}

/// A layered random cost graph of `nodes` nodes drawn from `seed`, for testing placers at
/// sizes no model has.
pub fn synthetic_cost_graph(nodes: usize, seed: u64) -> CostGraph {
    ordo_cost::synth(nodes, seed)
}

/// `graph` as the text of a cost-graph file (compact JSON).
pub fn cost_graph_json(graph: &CostGraph) -> String {
    ordo_cost::to_json_string(graph)
}

/// Writes `graph` as a cost-graph file, whole or not at all.
///
/// # Errors
/// [`crate::Error::CostGraph`] naming the file that could not be written.
pub fn write_cost_graph(graph: &CostGraph, path: impl AsRef<Path>) -> Result<()> {
    Ok(ordo_cost::write_costgraph(graph, path)?)
}
