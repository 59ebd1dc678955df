//! Runs: executing a plan's steps on CPU devices with real kernels, next to the simulator's
//! prediction of the same plan.

use ordo_exec::{EngineOptions, Executable, Feeds, Program, StepRun, TrainState};
use ordo_ir::Graph;
use ordo_sched::{Plan, TaskKind};
use ordo_sim::{BusyFraction, Channel, Report, SimOptions, TaskTiming};

use crate::error::Result;
use crate::{Planned, Problem};

/// One run of the plan: one training step, or several for a steady-state plan.
#[derive(Clone, Debug)]
pub struct StepResult {
    /// The mean of `losses` (NaN when the run computed none).
    pub loss: f32,
    /// Per training step of the run, the mean of its replicas' (and micro-batches') losses.
    pub losses: Vec<f32>,
    /// What the engine measured: outputs, task spans, wall time, peak memory.
    pub run: StepRun,
}

/// A plan bound to its model's program, with the training state it advances step by step.
/// Every replica reads the same synthetic inputs each step (seeded from the options' seed
/// and the replica; each micro-batch of a pipeline its own), so a run is deterministic.
pub struct Runner {
    exe: Executable,
    state: TrainState,
    feeds: Vec<Feeds>,
    plan: Plan,
    workers: usize,
    step_overhead_us: f64,
    concurrency_slowdown: f64,
    /// Micro-batches per step (1 but for a pipeline).
    micro_batches: usize,
    /// Training steps per run (1 but for a steady-state plan).
    steps: usize,
    /// For a model imported from a file: how many of the parameters started from its values.
    from_file: Option<usize>,
}

impl Runner {
    /// Binds `planned` (made from `problem`) to the model's kernels. The parameters start from
    /// the values of an imported file where it has them ([`crate::Model::file_weights`]); the other
    /// parameters, the inputs and dropout are seeded by `options.settings.seed`. A data-parallel plan's
    /// loss gradient is scaled by `1 / replicas`, so that the all-reduced sum is the mean.
    ///
    /// # Errors
    /// [`crate::Error::Usage`] for a cost graph (it has no kernels), a model in mixed
    /// precision (the CPU kernels compute in fp32) or a plan made for another problem
    /// ([`Planned::check_belongs_to`]: its devices, its memory); [`crate::Error::Exec`] for an
    /// op without a CPU kernel or a plan that does not run the model's graph.
    pub fn new(problem: &Problem, planned: &Planned, options: EngineOptions) -> Result<Self> {
        let graph = problem.model.require_graph("running a plan needs a model with kernels")?;
        if problem.model.is_mixed_precision() {
            crate::error::usage!(
                "{}: mixed precision is planned and simulated, not run: the CPU kernels compute \
                 in fp32 (run the fp32 model)",
                problem.model.name()
            );
        }
        planned.check_belongs_to(problem)?;
        let program =
            program(graph, planned).map_err(|e| problem.model.explain_missing_kernels(e))?;
        let seed = options.settings.seed;
        let workers = options.workers_per_device;
        let exe = Executable::new(program.clone(), &planned.plan, options)?;
        let mut state = TrainState::new(&program, seed)?;
        let mut from_file = None;
        if let Some(mut weights) = problem.model.file_weights()? {
            let mut loaded = 0;
            for (p, param) in program.graph().params.iter().enumerate() {
                let Some(value) = weights.remove(&param.name) else { continue };
                if value.shape() != param.fact.shape.as_slice() {
                    return Err(crate::Error::Usage(format!(
                        "parameter `{}`: the file holds {}, the graph needs {}",
                        param.name,
                        value.fact(),
                        param.fact
                    )));
                }
                state.params[p] = std::sync::Arc::new(value);
                loaded += 1;
            }
            from_file = Some(loaded);
        }
        // Every training step reads the same batch: each step's copy of an input of an
        // unrolled plan is fed what the step's graph would read.
        let feeds = (0..planned.replicas)
            .map(|r| match planned.steps {
                1 => ordo_exec::synthetic_feeds(program.graph(), seed + r as u64),
                _ => ordo_exec::synthetic_feeds(graph, seed + r as u64).map(|feeds| {
                    let copy = program.graph();
                    ordo_exec::copied_feeds(graph, copy, program.provenance(), &feeds)
                }),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            exe,
            state,
            feeds,
            plan: planned.plan.clone(),
            workers,
            step_overhead_us: problem.step_overhead_us,
            concurrency_slowdown: problem.concurrency_slowdown,
            micro_batches: planned.micro_batches(),
            steps: planned.steps,
            from_file,
        })
    }

    /// For a model imported from a file, how many parameters started from its values, of how
    /// many (the others were seeded); `None` for a model without a file (all seeded).
    pub fn parameters_from_file(&self) -> Option<(usize, usize)> {
        self.from_file.map(|loaded| (loaded, self.state.params.len()))
    }

    /// The parameters as they are now.
    pub fn parameters(&self) -> &[std::sync::Arc<ordo_exec::cpu::Tensor>] {
        &self.state.params
    }

    /// The program the plan runs: the model's graph, or for a pipeline its micro-batched copy.
    pub fn program(&self) -> &Program {
        self.exe.program()
    }

    /// The inputs every step reads, one set per replica.
    pub fn feeds(&self) -> &[Feeds] {
        &self.feeds
    }

    /// Runs untimed steps on a copy of the state for `seconds` (at least one step when
    /// `seconds` > 0, none for 0): the state, and so the losses of the steps that follow, are
    /// unchanged, and the machine is warm when they are measured. Returns the steps run.
    ///
    /// # Errors
    /// As [`Runner::step`].
    pub fn warm_up(&self, seconds: f64) -> Result<usize> {
        let clock = std::time::Instant::now();
        let mut steps = 0;
        while clock.elapsed().as_secs_f64() < seconds {
            let mut copy = self.state.clone();
            self.exe.run_step(&mut copy, &self.feeds)?;
            steps += 1;
        }
        Ok(steps)
    }

    /// Runs one step: forward, backward and updates (or the forward pass of a forward graph).
    ///
    /// # Errors
    /// [`crate::Error::Exec`] when a kernel fails or a memory budget is exceeded; the state is
    /// then as before the step.
    pub fn step(&mut self) -> Result<StepResult> {
        let run = self.exe.run_step(&mut self.state, &self.feeds)?;
        // A replica's first outputs are its losses: one per micro-batch, or one per step of a
        // steady-state plan.
        let mut losses = vec![Vec::new(); self.steps];
        for outputs in &run.outputs {
            let first = outputs.outputs.iter().take(self.micro_batches.max(self.steps));
            for (k, t) in first.enumerate() {
                if let Some(&value) = t.as_f32().and_then(<[f32]>::first) {
                    losses[k % self.steps].push(value);
                }
            }
        }
        let mean = |v: &[f32]| {
            if v.is_empty() { f32::NAN } else { v.iter().sum::<f32>() / v.len() as f32 }
        };
        let losses: Vec<f32> = losses.iter().map(|l| mean(l)).collect();
        let loss = mean(&losses);
        Ok(StepResult { loss, losses, run })
    }

    /// The simulator's prediction of one run of this plan on these CPU devices (see
    /// [`predict`]: one training step, or [`Planned::steps`] of them), plus what the profile
    /// measured a run costs outside its tasks.
    ///
    /// # Errors
    /// [`crate::Error::Sim`] if the simulator refuses the plan.
    pub fn predict(&self) -> Result<Report> {
        let mut report = predict(&self.plan, self.workers, self.concurrency_slowdown)?;
        report.step_time_us += self.step_overhead_us;
        Ok(report)
    }

    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The parameters and optimizer state after the steps run so far.
    pub fn state(&self) -> &TrainState {
        &self.state
    }
}

/// The program that runs `planned` on `graph`: a plan of several steps runs the graph unrolled
/// over them ([`ordo_ir::transform::unroll`]), a data-parallel plan's loss gradient scaled by
/// `1 / replicas` and a pipeline's by `1 / micro-batches` (so that the summed gradients are
/// those of the mean loss), a pipeline's graph copied per micro-batch with its weight
/// gradients accumulated across them ([`ordo_ir::transform::micro_batch`], whose copies are
/// the micro-batched problem's node for node).
///
/// # Errors
/// [`crate::Error::Sched`] when the micro-batched problem was not made from the graph;
/// [`crate::Error::Exec`] for an op without a CPU kernel.
pub fn program(graph: &Graph, planned: &Planned) -> Result<Program> {
    if planned.steps > 1 {
        let mut unrolled = ordo_ir::transform::unroll(graph, planned.steps)?;
        if planned.replicas > 1 {
            ordo_exec::scale_backward_seed(&mut unrolled.graph, 1.0 / planned.replicas as f64);
        }
        return Ok(Program::unrolled(unrolled)?);
    }
    let Some(split) = &planned.micro_batched else {
        let mut graph = graph.clone();
        if planned.replicas > 1 {
            ordo_exec::scale_backward_seed(&mut graph, 1.0 / planned.replicas as f64);
        }
        return Ok(Program::new(graph)?);
    };
    let micro_batches = split.micro_batches();
    let mut copied = ordo_ir::transform::micro_batch(graph, micro_batches)?;
    if copied.provenance != split.provenance {
        return Err(ordo_sched::SchedError::Mismatch(format!(
            "the pipeline's micro-batched problem ({} nodes) was not made from `{}` ({} nodes \
             per {micro_batches} micro-batches)",
            split.problem.len(),
            graph.name,
            copied.graph.nodes.len()
        ))
        .into());
    }
    if micro_batches > 1 {
        ordo_exec::scale_backward_seed(&mut copied.graph, 1.0 / micro_batches as f64);
    }
    Ok(Program::micro_batched(copied)?)
}

/// The simulator's prediction of `plan` run with `workers` compute threads per device on one
/// host whose cores slow each other by `slowdown` (the profile's
/// [`ordo_cost::Profile::concurrency_slowdown`], 1 for none): each kernel or copy keeps one
/// thread, `slowdown / workers` of its device, busy, so that tasks of different streams run
/// side by side up to `workers` at a time, each `slowdown` times slower than alone (the
/// simulator's concurrent kernels, sharing by occupancy); work on different devices is slowed
/// by `slowdown` while it overlaps ([`ordo_sim::simulate_on_host`]); a transfer is a copy
/// made by a worker of the sending device (the simulator's host channel).
///
/// # Errors
/// [`crate::Error::Sim`] if the simulator refuses the plan.
pub fn predict(plan: &Plan, workers: usize, slowdown: f64) -> Result<Report> {
    let mut plan = plan.clone();
    let slowdown = if slowdown.is_finite() { slowdown.max(1.0) } else { 1.0 };
    if workers > 1 {
        let occupancy = (slowdown / workers as f64).min(1.0);
        for task in &mut plan.tasks {
            if let TaskKind::Compute { .. } | TaskKind::Transfer { .. } = task.kind {
                task.occupancy = occupancy;
            }
        }
    }
    let options = SimOptions { concurrent_kernels: workers > 1, channel: Channel::Host };
    Ok(ordo_sim::simulate_on_host(&plan, &options, slowdown)?)
}

/// A measured step in the simulator's report form, so that it draws as the same trace
/// ([`ordo_sim::chrome_trace_json`]) as a prediction.
pub fn measured_report(run: &StepRun) -> Report {
    Report {
        step_time_us: run.wall_us,
        lower_bound_us: 0.0,
        peak_memory_bytes: run.peak_memory_bytes.clone(),
        busy_fraction: BusyFraction { devices: Vec::new(), links: Vec::new(), collectives: 0.0 },
        tasks: run
            .tasks
            .iter()
            .map(|t| TaskTiming {
                name: String::new(),
                start_us: t.start_us,
                finish_us: t.finish_us,
            })
            .collect(),
        memory_timeline: Vec::new(),
        critical_path: Vec::new(),
    }
}
