//! The seam between the engine and the hardware it runs on.
//!
//! The engine ([`crate::Executable`]) decides *when* a task may start: dependency counting over
//! the plan's streams and events, memory budgets, failure. A [`Backend`] decides *how* it
//! runs: where buffers live, how a kernel is launched, how an event orders two streams, how
//! devices exchange data. Three traits make the seam:
//!
//! * [`Device`]: buffers (uploaded from and downloaded to host [`Tensor`]s), kernels enqueued
//!   on one of the device's in-order streams, and events that a stream records and another
//!   waits for.
//! * [`Collectives`]: all-reduce, broadcast, send and receive between the devices of a group,
//!   each returning a [`Handle`] to wait on. Every participant issues its part itself, and
//!   all participants issue the collectives of a group in the same order (the plan's order on
//!   their collective streams): the `k`-th call of one rank in a group matches the `k`-th call
//!   of every other, as in NCCL or `torch.distributed`.
//! * [`Backend`]: a set of devices and the collectives between them.
//!
//! # How the engine drives a backend
//!
//! A task becomes ready when every task it depends on has been *issued* (its call to the
//! backend returned). Before issuing a task on stream `s`, the engine makes `s` wait for the
//! event that each predecessor on another stream recorded; after issuing, a task with a
//! successor on another stream records an event on its own stream. A backend whose calls
//! return once the work is enqueued (a GPU) is thereby ordered by its events, one whose calls
//! return once the work is done (the CPU) by the calls themselves. A buffer that the engine
//! drops may still be read by enqueued work: an asynchronous backend keeps its memory alive
//! until that work has finished (what `record_stream` does for PyTorch's caching allocator).
//!
//! [`Cpu`] is the first backend: devices that share the host's memory and run kernels on the
//! calling thread, and in-process collectives that match calls by sequence number.
//! [`conformance`] is the suite of checks that every backend must pass.

pub mod conformance;
mod cpu;

use std::sync::Arc;
use std::time::Duration;

pub use cpu::{Cpu, CpuCollectives, CpuDevice, CpuEvent, CpuHandle, DEFAULT_TIMEOUT};

use crate::cpu::{KernelError, Tensor};
use crate::program::{Program, RunSettings};

/// Why a backend call failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// A collective or a receive did not complete in time: a participant never issued its
    /// part (it failed, hangs, or issues collectives in another order).
    #[error("{op} timed out after {waited:?}: waiting for rank(s) {missing:?}")]
    Timeout {
        /// The operation, with its group and sequence number.
        op: String,
        /// How long it waited.
        waited: Duration,
        /// The ranks whose part never came.
        missing: Vec<usize>,
    },
    /// The participants of a collective disagree: different operations at the same
    /// position of the group's order, different shapes, a rank outside the group.
    #[error("{op}: {problem}")]
    Mismatch {
        /// The operation, with its group and sequence number.
        op: String,
        /// What disagrees.
        problem: String,
    },
    /// A stream waited for an event that was never recorded, or a device was asked for
    /// something it cannot do.
    #[error("device {device}: {problem}")]
    Device {
        /// The device.
        device: usize,
        /// What went wrong.
        problem: String,
    },
}

/// One node of a program, as a device is asked to run it.
#[derive(Debug)]
pub struct Launch<'a, B> {
    /// The program that holds the node and its calling convention.
    pub program: &'a Program,
    /// The node.
    pub node: ordo_ir::NodeId,
    /// Its input wires' buffers, in [`crate::NodeCall::inputs`] order.
    pub inputs: &'a [&'a B],
    /// Its parameters, in [`crate::NodeCall::params`] order.
    pub params: &'a [&'a B],
    /// The optimizer state it advances (empty for a node that is not an update).
    pub state: Vec<B>,
    /// The run's step number (before the node's step offset).
    pub step: u64,
    /// Seed, optimizer hyper-parameters, mode.
    pub settings: &'a RunSettings,
}

/// A launched node's outputs and its optimizer state after the launch.
#[derive(Debug)]
pub struct Launched<B> {
    /// One buffer per output of the node.
    pub outputs: Vec<B>,
    /// The optimizer state it left.
    pub state: Vec<B>,
}

/// A device: buffers, kernels on in-order streams, events between streams.
///
/// Streams are numbered as the plan numbers them ([`ordo_sched::Plan::streams`]); work
/// enqueued on one stream runs in the order it was enqueued, and work on two streams is
/// ordered only by events.
pub trait Device: Send + Sync {
    /// A tensor held by the device; cloning shares it.
    type Buffer: Clone + Send + Sync;
    /// A point in a stream's work that another stream can wait for.
    type Event: Send + Sync;

    /// A new buffer holding `host`'s values, written on `stream`.
    ///
    /// # Errors
    /// [`BackendError::Device`] when the device cannot hold it.
    fn upload(&self, stream: u32, host: &Arc<Tensor>) -> Result<Self::Buffer, BackendError>;

    /// `buffer`'s values on the host, once the work that writes it has finished.
    ///
    /// # Errors
    /// [`BackendError::Device`] when the device cannot read it back.
    fn download(&self, buffer: &Self::Buffer) -> Result<Arc<Tensor>, BackendError>;

    /// Enqueues a node's kernel on `stream`.
    ///
    /// # Errors
    /// The kernel's error when it rejects its arguments.
    fn launch(
        &self,
        stream: u32,
        launch: Launch<'_, Self::Buffer>,
    ) -> Result<Launched<Self::Buffer>, KernelError>;

    /// Records, on `stream`, an event that completes when the work enqueued on it so far has.
    fn record(&self, stream: u32) -> Self::Event;

    /// Makes the work enqueued on `stream` from now on wait for `event`.
    ///
    /// # Errors
    /// [`BackendError::Device`] when the event cannot be waited for.
    fn wait(&self, stream: u32, event: &Self::Event) -> Result<(), BackendError>;

    /// Blocks until every stream of the device has finished its work.
    ///
    /// # Errors
    /// [`BackendError::Device`] when enqueued work failed.
    fn synchronize(&self) -> Result<(), BackendError>;
}

/// What a collective or point-to-point call returns: the result, once every participant has
/// issued its part.
pub trait Handle {
    /// The buffer type of the backend.
    type Buffer;

    /// Blocks until the operation has completed on this participant and returns its result:
    /// the reduced buffer of an all-reduce, the root's buffer of a broadcast, the received
    /// buffer of a receive, the sent buffer of a send.
    ///
    /// # Errors
    /// [`BackendError::Timeout`] naming the ranks that never issued their part;
    /// [`BackendError::Mismatch`] when the participants disagree.
    fn wait(self) -> Result<Self::Buffer, BackendError>;
}

/// Collectives and point-to-point transfers between the devices of a backend.
///
/// A *group* is a list of distinct ranks (device indices) in ascending order; `rank` is the
/// caller's. Each rank issues its part of every collective of a group in the group's order;
/// a call returns without waiting for the other participants.
pub trait Collectives: Send + Sync {
    /// The buffer type of the backend's devices.
    type Buffer;
    /// The handle its calls return.
    type Handle: Handle<Buffer = Self::Buffer>;

    /// Sums `buffer` over `group`, adding the ranks' buffers in group order (so that the
    /// result is the same on every run and every rank).
    ///
    /// # Errors
    /// [`BackendError::Mismatch`] for a rank outside the group.
    fn all_reduce(
        &self,
        group: &[usize],
        rank: usize,
        buffer: &Self::Buffer,
    ) -> Result<Self::Handle, BackendError>;

    /// Gives every rank of `group` the root's buffer; the root passes `Some`, the others
    /// `None`.
    ///
    /// # Errors
    /// [`BackendError::Mismatch`] for a rank or root outside the group, or a buffer given
    /// by a rank that is not the root (or not by the root).
    fn broadcast(
        &self,
        group: &[usize],
        root: usize,
        rank: usize,
        buffer: Option<&Self::Buffer>,
    ) -> Result<Self::Handle, BackendError>;

    /// Sends `buffer` from rank `from` to rank `to`; transfers between two ranks arrive in
    /// the order they were sent.
    ///
    /// # Errors
    /// [`BackendError::Mismatch`] for a transfer to itself or to an unknown rank.
    fn send(
        &self,
        from: usize,
        to: usize,
        buffer: &Self::Buffer,
    ) -> Result<Self::Handle, BackendError>;

    /// Receives, on rank `to`, the next buffer that rank `from` sends it.
    ///
    /// # Errors
    /// [`BackendError::Mismatch`] for a transfer to itself or from an unknown rank.
    fn recv(&self, to: usize, from: usize) -> Result<Self::Handle, BackendError>;
}

/// Devices and the collectives between them.
pub trait Backend: Send + Sync {
    /// The buffer type every device and the collectives share.
    type Buffer: Clone + Send + Sync;
    /// A device.
    type Device: Device<Buffer = Self::Buffer>;
    /// The collectives between the devices.
    type Collectives: Collectives<Buffer = Self::Buffer>;

    /// How many devices it has.
    fn devices(&self) -> usize;
    /// Device `index` (below [`Backend::devices`]).
    fn device(&self, index: usize) -> &Self::Device;
    /// The collectives between its devices.
    fn collectives(&self) -> &Self::Collectives;
    /// A short name for messages ("cpu", "cuda").
    fn name(&self) -> &str;
}
