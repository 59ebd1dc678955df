"""Data-parallel training on ``torch.distributed`` with ordo's gradient buckets and reverse
first-k order (out-of-order backprop), and compressed all-reduce hooks for PyTorch's DDP.

    profiled = ordo.torch.profile(model, x, split_backward=True)      # one rank's batch
    plan = ordo.data_parallel.plan(profiled, replicas=world, network=measure_network())
    dp = ordo.data_parallel.DataParallel(model, plan, optimizer=optimizer)
    for x, y in batches:                    # unchanged training loop
        optimizer.zero_grad()
        loss_fn(dp(x), y).backward()
        optimizer.step()
    dp.flush()                              # apply the last deferred updates

``plan`` asks ordo's simulator for the step: the gradients in buckets of at least
``bucket_bytes``, issued in the order the backward produces them, and reverse first-k: the
weight gradients of the first ``k`` layers with weights are computed after the whole input
gradient chain, in forward order, and all-reduced last; each such layer's update is applied
just before its forward pass in the next step, so that those all-reduces overlap the next
step instead of ending this one (``k = "auto"``: the fastest ``k`` simulated).

``DataParallel`` runs that plan. Every rank issues the same all-reduces in the same order: the
plan's buckets, each launched (asynchronously) when all its gradients are there and every
bucket before it was launched; rank 0's plan is broadcast so that all ranks agree. The first
``k`` layers' backward is split (``_split_backward``): ``loss.backward()`` computes their input
gradients, and at its end their weight gradients are computed in forward order, each bucket
all-reduced as soon as its layers are done. ``loss.backward()`` returns with the other
gradients averaged in ``.grad`` (as DDP); ``optimizer.step()`` updates those parameters and
leaves the deferred ones (their ``.grad`` is not set) to be updated before their layer's next
forward, with the hyperparameters of the step they belong to (a learning-rate schedule sees
every update at its own step). Gradients are multiplied by ``1 / world`` and summed, as DDP
does, so two ranks reach DDP's gradients bitwise.

Limits: every parameter that needs a gradient gets one every step (no unused parameters);
``optimizer.step()`` follows every backward when ``k > 0`` (no gradient accumulation); a
deferred layer's parameters are its own (not shared with another layer) and its parameters'
``.grad`` is never set, so clipping by a global norm needs ``k = 0``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

import ordo
from ordo._compression import Int8State, compression_hook, int8_hook
from ordo._process_group import from_rank0, global_rank, median_us
from ordo._split_backward import SplitCall, split_call

__all__ = [
    "DataParallel",
    "Int8State",
    "compression_hook",
    "int8_hook",
    "measure_network",
    "plan",
]


def plan(
    profiled,
    *,
    replicas: int,
    first_k: int | str = "auto",
    bucket_bytes: int = 25 << 20,
    network: tuple[float, float] | None = None,
    memory: int | str | None = None,
) -> dict:
    """ordo's data-parallel step of ``profiled`` (``ordo.torch.profile(..., split_backward=
    True)`` of one rank's batch) on ``replicas`` ranks: ``ordo.data_parallel_plan``'s dict
    (``first_k``, ``buckets``, ``predicted``). ``network``: ``(Gbit/s, latency µs)`` of the
    ranks' all-reduce (``measure_network``; default: the profile's copy cost); ``memory``:
    a rank's memory, which the deferred work must fit in."""
    target = ordo.Target.uniform(1, memory=memory)
    problem = ordo.Problem(profiled.training_model(), target, mode="training-graph")
    gbps, latency_us = network if network is not None else (None, 0.0)
    return ordo.data_parallel_plan(
        problem,
        replicas=replicas,
        first_k=first_k,
        bucket_bytes=bucket_bytes,
        network_gbps=gbps,
        latency_us=latency_us,
    )


def measure_network(
    group=None, sizes: tuple[int, int] = (1 << 16, 1 << 24), reps: int = 7
) -> tuple[float, float]:
    """``(Gbit/s, latency µs)`` of the process group's ring all-reduce, fitted to the median
    time of all-reduces of two sizes in bytes (ordo's model: ``2 (N - 1)`` steps of
    ``bytes / N``, each a latency plus bytes over bandwidth); rank 0's figures on every rank."""
    world = dist.get_world_size(group)
    if world < 2:
        raise ordo.OrdoError("measure_network needs at least 2 ranks")
    medians = []
    for size in sizes:
        tensor = torch.zeros(max(1, size // 4))
        # One untimed all-reduce warms the connections and buffers.
        medians.append(
            median_us(
                lambda tensor=tensor: dist.all_reduce(tensor, group=group),
                reps=reps,
                warmup=1,
                group=group,
            )
        )
    steps = 2 * (world - 1)
    per_step_bytes = [s / world for s in sizes]
    us_per_byte = max(
        (medians[1] - medians[0]) / (steps * (per_step_bytes[1] - per_step_bytes[0])), 1e-9
    )
    latency = max(0.0, medians[0] / steps - us_per_byte * per_step_bytes[0])
    gbps, latency = from_rank0([8.0 / (us_per_byte * 1e3), latency], group)
    return gbps, latency


class _Bucket:
    """One all-reduce of the plan: its parameters and, during a step, its work in flight."""

    def __init__(self, layers: list[str], params: list[nn.Parameter], deferred: bool):
        self.layers, self.params, self.deferred = layers, params, deferred
        self.ready = 0
        self.flat: torch.Tensor | None = None
        self.work = None
        self.hyper: list[dict] | None = None  # the optimizer's settings at its step

    def launch(self, grads: list[torch.Tensor], world: int, group) -> None:
        # As DDP: each gradient multiplied by 1/world (not divided) as it is copied into the
        # bucket, then summed.
        self.flat = torch.empty(sum(g.numel() for g in grads), dtype=grads[0].dtype)
        start = 0
        for g in grads:
            torch.mul(g.reshape(-1), 1.0 / world, out=self.flat[start : start + g.numel()])
            start += g.numel()
        self.work = dist.all_reduce(self.flat, group=group, async_op=True)

    def reduced(self) -> list[torch.Tensor]:
        """Waits for the all-reduce; the averaged gradients, shaped as the parameters."""
        self.work.wait()
        grads, start = [], 0
        for p in self.params:
            grads.append(self.flat[start : start + p.numel()].view_as(p))
            start += p.numel()
        self.work, self.flat = None, None
        return grads


class DataParallel(nn.Module):
    """``module`` trained data-parallel over ``group``'s ranks under ``plan`` (see the
    module's docstring; rank 0's plan is used, the other ranks may pass None).
    ``optimizer`` (over ``module``'s parameters) is needed when the plan defers layers.
    ``broadcast_buffers``: rank 0's buffers (batch-norm statistics) are sent to every rank
    before each training forward, as DDP does."""

    def __init__(
        self,
        module: nn.Module,
        plan: dict | None,
        *,
        optimizer: torch.optim.Optimizer | None = None,
        group=None,
        broadcast_buffers: bool = True,
    ) -> None:
        super().__init__()
        self.module = module
        self._group, self._world = group, dist.get_world_size(group)
        self._src = global_rank(group, 0)
        box = [plan]
        dist.broadcast_object_list(box, src=self._src, group=group)
        self.plan = box[0]  # rank 0's: every rank issues the same all-reduces
        if self.plan["replicas"] != self._world:
            raise ordo.OrdoError(
                f"the plan is for {self.plan['replicas']} ranks, the group has {self._world}"
            )
        self._broadcast_buffers = broadcast_buffers
        for tensor in [*module.parameters(), *module.buffers()]:
            dist.broadcast(tensor.detach(), src=self._src, group=group)
        self._buckets = _buckets_of(module, self.plan)
        self._deferred = [b for b in self._buckets if b.deferred]
        self._eager = [b for b in self._buckets if not b.deferred]
        self._optimizer = optimizer
        self._check_optimizer()
        self._next_launch = 0
        self._in_backward = False
        self._calls: dict[str, SplitCall] = {}
        self._applying = False
        self._bucket_of_param = {id(p): b for b in self._eager for p in b.params}
        for bucket in self._eager:
            for p in bucket.params:
                p.register_post_accumulate_grad_hook(self._on_gradient)
        self._split_layers(module)
        if optimizer is not None:
            optimizer.register_step_pre_hook(self._before_step)
            optimizer.register_step_post_hook(self._after_step)
        self._stashed: dict[nn.Parameter, torch.Tensor | None] = {}

    @property
    def first_k(self) -> int:
        """How many layers' weight gradients the plan defers."""
        return int(self.plan["first_k"])

    def forward(self, *args, **kwargs):
        if self._broadcast_buffers and torch.is_grad_enabled():
            for buffer in self.module.buffers():
                dist.broadcast(buffer, src=self._src, group=self._group)
        return self.module(*args, **kwargs)

    def flush(self) -> None:
        """Applies every deferred update that a step has asked for (after the last step, before
        evaluating or saving the parameters)."""
        for bucket in self._deferred:
            if bucket.hyper is not None:
                self._apply(bucket)

    # -- the backward: eager buckets, then the deferred weight gradients ------------------

    def _backward_started(self) -> None:
        """Called by the first gradient hook or split layer of a backward."""
        if self._in_backward:
            return
        self._in_backward = True
        torch.autograd.Variable._execution_engine.queue_callback(self._backward_finished)

    def _on_gradient(self, param: nn.Parameter) -> None:
        self._backward_started()
        self._bucket_of_param[id(param)].ready += 1
        while self._next_launch < len(self._eager):
            bucket = self._eager[self._next_launch]
            if bucket.ready < len(bucket.params):
                break
            bucket.launch([p.grad for p in bucket.params], self._world, self._group)
            self._next_launch += 1

    def _backward_finished(self) -> None:
        """The engine's last callback of a backward: the deferred weight gradients in forward
        order, each bucket all-reduced when done; then the eager buckets waited for and their
        averages written to ``.grad``."""
        self._in_backward = False
        missing = self._eager[self._next_launch :]
        self._next_launch = 0
        for bucket in self._eager:
            bucket.ready = 0
        if missing:
            names = _param_names(
                self.module, [p for b in missing for p in b.params if p.grad is None]
            )
            raise ordo.OrdoError(
                f"parameters got no gradient in this backward: {names[:8]}; every rank must "
                "compute a gradient for every parameter (ordo's buckets are fixed)"
            )
        for bucket in self._deferred:
            if bucket.work is not None or bucket.hyper is not None:
                raise ordo.OrdoError(
                    f"layer `{bucket.layers[0]}`: a backward ran before optimizer.step() applied "
                    "the last one's deferred gradients; reverse first-k needs a step after every "
                    "backward (accumulate gradients with first_k=0)"
                )
            grads = []
            for layer in bucket.layers:
                call = self._calls.pop(layer, None)
                if call is None or call.output_grads is None:
                    raise ordo.OrdoError(f"layer `{layer}`: deferred, but no backward reached it")
                grads.extend(call.weight_grads())
            bucket.launch(grads, self._world, self._group)
        for bucket in self._eager:
            for p, reduced in zip(bucket.params, bucket.reduced()):
                p.grad.copy_(reduced)

    # -- the deferred layers: split backward, update before the next forward --------------

    def _split_layers(self, module: nn.Module) -> None:
        modules = dict(module.named_modules())
        for bucket in self._deferred:
            for layer in bucket.layers:
                target = modules[layer]
                own = list(target.parameters())
                original = target.forward

                def forward(
                    *args, _layer=layer, _bucket=bucket, _own=own, _original=original, **kw
                ):
                    if _bucket.hyper is not None:
                        self._apply(_bucket)
                    if not torch.is_grad_enabled():
                        return _original(*args, **kw)
                    if _layer in self._calls:
                        raise ordo.OrdoError(
                            f"layer `{_layer}` is called twice in a step: reverse first-k "
                            "defers layers called once"
                        )
                    call = SplitCall(_layer, _own, self._backward_started)
                    self._calls[_layer] = call
                    return split_call(call, _original, args, kw)

                target.forward = forward

    def _check_optimizer(self) -> None:
        if not self._deferred:
            return
        if self._optimizer is None:
            raise ordo.OrdoError(
                f"the plan defers {self.first_k} layers: give DataParallel the optimizer "
                "(optimizer=...), which updates them before their next forward"
            )
        known = {id(p) for g in self._optimizer.param_groups for p in g["params"]}
        for bucket in self._deferred:
            for p in bucket.params:
                if id(p) not in known:
                    names = _param_names(self.module, [p])
                    raise ordo.OrdoError(f"parameter {names[0]} is not in the optimizer")

    def _before_step(self, optimizer, args, kwargs) -> None:
        if self._applying:
            return
        hyper = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
        for bucket in self._deferred:
            if bucket.work is not None:
                bucket.hyper = hyper  # due before its next forward
                for p in bucket.params:
                    self._stashed[p] = p.grad
                    p.grad = None

    def _after_step(self, optimizer, args, kwargs) -> None:
        if self._applying:
            return
        for p, grad in self._stashed.items():
            p.grad = grad
        self._stashed.clear()

    def _apply(self, bucket: _Bucket) -> None:
        """Updates ``bucket``'s parameters with their averaged gradients: the optimizer's step
        with only those gradients set and the settings of the step they belong to."""
        optimizer = self._optimizer
        grads = bucket.reduced()
        saved = [(p, p.grad) for g in optimizer.param_groups for p in g["params"]]
        current = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
        try:
            for p, _ in saved:
                p.grad = None
            for p, grad in zip(bucket.params, grads):
                p.grad = grad
            for group, hyper in zip(optimizer.param_groups, bucket.hyper):
                group.update(hyper)
            self._applying = True
            with torch.no_grad():
                optimizer.step()
        finally:
            self._applying = False
            for p, grad in saved:
                p.grad = grad
            for group, hyper in zip(optimizer.param_groups, current):
                group.update(hyper)
            bucket.hyper = None


def _buckets_of(module: nn.Module, plan: dict) -> list[_Bucket]:
    """The plan's buckets as parameters of ``module``: each layer's parameters (a layer called
    again, ``name#2``, has them with its first call); parameters of no planned layer in one
    last bucket."""
    modules = dict(module.named_modules())
    claimed: set[int] = set()
    buckets = []
    for spec in plan["buckets"]:
        params, layers = [], []
        for layer in spec["layers"]:
            base = layer.split("#")[0]
            if base not in modules:
                raise ordo.OrdoError(
                    f"the plan's layer `{layer}` is not a module of this model: plan it from "
                    "this model's profile"
                )
            if spec["deferred"] and "#" in layer:
                raise ordo.OrdoError(f"layer `{base}` is called twice: it cannot be deferred")
            own = [p for p in modules[base].parameters() if p.requires_grad]
            if spec["deferred"] and any(id(p) in claimed for p in own):
                raise ordo.OrdoError(
                    f"layer `{layer}` shares parameters with another layer: it cannot be deferred"
                )
            fresh = [p for p in own if id(p) not in claimed]
            claimed.update(id(p) for p in fresh)
            params.extend(fresh)
            layers.append(base)
        if params:
            buckets.append(_Bucket(layers, params, spec["deferred"]))
    rest = [p for p in module.parameters() if p.requires_grad and id(p) not in claimed]
    if rest:
        buckets.insert(sum(not b.deferred for b in buckets), _Bucket([], rest, False))
    shared_with_deferred = _shared(module, [b for b in buckets if b.deferred])
    if shared_with_deferred:
        raise ordo.OrdoError(
            f"layer `{shared_with_deferred}` shares parameters with another module: it cannot "
            "be deferred"
        )
    return buckets


def _shared(module: nn.Module, deferred: list[_Bucket]) -> str | None:
    """A deferred layer one of whose parameters another module outside it also holds."""
    for bucket in deferred:
        for layer in bucket.layers:
            own = {id(p) for p in module.get_submodule(layer).parameters()}
            prefix = f"{layer}."
            for name, other in module.named_modules():
                if name == layer or name.startswith(prefix) or layer.startswith(f"{name}."):
                    continue
                if any(id(p) in own for p in other.parameters(recurse=False)):
                    return layer
    return None


def _param_names(module: nn.Module, params: list[torch.Tensor]) -> list[str]:
    ids = {id(p) for p in params}
    return [name for name, p in module.named_parameters() if id(p) in ids]
