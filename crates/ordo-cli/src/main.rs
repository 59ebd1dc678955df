//! `ordo`: plan and run deep-learning training across devices, out of order.

mod commands;
mod format;
mod heap;
mod placing;
mod progress;
mod source;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Counts heap bytes when `ordo profile` measures temporary memory.
#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

/// Plan and run deep-learning training across devices, out of order.
#[derive(Parser, Debug)]
#[command(name = "ordo", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the built-in models: nodes, parameters and forward GFLOPs at the default batch.
    Models,
    /// Summarise a model or a cost-graph file, with a per-node table.
    Inspect(commands::inspect::Args),
    /// Write a model as a cost graph (NetworkX node-link JSON with Baechi's attributes).
    Export(commands::export::Args),
    /// Write a training pipeline's schedule in PyTorch's action format (CSV, one line per
    /// rank), checked by ordo's simulator first.
    ExportSchedule(commands::export_schedule::Args),
    /// Generate a random layered cost graph (for benchmarks and tests).
    Synth(commands::synth::Args),
    /// Place a model or cost graph on devices under memory limits.
    Place(commands::place::Args),
    /// Run every placement algorithm and compare them in one table.
    Compare(commands::compare::Args),
    /// Place, then schedule: per-device streams, transfers, events and buffer lifetimes.
    Plan(commands::plan::Args),
    /// Search the data, tensor and pipeline degrees, micro-batches, schedule, sharding and
    /// recomputation that train a model fastest on a cluster's GPUs, each simulated, within
    /// each GPU's memory.
    PlanParallel(commands::plan_parallel::Args),
    /// Training runs others measured at scale (published configurations and utilisation),
    /// each beside ordo's prediction.
    Published(commands::published::Args),
    /// Predict a step: time, utilisation, memory, critical path; Chrome trace and SVG charts.
    Simulate(commands::simulate::Args),
    /// Execute training (or forward) steps on CPU devices with real kernels, next to the
    /// simulator's prediction.
    Run(commands::run::Args),
    /// Time every node's CPU kernel on real inputs and write a profile for `--profile`.
    Profile(commands::profile::Args),
    /// Run ONNX backend node tests (model.onnx plus test data) on the CPU kernels: pass, fail
    /// and unsupported per op.
    Conformance(commands::onnx_conformance::Args),
}

/// Runs the command; on failure prints the error with its chain of causes (no backtrace: the
/// messages name the file, node or value at fault) and exits with status 1.
fn main() -> ExitCode {
    restore_default_sigpipe();
    let cli = Cli::parse();
    // The commands that time kernels keep freed memory in the process, so that a timed kernel
    // does not pay for page faults; the others return it (planning a long pipeline frees and
    // reallocates large plans, which the kept heap makes slower: 6.9 s against 6.1 s for
    // LLaMA-2 70B on 64 stages of 64 micro-batches). Called before any thread starts.
    if matches!(cli.command, Command::Run(_) | Command::Profile(_)) {
        ordo::profiling::keep_freed_memory();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // Line breaks of the message stay; other control characters (from a node name)
            // are shown escaped.
            let text = message(&err);
            let lines: Vec<String> = text.split('\n').map(format::printable).collect();
            eprintln!("error: {}", lines.join("\n"));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-separated, each cause once: a cause whose text the message
/// already holds (an error that writes its source into its own text) is not repeated.
fn message(err: &anyhow::Error) -> String {
    let mut chain = err.chain().map(text);
    let mut message = chain.next().unwrap_or_default();
    for cause in chain {
        if !message.contains(&cause) {
            message.push_str(": ");
            message.push_str(&cause);
        }
    }
    message
}

/// One error's text, the facade's parameters worded as this command's flags.
fn text(err: &(dyn std::error::Error + 'static)) -> String {
    // The facade's errors are ordo::Error values, a parameter's transparent over it (so it
    // never stands in the chain by itself).
    match err.downcast_ref::<ordo::Error>() {
        Some(ordo::Error::Parameter(parameter)) => {
            parameter.worded(|parameter, value| match value {
                Some(value) => format!("{} {value}", flag(parameter)),
                None => flag(parameter).to_string(),
            })
        }
        _ => err.to_string(),
    }
}

/// The flag that sets a parameter of the facade.
fn flag(parameter: ordo::Parameter) -> &'static str {
    use ordo::Parameter as P;
    match parameter {
        P::Devices => "--devices",
        P::Stages => "--pipeline",
        P::MicroBatches => "--micro-batches",
        P::Modulo => "--modulo",
        P::Schedule => "--schedule",
        P::Replicas => "--data-parallel",
        P::FirstK => "--first-k",
        P::BucketBytes => "--bucket",
        P::Steps => "--unroll",
        P::Defer => "--defer",
        P::Order => "--order",
        P::NetworkGbps => "--network-gbps",
        P::NetworkLatencyUs => "--network-latency-us",
        P::AllReduce => "--all-reduce",
        P::Nodes => "--nodes",
        P::Batch => "--batch",
        P::Gpus => "--gpus",
        P::MaxMicroBatches => "--max-micro-batches",
        P::TensorParallel => "--tensor-parallel",
        P::Recompute => "--recompute",
        P::Loss => "--loss",
        P::Small => "--small",
        P::Rtol => "--rtol",
        P::Atol => "--atol",
        P::Reps => "--reps",
        P::Granularity => "--granularity",
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Models => commands::models::run(),
        Command::Inspect(args) => commands::inspect::run(&args),
        Command::Export(args) => commands::export::run(&args),
        Command::ExportSchedule(args) => commands::export_schedule::run(&args),
        Command::Synth(args) => commands::synth::run(&args),
        Command::Place(args) => commands::place::run(&args),
        Command::Compare(args) => commands::compare::run(&args),
        Command::Plan(args) => commands::plan::run(&args),
        Command::Simulate(args) => commands::simulate::run(&args),
        Command::PlanParallel(args) => commands::plan_parallel::run(&args),
        Command::Published(args) => commands::published::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Profile(args) => commands::profile::run(&args),
        Command::Conformance(args) => commands::onnx_conformance::run(&args),
    }
}

/// Rust ignores SIGPIPE, so printing into a closed pipe (`ordo models | head -1`) would panic.
/// Restoring the default makes `ordo` end quietly there, like other command-line tools.
fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any other thread exists; `SIG_DFL` is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
