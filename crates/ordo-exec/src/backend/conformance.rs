//! The checks every backend must pass before the engine runs plans on it.
//!
//! A backend (CPU devices today; CUDA devices or a multi-process transport later) implements
//! the traits of [`crate::backend`]; [`check`] then runs every check below on fresh instances
//! made by a factory and returns what failed. A backend's test suite calls it:
//!
//! ```
//! use ordo_exec::backend::Cpu;
//! use ordo_exec::backend::conformance::{Numerics, check};
//!
//! let failures = check(|devices, timeout| Cpu::with_timeout(devices, timeout), Numerics::Bitwise);
//! assert!(failures.is_empty(), "{failures:#?}");
//! ```
//!
//! The checks, each independent of the others:
//!
//! * **Buffers**: what is uploaded downloads bitwise unchanged (NaN payloads, signed zeros,
//!   subnormals, integers at their limits, scalars, empty tensors).
//! * **Streams and events**: a kernel launched on a stream that waits for another stream's
//!   (or another device's) event reads what the first wrote.
//! * **Collectives**: all-reduce sums in group order (bitwise, on values whose sum depends on
//!   the order), on the whole group and on a subset, with the ranks on their own threads and
//!   every rank issuing several collectives before it waits; broadcast; transfers between two
//!   ranks arrive in the order they were sent, also when the receive is issued first.
//! * **Failures never hang**: a rank that never issues its part makes the others' waits fail
//!   within the timeout, naming it; participants that disagree (shapes, operations) get an
//!   error, not a wrong result.
//! * **The engine on the backend**: placed plans (every node on a random device, events and
//!   device-wait synchronisation, several workers), data-parallel plans (all-reduce, buckets,
//!   reverse first-k) and every pipeline schedule run several training steps whose losses,
//!   parameters and optimizer state match the CPU sequential reference ([`Numerics`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ordo_cost::{CommModel, StepMode};
use ordo_ir::op::{Optimizer, UnaryOp};
use ordo_ir::training::training_graph;
use ordo_ir::{DType, Graph, GraphBuilder, OutletId, TensorFact};
use ordo_problem::{Devices, PlaceProblem, Placement};
use ordo_sched::{DataParallel, OneDeviceSchedule, Pipeline, PipelineSchedule, Plan};

use crate::backend::{Backend, BackendError, Collectives, Device, Handle, Launch};
use crate::cpu::{Hyper, Tensor};
use crate::engine::{EngineOptions, Executable, Sync};
use crate::program::{Program, RunSettings};
use crate::sequential::run_step;
use crate::state::{Feeds, TrainState, synthetic_feeds};

/// How closely a backend's numbers must match the CPU reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Numerics {
    /// Bitwise: the backend runs the CPU kernels, or kernels that compute alike.
    Bitwise,
    /// `|got - want| <= atol + rtol * |want|` for every element.
    Close {
        /// Relative tolerance.
        rtol: f32,
        /// Absolute tolerance.
        atol: f32,
    },
}

/// A check that failed, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// The check's name.
    pub check: &'static str,
    /// What went wrong.
    pub message: String,
}

/// How long the checks of failures let a collective wait.
const SHORT_TIMEOUT: Duration = Duration::from_millis(200);
/// How long every other check lets a collective wait: far more than it needs.
const LONG_TIMEOUT: Duration = Duration::from_secs(60);

type CheckResult = Result<(), String>;
/// A named check, ready to run.
type Check<'a> = (&'static str, Box<dyn Fn() -> CheckResult + 'a>);

/// Runs every check on backends made by `make(devices, collective timeout)` and returns the
/// failures (none for a conforming backend). A check that panics fails with its message.
pub fn check<B: Backend>(make: impl Fn(usize, Duration) -> B, numerics: Numerics) -> Vec<Failure> {
    let long = |devices: usize| make(devices, LONG_TIMEOUT);
    let checks: Vec<Check<'_>> = vec![
        ("buffers round-trip", Box::new(|| round_trip(&long(1)))),
        ("events order streams", Box::new(|| events(&long(2)))),
        ("all-reduce sums in group order", Box::new(|| all_reduce(&long(4)))),
        ("broadcast", Box::new(|| broadcast(&long(3)))),
        ("transfers arrive in order", Box::new(|| transfers(&long(2)))),
        ("a missing rank times out", Box::new(|| missing_rank(&make(3, SHORT_TIMEOUT)))),
        ("disagreeing ranks fail", Box::new(|| disagreement(&make(2, SHORT_TIMEOUT)))),
        ("placed plans", Box::new(|| placed(&long, numerics))),
        ("data-parallel plans", Box::new(|| data_parallel(&long, numerics))),
        ("pipeline plans", Box::new(|| pipelines(&long, numerics))),
    ];
    checks
        .into_iter()
        .filter_map(|(check, run)| {
            let outcome = catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(format!("panicked: {message}"))
            });
            outcome.err().map(|message| Failure { check, message })
        })
        .collect()
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn f32s(shape: &[usize], values: Vec<f32>) -> Arc<Tensor> {
    Arc::new(Tensor::from_f32(shape, values).expect("the values fill the shape"))
}

fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    crate::engine::bitwise_equal(a, b)
}

fn round_trip<B: Backend>(backend: &B) -> CheckResult {
    let device = backend.device(0);
    let specials = vec![
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffc0_0001),
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE / 8.0,
        f32::MAX,
    ];
    let tensors = [
        f32s(&[2, 4], specials),
        f32s(&[], vec![1.5]),
        f32s(&[0, 3], Vec::new()),
        Arc::new(Tensor::from_i64(&[3], vec![i64::MIN, -1, i64::MAX]).map_err(err)?),
    ];
    for t in &tensors {
        let back = device.download(&device.upload(0, t).map_err(err)?).map_err(err)?;
        if !same_bits(t, &back) {
            return Err(format!("uploaded {t:?}, downloaded {back:?}"));
        }
    }
    Ok(())
}

/// `x -> scale 2 -> scale 3`, forward only.
fn two_scales() -> Result<Program, String> {
    let mut b = GraphBuilder::new("scales");
    let x = b.input("x", TensorFact::f32([5])).map_err(err)?;
    let y = b.scale("double", x, 2.0).map_err(err)?;
    let z = b.scale("triple", y, 3.0).map_err(err)?;
    b.output(z);
    Program::new(b.finish()).map_err(err)
}

fn events<B: Backend>(backend: &B) -> CheckResult {
    let program = two_scales()?;
    let settings = RunSettings::default();
    let x = f32s(&[5], vec![1.0, -2.5, 1e-3, 7.0, f32::MAX / 4.0]);
    let want: Vec<f32> = x.as_f32().unwrap_or_default().iter().map(|v| v * 2.0 * 3.0).collect();
    let launch = |device: &B::Device, stream: u32, node: u32, input: &B::Buffer| {
        let launch = Launch {
            program: &program,
            node: ordo_ir::NodeId(node),
            inputs: &[input],
            params: &[],
            state: Vec::new(),
            step: 1,
            settings: &settings,
        };
        device.launch(stream, launch).map_err(err).map(|l| l.outputs[0].clone())
    };
    // Streams 0 and 1 of device 0, then device 0's stream 0 and device 1's stream 2.
    for (second, second_stream) in [(0, 1), (1, 2)] {
        let (first, other) = (backend.device(0), backend.device(second));
        let input = first.upload(0, &x).map_err(err)?;
        let doubled = launch(first, 0, 1, &input)?;
        let event = first.record(0);
        other.wait(second_stream, &event).map_err(err)?;
        let tripled = launch(other, second_stream, 2, &doubled)?;
        other.synchronize().map_err(err)?;
        let got = other.download(&tripled).map_err(err)?;
        if got.as_f32() != Some(&want[..]) {
            return Err(format!(
                "device {second} stream {second_stream} read {got:?} after waiting for device \
                 0's event; want {want:?}"
            ));
        }
    }
    Ok(())
}

/// Runs `body(rank)` for every rank on its own thread and collects the results in rank order.
fn on_ranks<T: Send>(ranks: usize, body: impl Fn(usize) -> T + std::marker::Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..ranks)
            .map(|r| {
                s.spawn({
                    let body = &body;
                    move || body(r)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a rank's thread panicked")).collect()
    })
}

/// Rank `r`'s part of collective `k`: values whose f32 sum depends on the order of addition.
fn part(r: usize, k: usize) -> Arc<Tensor> {
    let big = [1e8f32, 1.0, -1e8, 3.5e-3][r % 4];
    f32s(&[3], vec![big * (k + 1) as f32, (r as f32 + 0.1) / 3.0, -big + k as f32])
}

fn sum_in_order(parts: &[Arc<Tensor>]) -> Vec<f32> {
    let mut sum = parts[0].as_f32().unwrap_or_default().to_vec();
    for p in &parts[1..] {
        sum.iter_mut().zip(p.as_f32().unwrap_or_default()).for_each(|(a, b)| *a += b);
    }
    sum
}

fn all_reduce<B: Backend>(backend: &B) -> CheckResult {
    const ROUNDS: usize = 4;
    for group in [vec![0, 1, 2, 3], vec![1, 3]] {
        let results = on_ranks(4, |rank| -> Result<Vec<Arc<Tensor>>, String> {
            if !group.contains(&rank) {
                return Ok(Vec::new());
            }
            let device = backend.device(rank);
            // Every collective is issued before the first is waited for.
            let handles = (0..ROUNDS)
                .map(|k| {
                    let buffer = device.upload(0, &part(rank, k)).map_err(err)?;
                    backend.collectives().all_reduce(&group, rank, &buffer).map_err(err)
                })
                .collect::<Result<Vec<_>, _>>()?;
            handles
                .into_iter()
                .map(|h| device.download(&h.wait().map_err(err)?).map_err(err))
                .collect()
        });
        for (rank, got) in results.into_iter().enumerate() {
            let got = got?;
            for (k, sum) in got.iter().enumerate() {
                let parts: Vec<_> = group.iter().map(|&r| part(r, k)).collect();
                let want = sum_in_order(&parts);
                let same = sum.as_f32().is_some_and(|s| {
                    s.len() == want.len()
                        && s.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits())
                });
                if !same {
                    return Err(format!(
                        "group {group:?}, rank {rank}, all-reduce {k}: got {:?}, want the sum in \
                         group order {want:?}",
                        sum.as_f32()
                    ));
                }
            }
        }
    }
    Ok(())
}

fn broadcast<B: Backend>(backend: &B) -> CheckResult {
    let group = [0, 1, 2];
    let root = 1;
    let value = part(5, 2);
    let results = on_ranks(3, |rank| -> Result<Arc<Tensor>, String> {
        let device = backend.device(rank);
        let mine = if rank == root { Some(device.upload(0, &value).map_err(err)?) } else { None };
        let handle =
            backend.collectives().broadcast(&group, root, rank, mine.as_ref()).map_err(err)?;
        device.download(&handle.wait().map_err(err)?).map_err(err)
    });
    for (rank, got) in results.into_iter().enumerate() {
        let got = got?;
        if !same_bits(&got, &value) {
            return Err(format!(
                "rank {rank} received {got:?} from root {root}, which sent {value:?}"
            ));
        }
    }
    Ok(())
}

fn transfers<B: Backend>(backend: &B) -> CheckResult {
    let sent: Vec<Arc<Tensor>> = (0..3).map(|k| part(k, k)).collect();
    let results = on_ranks(2, |rank| -> Result<Vec<Arc<Tensor>>, String> {
        let device = backend.device(rank);
        let c = backend.collectives();
        if rank == 0 {
            // Wait before sending, so that the receiver's receives are issued first.
            std::thread::sleep(Duration::from_millis(20));
            let handles = sent
                .iter()
                .map(|t| c.send(0, 1, &device.upload(0, t).map_err(err)?).map_err(err))
                .collect::<Result<Vec<_>, _>>()?;
            handles.into_iter().try_for_each(|h| h.wait().map(drop).map_err(err))?;
            Ok(Vec::new())
        } else {
            let handles = (0..sent.len())
                .map(|_| c.recv(1, 0).map_err(err))
                .collect::<Result<Vec<_>, _>>()?;
            handles
                .into_iter()
                .map(|h| device.download(&h.wait().map_err(err)?).map_err(err))
                .collect()
        }
    });
    let received = results.into_iter().nth(1).unwrap_or_else(|| Ok(Vec::new()))?;
    for (k, (got, want)) in received.iter().zip(&sent).enumerate() {
        if !same_bits(got, want) {
            return Err(format!("receive {k} got {got:?}; send {k} sent {want:?}"));
        }
    }
    if received.len() != sent.len() {
        return Err(format!("{} receives completed for {} sends", received.len(), sent.len()));
    }
    Ok(())
}

fn missing_rank<B: Backend>(backend: &B) -> CheckResult {
    let started = Instant::now();
    let results = on_ranks(2, |rank| {
        let buffer = backend.device(rank).upload(0, &part(rank, 0)).map_err(err)?;
        let handle = backend.collectives().all_reduce(&[0, 1, 2], rank, &buffer).map_err(err)?;
        Ok::<_, String>(handle.wait())
    });
    let waited = started.elapsed();
    for (rank, result) in results.into_iter().enumerate() {
        match result? {
            Err(BackendError::Timeout { missing, .. }) if missing == [2] => {}
            other => {
                let got = match other {
                    Ok(_) => "a result".to_string(),
                    Err(e) => format!("`{e}`"),
                };
                return Err(format!(
                    "rank {rank} waited for rank 2, which never issued its part, and got {got}; \
                     want a timeout naming rank 2"
                ));
            }
        }
    }
    if waited > SHORT_TIMEOUT * 20 {
        return Err(format!("the timeout of {SHORT_TIMEOUT:?} took {waited:?}"));
    }
    Ok(())
}

fn disagreement<B: Backend>(backend: &B) -> CheckResult {
    let shapes = on_ranks(2, |rank| {
        let t = f32s(&[rank + 2], vec![1.0; rank + 2]);
        let buffer = backend.device(rank).upload(0, &t).map_err(err)?;
        let handle = backend.collectives().all_reduce(&[0, 1], rank, &buffer).map_err(err)?;
        Ok::<_, String>(handle.wait())
    });
    for (rank, result) in shapes.into_iter().enumerate() {
        if !matches!(result?, Err(BackendError::Mismatch { .. })) {
            return Err(format!("rank {rank} all-reduced shapes [2] and [3] without an error"));
        }
    }
    let kinds = on_ranks(2, |rank| {
        let buffer = backend.device(rank).upload(0, &part(rank, 0)).map_err(err)?;
        let c = backend.collectives();
        let handle = if rank == 0 {
            c.all_reduce(&[0, 1], rank, &buffer)
        } else {
            c.broadcast(&[0, 1], 1, rank, Some(&buffer))
        };
        Ok::<_, String>(handle.map_err(err)?.wait())
    });
    for (rank, result) in kinds.into_iter().enumerate() {
        if !matches!(result?, Err(BackendError::Mismatch { .. })) {
            return Err(format!(
                "rank {rank} completed an all-reduce that the other rank issued as a broadcast"
            ));
        }
    }
    Ok(())
}

/// A small trainable model: linear layers, activations, a layer norm, a residual add, a
/// cross-entropy loss. No dropout, so that micro-batch copies compute alike.
fn model() -> Result<Graph, String> {
    let mut b = GraphBuilder::new("conformance");
    let x = b.input("x", TensorFact::f32([4, 6])).map_err(err)?;
    let h = b.linear("fc1", x, 8).map_err(err)?;
    let h = b.unary("relu", UnaryOp::Relu, h).map_err(err)?;
    let n = b.layer_norm("norm", h, 1e-5).map_err(err)?;
    let g = b.linear("fc2", n, 8).map_err(err)?;
    let g = b.unary("tanh", UnaryOp::Tanh, g).map_err(err)?;
    let r = b.add("residual", g, h).map_err(err)?;
    let logits = b.linear("head", r, 3).map_err(err)?;
    let labels = b.input("labels", TensorFact::new(DType::I64, [4])).map_err(err)?;
    let loss = b.cross_entropy("loss", logits, labels).map_err(err)?;
    b.output(loss);
    let forward = b.finish();
    let loss = OutletId::new(forward.find("loss").ok_or("no loss node")?.id, 0);
    training_graph(&forward, loss, Optimizer::Adam).map_err(err)
}

fn problem(graph: &Graph, devices: usize) -> Result<PlaceProblem, String> {
    let cost = ordo_cost::costgraph_from_graph(graph);
    PlaceProblem::new(&cost, Devices::uniform(devices, u64::MAX), StepMode::TrainingGraph)
        .map_err(err)
}

fn settings() -> RunSettings {
    RunSettings { seed: 3, hyper: Hyper { lr: 0.05, ..Default::default() }, ..Default::default() }
}

fn close(got: &Tensor, want: &Tensor, numerics: Numerics) -> bool {
    match numerics {
        Numerics::Bitwise => same_bits(got, want),
        Numerics::Close { rtol, atol } => {
            got.shape() == want.shape()
                && match (got.as_f32(), want.as_f32()) {
                    (Some(g), Some(w)) => {
                        g.iter().zip(w).all(|(a, b)| (a - b).abs() <= atol + rtol * b.abs())
                    }
                    _ => got == want,
                }
        }
    }
}

const STEPS: usize = 3;

/// Runs `plan` for [`STEPS`] steps on a backend and the reference program sequentially, and
/// compares every replica's first output each step, then the parameters and optimizer state.
fn same_as_reference<B: Backend>(
    backend: B,
    (program, plan, feeds): (&Program, &Plan, &[Feeds]),
    (reference, reference_feeds): (&Program, &Feeds),
    options: EngineOptions,
    numerics: Numerics,
    what: &str,
) -> CheckResult {
    let exe = Executable::on(backend, program.clone(), plan, options).map_err(err)?;
    let mut state = TrainState::new(program, 5).map_err(err)?;
    let mut want_state = TrainState::new(reference, 5).map_err(err)?;
    for step in 0..STEPS {
        let run = exe.run_step(&mut state, feeds).map_err(|e| format!("{what}: {e}"))?;
        let want =
            run_step(reference, &mut want_state, reference_feeds, &settings()).map_err(err)?;
        for (r, outputs) in run.outputs.iter().enumerate() {
            if !close(&outputs.outputs[0], &want.outputs[0], numerics) {
                return Err(format!(
                    "{what}: step {step}, replica {r}: loss {:?}, the reference's {:?}",
                    outputs.outputs[0].as_f32(),
                    want.outputs[0].as_f32()
                ));
            }
        }
    }
    for (p, (got, want)) in state.params.iter().zip(&want_state.params).enumerate() {
        if !close(got, want, numerics) {
            let name = &program.graph().params[p].name;
            return Err(format!("{what}: parameter `{name}` differs after {STEPS} steps"));
        }
    }
    // The optimizer state of each update, wherever the program keeps it, by update order.
    let updates = |s: &TrainState| {
        s.slots.iter().filter(|v| !v.is_empty()).flatten().cloned().collect::<Vec<_>>()
    };
    let (got, want) = (updates(&state), updates(&want_state));
    if got.len() != want.len() || got.iter().zip(&want).any(|(g, w)| !close(g, w, numerics)) {
        return Err(format!("{what}: optimizer state differs after {STEPS} steps"));
    }
    Ok(())
}

fn options(sync: Sync, workers: usize) -> EngineOptions {
    EngineOptions { sync, workers_per_device: workers, settings: settings(), ..Default::default() }
}

fn placed<B: Backend>(make: &impl Fn(usize) -> B, numerics: Numerics) -> CheckResult {
    let graph = model()?;
    let program = Program::new(graph.clone()).map_err(err)?;
    let feeds = synthetic_feeds(&graph, 9).map_err(err)?;
    for (seed, devices, sync, workers) in
        [(1, 3, Sync::Events, 1), (2, 3, Sync::DeviceWait, 2), (3, 2, Sync::Events, 2)]
    {
        let mut rng = fastrand::Rng::with_seed(seed);
        let device_of = (0..graph.nodes.len()).map(|_| rng.usize(..devices)).collect();
        let placement = Placement::in_id_order("random", device_of, devices);
        let plan = ordo_sched::build_plan(&problem(&graph, devices)?, &placement).map_err(err)?;
        let mode = if sync == Sync::Events { "events" } else { "device wait" };
        let what = format!("a random placement on {devices} devices ({mode}, {workers} workers)");
        same_as_reference(
            make(devices),
            (&program, &plan, std::slice::from_ref(&feeds)),
            (&program, &feeds),
            options(sync, workers),
            numerics,
            &what,
        )?;
    }
    Ok(())
}

/// With identical shards, a power-of-two number of replicas and the loss gradient scaled by
/// `1 / replicas`, the all-reduced gradients are exactly the whole batch's.
fn data_parallel<B: Backend>(make: &impl Fn(usize) -> B, numerics: Numerics) -> CheckResult {
    let graph = model()?;
    let reference = Program::new(graph.clone()).map_err(err)?;
    let feeds = synthetic_feeds(&graph, 9).map_err(err)?;
    for (replicas, bucket_bytes, first_k) in [(2, 0, 0), (4, 256, 2)] {
        let mut scaled = graph.clone();
        crate::program::scale_backward_seed(&mut scaled, 1.0 / replicas as f64);
        let config = DataParallel {
            replicas,
            network: CommModel::baechi_default().into(),
            bucket_bytes,
            first_k,
            schedule: OneDeviceSchedule::Ooo,
        };
        let plan =
            ordo_sched::data_parallel_plan(&problem(&graph, replicas)?, &config, 1).map_err(err)?;
        let what = format!("{replicas} replicas, buckets of {bucket_bytes} B, first-k {first_k}");
        same_as_reference(
            make(replicas),
            (&Program::new(scaled).map_err(err)?, &plan, &vec![feeds.clone(); replicas]),
            (&reference, &feeds),
            options(Sync::Events, 2),
            numerics,
            &what,
        )?;
    }
    Ok(())
}

/// Every schedule of a two-stage pipeline of two micro-batches, against the same micro-batched
/// program run sequentially (which accumulates the micro-batches in the same order).
fn pipelines<B: Backend>(make: &impl Fn(usize) -> B, numerics: Numerics) -> CheckResult {
    let graph = model()?;
    let feeds = synthetic_feeds(&graph, 9).map_err(err)?;
    for schedule in PipelineSchedule::ALL {
        let pipeline = Pipeline::new(2, 2, schedule);
        let planned = ordo_sched::pipeline_plan(&problem(&graph, 2)?, &pipeline).map_err(err)?;
        let mut split = ordo_ir::transform::micro_batch(&graph, 2).map_err(err)?;
        if split.provenance != planned.split.provenance {
            return Err(format!("a {} pipeline: the plan copies another graph", schedule.name()));
        }
        crate::program::scale_backward_seed(&mut split.graph, 0.5);
        let copies = crate::state::copied_feeds(&graph, &split.graph, &split.provenance, &feeds);
        let program = Program::micro_batched(split).map_err(err)?;
        same_as_reference(
            make(2),
            (&program, &planned.plan, std::slice::from_ref(&copies)),
            (&program, &copies),
            options(Sync::Events, 1),
            numerics,
            &format!("a {} pipeline", schedule.name()),
        )?;
    }
    Ok(())
}
