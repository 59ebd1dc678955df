//! Turning command-line arguments into a placement problem: the graph, the devices and the
//! memory mode.

use anyhow::{Context, bail};
use ordo_cost::{Cluster, CostGraph, Optimizer, StepMode};
use ordo_place::{Algorithm, Devices, PlaceOptions, PlaceProblem, Placement};

use crate::source::{self, SizeArgs, Source};

/// Optimizer whose state the training-step memory model counts.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum OptimizerArg {
    /// Plain SGD (no state).
    Sgd,
    /// SGD with momentum (one state tensor per parameter).
    Momentum,
    /// Adam (two state tensors per parameter).
    Adam,
}

impl From<OptimizerArg> for Optimizer {
    fn from(arg: OptimizerArg) -> Self {
        match arg {
            OptimizerArg::Sgd => Optimizer::Sgd,
            OptimizerArg::Momentum => Optimizer::SgdMomentum,
            OptimizerArg::Adam => Optimizer::Adam,
        }
    }
}

/// Arguments shared by `place` and `compare`.
#[derive(clap::Args, Clone, Debug)]
pub struct ProblemArgs {
    /// A zoo model name (see `ordo models`), an ONNX model (`.onnx`) or a cost-graph JSON file.
    pub target: String,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Number of devices (default: all of the cluster's).
    #[arg(long)]
    pub devices: Option<usize>,
    /// Memory of each device, e.g. `16GiB` (default: unlimited). Not with `--cluster`.
    #[arg(long, conflicts_with = "cluster")]
    pub memory: Option<String>,
    /// A cluster description: a shipped name (e.g. `a100x8-nvlink`) or a JSON file.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Place the forward graph only, as Baechi does, ignoring what backward keeps in memory.
    #[arg(long, conflicts_with = "train")]
    pub forward_only: bool,
    /// Place the model's training graph: forward, dX, dW and optimizer-update nodes (zoo and
    /// ONNX models). Without it the forward graph is placed and charged for the whole step.
    #[arg(long)]
    pub train: bool,
    /// With `--train`, a loss to add to a model that ends at its predictions (an ONNX export
    /// of the forward pass): `cross-entropy` over its one output, with an int64 `labels` input.
    #[arg(long, value_enum, requires = "train")]
    pub loss: Option<crate::onnx::LossArg>,
    /// Optimizer for the training-step memory model.
    #[arg(long, value_enum, default_value = "momentum")]
    pub optimizer: OptimizerArg,
    /// Node compute times, and the cost of a transfer where it was measured, from a profile
    /// written by `ordo profile` (of the same graph: the
    /// same model, size, `--small` and `--train`) instead of the roofline.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
}

/// A placement problem and how to describe it to the user.
pub struct Loaded {
    /// The problem.
    pub problem: PlaceProblem,
    /// What was loaded, e.g. `resnet50` or the file path.
    pub label: String,
    /// The devices, e.g. `4 devices, 16.0 GiB each` or the cluster name.
    pub devices_label: String,
}

impl ProblemArgs {
    /// The memory mode the arguments ask for.
    pub fn mode(&self) -> StepMode {
        if self.forward_only {
            return StepMode::ForwardOnly;
        }
        if self.train {
            return StepMode::TrainingGraph;
        }
        StepMode::Training { optimizer: self.optimizer() }
    }

    fn optimizer(&self) -> Optimizer {
        self.optimizer.into()
    }

    /// Loads the target, costs it for the devices and builds the placement problem.
    pub fn load(&self) -> anyhow::Result<Loaded> {
        let cluster = self.cluster.as_deref().map(load_cluster).transpose()?;
        let n = match (&cluster, self.devices) {
            (_, Some(0)) => bail!("--devices must be at least 1"),
            (Some(c), Some(n)) if n > c.device_count() => {
                bail!("--devices {n}: cluster `{}` has only {} devices", c.name, c.device_count())
            }
            (_, Some(n)) => n,
            (Some(c), None) => c.device_count(),
            (None, None) => bail!("give --devices N (or --cluster)"),
        };
        let (devices, devices_label) = match &cluster {
            Some(c) => {
                let comm =
                    if n > 1 { c.comm(0, 1) } else { ordo_cost::CommModel::baechi_default() };
                let memory = c.memory_limits()[..n].to_vec();
                (Devices { memory, comm }, format!("{n} devices of cluster `{}`", c.name))
            }
            None => {
                let memory = match &self.memory {
                    Some(text) => {
                        ordo_cost::parse_bytes(text).with_context(|| format!("--memory {text}"))?
                    }
                    None => u64::MAX,
                };
                let label = if memory == u64::MAX {
                    format!("{n} devices, unlimited memory")
                } else {
                    format!("{n} devices, {} each", crate::format::bytes(memory))
                };
                (Devices::uniform(n, memory), label)
            }
        };
        let profile = self.profile.as_deref().map(ordo_cost::Profile::read).transpose()?;
        let mut devices = devices;
        if let Some(comm) = profile.as_ref().and_then(ordo_cost::Profile::comm) {
            devices.comm = comm;
        }
        let (graph, label) = self.cost_graph(cluster.as_ref(), profile.as_ref())?;
        let problem = PlaceProblem::new(&graph, devices, self.mode())
            .with_context(|| format!("preparing `{label}` for placement"))?;
        Ok(Loaded { problem, label, devices_label })
    }

    /// The costed graph, with node times from `profile` (read from `--profile`) when given,
    /// and its label.
    fn cost_graph(
        &self,
        cluster: Option<&Cluster>,
        profile: Option<&ordo_cost::Profile>,
    ) -> anyhow::Result<(CostGraph, String)> {
        let (mut graph, label) = self.roofline_cost_graph(cluster)?;
        if let (Some(profile), Some(path)) = (profile, &self.profile) {
            ordo_cost::apply_profile(&mut graph, profile)
                .with_context(|| format!("costing `{label}` with {}", path.display()))?;
        }
        Ok((graph, label))
    }

    fn roofline_cost_graph(
        &self,
        cluster: Option<&Cluster>,
    ) -> anyhow::Result<(CostGraph, String)> {
        Ok(match source::load(&self.target, self.size)? {
            Source::Model(forward) => {
                let graph = if self.train {
                    training_graph(&forward, self.optimizer(), self.loss)?
                } else {
                    *forward
                };
                let costed = match cluster {
                    Some(c) => ordo_cost::costgraph_for_cluster(&graph, c),
                    None => ordo_cost::costgraph_from_graph(&graph),
                };
                (costed, graph.name.clone())
            }
            Source::CostGraph { path, .. } if self.train => {
                bail!(
                    "--train builds the training graph of a model; {} is a cost graph",
                    path.display()
                )
            }
            Source::CostGraph { path, graph } => (*graph, path.display().to_string()),
        })
    }
}

/// The training graph of a model from its loss (see [`crate::onnx::with_loss`], which adds one
/// when `add` asks), named `<model> (training graph)`.
pub fn training_graph(
    forward: &ordo_ir::Graph,
    optimizer: Optimizer,
    add: Option<crate::onnx::LossArg>,
) -> anyhow::Result<ordo_ir::Graph> {
    let (forward, loss) = crate::onnx::with_loss(forward, add)?;
    let mut graph = ordo_ir::training::training_graph(&forward, loss, optimizer)?;
    graph.name = format!("{} (training graph)", forward.name);
    Ok(graph)
}

fn load_cluster(arg: &str) -> anyhow::Result<Cluster> {
    if source::is_file(arg) {
        Ok(Cluster::read(arg)?)
    } else {
        Cluster::builtin(arg).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown cluster `{arg}`; shipped: {}",
                Cluster::builtin_names().collect::<Vec<_>>().join(", ")
            )
        })
    }
}

/// The memory mode in words.
pub fn mode_label(mode: StepMode) -> &'static str {
    match mode {
        StepMode::ForwardOnly => "forward pass only (Baechi's model)",
        StepMode::Training { optimizer: Optimizer::Sgd } => "whole training step, SGD",
        StepMode::Training { optimizer: Optimizer::SgdMomentum } => {
            "whole training step, SGD with momentum"
        }
        StepMode::Training { optimizer: Optimizer::Adam } => "whole training step, Adam",
        StepMode::TrainingGraph => "training graph (forward, dX, dW and updates)",
    }
}

impl Loaded {
    /// Places the problem with the named algorithm, showing a spinner if it takes a while;
    /// `auto` runs every fast placer and the search of [`ordo_place::place_auto`] within
    /// `search`'s budget.
    pub fn place(
        &self,
        algo: &str,
        options: &PlaceOptions,
        search: &SearchArgs,
    ) -> anyhow::Result<Placed> {
        if algo == "auto" {
            let auto_options = ordo_place::AutoOptions {
                budget_seconds: search.budget_seconds()?,
                seed: search.seed,
                place: options.clone(),
            };
            let auto = crate::progress::with_spinner("placing with auto", |_| {
                ordo_place::place_auto(&self.problem, &auto_options)
            })
            .with_context(|| format!("placing `{}` with auto", self.label))?;
            return Ok(Placed { placement: auto.placement.clone(), auto: Some(auto) });
        }
        let algo: Algorithm = algo.parse().map_err(|e| anyhow::anyhow!("{e}, auto"))?;
        let placement =
            crate::progress::with_spinner(&format!("placing with {}", algo.name()), |_| {
                ordo_place::place(&self.problem, algo, options)
            })
            .with_context(|| format!("placing `{}` with {}", self.label, algo.name()))?;
        Ok(Placed { placement, auto: None })
    }
}

/// A placement, and what `auto` did to find it.
pub struct Placed {
    /// The placement.
    pub placement: Placement,
    /// The candidates and the search, when the algorithm was `auto`.
    pub auto: Option<ordo_place::AutoPlacement>,
}

/// The budget and seed of `--algo auto`'s search.
#[derive(clap::Args, Clone, Debug)]
pub struct SearchArgs {
    /// Time budget of `--algo auto`'s search after the fast placers, e.g. `2s`, `500ms`
    /// (turned into a fixed number of simulations, so the result does not depend on the
    /// machine's load).
    #[arg(long, default_value = "2s")]
    pub budget: String,
    /// Seed of `--algo auto`'s random restarts: the same seed gives the same placement.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl Default for SearchArgs {
    fn default() -> Self {
        Self { budget: "2s".into(), seed: 0 }
    }
}

impl SearchArgs {
    /// The budget in seconds.
    pub fn budget_seconds(&self) -> anyhow::Result<f64> {
        let text = self.budget.trim();
        let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
            (ms, 1e-3)
        } else if let Some(s) = text.strip_suffix('s') {
            (s, 1.0)
        } else {
            (text, 1.0)
        };
        match number.trim().parse::<f64>() {
            Ok(value) if value.is_finite() && value >= 0.0 => Ok(value * scale),
            _ => anyhow::bail!("--budget {text}: expected a duration such as `2s` or `500ms`"),
        }
    }
}

/// Writes `value` as pretty JSON to `path`, or to standard output when `path` is `-`.
/// Returns whether it went to standard output (so nothing else should be printed).
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> anyhow::Result<bool> {
    let text = serde_json::to_string_pretty(value)?;
    if path.as_os_str() == "-" {
        println!("{text}");
        return Ok(true);
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(false)
}
