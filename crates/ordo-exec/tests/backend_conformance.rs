//! The backend conformance suite: the CPU backend passes every check, and backends broken on
//! purpose (each in one way a real backend could be) fail the check that covers it, so that
//! the suite is known to catch what it claims to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ordo_exec::backend::conformance::{Numerics, check};
use ordo_exec::backend::{
    Backend, BackendError, Collectives, Cpu, CpuCollectives, CpuDevice, CpuEvent, CpuHandle,
    Device, Handle, Launch, Launched,
};
use ordo_exec::cpu::{KernelError, Tensor};

#[test]
fn the_cpu_backend_passes_every_check() {
    let failures = check(Cpu::with_timeout, Numerics::Bitwise);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// How a [`Broken`] backend goes wrong.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// Downloads lose NaN payloads (canonicalise every NaN).
    CanonicalNan,
    /// All-reduce adds the parts in reverse group order.
    ReverseSum,
    /// Every receive fails.
    NoReceive,
    /// A collective whose part is missing waits forever.
    NoTimeout,
    /// A kernel's outputs come back slightly off.
    SloppyKernels,
}

/// The CPU backend with one fault.
struct Broken {
    devices: Vec<BrokenDevice>,
    collectives: BrokenCollectives,
}

impl Broken {
    fn new(fault: Fault, devices: usize, timeout: Duration) -> Self {
        let cpu = Cpu::with_timeout(devices, timeout);
        let cpu_devices: Vec<_> =
            (0..devices).map(|d| BrokenDevice { fault, cpu: *cpu.device(d) }).collect();
        // A backend without a timeout is modelled by one far longer than the check allows.
        let timeout = if fault == Fault::NoTimeout { Duration::from_secs(6) } else { timeout };
        Self {
            devices: cpu_devices,
            collectives: BrokenCollectives {
                fault,
                inner: CpuCollectives::new(devices, timeout),
                issued: Mutex::default(),
                parts: Arc::default(),
            },
        }
    }
}

struct BrokenDevice {
    fault: Fault,
    cpu: CpuDevice,
}

impl Device for BrokenDevice {
    type Buffer = Arc<Tensor>;
    type Event = CpuEvent;

    fn upload(&self, stream: u32, host: &Arc<Tensor>) -> Result<Arc<Tensor>, BackendError> {
        self.cpu.upload(stream, host)
    }

    fn download(&self, buffer: &Arc<Tensor>) -> Result<Arc<Tensor>, BackendError> {
        let t = self.cpu.download(buffer)?;
        match (self.fault, t.as_f32()) {
            (Fault::CanonicalNan, Some(v)) => {
                let v = v.iter().map(|x| if x.is_nan() { f32::NAN } else { *x }).collect();
                Ok(Arc::new(Tensor::from_f32(t.shape(), v).expect("same shape")))
            }
            _ => Ok(t),
        }
    }

    fn launch(
        &self,
        stream: u32,
        launch: Launch<'_, Arc<Tensor>>,
    ) -> Result<Launched<Arc<Tensor>>, KernelError> {
        let mut launched = self.cpu.launch(stream, launch)?;
        if self.fault == Fault::SloppyKernels {
            for out in &mut launched.outputs {
                if let Some(v) = out.as_f32() {
                    let v = v.iter().map(|x| x * (1.0 + 1e-6)).collect();
                    *out = Arc::new(Tensor::from_f32(out.shape(), v).expect("same shape"));
                }
            }
        }
        Ok(launched)
    }

    fn record(&self, stream: u32) -> CpuEvent {
        self.cpu.record(stream)
    }

    fn wait(&self, stream: u32, event: &CpuEvent) -> Result<(), BackendError> {
        self.cpu.wait(stream, event)
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.cpu.synchronize()
    }
}

/// Per (group, sequence number), the parts of an all-reduce by position in the group.
type Parts = Mutex<HashMap<Key, Vec<Option<Arc<Tensor>>>>>;
/// A group and the sequence number of one of its all-reduces.
type Key = (Vec<usize>, u64);

struct BrokenCollectives {
    fault: Fault,
    inner: CpuCollectives,
    /// Per (group, rank): all-reduces issued.
    issued: Mutex<HashMap<(Vec<usize>, usize), u64>>,
    parts: Arc<Parts>,
}

/// A handle whose result a fault may change.
struct BrokenHandle {
    inner: CpuHandle,
    /// For a reversed sum: the shared parts and this all-reduce's key.
    reversed: Option<(Arc<Parts>, Key)>,
}

impl Handle for BrokenHandle {
    type Buffer = Arc<Tensor>;

    fn wait(self) -> Result<Arc<Tensor>, BackendError> {
        // Once the real all-reduce is done, every part is in.
        let result = self.inner.wait()?;
        let Some((parts, key)) = self.reversed else { return Ok(result) };
        let parts: Vec<Arc<Tensor>> =
            parts.lock().unwrap()[&key].iter().rev().map(|p| p.clone().unwrap()).collect();
        // The parts added in reverse group order: wrong whenever the order matters.
        let mut sum = parts[0].as_f32().expect("f32").to_vec();
        for p in &parts[1..] {
            sum.iter_mut().zip(p.as_f32().expect("f32")).for_each(|(a, b)| *a += b);
        }
        Ok(Arc::new(Tensor::from_f32(result.shape(), sum).expect("same shape")))
    }
}

impl Collectives for BrokenCollectives {
    type Buffer = Arc<Tensor>;
    type Handle = BrokenHandle;

    fn all_reduce(
        &self,
        group: &[usize],
        rank: usize,
        buffer: &Arc<Tensor>,
    ) -> Result<BrokenHandle, BackendError> {
        let inner = self.inner.all_reduce(group, rank, buffer)?;
        if self.fault != Fault::ReverseSum || buffer.as_f32().is_none() {
            return Ok(BrokenHandle { inner, reversed: None });
        }
        let mut issued = self.issued.lock().unwrap();
        let seq = issued.entry((group.to_vec(), rank)).or_insert(0);
        let key = (group.to_vec(), *seq);
        *seq += 1;
        let position = group.iter().position(|&r| r == rank).expect("checked by the inner call");
        self.parts.lock().unwrap().entry(key.clone()).or_insert_with(|| vec![None; group.len()])
            [position] = Some(buffer.clone());
        Ok(BrokenHandle { inner, reversed: Some((self.parts.clone(), key)) })
    }

    fn broadcast(
        &self,
        group: &[usize],
        root: usize,
        rank: usize,
        buffer: Option<&Arc<Tensor>>,
    ) -> Result<BrokenHandle, BackendError> {
        Ok(BrokenHandle { inner: self.inner.broadcast(group, root, rank, buffer)?, reversed: None })
    }

    fn send(
        &self,
        from: usize,
        to: usize,
        buffer: &Arc<Tensor>,
    ) -> Result<BrokenHandle, BackendError> {
        Ok(BrokenHandle { inner: self.inner.send(from, to, buffer)?, reversed: None })
    }

    fn recv(&self, to: usize, from: usize) -> Result<BrokenHandle, BackendError> {
        if self.fault == Fault::NoReceive {
            return Err(BackendError::Device { device: to, problem: "cannot receive".into() });
        }
        Ok(BrokenHandle { inner: self.inner.recv(to, from)?, reversed: None })
    }
}

impl Backend for Broken {
    type Buffer = Arc<Tensor>;
    type Device = BrokenDevice;
    type Collectives = BrokenCollectives;

    fn devices(&self) -> usize {
        self.devices.len()
    }

    fn device(&self, index: usize) -> &BrokenDevice {
        &self.devices[index]
    }

    fn collectives(&self) -> &BrokenCollectives {
        &self.collectives
    }

    fn name(&self) -> &str {
        "broken cpu"
    }
}

/// The checks a fault fails.
fn failed(fault: Fault) -> Vec<&'static str> {
    let mut failed: Vec<_> =
        check(|devices, timeout| Broken::new(fault, devices, timeout), Numerics::Bitwise)
            .into_iter()
            .map(|f| f.check)
            .collect();
    failed.sort_unstable();
    failed
}

#[test]
fn lost_nan_payloads_fail_the_round_trip() {
    assert!(failed(Fault::CanonicalNan).contains(&"buffers round-trip"));
}

#[test]
fn a_sum_in_the_wrong_order_fails_the_all_reduce_check() {
    // (Data-parallel training may pass: its replicas' identical gradients sum alike in any
    // order.)
    let failed = failed(Fault::ReverseSum);
    assert!(failed.contains(&"all-reduce sums in group order"), "{failed:?}");
}

#[test]
fn transfers_that_cannot_be_received_fail_transfers_and_placed_plans() {
    let failed = failed(Fault::NoReceive);
    for check in ["transfers arrive in order", "placed plans", "pipeline plans"] {
        assert!(failed.contains(&check), "{check} passed: {failed:?}");
    }
}

#[test]
fn a_collective_without_a_timeout_fails_the_missing_rank_check() {
    assert_eq!(failed(Fault::NoTimeout), ["a missing rank times out"]);
}

#[test]
fn kernels_off_by_a_rounding_error_fail_bitwise_but_pass_a_tolerance() {
    let bitwise = failed(Fault::SloppyKernels);
    for check in ["events order streams", "placed plans", "data-parallel plans", "pipeline plans"] {
        assert!(bitwise.contains(&check), "{check} passed: {bitwise:?}");
    }
    let close = check(
        |devices, timeout| Broken::new(Fault::SloppyKernels, devices, timeout),
        Numerics::Close { rtol: 1e-3, atol: 1e-5 },
    );
    let close: Vec<_> = close.iter().map(|f| f.check).collect();
    // The event check compares exactly (a scale by 6 is exact on any backend).
    assert_eq!(close, ["events order streams"]);
}
