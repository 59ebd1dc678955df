//! Problems: a model costed for a target, in the form the placers and schedulers read.

use ordo_cost::StepMode;
use ordo_problem::PlaceProblem;

use crate::error::{Result, usage};
use crate::{Model, Target};

/// A model costed for a target under a memory mode: what every strategy is planned from.
#[derive(Clone, Debug)]
pub struct Problem {
    /// The placement problem (nodes, edges, tensors, devices) in index form.
    pub place: PlaceProblem,
    /// The model it was built from (its graph is what a run executes).
    pub model: Model,
    /// What the target's profile measured a step to cost outside its tasks, in µs (0 without
    /// a profile): added to predictions of a run.
    pub step_overhead_us: f64,
    /// How much slower a kernel runs while another device's (or worker's) kernel runs at once
    /// on the same host, from the profile (1 without one): [`crate::predict`] charges it for the
    /// time two kernels overlap.
    pub concurrency_slowdown: f64,
    /// The profile's spread when the node times were measured (see
    /// [`ordo_cost::Profile::spread`]): above 0.1, predictions may be off by as much.
    pub cost_spread: Option<f64>,
    /// Where the node times came from, in words: a profile (measured), a cost graph's own
    /// times, or a roofline (estimated, not measured), for every output to state.
    pub costs: String,
    /// The cluster the target describes, where it has one: its nodes and network cost
    /// data-parallel all-reduces.
    pub cluster: Option<ordo_cost::Cluster>,
}

impl Problem {
    /// Costs `model` for `target` and builds the problem that plans must fit under `mode`:
    /// one forward pass ([`StepMode::ForwardOnly`], Baechi's), the forward graph charged for
    /// a whole training step ([`StepMode::Training`]), or a training graph as it is
    /// ([`StepMode::TrainingGraph`]).
    ///
    /// # Errors
    /// [`crate::Error::Profile`] for a profile of another graph; [`crate::Error::Problem`]
    /// for a cost graph that is not a valid problem (a cycle, a link to a missing node) or a
    /// device count out of range.
    pub fn new(model: &Model, target: &Target, mode: StepMode) -> Result<Self> {
        if matches!(mode, StepMode::Training { .. }) && model.is_mixed_precision() {
            usage!(
                "{}: in mixed precision, plan the training graph (`--train`, mode \
                 \"training-graph\"), which charges the fp32 master weights and optimizer \
                 states; a forward graph charged for a training step cannot tell them apart",
                model.name()
            );
        }
        let costed = target.cost(model)?;
        let place = PlaceProblem::new(&costed, target.devices.clone(), mode)?;
        let step_overhead_us =
            target.profile.as_ref().and_then(|p| p.step_overhead_us).unwrap_or(0.0);
        let costs = target.costs_description(model);
        let concurrency_slowdown =
            target.profile.as_ref().and_then(|p| p.concurrency_slowdown).unwrap_or(1.0);
        let cost_spread = target.profile.as_ref().and_then(|p| p.spread);
        Ok(Self {
            place,
            model: model.clone(),
            step_overhead_us,
            concurrency_slowdown,
            cost_spread,
            costs,
            cluster: target.cluster.clone(),
        })
    }

    /// The model's name, for messages.
    pub fn name(&self) -> &str {
        self.model.name()
    }

    /// On a cluster of several nodes, each transfer of `plan` (planned for this problem)
    /// between devices on different nodes costed at the network's rate
    /// ([`ordo_cost::Cluster::comm`]) rather than the problem's one link between devices (a
    /// node's): a pipeline longer than a node sends across the network where it crosses
    /// nodes. The devices' orders stay those planned at the node's rate.
    pub(crate) fn cost_transfers_between_nodes(&self, plan: &mut ordo_sched::Plan) {
        let Some(cluster) = self.cluster.as_ref().filter(|c| c.node_count() > 1) else {
            return;
        };
        let per_node = cluster.devices_per_node();
        let devices = cluster.device_count();
        for task in &mut plan.tasks {
            let ordo_sched::TaskKind::Transfer { buffer, from, to } = task.kind else { continue };
            if from / per_node != to / per_node && from.max(to) < devices {
                let bytes = plan.buffers[buffer.0 as usize].bytes;
                task.duration_us = cluster.comm(from, to).time_us(bytes);
            }
        }
    }

    /// The best lower bound on any placement's step, in µs ([`ordo_place::lower_bounds`]).
    pub fn lower_bound_us(&self) -> u64 {
        ordo_place::lower_bounds(&self.place).best_us()
    }
}
