//! Binding a plan to a program: every task's work, dependencies, buffers and worker pool, in
//! the flat form the workers read.

use std::collections::HashMap;

use ordo_ir::NodeId;
use ordo_sched::{Plan, TaskKind, task_graph, task_order, validate};

use crate::error::ExecError;
use crate::program::Program;

/// How a task synchronises with the tasks of other streams it depends on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sync {
    /// It waits for exactly the events the plan gives it (the default).
    #[default]
    Events,
    /// It waits, for each event, until the event's device has run everything up to the
    /// event's task in the plan's order, on all of its streams: ParallelExecutor's
    /// `DeviceContext::Wait()`, coarser and easier to debug.
    DeviceWait,
}

/// What a task does.
#[derive(Clone, Debug)]
pub(crate) enum Work {
    Compute {
        node: NodeId,
        /// The buffer of each input wire on the task's device (none for an `Input`).
        inputs: Vec<u32>,
        /// The buffer of each output, where one is read.
        outputs: Vec<Option<u32>>,
        /// `(output slot, index in the graph's outputs)` of each output the caller fetches.
        fetch: Vec<(usize, usize)>,
        /// The replica whose feeds, parameters and state it uses.
        replica: usize,
    },
    Transfer {
        from: u32,
        to: u32,
    },
    /// For each reduced tensor, its buffer on every device, in device order.
    AllReduce {
        groups: Vec<Vec<u32>>,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct BoundTask {
    pub name: String,
    pub work: Work,
    /// The device whose memory its workspace uses and whose workers run it (the sender of a
    /// transfer, the first device of an all-reduce): on a CPU a copy or a sum needs a core as a
    /// kernel does, so a device's workers do its communication too.
    pub device: usize,
    /// Position in one topological order of the plan: the priority among ready tasks.
    pub rank: u32,
    /// How many tasks it waits for.
    pub deps: usize,
    /// The tasks that wait for it.
    pub succs: Vec<u32>,
    /// Buffers it reads, each once: one of their readers.
    pub reads: Vec<u32>,
    /// Buffers it writes, allocated when it starts.
    pub writes: Vec<u32>,
    pub workspace: u64,
    /// The plan's stream it is issued on: its first (a transfer's sender's tx stream, an
    /// all-reduce's first device's collective stream), where it records its event.
    pub stream: u32,
    /// The predecessors on other streams, whose events its stream waits for.
    pub waits_on: Vec<u32>,
    /// Whether a successor on another stream waits for its event.
    pub records: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct BoundBuffer {
    pub device: usize,
    pub bytes: u64,
    pub readers: usize,
    pub retained: bool,
}

/// A plan bound to a program.
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    pub devices: usize,
    pub replicas: usize,
    pub tasks: Vec<BoundTask>,
    pub buffers: Vec<BoundBuffer>,
    pub persistent: Vec<u64>,
    /// Tasks without predecessors.
    pub roots: Vec<u32>,
}

fn mismatch(message: String) -> ExecError {
    ExecError::Mismatch(message)
}

/// Binds `plan` to `program` under `sync`, in phases: which node each compute task runs (and
/// so how many replicas the plan has), where each buffer is, each task's work with the
/// buffers it reads and writes, its dependencies under `sync`, and the links between tasks
/// that the workers follow.
pub(crate) fn bind(program: &Program, plan: &Plan, sync: Sync) -> Result<Bound, ExecError> {
    validate(plan)?;
    let (node_of, replicas) = compute_nodes(program, plan)?;
    let buffers = BufferIndex::of(program, plan);
    let order = task_order(plan)?;
    let mut rank = vec![0u32; plan.tasks.len()];
    for (r, t) in order.iter().enumerate() {
        rank[t.0 as usize] = r as u32;
    }
    let preds = dependencies(plan, sync, &rank);
    let mut tasks = Vec::with_capacity(plan.tasks.len());
    for (t, task) in plan.tasks.iter().enumerate() {
        let device = task_device(plan, task);
        let (work, reads, writes) = match &task.kind {
            TaskKind::Compute { .. } => {
                let id = node_of[t].unwrap_or(NodeId(0));
                let replica = if replicas > 1 { device } else { 0 };
                compute_work(program, plan, &buffers, t, id, replica)?
            }
            TaskKind::Transfer { buffer, .. } => {
                let to = *buffers.written_by[t].first().ok_or_else(|| {
                    mismatch(format!("transfer `{}` writes no buffer", task.name))
                })?;
                (Work::Transfer { from: buffer.0, to }, vec![buffer.0], vec![to])
            }
            TaskKind::AllReduce { replicas: Some(replicas), .. } => {
                return Err(mismatch(format!(
                    "all-reduce `{}` stands for {replicas} replicas in a plan simulated by \
                     symmetry; a run needs the plan of every replica",
                    task.name
                )));
            }
            TaskKind::AllReduce { buffers, replicas: None } => {
                let joined = task.streams.len().max(1);
                let per = buffers.len() / joined;
                let groups = (0..per)
                    .map(|i| (0..joined).map(|d| buffers[d * per + i].0).collect())
                    .collect();
                let mut reads: Vec<u32> = buffers.iter().map(|b| b.0).collect();
                reads.sort_unstable();
                reads.dedup();
                (Work::AllReduce { groups }, reads, Vec::new())
            }
        };
        tasks.push(BoundTask {
            name: task.name.clone(),
            work,
            device,
            rank: rank[t],
            deps: preds[t].len(),
            succs: Vec::new(),
            reads,
            writes,
            workspace: task.workspace_bytes,
            stream: task.streams.first().map_or(0, |s| s.0),
            waits_on: Vec::new(),
            records: false,
        });
    }
    link(&mut tasks, &preds);
    check_all_reduce_readers(plan, &tasks, &preds)?;
    let buffers = plan
        .buffers
        .iter()
        .map(|b| BoundBuffer {
            device: b.device,
            bytes: b.bytes,
            readers: b.readers.len(),
            retained: b.retained,
        })
        .collect();
    let roots = (0..tasks.len() as u32).filter(|&t| tasks[t as usize].deps == 0).collect();
    Ok(Bound {
        devices: plan.devices,
        replicas,
        tasks,
        buffers,
        persistent: plan.persistent_bytes.clone(),
        roots,
    })
}

/// The device of a task: that of its first stream.
fn task_device(plan: &Plan, task: &ordo_sched::Task) -> usize {
    task.streams.first().map_or(0, |s| plan.streams[s.0 as usize].device)
}

/// Which node each compute task runs (by id, or by name for plans without ids or built from a
/// graph numbered otherwise), and the plan's replicas: 1 when each node runs once (a
/// placement), the device count when each runs once on every device (data parallel).
fn compute_nodes(
    program: &Program,
    plan: &Plan,
) -> Result<(Vec<Option<NodeId>>, usize), ExecError> {
    let graph = program.graph();
    let mut node_of = vec![None; plan.tasks.len()];
    let mut placed: Vec<Vec<usize>> = vec![Vec::new(); graph.nodes.len()];
    for (t, task) in plan.tasks.iter().enumerate() {
        let TaskKind::Compute { node, id } = &task.kind else { continue };
        // Bound by id; the name, for people, must agree with the node the id names.
        let Some(id) = id.map(NodeId) else {
            return Err(mismatch(format!(
                "task `{}` runs node `{node}` but records no node id: plans bind to a graph by \
                 id (build it again with this version)",
                task.name
            )));
        };
        match graph.nodes.get(id.index()) {
            Some(bound) if bound.name == *node => {}
            Some(bound) => {
                return Err(mismatch(format!(
                    "task `{}` runs node {id} `{node}`, but the graph's node {id} is `{}`",
                    task.name, bound.name
                )));
            }
            None => {
                return Err(mismatch(format!(
                    "task `{}` runs node {id} `{node}`, which the graph lacks",
                    task.name
                )));
            }
        }
        node_of[t] = Some(id);
        placed[id.index()].push(task_device(plan, task));
    }
    let devices = plan.devices;
    if placed.iter().all(|d| d.len() == 1) {
        return Ok((node_of, 1));
    }
    if devices > 1 && placed.iter().all(|d| d.len() == devices) {
        return Ok((node_of, devices));
    }
    let (node, d) =
        placed.iter().enumerate().find(|(_, d)| d.len() != 1).unwrap_or((0, &placed[0]));
    Err(mismatch(format!(
        "node `{}` runs on {} devices: a plan runs each node once (placement) or once on every \
         device (data parallel)",
        graph.nodes[node].name,
        d.len()
    )))
}

/// The plan's buffers looked up by (device, tensor name) and by the task that writes them,
/// and the graph's outputs by the node that computes them.
struct BufferIndex<'a> {
    by_name: HashMap<(usize, &'a str), u32>,
    /// Per task: the buffers it produces, ascending.
    written_by: Vec<Vec<u32>>,
    /// Per node: `(output slot, index in the graph's outputs)` of each output the caller
    /// fetches.
    fetched: HashMap<NodeId, Vec<(usize, usize)>>,
}

impl<'a> BufferIndex<'a> {
    fn of(program: &Program, plan: &'a Plan) -> Self {
        let mut by_name = HashMap::new();
        let mut written_by = vec![Vec::new(); plan.tasks.len()];
        for (b, buffer) in plan.buffers.iter().enumerate() {
            by_name.insert((buffer.device, buffer.name.as_str()), b as u32);
            written_by[buffer.producer.0 as usize].push(b as u32);
        }
        let mut fetched: HashMap<NodeId, Vec<(usize, usize)>> = HashMap::new();
        for (k, o) in program.graph().outputs.iter().enumerate() {
            fetched.entry(o.node).or_default().push((o.slot as usize, k));
        }
        Self { by_name, written_by, fetched }
    }
}

/// A compute task's work: the buffers of its inputs on its device, of the outputs it
/// produces there, the outputs the caller fetches; with the buffers it reads (each once) and
/// writes.
fn compute_work(
    program: &Program,
    plan: &Plan,
    buffers: &BufferIndex<'_>,
    t: usize,
    id: NodeId,
    replica: usize,
) -> Result<(Work, Vec<u32>, Vec<u32>), ExecError> {
    let (graph, task) = (program.graph(), &plan.tasks[t]);
    let device = task_device(plan, task);
    let node = graph.node(id);
    let mut inputs = Vec::with_capacity(node.inputs.len());
    for o in &program.call(id).inputs {
        let tensor = format!("{}:{}", graph.node(o.node).name, o.slot);
        let b = buffers.by_name.get(&(device, tensor.as_str())).ok_or_else(|| {
            mismatch(format!(
                "task `{}` reads `{tensor}`, which has no buffer on device {device}",
                task.name
            ))
        })?;
        inputs.push(*b);
    }
    let outputs: Vec<Option<u32>> = (0..node.outputs.len())
        .map(|s| {
            let tensor = format!("{}:{s}", node.name);
            buffers
                .by_name
                .get(&(device, tensor.as_str()))
                .copied()
                .filter(|&b| plan.buffers[b as usize].producer.0 as usize == t)
        })
        .collect();
    let fetch = buffers.fetched.get(&id).cloned().unwrap_or_default();
    let mut reads = inputs.clone();
    reads.sort_unstable();
    reads.dedup();
    let writes = buffers.written_by[t].clone();
    Ok((Work::Compute { node: id, inputs, outputs, fetch, replica }, reads, writes))
}

/// Each task's successors, and for a predecessor on another stream, the event it records and
/// the successor's wait for it.
fn link(tasks: &mut [BoundTask], preds: &[Vec<u32>]) {
    for (t, list) in preds.iter().enumerate() {
        for &p in list {
            tasks[p as usize].succs.push(t as u32);
            if tasks[p as usize].stream != tasks[t].stream {
                tasks[p as usize].records = true;
                tasks[t].waits_on.push(p);
            }
        }
    }
}

/// Each task's predecessors under `sync`, sorted and without repeats.
fn dependencies(plan: &Plan, sync: Sync, rank: &[u32]) -> Vec<Vec<u32>> {
    let graph = task_graph(plan);
    match sync {
        Sync::Events => graph.iter().map(|l| l.iter().map(|t| t.0).collect()).collect(),
        Sync::DeviceWait => {
            // Stream predecessors stay; each awaited event becomes "its device has run, on
            // every stream, everything up to the event's task in plan order": on each stream
            // of that device, the last task whose rank is at most the event task's. Every
            // dependency has a lower rank than its task, so this cannot deadlock.
            let streams_of = |d: usize| plan.streams.iter().filter(move |s| s.device == d);
            let device_of = |t: usize| {
                plan.tasks[t].streams.first().map_or(0, |s| plan.streams[s.0 as usize].device)
            };
            let mut preds: Vec<Vec<u32>> = vec![Vec::new(); plan.tasks.len()];
            for stream in &plan.streams {
                for pair in stream.tasks.windows(2) {
                    preds[pair[1].0 as usize].push(pair[0].0);
                }
            }
            for (t, task) in plan.tasks.iter().enumerate() {
                for wait in &task.waits {
                    let after = plan.events[wait.0 as usize].after.0 as usize;
                    for stream in streams_of(device_of(after)) {
                        let upto =
                            stream.tasks.partition_point(|s| rank[s.0 as usize] <= rank[after]);
                        if let Some(last) = upto.checked_sub(1).map(|i| stream.tasks[i].0)
                            && last as usize != t
                        {
                            preds[t].push(last);
                        }
                    }
                }
            }
            for list in &mut preds {
                list.sort_unstable();
                list.dedup();
            }
            preds
        }
    }
}

/// An all-reduce rewrites its buffers in place: every other reader of them must wait for it
/// (directly, or by coming after it on the all-reduce's own stream), or it could read either
/// version. The plan builders keep this; a hand-written plan may not.
fn check_all_reduce_readers(
    plan: &Plan,
    tasks: &[BoundTask],
    preds: &[Vec<u32>],
) -> Result<(), ExecError> {
    for (t, task) in tasks.iter().enumerate() {
        let Work::AllReduce { .. } = task.work else { continue };
        for &b in &task.reads {
            for reader in &plan.buffers[b as usize].readers {
                let r = reader.0 as usize;
                if r != t && !preds[r].contains(&(t as u32)) && !preds[t].contains(&(r as u32)) {
                    return Err(mismatch(format!(
                        "`{}` reads `{}` without waiting for `{}`, which rewrites it",
                        plan.tasks[r].name, plan.buffers[b as usize].name, task.name
                    )));
                }
            }
        }
    }
    Ok(())
}
