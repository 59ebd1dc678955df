"""Logical devices on GPUs: the seed's stream and event protocol.

Each logical device placed on a GPU is a **compute stream** (``torch.cuda.Stream``); several
logical devices may share one GPU, each with a stream of its own, so that their layers overlap
as they would on separate GPUs. Launching kernels is asynchronous, so a layer runs on its
device by being launched on its stream from the thread that submits it (the host, or the
thread of a layer that waited): a GPU device needs no worker thread.

The protocol, per step (``StreamStep``):

* Every stream of the step first waits for the work the caller queued before the step (the
  last step's optimizer update, the inputs).
* After a layer's launch an **event** is recorded on its stream. The storages of its outputs
  are registered as produced by that event, the storages of its inputs as read by it.
* A layer that reads a tensor produced on another stream of its GPU makes its stream wait for
  the producing event and marks the tensor used by its stream (``record_stream``): the caching
  allocator never hands the memory out again while a stream may still read it (no buffer is
  freed while another stream reads it).
* A layer that reads a tensor on another physical device (another GPU, or the host's memory)
  gets a copy made on the seed's **transfer streams** of (producing layer, destination
  logical device): an rx stream on the destination GPU, and a tx stream on the source GPU
  when the source is another GPU (PyTorch copies between GPUs on the source's current stream
  and synchronises with the destination's). The transfer waits for the producing event, copies
  and records an event that the compute stream waits for; the source is marked used by the
  transfer and the copy by the compute stream. Each (tensor, destination) is copied once per
  step.
* A tensor the host computed between layers (on the caller's current stream) is waited for
  with ``wait_stream`` of that stream.
* A layer that writes its input in place (``inplace=True``) first waits for every event that
  read it.
* An operation between layers (on the host thread, seen by ``StreamOps``, a torch function
  mode; or deferred, on the thread that completes its inputs) runs on the caller's current
  stream, which waits for the events that produced its inputs and for those that read what it
  writes; what it writes in place counts as the caller's from then on. Inputs on different
  devices are moved to its first GPU input's device (§1.3.4 of the seed: functional code
  between layers on different devices works unchanged).
* At the end of the step the caller's streams wait for every stream of the step, and the
  output is marked used by them. ``loss.backward()`` needs nothing more: autograd runs each
  backward operation on the stream its forward ran on and synchronises streams itself.

Locking: ``StreamStep.lock`` (re-entrant) guards the registries (``produced``, ``read``,
``copies``, ``streams``), which the host and the threads of waiting layers update as they
launch. CUDA's stream and event calls are thread-safe. The order that matters is the order of
launches on each stream: a layer is launched only after every layer it waits for was launched
(the Assigner's submission protocol), and its event is registered before its output reaches
anyone.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode

from ordo._devices import Inline
from ordo._pending import tree_apply, written_by

__all__ = ["GpuDevice", "StreamOps", "StreamStep", "TransferStreams", "current_stream", "on_stream"]


class GpuDevice(Inline):
    """A logical device on a GPU: its compute stream (the GPU's default stream when the
    devices are not to run in parallel). Jobs run on the thread that submits them."""

    def __init__(self, index: int, device: torch.device, parallel: bool) -> None:
        self.index = index
        self.device = device
        self.stream = torch.cuda.Stream(device) if parallel else torch.cuda.default_stream(device)


class TransferStreams:
    """The seed's tx/rx streams, one pair per (producing layer, destination logical device),
    made on first use and kept for the module's life."""

    def __init__(self) -> None:
        self._streams: dict[tuple[str, int, torch.device], torch.cuda.Stream] = {}
        self._lock = threading.Lock()

    def get(self, source: str, dest: int, device: torch.device) -> torch.cuda.Stream:
        key = (source, dest, device)
        with self._lock:
            stream = self._streams.get(key)
            if stream is None:
                stream = self._streams[key] = torch.cuda.Stream(device)
            return stream

    def __len__(self) -> int:
        return len(self._streams)


@dataclass(frozen=True)
class _Produced:
    """What produced a storage in this step: a layer's launch (its event and stream) and the
    logical device it ran on.

    Entries are keyed by the storage's address and do not keep it alive (that would hold
    every activation until the step ends). A freed block is handed out again only for work on
    the stream it was allocated on (the caching allocator's pools are per stream), so a later
    tensor at the same address was made by the same stream: an entry never hides a wait, at
    worst it adds one for an event that is already past."""

    event: torch.cuda.Event
    stream: torch.cuda.Stream
    layer: str
    device: int


# The protocol's own tensor calls (`untyped_storage`, `record_stream`, `to`) must not reach
# the torch function modes on the host's stack (``StreamOps`` would see them as operations
# between layers and run the protocol again, inside itself): they run with torch functions
# disabled.
_UNWATCHED = torch._C.DisableTorchFunction

# The calling thread's current stream of a GPU, as a Stream object made once per stream:
# `torch.cuda.current_stream` builds a new one (a device switch and back) on every call, and
# a launch asks several times. The C functions below are the ones `torch.cuda.current_stream`
# and `torch.cuda.set_stream` call.
_STREAMS: dict[tuple[int, int, int], torch.cuda.Stream] = {}


def current_stream(gpu: int) -> torch.cuda.Stream:
    key = torch._C._cuda_getCurrentStream(gpu)
    stream = _STREAMS.get(key)
    if stream is None:
        stream = torch.cuda.Stream(stream_id=key[0], device_index=key[1], device_type=key[2])
        _STREAMS[key] = stream
    return stream


class on_stream:
    """``torch.cuda.stream(stream)`` for one launch, without building Stream objects: the
    calling thread's current stream of the stream's GPU is ``stream`` inside (and that GPU
    the current device), the previous one again after."""

    __slots__ = ("stream", "previous", "device")

    def __init__(self, stream: torch.cuda.Stream) -> None:
        self.stream = stream

    def __enter__(self) -> None:
        s = self.stream
        self.device = None
        # What `torch.cuda.current_device()` returns, without its lazy-initialisation check
        # (CUDA is initialised: the stream exists).
        if torch._C._cuda_getDevice() != s.device_index:
            self.device = torch.cuda.device(s.device_index)
            self.device.__enter__()
        self.previous = torch._C._cuda_getCurrentStream(s.device_index)
        torch._C._cuda_setStream(
            stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type
        )

    def __exit__(self, *exc) -> None:
        p = self.previous
        torch._C._cuda_setStream(stream_id=p[0], device_index=p[1], device_type=p[2])
        if self.device is not None:
            self.device.__exit__(*exc)


def _key(x: torch.Tensor) -> int:
    return x.untyped_storage().data_ptr()


def _is_gpu_tensor(x) -> bool:
    return type(x) is not bool and isinstance(x, torch.Tensor) and x.is_cuda


class StreamStep:
    """The stream protocol of one step (see the module's docstring)."""

    def __init__(self, devices: list[GpuDevice], transfers: TransferStreams, copy_all: bool):
        self.devices = devices
        self.transfers = transfers
        # Tests: copy between logical devices even on one GPU, so that the transfer path runs.
        self.copy_all = copy_all
        self.lock = threading.RLock()
        self.produced: dict[int, _Produced] = {}  # guarded by lock
        self.read: dict[int, list[torch.cuda.Event]] = {}  # guarded by lock
        # (id of a tensor, destination) -> the tensor (kept: its id stays its own), its copy, the
        # copy's event.
        self.copies: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor, torch.cuda.Event]] = {}
        self.streams: dict[torch.cuda.Stream, None] = {}  # every stream of the step; lock
        for device in devices:
            if device.stream not in self.streams:
                self.streams[device.stream] = None
                caller = current_stream(device.device.index)
                if device.stream != caller:
                    device.stream.wait_stream(caller)

    # -- layers ----------------------------------------------------------------------------

    def launch(self, layer: str, device: GpuDevice, forward: Callable, inplace: bool, *a, **kw):
        """``forward(*a, **kw)`` launched on ``device``'s stream, after what it reads."""
        stream = device.stream
        gpu = device.device.index
        host_waited = False
        read: list[int] = []  # the storages it reads on its own stream

        def bring(x):
            nonlocal host_waited
            if not isinstance(x, torch.Tensor) or x.layout != torch.strided:
                return x
            if not x.is_cuda:
                if x.dim() == 0:  # a host scalar: kernels take it as it is
                    return x
                return self._transfer(x, None, device)
            key = _key(x)
            with self.lock:
                source = self.produced.get(key)
            # `get_device()`: the GPU's index as an int (`x.device` builds a device object).
            if x.get_device() != gpu or (
                self.copy_all and source is not None and source.device != device.index
            ):
                return self._transfer(x, source, device)
            read.append(key)
            if source is None:  # the host's: computed on its stream before this launch
                caller = current_stream(gpu)
                if caller != stream:
                    if not host_waited:
                        stream.wait_stream(caller)
                        host_waited = True
                    x.record_stream(stream)
            elif source.stream != stream:
                stream.wait_event(source.event)
                x.record_stream(stream)
            return x

        with _UNWATCHED():
            if not kw and all(type(x) is torch.Tensor for x in a):  # the usual layer call
                a = tuple([bring(x) for x in a])
            else:
                a, kw = tree_apply(bring, (a, kw))
            if inplace and a and isinstance(a[0], torch.Tensor) and a[0].is_cuda:
                with self.lock:
                    readers = list(self.read.get(_key(a[0]), ()))
                for event in readers:
                    stream.wait_event(event)
        with on_stream(stream):
            output = forward(*a, **kw)
        with _UNWATCHED():
            done = torch.cuda.Event()
            done.record(stream)
            produced = _Produced(done, stream, layer, device.index)
            outputs = [output] if type(output) is torch.Tensor else _tensor_leaves(output)
            keys = [_key(x) for x in outputs if x.is_cuda]
            with self.lock:
                self.streams[stream] = None
                for key in read:
                    self.read.setdefault(key, []).append(done)
                for key in keys:
                    self.produced[key] = produced
        return output

    def _transfer(self, x: torch.Tensor, source: _Produced | None, device: GpuDevice):
        """``x`` copied to ``device`` on the transfer streams (once per step)."""
        with self.lock:
            copied = self.copies.get((id(x), device.index))
        if copied is not None:
            copy, event = copied[1], copied[2]
        else:
            origin = source.layer if source is not None else "host"
            rx = self.transfers.get(origin, device.index, device.device)
            contexts = [on_stream(rx)]
            tx = None
            if x.is_cuda and x.device != device.device:
                tx = self.transfers.get(origin, device.index, x.device)
                contexts.insert(0, on_stream(tx))
            first = tx if tx is not None else rx
            if source is not None:
                first.wait_event(source.event)
            elif x.is_cuda:
                first.wait_stream(current_stream(x.device.index))
            if tx is not None:
                rx.wait_stream(tx)
            with contexts[0]:
                if len(contexts) == 2:
                    with contexts[1]:
                        copy = x.to(device.device, non_blocking=True, copy=True)
                else:
                    copy = x.to(device.device, non_blocking=True, copy=True)
            if x.is_cuda:
                x.record_stream(first)
            event = torch.cuda.Event()
            event.record(rx)
            with self.lock:
                self.copies[(id(x), device.index)] = (x, copy, event)
                self.streams[rx] = None
                if tx is not None:
                    self.streams[tx] = None
                if x.is_cuda:
                    self.read.setdefault(_key(x), []).append(event)
        device.stream.wait_event(event)
        copy.record_stream(device.stream)
        return copy

    # -- operations between layers ---------------------------------------------------------

    def before_op(self, func, args, kwargs):
        """The arguments of an operation between layers, ready for the caller's current stream
        (moved to one device where they span several)."""
        with _UNWATCHED():
            return self._before_op(func, args, kwargs)

    def _before_op(self, func, args, kwargs):
        leaves = [x for x in _tensor_leaves((args, kwargs)) if x.dim() > 0]
        places = {x.device for x in leaves}
        if len(places) > 1 and any(p.type == "cuda" for p in places):
            target = next(x.device for x in leaves if x.is_cuda)

            def move(x):
                if isinstance(x, torch.Tensor) and x.dim() > 0 and x.device != target:
                    return x.to(target)
                return x

            args, kwargs = tree_apply(move, (args, kwargs))
        gpu = [x for x in _tensor_leaves((args, kwargs)) if x.is_cuda]
        if not gpu:
            return args, kwargs
        target = written_by(func, args, kwargs)
        written = isinstance(target, torch.Tensor) and target.is_cuda
        with self.lock:
            sources = [(x, self.produced.get(_key(x))) for x in gpu]
            readers = list(self.read.get(_key(target), ())) if written else []
            if written:
                # The caller's stream writes it now: from here on a layer that reads it waits
                # for the caller's stream, not for the layer that produced it.
                self.produced.pop(_key(target), None)
        for x, source in sources:
            if source is not None:
                current = current_stream(x.device.index)
                if source.stream != current:
                    current.wait_event(source.event)
                    x.record_stream(current)
        if readers:
            current = current_stream(target.device.index)
            for event in readers:
                current.wait_event(event)
        return args, kwargs

    def synced(self, func: Callable) -> Callable:
        """``func`` run after ``before_op`` (a deferred operation between layers)."""

        def run(*args, **kwargs):
            args, kwargs = self.before_op(func, args, kwargs)
            return func(*args, **kwargs)

        return run

    # -- the end of the step ---------------------------------------------------------------

    def finish(self, output):
        """The caller's streams wait for every stream of the step; the output is marked used
        by them."""
        with _UNWATCHED():
            return self._finish(output)

    def _finish(self, output):
        with self.lock:
            streams = list(self.streams)
            self.copies.clear()
        for stream in streams:
            current_stream(stream.device_index).wait_stream(stream)
        for x in _gpu_leaves(output):
            current = current_stream(x.device.index)
            if all(current != s for s in streams):
                x.record_stream(current)
        return output


class StreamOps(TorchFunctionMode):
    """The host's operations between layers, on the caller's stream after what they read
    (``StreamStep.before_op``). ``step.in_layer``: a layer runs on the host; its operations
    are the layer's, launched on its device's stream."""

    def __init__(self, step, streams: StreamStep) -> None:
        super().__init__()
        self.step = step
        self.streams = streams

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.step.in_layer:
            args, kwargs = self.streams.before_op(func, args, kwargs)
        return func(*args, **kwargs)


def _tensor_leaves(tree) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    tree_apply(
        lambda x: (
            found.append(x) if isinstance(x, torch.Tensor) and x.layout == torch.strided else None
        ),
        tree,
    )
    return found


def _gpu_leaves(tree) -> list[torch.Tensor]:
    return [x for x in _tensor_leaves(tree) if x.is_cuda]
