"""Baechi-PyTorch's Assigner on ordo: the user's own module, run as a placement says.

``Distributed`` wraps the ``forward`` of every placed layer with the seed's Algorithm 1; the
model's own ``forward`` runs unchanged on the caller's thread (the host), which reaches the
layers in code order.

The protocol, per training step (one call of ``Distributed.forward``):

* Each logical device is a **compute stream**: on a GPU a CUDA stream, with events between
  streams and the seed's tx/rx streams for transfers (the protocol is in ``ordo._cuda``); on
  the CPU a worker thread that runs the layers submitted to it one at a time, in submission
  order (a CUDA stream's guarantee), so that layers on different logical devices run at once.
  The CPU device with the most layers (and every device with ``parallel=False``) runs a layer
  on the thread that submits it, at once.
* A layer **submits** to its device once the layers it waits for have submitted: the layer
  before it on its device (the GPU-wise topological parent: the device then runs its layers in
  the placement's order) and its graph parents (their outputs are its inputs; with the CPU's
  shared memory the output itself is the copy that the seed's tx/rx streams make). It also
  waits for the layers its actual arguments were computed from, in case the profile missed a
  dependency.
* The host decides, when it reaches a layer, whether to submit it itself or to leave it to a
  thread of its own that waits (``isNotWaiting`` with its cache: every layer before it on its
  device reached and not waiting, no parent waiting; or the global criterion). A layer the host
  submits never waits for one it has not reached, so the host never deadlocks, and the threads
  only wait for layers the host has reached or will.
* The host gets a ``Pending`` for an output that is not ready (see ``ordo._pending``); code
  between layers works on it. At the end of ``forward`` the layers the host never reached
  (a branch not taken) count as submitted, every layer and operation of the step is waited for
  (the first error is raised, naming where it happened), and the output is returned ready.
  ``loss.backward()`` and ``optimizer.step()`` then run as on the undistributed module:
  autograd recorded each layer on the thread that ran it.

* In-place writes keep code order: a write of a pending value waits for the deferred work that
  reads the old value; a write of a tensor the host holds (seen by the ``HostWrites`` torch
  function mode, which is thread-local and so watches the host only) first waits for the
  deferred work that reads its storage.

The step's own locking is written down in ``ordo._step``.
"""

from __future__ import annotations

import collections
import weakref
from dataclasses import dataclass, field
from typing import Callable

import torch

import ordo
from ordo._cuda import GpuDevice, TransferStreams
from ordo._devices import Inline, Worker, close_all
from ordo._ordo import LayerCall
from ordo._step import Plan, Step

__all__ = ["STEPS_KEPT", "Distributed", "StepReport"]

# How many steps' reports a distributed module keeps.
STEPS_KEPT = 1000


@dataclass
class StepReport:
    """What one step did: the layers in the order the host reached them, and those that
    waited on threads under the criterion in use; ``threads_under`` gives the count under
    either criterion for the same code order (ordo's Rust decision, independent of this run)."""

    code_order: list[str]
    threads: list[str]
    criterion: str
    _placement: object = field(repr=False)

    def threads_under(self, criterion: str) -> list[str]:
        """The layers that would wait on threads under ``criterion`` (``gpu-topo`` or
        ``global-topo``) when the host reaches the layers in this step's order."""
        p = self._placement
        reached = set(self.code_order)
        order = self.code_order + [layer for layer in p.layers if layer not in reached]
        return ordo.reorder_threads(
            order,
            p.parents,
            p.device_of,
            p.device_order,
            criterion=criterion,
            global_order=p.global_order,
        )


class _Assigner:
    """The placement applied to one module: the wrapped layers and the devices."""

    def __init__(self, module, placement, devices, reorder, criterion, parallel, timeout):
        if criterion not in ("gpu-topo", "global-topo"):
            raise ordo.OrdoError(f"criterion `{criterion}`: expected gpu-topo or global-topo")
        if not timeout > 0:
            raise ordo.OrdoError(f"timeout={timeout}: must be a positive number of seconds")
        self.plan = Plan(placement)
        count = len(self.plan.device_order)
        names = list(devices) if devices is not None else ["cpu"] * count
        if len(names) != count:
            raise ordo.OrdoError(
                f"devices lists {len(names)} devices, the placement has {count} logical devices"
            )
        kinds = set()
        for name in names:
            try:
                kinds.add(torch.device(name).type)
            except (RuntimeError, TypeError) as error:
                message = f"devices: `{name}` is not a torch device ({error})"
                raise ordo.OrdoError(message) from None
        if not kinds <= {"cpu", "cuda"}:
            other = sorted(kinds - {"cpu", "cuda"})
            raise ordo.OrdoError(
                f"devices: {other}: ordo.torch.distribute runs logical devices on the CPU or "
                f"on CUDA GPUs"
            )
        if len(kinds) > 1:
            raise ordo.OrdoError(
                "devices: mixes the CPU and CUDA GPUs; give every logical device a GPU (several "
                "may share one), or every one the CPU"
            )
        self.gpu = kinds == {"cuda"}
        if self.gpu and not torch.cuda.is_available():
            raise ordo.OrdoError(f"devices: {names}: CUDA is not available to torch here")
        self.reorder, self.criterion, self.timeout = reorder, criterion, float(timeout)
        if self.gpu:
            physical = [torch.device(name) for name in names]
            physical = [d if d.index is not None else torch.device("cuda", 0) for d in physical]
            self.devices = [GpuDevice(d, physical[d], parallel) for d in range(count)]
        else:
            # The device with the most layers runs them on the host thread: torch's CPU
            # kernels run about 15% slower on a thread other than the main one (its OpenMP
            # team competes with the main thread's), so the host keeps the largest share.
            sizes = [len(order) for order in self.plan.device_order]
            on_host = sizes.index(max(sizes))
            self.devices = [
                Worker(d) if parallel and d != on_host else Inline() for d in range(count)
            ]
        # Per layer: its device runs it on the thread that submits it, at once (a GPU device
        # launches it there: GpuDevice is an Inline).
        self.runs_inline = [isinstance(self.devices[d], Inline) for d in self.plan.device_of]
        # The seed's tx/rx streams, and (tests) copies between logical devices on one GPU.
        self.transfers = TransferStreams()
        self.copy_between_logical_devices = False
        weakref.finalize(self, close_all, self.devices)
        self.step: Step | None = None
        # The last reports only: a long training run must not grow without bound.
        self.reports: collections.deque[StepReport] = collections.deque(maxlen=STEPS_KEPT)
        self.placement = placement
        self.wrapped: list[torch.nn.Module] = []  # their `forward` is an instance attribute
        modules = dict(module.named_modules())
        for index, qualname in enumerate(self.plan.modules):
            m = modules.get(qualname)
            if m is None:
                message = f"the placement names layer `{qualname}`, which the module lacks"
                raise ordo.OrdoError(message)
            m.forward = self._wrapped(index, m)
            self.wrapped.append(m)
        if self.gpu:
            _move_to_devices(module, modules, self.plan, self.devices)

    def _wrapped(self, index: int, module: torch.nn.Module) -> Callable:
        """``module.forward`` as a layer: the wrapped module number ``index`` of the plan (ordo's
        ``LayerCall``: the common call is made in Rust, the others go to the step). Whether it
        writes its input (``inplace=True``) is read once, here, from its own attributes
        (``getattr`` of one it lacks goes through ``nn.Module.__getattr__`` and an
        AttributeError: a cost on every call)."""
        inplace = module.__dict__.get("inplace") is True
        return LayerCall(self.plan.lookup, index, module.forward, inplace, torch.Tensor)

    def run(self, module, args, kwargs):
        if self.step is not None:
            raise ordo.OrdoError("forward called again before the last call returned")
        step = self.step = Step(self)
        self.plan.lookup.begin(step.core, step)
        try:
            try:
                output = module(*args, **kwargs)
            finally:
                step.unwatch()
            return step.finish(output)
        except BaseException:
            step.abort()
            raise
        finally:
            self.plan.lookup.end()
            self.step = None
            self.reports.append(
                StepReport(step.code_order, step.threads, self.criterion, self.placement)
            )

    def close(self) -> None:
        for m in self.wrapped:
            if m.__dict__.get("forward") is not None:
                del m.forward
        self.wrapped.clear()
        close_all(self.devices)


def _move_to_devices(module, modules, plan: Plan, devices: list[GpuDevice]) -> None:
    """Moves the module to the first logical device's GPU, then each layer's parameters and
    buffers to its device's GPU. A parameter that layers on different GPUs use (tied weights)
    is an error: it can live on one GPU only."""
    module.to(devices[0].device)
    home: dict[str, torch.device] = {}
    for layer, d in zip(plan.layers, plan.device_of):
        qualname = layer.split("#")[0]
        device = devices[d].device
        if home.setdefault(qualname, device) != device:
            raise ordo.OrdoError(
                f"layer `{qualname}` is called on {home[qualname]} and on {device}: its "
                f"parameters can live on one GPU only; place its calls on one GPU"
            )
    users: dict[int, tuple[str, str, torch.device]] = {}
    for qualname, device in home.items():
        for name, p in modules[qualname].named_parameters():
            other = users.setdefault(id(p), (qualname, name, device))
            if other[2] != device:
                raise ordo.OrdoError(
                    f"parameter `{name}` of layer `{qualname}` (on {device}) is also layer "
                    f"`{other[0]}`'s (on {other[2]}): tied weights must be placed on one GPU"
                )
    for qualname, device in home.items():
        modules[qualname].to(device)


class Distributed(torch.nn.Module):
    """A module run as a placement says (``ordo.torch.distribute`` makes one). Its
    parameters are the module's; ``steps`` reports each forward pass."""

    def __init__(self, module, placement, *, devices, reorder, criterion, parallel, timeout):
        super().__init__()
        self.module = module
        self._assigner = _Assigner(
            module, placement, devices, reorder, criterion, parallel, timeout
        )

    def forward(self, *args, **kwargs):
        return self._assigner.run(self.module, args, kwargs)

    @property
    def steps(self) -> list[StepReport]:
        """A report of each of the last ``STEPS_KEPT`` (1000) forward passes, oldest first."""
        return list(self._assigner.reports)

    def close(self) -> None:
        """Restores the module's layers and stops the device threads."""
        self._assigner.close()
