//! `--data-parallel N` on `ordo simulate` and `ordo compare`: the training graph replicated on
//! N devices, gradients all-reduced, and reverse first-k chosen by simulation.

use anyhow::{Context, bail};
use ordo::{DataParallel, OneDeviceSchedule};
use ordo::{DataParallelSteady as Outcome, FirstK};
use ordo::{SimOptions, Steady};
use serde_json::json;

use crate::format::{Table, bytes};
use crate::placing::{Loaded, ProblemArgs};

/// Most values of k the reverse first-k search simulates.
const MAX_TRIES: usize = 16;

/// `--all-reduce`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum AllReduceArg {
    /// NCCL's ring.
    Ring,
    /// NCCL's double binary tree across nodes, a chain inside each.
    Tree,
    /// Reduce-scatter inside each node, all-reduce across nodes, all-gather inside each.
    Hierarchical,
    /// The faster of ring and tree for each size.
    Nccl,
}

impl From<AllReduceArg> for ordo::AllReduceAlgorithm {
    fn from(arg: AllReduceArg) -> Self {
        match arg {
            AllReduceArg::Ring => Self::Ring,
            AllReduceArg::Tree => Self::Tree,
            AllReduceArg::Hierarchical => Self::Hierarchical,
            AllReduceArg::Nccl => Self::Nccl,
        }
    }
}

/// How the replicas are linked and how gradients are reduced.
#[derive(clap::Args, Clone, Debug)]
pub struct DataParallelArgs {
    /// With `--train`: replicate the training step on N devices and all-reduce the gradients
    /// (ring all-reduce), reporting the steady state.
    #[arg(allow_negative_numbers = true, long, value_name = "N", requires = "train")]
    pub data_parallel: Option<usize>,
    /// Reverse first-k: defer the weight gradients (and updates) of the first K layers with
    /// weights behind the dX chain so their all-reduces overlap the next forward pass; `auto`
    /// lets the simulator choose K.
    #[arg(
        allow_negative_numbers = true,
        long,
        value_name = "auto|K",
        default_value = "auto",
        requires = "data_parallel"
    )]
    pub first_k: String,
    /// All-reduce gradients in buckets of at least this size (e.g. `25MiB`); 0 reduces each
    /// gradient on its own.
    #[arg(
        allow_hyphen_values = true,
        long,
        value_name = "SIZE",
        default_value = "0",
        requires = "data_parallel"
    )]
    pub bucket: String,
    /// Bandwidth of the network between replicas in Gbit/s (default: the cluster's link
    /// between devices 0 and 1).
    #[arg(allow_negative_numbers = true, long, value_name = "GBIT/S", requires = "data_parallel")]
    pub network_gbps: Option<f64>,
    /// The all-reduce's algorithm: NCCL's `ring` or `tree`, `hierarchical` (reduce-scatter in
    /// each node, all-reduce across nodes, all-gather), or `nccl` (the faster of ring and tree
    /// for each bucket, as NCCL's tuner picks).
    #[arg(long, value_enum, default_value = "ring", requires = "data_parallel")]
    pub all_reduce: AllReduceArg,
    /// Latency of one message on that network, in µs.
    #[arg(
        allow_negative_numbers = true,
        long,
        value_name = "US",
        default_value_t = 25.0,
        requires = "network_gbps"
    )]
    pub network_latency_us: f64,
}

impl DataParallelArgs {
    /// `problem` with one device when data parallelism is asked for and no device count is
    /// given: a replica's problem needs only device 0 (the cluster, where there is one, links
    /// the replicas).
    pub fn replica_problem(&self, problem: &ProblemArgs) -> ProblemArgs {
        let mut problem = problem.clone();
        if self.data_parallel.is_some() && problem.devices.is_none() {
            problem.devices = Some(1);
        }
        problem
    }

    /// The copies of a pipeline of `stages` that `--data-parallel` asks for, and how each
    /// stage's copies reduce their gradients; `None` without `--data-parallel`.
    pub fn pipeline_replicas(
        &self,
        loaded: &Loaded,
        stages: usize,
    ) -> anyhow::Result<Option<ordo::PipelineReplicas>> {
        let Some(replicas) = self.data_parallel else { return Ok(None) };
        if !matches!(self.first_k.as_str(), "auto" | "0") {
            bail!(
                "--first-k {}: reverse first-k across the steps of a pipeline is not modelled \
                 yet; leave --first-k out (or give 0) with --pipeline",
                self.first_k
            );
        }
        let (link, bucket_bytes) = self.link_and_buckets()?;
        let algorithm = self.all_reduce.into();
        let network = ordo::stage_network(&loaded.problem, replicas, stages, link, algorithm);
        Ok(Some(ordo::PipelineReplicas { replicas, network, bucket_bytes }))
    }

    /// The link `--network-gbps` gives (`None`: the cluster's) and the bucket size.
    fn link_and_buckets(&self) -> anyhow::Result<(Option<ordo::CommModel>, u64)> {
        let bucket_bytes =
            ordo::parse_bytes(&self.bucket).with_context(|| format!("--bucket {}", self.bucket))?;
        let link = match self.network_gbps {
            Some(gbps) => Some(ordo::network(gbps, self.network_latency_us)?),
            None => None,
        };
        Ok((link, bucket_bytes))
    }

    /// The configuration (its `first_k` 0) and the choice of k, for `loaded`'s links.
    fn config(
        &self,
        loaded: &Loaded,
        replicas: usize,
        schedule: OneDeviceSchedule,
    ) -> anyhow::Result<(DataParallel, FirstK)> {
        let first_k = match self.first_k.as_str() {
            "auto" => FirstK::Auto { max_tries: MAX_TRIES },
            k => FirstK::Fixed(
                k.parse().with_context(|| format!("--first-k {k}: expected `auto` or a count"))?,
            ),
        };
        let (link, bucket_bytes) = self.link_and_buckets()?;
        let algorithm = self.all_reduce.into();
        let network = ordo::data_parallel_network(&loaded.problem, replicas, link, algorithm);
        Ok((DataParallel { replicas, network, bucket_bytes, first_k: 0, schedule }, first_k))
    }
}

fn evaluate(
    loaded: &Loaded,
    args: &DataParallelArgs,
    replicas: usize,
    schedule: OneDeviceSchedule,
    options: &SimOptions,
) -> anyhow::Result<Outcome> {
    let (config, first_k) = args.config(loaded, replicas, schedule)?;
    let searching = matches!(first_k, FirstK::Auto { .. });
    let message = if searching { "searching reverse first-k" } else { "simulating" };
    crate::progress::with_spinner(message, |_| {
        ordo::data_parallel_steady(&loaded.problem, &config, first_k, options)
    })
    .with_context(|| format!("simulating `{}` on {replicas} data-parallel devices", loaded.label))
}

/// `ordo simulate MODEL --train --data-parallel N`: the steady state with the k asked for.
pub fn simulate(
    loaded: &Loaded,
    args: &DataParallelArgs,
    replicas: usize,
    schedule: OneDeviceSchedule,
    options: &SimOptions,
    as_json: bool,
    drawings: &crate::commands::simulate::Drawings,
) -> anyhow::Result<()> {
    let outcome = evaluate(loaded, args, replicas, schedule, options)?;
    let limit = loaded.problem.place.devices.memory[0];
    if outcome.chosen.peak_memory_bytes > limit {
        bail!(
            "{} with reverse first-k = {} needs {} per device at its peak, more than the \
             device's {}",
            loaded.label,
            outcome.config.first_k,
            bytes(outcome.chosen.peak_memory_bytes),
            bytes(limit)
        );
    }
    let written = if drawings.any() {
        // One step of the plan with the k chosen, from an empty start: the steady state's
        // numbers above come from a longer run.
        let strategy = ordo::Strategy::DataParallel { config: outcome.config, steps: 1 };
        let planned = ordo::plan(&loaded.problem, &strategy)
            .with_context(|| format!("planning `{}` to draw one step", loaded.label))?;
        let report = ordo::simulate(&planned, options)
            .with_context(|| format!("simulating one step of `{}`", loaded.label))?;
        let title = format!(
            "{}: one step on {replicas} data-parallel devices, reverse first-k = {}",
            loaded.label, outcome.config.first_k
        );
        drawings.draw(&planned.plan, &report, &title, &vec![limit; planned.plan.devices])?
    } else {
        Vec::new()
    };
    if as_json {
        println!("{:#}", outcome_json(loaded, &outcome));
        return Ok(());
    }
    println!(
        "{} on {replicas} data-parallel devices ({}), steady state",
        loaded.label,
        schedule.name()
    );
    println!("network       {}", outcome.config.network);
    println!(
        "step time     {:.2} ms with reverse first-k, k = {}{}",
        outcome.chosen.step_time_us / 1e3,
        outcome.config.first_k,
        if outcome.search.is_some() { " (chosen by simulation)" } else { "" }
    );
    println!("peak memory   {} per device", bytes(outcome.chosen.peak_memory_bytes));
    for path in written {
        println!("wrote {} (one step, from an empty start)", path.display());
    }
    Ok(())
}

/// `ordo compare MODEL --train --data-parallel N`: one device, the default order and reverse
/// first-k side by side.
pub fn compare(
    loaded: &Loaded,
    args: &DataParallelArgs,
    replicas: usize,
    options: &SimOptions,
    as_json: bool,
) -> anyhow::Result<()> {
    let outcome = evaluate(loaded, args, replicas, OneDeviceSchedule::InOrder, options)?;
    if as_json {
        println!("{:#}", outcome_json(loaded, &outcome));
        return Ok(());
    }
    println!(
        "{} on {replicas} data-parallel devices, steady state; network {}",
        loaded.label, outcome.config.network
    );
    let base = outcome.default.step_time_us;
    let mut table = Table::new(&["schedule", "step ms", "speedup", "peak memory"]);
    let rows = [
        ("one device, no communication".to_string(), outcome.single),
        ("default order (k = 0)".to_string(), outcome.default),
        (format!("reverse first-k (k = {})", outcome.config.first_k), outcome.chosen),
    ];
    for (name, steady) in rows {
        table.row(vec![
            name,
            format!("{:.2}", steady.step_time_us / 1e3),
            format!("{:.3}x", base / steady.step_time_us.max(1e-9)),
            bytes(steady.peak_memory_bytes),
        ]);
    }
    print!("{}", table.render());
    if let Some(search) = &outcome.search {
        let tried: Vec<String> =
            search.tried.iter().map(|(k, s)| format!("{k}: {:.2}", s.step_time_us / 1e3)).collect();
        println!("k tried (ms): {}", tried.join(", "));
    }
    Ok(())
}

fn outcome_json(loaded: &Loaded, outcome: &Outcome) -> serde_json::Value {
    let steady = |s: &Steady| json!({"step_time_us": s.step_time_us, "peak_memory_bytes": s.peak_memory_bytes});
    let tried: Vec<_> = outcome
        .search
        .iter()
        .flat_map(|s| &s.tried)
        .map(|(k, s)| json!({"k": k, "step_time_us": s.step_time_us}))
        .collect();
    json!({
        "target": loaded.label,
        "replicas": outcome.config.replicas,
        "schedule": outcome.config.schedule.name(),
        "network": network_json(&outcome.config.network),
        "bucket_bytes": outcome.config.bucket_bytes,
        "step_time_us": outcome.chosen.step_time_us,
        "peak_memory_bytes": outcome.chosen.peak_memory_bytes,
        "first_k": outcome.config.first_k,
        "first_k_chosen": outcome.search.is_some(),
        "default_order": steady(&outcome.default),
        "one_device": steady(&outcome.single),
        "first_k_search": tried,
    })
}

/// The links the all-reduces use: one node's link, and the network and the algorithm where the
/// replicas span nodes or do not reduce by ring.
pub fn network_json(network: &ordo::Collectives) -> serde_json::Value {
    let mut value = json!({
        "us_per_byte": network.intra.us_per_byte,
        "latency_us": network.intra.fixed_us,
    });
    if let Some(inter) = network.inter {
        value["replicas_per_node"] = json!(inter.per_node);
        value["between_nodes"] =
            json!({"us_per_byte": inter.link.us_per_byte, "latency_us": inter.link.fixed_us});
    }
    if network.algorithm != ordo::AllReduceAlgorithm::Ring || network.inter.is_some() {
        value["all_reduce"] = json!(network.algorithm.as_str());
    }
    value
}
