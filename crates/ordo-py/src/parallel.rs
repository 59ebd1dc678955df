//! `ordo.plan_parallel`: the facade's parallel planner for Python.

use ordo::{Model, ParallelConfig, ParallelSearch, Size};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::error;
use crate::model::optimizer;

/// The best data x tensor x pipeline plans of `model` (a zoo name, a Hugging Face `config.json` path or
/// `family:field=value,...`) on `gpus` GPUs (default: all) of `cluster` (a shipped name or a
/// file; `nodes` resizes it) for a global batch of `batch` samples, each simulated: a dict of
/// `candidates` (fastest first: `data`, `tensor`, `stages`, `micro_batches`, `schedule`,
/// `step_time_us`, `samples_per_s`, `mfu`, `bubble_fraction`, `peak_memory_bytes` per
/// stage), `rejected` (`config` dicts with a `reason`), `simulated`, `pruned`, and for the
/// best plan its `export`: `micro_batch_size`, `csv` (PyTorch's actions; `None` for one stage),
/// `stage_units`, `stage_rank`, `tensor_groups`, `pipeline_groups` and `data_groups` (ranks).
/// `tensor_parallel` is the most tensor-parallel ranks per stage tried (1: none);
/// `recompute` the activation recomputation (`auto`: none, selective, full in turn, the least
/// that fits; or one of them). A candidate says whether it shards the optimizer state
/// (`sharded_optimizer`, ZeRO-1, where the whole does not fit) and what it recomputes.
/// `granularity` is how finely each pipeline is simulated: `block` (within about 1% of the
/// node level, peaks a few percent higher), `node`, or `auto` (per block past 200,000
/// node-level tasks).
#[pyfunction]
#[pyo3(signature = (
    model, *, cluster, batch, gpus = None, nodes = None, seq_len = None, small = false,
    precision = "fp32", optimizer = "adam", max_micro_batches = 64, tensor_parallel = 8,
    recompute = "auto", all_reduce = "nccl", exhaustive = false, granularity = "block"
))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments, each with a default.
pub fn plan_parallel<'py>(
    py: Python<'py>,
    model: &str,
    cluster: &str,
    batch: usize,
    gpus: Option<usize>,
    nodes: Option<usize>,
    seq_len: Option<usize>,
    small: bool,
    precision: &str,
    optimizer: &str,
    max_micro_batches: usize,
    tensor_parallel: usize,
    recompute: &str,
    all_reduce: &str,
    exhaustive: bool,
    granularity: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let mut cluster = ordo::cluster(cluster).map_err(error)?;
    if let Some(nodes) = nodes {
        cluster = ordo::with_nodes(cluster, nodes).map_err(error)?;
    }
    let precision = precision.parse::<ordo::Precision>().map_err(error)?;
    let optimizer = self::optimizer(optimizer)?;
    let search = ParallelSearch {
        max_micro_batches,
        max_tensor_parallel: tensor_parallel,
        recompute: ordo::recompute_choices(recompute).map_err(error)?,
        all_reduce: ordo::all_reduce_algorithm(all_reduce).map_err(error)?,
        exhaustive,
        granularity: ordo::granularity(granularity).map_err(error)?,
        ..ParallelSearch::new(gpus.unwrap_or(cluster.device_count()), batch)
    };
    let variant = if small { ordo::Variant::Small } else { ordo::Variant::Full };
    let model_at = |micro: usize, tensor: usize| -> ordo::Result<Model> {
        let size = Size { batch: Some(micro), seq_len, variant, tensor_parallel: Some(tensor) };
        Model::load(model, size)?.training(optimizer, None)?.in_precision(precision)
    };
    let plans = py
        .detach(|| ordo::plan_parallel(&model_at, &cluster, &search, |_, _| {}))
        .map_err(error)?;
    let config = |c: &ParallelConfig| -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("data", c.data)?;
        dict.set_item("tensor", c.tensor)?;
        dict.set_item("stages", c.stages)?;
        dict.set_item("micro_batches", c.micro_batches)?;
        dict.set_item("schedule", c.schedule.name())?;
        dict.set_item("interleaved", c.interleaved)?;
        Ok(dict)
    };
    let candidates = PyList::empty(py);
    for c in &plans.candidates {
        let item = config(&c.config)?;
        item.set_item("step_time_us", c.step_time_us)?;
        item.set_item("samples_per_s", c.samples_per_s)?;
        item.set_item("mfu", c.mfu)?;
        item.set_item("sharded_optimizer", c.sharded_optimizer)?;
        item.set_item("recompute", c.recompute.name())?;
        item.set_item("bubble_fraction", c.bubble_fraction)?;
        item.set_item("peak_memory_bytes", c.peak_memory_bytes.clone())?;
        candidates.append(item)?;
    }
    let rejected = PyList::empty(py);
    for (c, why) in &plans.rejected {
        let item = config(c)?;
        item.set_item("reason", why)?;
        rejected.append(item)?;
    }
    let out = PyDict::new(py);
    if let Some(best) = plans.candidates.first() {
        let export = py
            .detach(|| ordo::export_parallel(&model_at, &cluster, batch, &best.config))
            .map_err(error)?;
        let item = PyDict::new(py);
        item.set_item("micro_batch_size", export.micro_batch_size)?;
        item.set_item("csv", export.schedule.as_ref().map(|s| s.csv.clone()))?;
        item.set_item("stage_units", export.schedule.as_ref().map(|s| s.stage_units.clone()))?;
        item.set_item("stage_rank", export.schedule.as_ref().map(|s| s.stage_rank.clone()))?;
        item.set_item("tensor_groups", export.tensor_groups)?;
        item.set_item("pipeline_groups", export.pipeline_groups)?;
        item.set_item("data_groups", export.data_groups)?;
        out.set_item("export", item)?;
    }
    out.set_item("candidates", candidates)?;
    out.set_item("rejected", rejected)?;
    out.set_item("simulated", plans.simulated)?;
    out.set_item("pruned", plans.pruned)?;
    Ok(out)
}
