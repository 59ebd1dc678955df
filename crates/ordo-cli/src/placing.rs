//! Turning command-line arguments into a placement problem: the graph, the devices and the
//! memory mode.

use anyhow::{Context, bail};
use ordo::PlaceOptions;
use ordo::{Optimizer, StepMode};
use ordo::{Placed, Placer, Problem, Target};

use crate::source::{self, SizeArgs};

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
    #[arg(allow_negative_numbers = true, long)]
    pub devices: Option<usize>,
    /// Memory of each device, e.g. `16GiB` (default: unlimited, or the cluster's; with
    /// `--cluster`, every device's memory instead of the cluster's).
    #[arg(allow_hyphen_values = true, long)]
    pub memory: Option<String>,
    /// A cluster description: a shipped name (e.g. `a100x8-nvlink`) or a JSON file.
    #[arg(allow_negative_numbers = true, long)]
    pub cluster: Option<String>,
    /// Nodes of the cluster (default: the description's), for a cluster with a network between
    /// its nodes (e.g. `h100x8-ib-ndr`).
    #[arg(allow_negative_numbers = true, long, requires = "cluster")]
    pub nodes: Option<usize>,
    /// Place the forward graph only, as Baechi does, ignoring what backward keeps in memory.
    #[arg(long, conflicts_with = "train")]
    pub forward_only: bool,
    /// Place the model's training graph: forward, dX, dW and optimizer-update nodes (zoo and
    /// ONNX models). Without it the forward graph is placed and charged for the whole step.
    #[arg(long)]
    pub train: bool,
    /// With `--train`, a loss to add to a model that ends at its predictions (an ONNX export
    /// of the forward pass): `cross-entropy` over its one output, with an int64 `labels` input.
    #[arg(allow_negative_numbers = true, long, value_enum, requires = "train")]
    pub loss: Option<LossArg>,
    /// Optimizer for the training-step memory model.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "momentum")]
    pub optimizer: OptimizerArg,
    /// Weights and activations in `fp32`, or mixed precision with them in `bf16` or `fp16`
    /// (with `--train`): matrix products at the tensor cores' rate, fp32 master weights and
    /// optimizer states charged. Planned and simulated only; `ordo run` computes in fp32.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "fp32")]
    pub precision: PrecisionArg,
    /// Node compute times, and the cost of a transfer where it was measured, from a profile
    /// written by `ordo profile` (of the same graph: the
    /// same model, size, `--small` and `--train`) instead of the roofline.
    #[arg(allow_negative_numbers = true, long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
}

/// A placement problem and how to describe it to the user.
pub struct Loaded {
    /// The problem.
    pub problem: ordo::Problem,
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

    /// The devices asked for (a cluster's, or `--devices` of `--memory` each), costed with
    /// the profile when one is given, and their description.
    fn target(&self) -> anyhow::Result<(Target, String)> {
        let (label, target) = match &self.cluster {
            Some(name) => {
                let mut cluster = ordo::cluster(name)?;
                if let Some(nodes) = self.nodes {
                    cluster = ordo::with_nodes(cluster, nodes)?;
                }
                let mut label = format!("devices of cluster `{}`", cluster.name);
                if let Some(text) = &self.memory {
                    let memory = memory_option(text)?;
                    cluster = cluster.with_memory(memory);
                    label.push_str(&format!(" with {} each", crate::format::bytes(memory)));
                }
                let target = Target::cluster(cluster, self.devices)?;
                (format!("{} {label}", target.count()), target)
            }
            None => {
                let Some(n) = self.devices else { bail!("give --devices N (or --cluster)") };
                let memory = self.memory.as_deref().map(memory_option).transpose()?;
                let memory = memory.unwrap_or(u64::MAX);
                let label = if memory == u64::MAX {
                    format!("{n} devices, unlimited memory")
                } else {
                    format!("{n} devices, {} each", crate::format::bytes(memory))
                };
                (label, Target::uniform(n, memory)?)
            }
        };
        Ok(match &self.profile {
            Some(path) => (target.with_profile(ordo::Profile::read(path)?), label),
            None => (target, label),
        })
    }

    /// Loads the target, costs it for the devices and builds the placement problem.
    pub fn load(&self) -> anyhow::Result<Loaded> {
        let (target, devices_label) = self.target()?;
        let model = source::load(&self.target, self.size.clone())?;
        let model = if self.train {
            model.training(self.optimizer(), self.loss.map(Into::into))?
        } else {
            model
        };
        let model = model.in_precision(self.precision.0)?;
        let label = model.name().to_string();
        let problem = Problem::new(&model, &target, self.mode()).with_context(|| {
            match (&target.profile, &self.profile) {
                (Some(_), Some(path)) => format!("costing `{label}` with {}", path.display()),
                _ => format!("preparing `{label}` for placement"),
            }
        })?;
        Ok(Loaded { problem, label, devices_label })
    }
}

/// The bytes of `--memory TEXT`: a size with a unit, more than 0.
///
/// # Errors
/// A size that does not parse, or 0, naming the option.
pub fn memory_option(text: &str) -> anyhow::Result<u64> {
    let bytes = ordo::parse_bytes(text).with_context(|| format!("--memory {text}"))?;
    if bytes == 0 {
        bail!("--memory {text}: a device needs some memory");
    }
    Ok(bytes)
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
    /// The placement problem in index form.
    pub fn place_problem(&self) -> &ordo::PlaceProblem {
        &self.problem.place
    }

    /// Places the problem with the named algorithm, showing a spinner if it takes a while;
    /// `auto` runs every fast placer and the search of [`ordo::place`] within
    /// `search`'s budget.
    pub fn place(
        &self,
        algo: &str,
        options: &PlaceOptions,
        search: &SearchArgs,
    ) -> anyhow::Result<Placed> {
        let placer = search.placer(algo, options)?;
        let name = placer.name();
        crate::progress::with_spinner(&format!("placing with {name}"), |bar| {
            ordo::place_reporting(&self.problem, &placer, &mut |p| {
                crate::progress::show_auto(bar, p);
            })
        })
        .with_context(|| format!("placing `{}` with {name}", self.label))
    }
}

/// The budget and seed of `--algo auto`'s search.
#[derive(clap::Args, Clone, Debug)]
pub struct SearchArgs {
    /// Time budget of `--algo auto`, e.g. `2s`, `500ms`: half (at least 1 s) for the fast
    /// placers, the rest for the search, whose number of simulations it sets (so the result
    /// does not depend on the machine's load unless a huge graph makes the search run past
    /// 1.1 x the budget, which the output then says).
    #[arg(allow_hyphen_values = true, long, default_value = "2s")]
    pub budget: String,
    /// Seed of `--algo auto`'s random restarts: the same seed gives the same placement.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0)]
    pub seed: u64,
    /// `--algo auto` never stops for the clock: every fast placer runs to its end and the
    /// search makes all the simulations the budget sets, so the placement is the same on every
    /// machine and build, however long it takes.
    #[arg(long)]
    pub reproducible: bool,
}

impl Default for SearchArgs {
    fn default() -> Self {
        Self { budget: "2s".into(), seed: 0, reproducible: false }
    }
}

impl SearchArgs {
    /// The placer `algo` names, `auto` with this budget and seed.
    pub fn placer(&self, algo: &str, options: &PlaceOptions) -> anyhow::Result<Placer> {
        Ok(match algo.parse::<Placer>()? {
            Placer::Auto(_) => Placer::Auto(ordo::AutoOptions {
                budget_seconds: self.budget_seconds()?,
                seed: self.seed,
                place: options.clone(),
                reproducible: self.reproducible,
            }),
            Placer::Algorithm(algo, _) => Placer::Algorithm(algo, options.clone()),
        })
    }

    /// The budget in seconds.
    pub fn budget_seconds(&self) -> anyhow::Result<f64> {
        seconds("--budget", &self.budget)
    }
}

/// The longest time an option takes: a day.
const MAX_SECONDS: f64 = 86_400.0;

/// A duration given to `option` as `2s`, `500ms` or a number of seconds, in seconds: finite,
/// at least 0 and at most a day.
pub fn seconds(option: &str, text: &str) -> anyhow::Result<f64> {
    let text = text.trim();
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        (text, 1.0)
    };
    match number.trim().parse::<f64>().map(|value| value * scale) {
        Ok(value) if value.is_finite() && (0.0..=MAX_SECONDS).contains(&value) => Ok(value),
        Ok(value) if value > MAX_SECONDS => {
            anyhow::bail!("{option} {text}: at most a day (86400s)")
        }
        _ => anyhow::bail!("{option} {text}: expected a duration such as `2s` or `500ms`"),
    }
}

/// Writes `value` as pretty JSON to the file `path` (atomically: whole or not at all).
///
/// # Errors
/// `-` (standard output is `--json`'s), and a file that cannot be written.
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        bail!("--out -: give a file name; --json prints the JSON on standard output");
    }
    let text = serde_json::to_string_pretty(value)?;
    crate::format::write_file(path, text.as_bytes())
}

/// A loss to add to a forward graph that ends at its predictions.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossArg {
    /// Mean cross-entropy of the graph's one output (logits, classes last) against an `i64`
    /// input `labels` shaped like the logits without their last dimension.
    CrossEntropy,
}

impl From<LossArg> for ordo::Loss {
    fn from(arg: LossArg) -> Self {
        match arg {
            LossArg::CrossEntropy => ordo::Loss::CrossEntropy,
        }
    }
}

/// `--precision`: the facade's precisions by their names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrecisionArg(pub ordo::Precision);

impl clap::ValueEnum for PrecisionArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [PrecisionArg; 3] = {
            let all = ordo::Precision::ALL;
            [PrecisionArg(all[0]), PrecisionArg(all[1]), PrecisionArg(all[2])]
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name()))
    }
}
