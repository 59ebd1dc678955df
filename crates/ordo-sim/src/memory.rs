//! Device memory over time: buffers allocated when their producer starts, freed when the
//! producer and every reader have finished (retained ones at the end of the step); a task's
//! workspace allocated when it starts and freed when it ends.

use ordo_sched::Plan;

pub(crate) struct Memory {
    level: Vec<u64>,
    peak: Vec<u64>,
    timeline: Vec<Vec<(f64, u64)>>,
    /// Per buffer: holders (producer and readers) not finished yet.
    left: Vec<u32>,
}

impl Memory {
    pub(crate) fn new(plan: &Plan, holders: &[u32]) -> Self {
        let level = plan.persistent_bytes.clone();
        Memory {
            peak: level.clone(),
            timeline: level.iter().map(|&b| vec![(0.0, b)]).collect(),
            level,
            left: holders.to_vec(),
        }
    }

    fn record(&mut self, device: usize, now: f64) {
        let bytes = self.level[device];
        self.peak[device] = self.peak[device].max(bytes);
        self.timeline[device].push((now, bytes));
    }

    /// The producer of `buffer` starts.
    pub(crate) fn allocate(&mut self, plan: &Plan, buffer: u32, now: f64) {
        let b = &plan.buffers[buffer as usize];
        if b.bytes > 0 {
            self.level[b.device] = self.level[b.device].saturating_add(b.bytes);
            self.record(b.device, now);
        }
    }

    /// A task with `bytes` of workspace on `device` starts (`starts`) or ends (`!starts`).
    pub(crate) fn workspace(&mut self, device: usize, bytes: u64, starts: bool, now: f64) {
        if bytes > 0 {
            let level = &mut self.level[device];
            *level = if starts { level.saturating_add(bytes) } else { level.saturating_sub(bytes) };
            self.record(device, now);
        }
    }

    /// A holder of `buffer` finished.
    pub(crate) fn release(&mut self, plan: &Plan, buffer: u32, now: f64) {
        let left = &mut self.left[buffer as usize];
        *left = left.saturating_sub(1);
        let b = &plan.buffers[buffer as usize];
        if *left == 0 && !b.retained {
            self.free(plan, buffer, now);
        }
    }

    fn free(&mut self, plan: &Plan, buffer: u32, now: f64) {
        let b = &plan.buffers[buffer as usize];
        if b.bytes > 0 {
            self.level[b.device] = self.level[b.device].saturating_sub(b.bytes);
            self.record(b.device, now);
        }
    }

    /// Ends the step: frees the retained buffers and closes every timeline at `end`.
    pub(crate) fn finish(mut self, plan: &Plan, end: f64) -> (Vec<u64>, Vec<Vec<(f64, u64)>>) {
        for (b, buffer) in plan.buffers.iter().enumerate() {
            if buffer.retained {
                self.free(plan, b as u32, end);
            }
        }
        for device in 0..self.level.len() {
            if self.timeline[device].last().is_none_or(|&(t, _)| t < end) {
                self.record(device, end);
            }
        }
        (self.peak, self.timeline)
    }
}
