//! Data-parallel planning: `ordo.data_parallel_plan`, the buckets and reverse first-k order
//! that `ordo.data_parallel.DataParallel` issues under PyTorch, with ordo's predictions.

use ordo::{DataParallel, FirstK, OneDeviceSchedule, SimOptions};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::model::PyProblem;
use crate::{error, usage};

/// `first_k` as Python gives it: `"auto"` or a count.
fn first_k_of(value: &Bound<'_, PyAny>, max_tries: usize) -> PyResult<FirstK> {
    if let Ok(text) = value.extract::<String>() {
        return match text.as_str() {
            "auto" => Ok(FirstK::Auto { max_tries }),
            other => Err(usage(format!("first_k=`{other}`: expected \"auto\" or a count"))),
        };
    }
    match value.extract::<usize>() {
        Ok(k) => Ok(FirstK::Fixed(k)),
        Err(_) => Err(usage(format!("first_k={value}: expected \"auto\" or a count >= 0"))),
    }
}

/// The data-parallel step of `problem` (one replica's training problem) on `replicas` ranks:
/// reverse first-k (`first_k`: a count, or `"auto"`: the fastest of at most `max_tries`
/// values simulated) and gradients cut into buckets of at least `bucket_bytes`, over a
/// network of `network_gbps` Gbit/s and `latency_us` per message (default: the problem's
/// cluster of nodes, or its link between devices), all-reduced by `all_reduce` (`"ring"`,
/// `"tree"`, `"hierarchical"` or `"nccl"`). A dict: `first_k`, `buckets` (in the order every rank issues them,
/// each a dict of `layers`, `gradients`, `bytes`, `deferred`) and `predicted` (steady-state
/// step times in µs: `default` (k = 0), `chosen`, `single` (one device, no communication),
/// `peak_bytes`, and `tried`: `(k, step µs, peak bytes)` per k simulated).
#[pyfunction]
#[pyo3(signature = (
    problem, *, replicas, first_k = None, bucket_bytes = 25 << 20, network_gbps = None,
    latency_us = 0.0, max_tries = 16, all_reduce = "ring"
))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments, each with a default.
pub fn data_parallel_plan<'py>(
    py: Python<'py>,
    problem: &PyProblem,
    replicas: usize,
    first_k: Option<&Bound<'py, PyAny>>,
    bucket_bytes: u64,
    network_gbps: Option<f64>,
    latency_us: f64,
    max_tries: usize,
    all_reduce: &str,
) -> PyResult<Bound<'py, PyDict>> {
    if max_tries == 0 {
        return Err(usage("max_tries must be at least 1"));
    }
    // The facade refuses zero replicas and a bad bandwidth or latency; a latency without a
    // bandwidth is not passed to it, so it is checked here.
    if !(latency_us.is_finite() && latency_us >= 0.0) {
        return Err(usage(format!("latency_us={latency_us}: expected a number >= 0")));
    }
    let first_k = match first_k {
        Some(value) => first_k_of(value, max_tries)?,
        None => FirstK::Auto { max_tries },
    };
    let link = match network_gbps {
        Some(gbps) => Some(ordo::network(gbps, latency_us).map_err(error)?),
        None => None,
    };
    let algorithm = ordo::all_reduce_algorithm(all_reduce).map_err(error)?;
    let network = ordo::data_parallel_network(&problem.inner, replicas, link, algorithm);
    let config = DataParallel {
        replicas,
        network,
        bucket_bytes,
        first_k: 0,
        schedule: OneDeviceSchedule::InOrder,
    };
    let inner = &problem.inner;
    let (steady, buckets) = py
        .detach(|| {
            let steady =
                ordo::data_parallel_steady(inner, &config, first_k, &SimOptions::default())?;
            let buckets = ordo::data_parallel_buckets(inner, &steady.config)?;
            Ok::<_, ordo::Error>((steady, buckets))
        })
        .map_err(error)?;
    let place = &inner.place;
    let list = PyList::empty(py);
    for bucket in &buckets {
        let item = PyDict::new(py);
        let mut layers: Vec<&str> =
            bucket.layers.iter().map(|&l| place.names[l].as_str()).collect();
        layers.dedup(); // a layer has one gradient per parameter tensor
        item.set_item("layers", layers)?;
        let gradients: Vec<&str> =
            bucket.tensors.iter().map(|&t| place.tensors[t].name.as_str()).collect();
        item.set_item("gradients", gradients)?;
        item.set_item("bytes", bucket.bytes)?;
        item.set_item("deferred", bucket.deferred)?;
        list.append(item)?;
    }
    let predicted = PyDict::new(py);
    predicted.set_item("default", steady.default.step_time_us)?;
    predicted.set_item("chosen", steady.chosen.step_time_us)?;
    predicted.set_item("single", steady.single.step_time_us)?;
    predicted.set_item("peak_bytes", steady.chosen.peak_memory_bytes)?;
    let tried: Vec<(usize, f64, u64)> = match &steady.search {
        Some(search) => {
            search.tried.iter().map(|(k, s)| (*k, s.step_time_us, s.peak_memory_bytes)).collect()
        }
        None => vec![(
            steady.config.first_k,
            steady.chosen.step_time_us,
            steady.chosen.peak_memory_bytes,
        )],
    };
    predicted.set_item("tried", tried)?;
    let dict = PyDict::new(py);
    dict.set_item("first_k", steady.config.first_k)?;
    dict.set_item("replicas", replicas)?;
    dict.set_item("buckets", list)?;
    dict.set_item("predicted", predicted)?;
    Ok(dict)
}
