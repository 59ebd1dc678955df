//! How the simulated hardware behaves.

use serde::{Deserialize, Serialize};

/// How transfers between devices contend with each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Channel {
    /// Baechi's TensorFlow model: each device has one channel shared by its sends and its
    /// receives, serving the transfers that involve it in the plan's task order (the order in
    /// which the placer booked them). A send starts when its data is ready and the sender's
    /// channel is free; the receive starts when the send has started and the receiver's
    /// channel is free, and the transfer ends one transfer time later; the sender's channel is
    /// free again one transfer time after the send started. A transfer leaves its tx and rx
    /// streams when its send starts (the channels keep the link's order), so the next transfer
    /// on the link can start sending while this one waits for its receiver. The placers use this
    /// model, so it is the default, and a plan built from a placement simulates to the placer's
    /// estimate.
    #[default]
    BaechiTf,
    /// Baechi's PyTorch simulator: no contention; a transfer waits only for its streams.
    BaechiPytorch,
    /// Each ordered device pair is a full-duplex link, and the receptions at one device are
    /// serialised (so one link carries one transfer at a time, and a device can send and receive
    /// at once).
    Duplex,
    /// Devices that are host CPUs: a transfer is a copy made by a thread of the sending
    /// device, so it holds the sender as a kernel does (alone, or by its occupancy with
    /// concurrent kernels) and needs no link. This is how `ordo run`'s CPU devices move data.
    Host,
}

/// Options of [`simulate`](crate::simulate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SimOptions {
    /// `false` (default): a device runs one kernel at a time, whichever compute stream it is on.
    ///
    /// `true`: kernels of different compute streams of a device run at once, sharing it by
    /// occupancy. A kernel keeps [`Task::occupancy`](ordo_sched::Task::occupancy) of its device
    /// busy (a small kernel leaves most of a GPU idle), and while kernels of total occupancy
    /// `load` run on a device, each works through its standalone `duration_us` at rate
    /// `1 / max(1, load)`. So two kernels of occupancy 0.5 run side by side as fast as alone,
    /// three of 0.5 each take 1.5 times as long, and kernels that each fill the device share
    /// it equally (processor sharing). A device is never faster than full: the device time
    /// used, `duration_us * occupancy` summed over kernels, is what the report's lower bound
    /// counts as work.
    pub concurrent_kernels: bool,
    /// The transfer contention model.
    pub channel: Channel,
}
