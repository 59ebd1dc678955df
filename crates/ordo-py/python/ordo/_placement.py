"""Placements of a profiled module's layers, and what ordo predicts for them.

``place(profiled, devices)`` runs one of ordo's placers on the profile's cost graph;
``Placement.of(profiled, device_of)`` takes a placement made elsewhere (by hand, in a test).
Either is checked by ordo's scheduler (every layer on one device, each device's order
respecting the graph, no wait across devices that could deadlock) and carries the global
order the global-topo criterion needs: a topological order of the layers and the device
orders together, by simulated start (``ordo.global_order``). ``predict`` is ordo's simulation
of a distributed step of the CPU runtime; ``measure`` the same step measured.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

import torch

import ordo
from ordo._outputs import default_loss

__all__ = ["Placement", "Prediction", "concurrency_slowdown", "measure", "place", "predict"]


@dataclass(frozen=True)
class Placement:
    """Where each profiled layer runs, in which order per device, and the plan ordo built
    for it (``planned``: simulate it, draw it)."""

    profiled: object = field(repr=False)  # ordo.torch.Profiled
    device_of: dict[str, int]
    device_order: list[list[str]]
    global_order: list[str] = field(repr=False)
    planned: ordo.Planned = field(repr=False)
    problem: ordo.Problem = field(repr=False)

    @property
    def layers(self) -> list[str]:
        """The profiled layers, in the order the profile saw them called."""
        return self.profiled.layers

    @property
    def parents(self) -> dict[str, list[str]]:
        """Each layer's graph parents."""
        parents: dict[str, list[str]] = {layer: [] for layer in self.profiled.layers}
        for producer, consumer in self.profiled.edges:
            parents[consumer].append(producer)
        return parents

    @property
    def devices(self) -> int:
        """The number of logical devices."""
        return len(self.device_order)

    @staticmethod
    def of(profiled, device_of: dict[str, int], device_order=None, *, devices=None) -> Placement:
        """A placement given by hand: ``device_of`` for every layer, ``device_order`` each
        device's layers in order (default: the profile's order), on ``devices`` logical
        devices (default: as many as ``device_order`` lists, else the largest index used,
        plus one)."""
        if devices is None and device_order is not None:
            devices = len(device_order)
        if devices is None:
            devices = max(device_of.values(), default=-1) + 1
        if devices < 1:
            raise ordo.OrdoError("a placement needs at least one device")
        problem = ordo.Problem(profiled.model(), ordo.Target.uniform(devices), mode="training")
        if device_order is not None:
            device_order = [list(order) for order in device_order]
        planned = ordo.plan_placement(problem, device_of, device_order)
        return Placement._of_planned(profiled, problem, planned)

    @staticmethod
    def _of_planned(profiled, problem: ordo.Problem, planned: ordo.Planned) -> Placement:
        placed = planned.placement
        global_order = ordo.global_order(problem, planned)
        return Placement(profiled, placed.device_of, placed.order, global_order, planned, problem)


def place(
    profiled,
    devices: int,
    algorithm: str = "m-etf",
    *,
    memory: int | str | None = None,
    cluster: str | None = None,
    budget: float = 2.0,
) -> Placement:
    """Places the profiled layers on ``devices`` devices of ``memory`` bytes each (a number or
    text such as ``"4GiB"``) with ``algorithm`` (``m-etf``, ``m-sct``, ``m-topo``, ``auto``
    within ``budget`` seconds, ...), charging each layer its forward and backward time."""
    target = ordo.Target.uniform(devices, memory=memory, cluster=cluster)
    problem = ordo.Problem(profiled.model(), target, mode="training")
    return Placement._of_planned(profiled, problem, ordo.plan(problem, algorithm, budget=budget))


@dataclass(frozen=True)
class Prediction:
    """ordo's prediction of a distributed step on CPU logical devices, in µs: the forward pass
    simulated on the placement (the layers of different devices at once), the backward pass
    as PyTorch's autograd runs it on a CPU (one layer after another, on one thread)."""

    forward_us: float
    backward_us: float

    @property
    def step_us(self) -> float:
        return self.forward_us + self.backward_us


def predict(placement: Placement, *, slowdown: float = 1.0) -> Prediction:
    """ordo's simulation of ``distribute(module, placement)``'s step on logical devices that
    share memory (CPU logical devices, or logical devices sharing one GPU: no transfer costs
    anything). ``slowdown``: how much slower work
    runs while two logical devices compute at once, sharing the CPU's cores
    (``concurrency_slowdown`` measures it; 1 for devices of their own)."""
    profiled = placement.profiled
    model = profiled.graph.shared_memory_forward_model()
    problem = ordo.Problem(model, ordo.Target.uniform(placement.devices), mode="forward-only")
    planned = ordo.plan_placement(problem, placement.device_of, placement.device_order)
    forward = ordo.simulate(planned, host_slowdown=slowdown).step_time_us
    return Prediction(forward, float(sum(profiled.backward_us.values())))


@dataclass(frozen=True)
class Measured:
    """Medians of measured steps, in µs."""

    forward_us: float
    backward_us: float
    steps: int

    @property
    def step_us(self) -> float:
        return self.forward_us + self.backward_us


def _sync_gpus() -> None:
    """Waits for the GPU work queued so far (a measured time is the work's, not its launch's);
    nothing where CUDA has not been used."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for index in range(torch.cuda.device_count()):
            torch.cuda.synchronize(index)


def measure(module, example_inputs, *, reps: int = 5, warmup: int = 2, loss_fn=None) -> Measured:
    """The median forward and backward time of ``module`` (distributed or not) on
    ``example_inputs``, after ``warmup`` untimed steps; ``loss_fn(output)`` gives the loss
    (default: the sum of the outputs)."""
    if reps < 1 or warmup < 0:
        raise ordo.OrdoError(f"reps={reps}, warmup={warmup}: at least one timed run")
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    forward, backward = [], []
    for i in range(warmup + reps):
        module.zero_grad(set_to_none=True)
        _sync_gpus()
        start = time.perf_counter()
        output = module(*inputs)
        _sync_gpus()
        middle = time.perf_counter()
        loss = loss_fn(output) if loss_fn else default_loss(output)
        if not isinstance(loss, torch.Tensor):
            raise ordo.OrdoError("the output has no tensor that needs a gradient: give loss_fn")
        loss.backward()
        _sync_gpus()
        end = time.perf_counter()
        if i >= warmup:
            forward.append((middle - start) * 1e6)
            backward.append((end - middle) * 1e6)
    module.zero_grad(set_to_none=True)
    return Measured(statistics.median(forward), statistics.median(backward), reps)


def concurrency_slowdown(module, example_inputs, *, reps: int = 5) -> float:
    """How much slower ``module``'s forward pass runs on this machine while another runs at
    once on a second thread (the CPU's cores shared), as a factor of at least 1: medians of
    ``reps`` passes alone and ``reps`` beside another."""
    if reps < 1:
        raise ordo.OrdoError(f"reps={reps}: at least one timed run")
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)

    def seconds() -> float:
        start = time.perf_counter()
        with torch.no_grad():
            module(*inputs)
        return time.perf_counter() - start

    seconds()
    alone = statistics.median(seconds() for _ in range(reps))
    stop = threading.Event()

    def beside() -> None:
        while not stop.is_set():
            seconds()

    other = threading.Thread(target=beside, daemon=True)
    other.start()
    try:
        together = statistics.median(seconds() for _ in range(reps))
    finally:
        stop.set()
        other.join()
    return max(1.0, together / alone)
