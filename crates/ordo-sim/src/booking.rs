//! Baechi's TensorFlow channel model: one channel per device, shared by its sends and its
//! receives, booked in a fixed order.
//!
//! This is the rule of Baechi's placers (`device.py`), which ordo's placers follow:
//! transfers are booked one after another in a global order; booking a transfer of `c` µs from
//! `s` to `r` whose data is ready at `ready` sets
//!
//! ```text
//! send_start = max(ready, free[s]);      free[s] = send_start + c
//! recv_start = max(send_start, free[r]); free[r] = recv_start + c   (the arrival)
//! ```
//!
//! so each device's channel serves the transfers that involve it in booking order, and the
//! sender's channel is released when its send ends even if the receiver only starts later.
//! The booking order is the plan's task order (a plan built by `ordo-sched` numbers its
//! transfers in the order its placer booked them).
//!
//! A simulation cannot book a transfer before its data exists, so each transfer is split into
//! its send part, queued on the sender's channel, and its receive part, queued on the
//! receiver's. A part is *booked* as soon as it is first in its channel's queue and its input is
//! known: for a send, that the transfer is ready; for a receive, its send's start. Booking then
//! applies the rule above. Each part starts no earlier than the instant it is booked (its start
//! is the end of the part before it on the channel, or the instant that made it bookable), so
//! the simulation never goes back in time.

use std::collections::VecDeque;

/// Which half of a transfer a channel queue entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Send,
    Receive,
}

/// What booking one part decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Booked {
    /// The send of `task` starts at `at`; `waited_for` is the task whose part held the channel
    /// until then, if the channel (not the data) decided the start.
    Send { task: u32, at: f64, waited_for: Option<u32> },
    /// The receive of `task` ends at `at` (the transfer's end); `waited_for` as for a send, for
    /// the receiving channel.
    Receive { task: u32, at: f64, waited_for: Option<u32> },
}

/// The channels of all devices.
pub(crate) struct Channels {
    /// Per device: the parts not booked yet, in booking order.
    queue: Vec<VecDeque<(u32, Part)>>,
    /// Per device: when the channel is free, and the task whose part ends then.
    free: Vec<(f64, Option<u32>)>,
    /// Per task: when its send starts, once booked.
    send_start: Vec<Option<f64>>,
    /// Per task: the receiving device of a transfer.
    receiver: Vec<usize>,
}

impl Channels {
    /// Channels for `tasks` tasks, of which `transfers` (task id, sender, receiver) are the
    /// transfers in booking order.
    pub(crate) fn new(devices: usize, tasks: usize, transfers: &[(u32, usize, usize)]) -> Self {
        let mut queue = vec![VecDeque::new(); devices];
        let mut receiver = vec![usize::MAX; tasks];
        for &(t, from, to) in transfers {
            queue[from].push_back((t, Part::Send));
            queue[to].push_back((t, Part::Receive));
            receiver[t as usize] = to;
        }
        let free = vec![(0.0, None); devices];
        Self { queue, free, send_start: vec![None; tasks], receiver }
    }

    /// Books every part that has become bookable, starting with the channel of `device`;
    /// `ready_at(t)` is when transfer `t` became ready, `None` if it is not ready yet, and
    /// `duration(t)` its length. Appends what was booked, in booking order.
    pub(crate) fn book(
        &mut self,
        device: usize,
        ready_at: impl Fn(u32) -> Option<f64>,
        duration: impl Fn(u32) -> f64,
        booked: &mut Vec<Booked>,
    ) {
        let mut pending = vec![device];
        while let Some(d) = pending.pop() {
            while let Some(&(t, part)) = self.queue[d].front() {
                let (free, holder) = self.free[d];
                let waited = |start: f64, input: f64| (start > input).then_some(holder).flatten();
                match part {
                    Part::Send => {
                        let Some(ready) = ready_at(t) else { break };
                        let start = ready.max(free);
                        self.send_start[t as usize] = Some(start);
                        self.free[d] = (start + duration(t), Some(t));
                        booked.push(Booked::Send {
                            task: t,
                            at: start,
                            waited_for: waited(start, ready),
                        });
                        self.queue[d].pop_front();
                        // The receive may be first on its channel, waiting for this start.
                        pending.push(self.receiver[t as usize]);
                    }
                    Part::Receive => {
                        let Some(send) = self.send_start[t as usize] else { break };
                        let start = send.max(free);
                        let end = start + duration(t);
                        self.free[d] = (end, Some(t));
                        booked.push(Booked::Receive {
                            task: t,
                            at: end,
                            waited_for: waited(start, send),
                        });
                        self.queue[d].pop_front();
                    }
                }
            }
        }
    }
}
