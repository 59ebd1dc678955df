//! How the simulated hardware behaves.

use serde::{Deserialize, Serialize};

/// How transfers between devices contend with each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Channel {
    /// Baechi's TensorFlow simulator: each device has one channel shared by its sends and its
    /// receives; a transfer holds the sender's and the receiver's channel. The placers use this
    /// model, so it is the default.
    #[default]
    BaechiTf,
    /// Baechi's PyTorch simulator: no contention; a transfer waits only for its streams.
    BaechiPytorch,
    /// Each ordered device pair is a full-duplex link, and the receptions at one device are
    /// serialised (so one link carries one transfer at a time, and a device can send and receive
    /// at once).
    Duplex,
}

/// Options of [`simulate`](crate::simulate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SimOptions {
    /// `false` (default): a device runs one kernel at a time, whichever compute stream it is on.
    /// `true`: kernels of different compute streams run at once and share the device's
    /// throughput equally (processor sharing).
    pub concurrent_kernels: bool,
    /// The transfer contention model.
    pub channel: Channel,
}
