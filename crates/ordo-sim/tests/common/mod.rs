//! Hand-built plans for the simulator's tests.
#![allow(dead_code)]

use std::collections::HashMap;

use ordo_sched::{
    Buffer, BufferId, Event, EventId, Plan, Stream, StreamId, StreamKind, Task, TaskId, TaskKind,
};

/// Builds a plan one stream, task, event and buffer at a time.
pub struct Builder {
    pub plan: Plan,
}

impl Builder {
    pub fn new(devices: usize) -> Self {
        Builder {
            plan: Plan {
                format: Plan::FORMAT.into(),
                devices,
                persistent_bytes: vec![0; devices],
                streams: Vec::new(),
                tasks: Vec::new(),
                events: Vec::new(),
                buffers: Vec::new(),
            },
        }
    }

    pub fn stream(&mut self, device: usize, kind: StreamKind) -> StreamId {
        self.plan.streams.push(Stream { device, kind, tasks: Vec::new() });
        StreamId(self.plan.streams.len() as u32 - 1)
    }

    /// A compute stream on device 0 and on device 1, and the tx / rx pair from 0 to 1, in that
    /// order: `(c0, c1, tx, rx)`.
    pub fn linked_pair(&mut self) -> (StreamId, StreamId, StreamId, StreamId) {
        let c0 = self.stream(0, StreamKind::Compute);
        let c1 = self.stream(1, StreamKind::Compute);
        let tx = self.stream(0, StreamKind::Tx { peer: 1 });
        let rx = self.stream(1, StreamKind::Rx { peer: 0 });
        (c0, c1, tx, rx)
    }

    fn push(&mut self, name: &str, kind: TaskKind, streams: Vec<StreamId>, dur: u64) -> TaskId {
        let id = TaskId(self.plan.tasks.len() as u32);
        for s in &streams {
            self.plan.streams[s.0 as usize].tasks.push(id);
        }
        self.plan.tasks.push(Task {
            name: name.into(),
            kind,
            streams,
            waits: Vec::new(),
            duration_us: dur,
            workspace_bytes: 0,
            occupancy: 1.0,
        });
        id
    }

    /// A compute task appended to `stream`.
    pub fn compute(&mut self, name: &str, stream: StreamId, dur: u64) -> TaskId {
        self.push(name, TaskKind::Compute { node: name.into(), id: None }, vec![stream], dur)
    }

    /// A compute task appended to `stream` that occupies `occupancy` of its device.
    pub fn kernel(&mut self, name: &str, stream: StreamId, dur: u64, occupancy: f64) -> TaskId {
        let id = self.compute(name, stream, dur);
        self.plan.tasks[id.0 as usize].occupancy = occupancy;
        id
    }

    /// A transfer of `buffer`, appended to `tx` and `rx`; devices taken from the streams.
    pub fn transfer(
        &mut self,
        name: &str,
        buffer: BufferId,
        tx: StreamId,
        rx: StreamId,
        dur: u64,
    ) -> TaskId {
        let from = self.plan.streams[tx.0 as usize].device;
        let to = self.plan.streams[rx.0 as usize].device;
        self.push(name, TaskKind::Transfer { buffer, from, to }, vec![tx, rx], dur)
    }

    /// A buffer on `device` written by `producer`.
    pub fn buffer(&mut self, name: &str, device: usize, bytes: u64, producer: TaskId) -> BufferId {
        self.plan.buffers.push(Buffer {
            name: name.into(),
            device,
            bytes,
            producer,
            readers: Vec::new(),
            retained: false,
        });
        BufferId(self.plan.buffers.len() as u32 - 1)
    }

    pub fn read(&mut self, buffer: BufferId, reader: TaskId) {
        self.plan.buffers[buffer.0 as usize].readers.push(reader);
    }

    /// `task` waits for a new event recorded after `after`.
    pub fn wait(&mut self, task: TaskId, after: TaskId) -> EventId {
        self.plan.events.push(Event { after });
        let e = EventId(self.plan.events.len() as u32 - 1);
        self.plan.tasks[task.0 as usize].waits.push(e);
        e
    }

    pub fn build(self) -> Plan {
        self.plan
    }
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A random DAG of `nodes` compute tasks, each with up to `fan_in` predecessors among the
/// `window` before it, placed on random devices and streams, with a transfer for every tensor
/// that crosses devices (once per receiving device) and events for every cross-stream edge.
/// Streams are filled in one topological order, so the plan cannot deadlock. Compute tasks
/// occupy random shares of their devices (1 in 4 the whole device, the others 0.01 to 1).
pub fn random_plan(seed: u64, nodes: usize, devices: usize, fan_in: u64, window: u64) -> Plan {
    let mut rng = Rng::new(seed);
    let mut b = Builder::new(devices);
    for d in 0..devices {
        b.plan.persistent_bytes[d] = rng.below(1000);
    }
    let compute: Vec<StreamId> = (0..devices).map(|d| b.stream(d, StreamKind::Compute)).collect();
    let sub: Vec<StreamId> = (0..devices).map(|d| b.stream(d, StreamKind::SubCompute)).collect();
    let mut tx: HashMap<(usize, usize), StreamId> = HashMap::new();
    let mut rx: HashMap<(usize, usize), StreamId> = HashMap::new();
    // Per node: its task, device, output buffer; per (node, device): the received copy.
    let mut node_task = Vec::with_capacity(nodes);
    let mut node_device = Vec::with_capacity(nodes);
    let mut node_stream = Vec::with_capacity(nodes);
    let mut node_buffer: Vec<BufferId> = Vec::with_capacity(nodes);
    let mut received: HashMap<(usize, usize), (TaskId, BufferId)> = HashMap::new();
    for i in 0..nodes {
        let device = rng.below(devices as u64) as usize;
        let stream = if rng.below(4) == 0 { sub[device] } else { compute[device] };
        let mut preds: Vec<usize> = Vec::new();
        if i > 0 {
            for _ in 0..rng.below(fan_in + 1) {
                let back = 1 + rng.below(window.min(i as u64)) as usize;
                preds.push(i - back);
            }
        }
        preds.sort_unstable();
        preds.dedup();
        // Inputs from other devices arrive first.
        let mut inputs: Vec<(TaskId, StreamId, BufferId)> = Vec::new();
        for &p in &preds {
            let pd = node_device[p];
            if pd == device {
                inputs.push((node_task[p], node_stream[p], node_buffer[p]));
                continue;
            }
            let (t, buf) = *received.entry((p, device)).or_insert_with(|| {
                let txs = *tx
                    .entry((pd, device))
                    .or_insert_with(|| b.stream(pd, StreamKind::Tx { peer: device }));
                let rxs = *rx
                    .entry((pd, device))
                    .or_insert_with(|| b.stream(device, StreamKind::Rx { peer: pd }));
                let name = format!("n{p}->{device}");
                let dur = 1 + rng.below(20);
                let t = b.transfer(&name, node_buffer[p], txs, rxs, dur);
                b.wait(t, node_task[p]);
                b.read(node_buffer[p], t);
                let bytes = b.plan.buffers[node_buffer[p].0 as usize].bytes;
                let buf = b.buffer(&format!("n{p}"), device, bytes, t);
                (t, buf)
            });
            inputs.push((t, StreamId(u32::MAX), buf));
        }
        let dur = rng.below(50);
        let t = b.compute(&format!("n{i}"), stream, dur);
        for (pt, ps, buf) in inputs {
            if ps != stream {
                b.wait(t, pt);
            }
            b.read(buf, t);
        }
        let bytes = 1 + rng.below(1 << 20);
        let buf = b.buffer(&format!("n{i}"), device, bytes, t);
        b.plan.buffers[buf.0 as usize].retained = rng.below(8) == 0;
        node_task.push(t);
        node_device.push(device);
        node_stream.push(stream);
        node_buffer.push(buf);
    }
    // Drawn apart, so that the plan's shape is the same as without occupancies.
    let mut shares = Rng::new(!seed);
    for task in &mut b.plan.tasks {
        if matches!(task.kind, TaskKind::Compute { .. }) && shares.below(4) != 0 {
            task.occupancy = (1 + shares.below(100)) as f64 / 100.0;
        }
    }
    b.build()
}
