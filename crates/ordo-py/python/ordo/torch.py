"""Baechi-PyTorch's profiler on ordo: a PyTorch module as an ordo cost graph of its layers.

``profile(module, example_inputs)`` decomposes the module into layers (its atomic modules, or
the modules the user names: the seed's user-chosen granularity) and captures the dependencies
between them from the autograd graph of a forward pass: a layer's producers are the layers whose
outputs its inputs were computed from, through any operations that are not layers (``x + y``,
``torch.cat``, in-place ``+=``, a reshape): those are shunted. This needs no tracing, so models
whose ``forward`` has Python control flow (ViT's shape checks) or in-place operations (ResNet's
``out += identity``) work as they are. Every layer's forward pass is timed in the model with
module hooks, and its backward pass on its own inputs (``torch.autograd.grad`` of the layer
alone: gradients of its inputs and parameters), medians after warm-up; the device is
synchronised around each call on a GPU, wall clock on a CPU. Each layer records the seed's
memory categories: (a) its parameters, (b) its output, (c) = (a) for the gradients of its
parameters, (d) = (b) for the upstream gradient, and (e) the temporary memory of its forward
pass where it can be measured (a GPU's allocator; 0 on a CPU). An in-place layer
(``ReLU(inplace=True)``) has no output of its own. Edges carry the producer's output, costed by
a copy between two devices measured on this machine (``measure_copy``). Layers that share a
parameter (a module called twice, tied weights) form one colocation group, which ordo places on
one device.

The result is an ordo cost graph (NetworkX node-link JSON, ``Profiled.costgraph``): it loads in
``ordo`` (``Profiled.model()``, ``ordo place FILE``) and in NetworkX.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field

import torch

import ordo
from ordo._assigner import Distributed, StepReport
from ordo._memory import SavedTensorsPeak
from ordo._outputs import default_loss, tensors
from ordo._placement import (
    Measured,
    Placement,
    Prediction,
    concurrency_slowdown,
    measure,
    place,
    predict,
)

__all__ = [
    "Distributed",
    "Measured",
    "Placement",
    "Prediction",
    "Profiled",
    "SavedTensorsPeak",
    "StepReport",
    "concurrency_slowdown",
    "distribute",
    "measure",
    "measure_copy",
    "pipeline",
    "place",
    "predict",
    "profile",
    "threads_needed",
]


@dataclass
class Profiled:
    """A profiled module: its layers in execution order, the edges between them, their
    median times in µs, and the layer graph ordo plans them with (``graph``)."""

    layers: list[str]
    forward_us: dict[str, float]
    backward_us: dict[str, float]
    edges: list[tuple[str, str]]
    graph: ordo.LayerGraph = field(repr=False)

    @property
    def costgraph(self) -> dict:
        """The cost graph of one node per layer, as a dictionary (NetworkX node-link data)."""
        return json.loads(self.to_json())

    def to_json(self) -> str:
        """The cost graph as JSON text (ordo's node-link format)."""
        return self.graph.to_json()

    def save(self, path: str) -> None:
        """Writes the cost graph to ``path`` (``ordo place PATH`` reads it)."""
        with open(path, "w") as f:
            f.write(self.to_json())

    def model(self) -> ordo.Model:
        """The layers as an ``ordo.Model`` to place and simulate."""
        return self.graph.model()

    def training_model(self) -> ordo.Model:
        """The training step as an ``ordo.Model`` whose layers' forward, input gradient,
        weight gradient and update are nodes of their own (``ordo.LayerGraph``), for pipeline
        schedules; needs a profile made with ``split_backward=True``."""
        return self.graph.training_model()


def _called(module: torch.nn.Module, inputs: tuple) -> set[str]:
    """The qualified names of the submodules a forward pass calls."""
    called: set[str] = set()
    hooks = [
        m.register_forward_pre_hook(lambda *_, q=q: called.add(q))
        for q, m in module.named_modules()
        if q
    ]
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return called


def _layer_modules(
    module: torch.nn.Module, names: set[str], types: tuple[type, ...], called: set[str]
) -> dict[str, torch.nn.Module]:
    """The layers, outermost first, none inside another, in registration order: the submodules
    named (by name or type), and the called submodules none of whose descendants is called (an
    atomic module; or one that uses its children's weights itself, as MultiheadAttention does
    with its `out_proj`)."""
    chosen: dict[str, torch.nn.Module] = {}
    for qualname, m in module.named_modules():
        if not qualname or any(qualname.startswith(c + ".") for c in chosen):
            continue
        named = qualname in names or (types and isinstance(m, types))
        inner_called = any(q.startswith(qualname + ".") for q in called)
        if named or (qualname in called and not inner_called):
            chosen[qualname] = m
    return chosen


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_copy(
    src: torch.device | str = "cpu", dst: torch.device | str = "cpu", reps: int = 5
) -> tuple[float, float]:
    """A copy of a tensor from ``src`` to ``dst`` as ``(fixed_us, us_per_byte)``: the median
    time of copies of 64 KiB and 16 MiB, fitted by a line. Between two CPU "devices" it is a
    copy in memory (``clone``), which is what a transfer between ordo's CPU devices costs."""
    src, dst = torch.device(src), torch.device(dst)
    times = []
    sizes = [64 << 10, 16 << 20]
    for size in sizes:
        x = torch.empty(size // 4, dtype=torch.float32, device=src)
        samples = []
        for _ in range(reps + 2):
            _sync(src)
            _sync(dst)
            start = time.perf_counter()
            y = x.to(dst, copy=True)
            _sync(dst)
            samples.append((time.perf_counter() - start) * 1e6)
            del y
        times.append(statistics.median(samples[2:]))
    per_byte = max(times[1] - times[0], 0.0) / (sizes[1] - sizes[0])
    fixed = max(times[0] - per_byte * sizes[0], 0.0)
    return fixed, per_byte


def profile(
    module: torch.nn.Module,
    example_inputs,
    *,
    leaf_modules=(),
    reps: int = 5,
    warmup: int = 2,
    loss_fn=None,
    training: bool = True,
    comm: tuple[float, float] | None = None,
    name: str | None = None,
    split_backward: bool | str = False,
) -> Profiled:
    """Profiles ``module`` on ``example_inputs`` (a tensor or a tuple of them) into an ordo
    cost graph of its layers.

    ``leaf_modules``: names (``"layer1.0"``) or types (``torchvision.models.inception.BasicConv2d``)
    of modules to keep whole as one layer; the others are the called submodules none of whose
    descendants is called. ``training``: each layer's weight is its forward plus
    backward time (both run on its device), else its forward time. ``loss_fn(output)`` gives the
    loss to run backward from (default: the sum of the outputs). ``comm``: ``(fixed_us,
    us_per_byte)`` of a transfer (default: ``measure_copy`` on this machine).
    ``split_backward``: also time each layer's input gradient and weight gradient apart
    (``input_grad_us``, ``weight_grad_us`` on each node), which the training graph and the
    pipeline schedules that split the backward need: ``True`` times them as ordo's split
    layers compute them (``ordo.data_parallel``'s first k), ``"pipelining"`` as PyTorch's
    pipeline runtime does for its ``I`` and ``W`` actions (``ordo.pipelining``), whose
    bookkeeping makes the two together dearer than one backward.
    """
    if reps < 1 or warmup < 0:
        raise ordo.OrdoError(f"reps={reps}, warmup={warmup}: at least one timed run")
    if split_backward not in (False, True, "pipelining"):
        raise ordo.OrdoError(
            f"split_backward={split_backward!r}: expected False, True or 'pipelining'"
        )
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    leaf_names = {m for m in leaf_modules if isinstance(m, str)}
    leaf_types = tuple(m for m in leaf_modules if isinstance(m, type))
    unknown = leaf_names - {n for n, _ in module.named_modules()}
    if unknown:
        raise ordo.OrdoError(f"leaf_modules: no module named {sorted(unknown)}")
    chosen = _layer_modules(module, leaf_names, leaf_types, _called(module, inputs))
    # Parameters of no layer (a class token, a position embedding used between layers) belong
    # to the first layer whose inputs were computed from them.
    owned = {id(p) for m in chosen.values() for p in m.parameters()}
    orphans = {id(p): p for p in module.parameters() if id(p) not in owned}
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    measured = _measure(
        module,
        inputs,
        device,
        chosen,
        orphans,
        reps,
        warmup,
        loss_fn or default_loss,
        split_backward,
    )
    layers, edges = measured.layers, measured.edges
    forward, backward = measured.forward_us, measured.backward_us
    out_bytes, temporary = measured.output_bytes, measured.temporary_bytes
    if not layers:
        raise ordo.OrdoError("the module has no layers to place (no submodule is called)")
    fixed_us, us_per_byte = comm if comm is not None else measure_copy(device, device)
    modules = dict(module.named_modules())

    def target(layer: str) -> str:
        return layer.split("#")[0]

    def params_of(layer: str) -> list[torch.Tensor]:
        own = list(modules[target(layer)].parameters())
        return own + [orphans[i] for i, users in measured.orphan_users.items() if layer in users]

    def persistent(layer: str) -> int:
        if "#" in layer:  # a second call: its parameters live with the first
            return 0
        firsts = [orphans[i] for i, users in measured.orphan_users.items() if users[0] == layer]
        params = list(modules[target(layer)].parameters()) + firsts
        return sum(p.numel() * p.element_size() for p in params)

    # Layers that share a parameter (a module called twice, tied embeddings, a parameter of no
    # layer read by several) are one colocation group: ordo places them on one device, where
    # the parameter lives.
    owner: dict[int, str] = {}
    group: dict[str, str] = {}
    for layer in layers:
        params = params_of(layer)
        shared = next((owner[id(p)] for p in params if id(p) in owner), layer)
        for p in params:
            owner.setdefault(id(p), shared)
        group[layer] = shared
    graph = ordo.LayerGraph(
        name or type(module).__name__,
        comm=(fixed_us, us_per_byte),
        device=str(device),
        reps=reps,
        training=training,
        split_backward=split_backward,
    )
    index = {}
    for layer in layers:
        index[layer] = graph.add_layer(
            layer,
            op_type=type(modules[target(layer)]).__name__,
            forward_us=forward.get(layer, 0.0),
            backward_us=backward.get(layer, 0.0),
            input_grad_us=measured.input_grad_us.get(layer, 0.0),
            weight_grad_us=measured.weight_grad_us.get(layer, 0.0),
            temporary_bytes=int(temporary.get(layer, 0)),
            persistent_bytes=persistent(layer),
            output_bytes=int(out_bytes.get(layer, 0)),
        )
    for layer in layers:
        if group[layer] != layer:
            graph.colocate(index[layer], index[group[layer]])
    for producer, consumer in edges:
        graph.add_edge(index[producer], index[consumer])
    return Profiled(layers, forward, backward, edges, graph)


@dataclass
class _Measured:
    """What one profiling run saw: the layers in call order, the edges between them, times in
    µs (medians), output and temporary bytes."""

    layers: list[str] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    forward_us: dict[str, float] = field(default_factory=dict)
    backward_us: dict[str, float] = field(default_factory=dict)
    input_grad_us: dict[str, float] = field(default_factory=dict)
    weight_grad_us: dict[str, float] = field(default_factory=dict)
    output_bytes: dict[str, int] = field(default_factory=dict)
    temporary_bytes: dict[str, int] = field(default_factory=dict)
    # Each parameter of no layer (by id): the layers whose inputs were computed from it.
    orphan_users: dict[int, list[str]] = field(default_factory=dict)


def _producers(
    tensor: torch.Tensor, of_fn: dict, of_id: dict, orphans: dict, used: set[int]
) -> set[str]:
    """The layers whose outputs ``tensor`` was computed from: the autograd graph walked back
    from its ``grad_fn`` through operations that are not layers, stopping at layer outputs (a
    tensor without history: the layer that returned that very object). Parameters of no layer
    met on the way (``orphans``, by id) are added to ``used``."""
    if id(tensor) in of_id and tensor.grad_fn is None:
        return {of_id[id(tensor)]}
    found: set[str] = set()
    stack, seen = [tensor.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if fn in of_fn:
            found.add(of_fn[fn])
            continue
        variable = getattr(fn, "variable", None)  # AccumulateGrad: a leaf, e.g. a parameter
        if variable is not None and id(variable) in orphans:
            used.add(id(variable))
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return found


def _backward_us(module, args, kwargs, device, split) -> tuple[float, float, float]:
    """The layer's backward alone, in µs: gradients of its (floating-point) inputs and
    parameters for an upstream gradient of ones, on fresh copies of its inputs; with
    ``split``, also the input gradients alone and the parameter gradients alone (as a
    schedule that splits the backward runs them: ``"pipelining"`` as PyTorch's pipeline
    runtime does, else each by itself as ordo's split layers do), else those two are 0."""
    # Gradients are taken with respect to leaves; the layer gets clones of them, which it may
    # modify in place (ReLU(inplace=True), a block's `x += ...`).
    leaves = [
        a.detach().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a
        for a in args
    ]
    inputs = [c for c in leaves if isinstance(c, torch.Tensor) and c.requires_grad]
    params = [p for p in module.parameters() if p.requires_grad]

    def timed(wrt: list[torch.Tensor]) -> float:
        with torch.enable_grad():
            outputs, grads = _forward_again(module, leaves, kwargs)
            if not outputs or not wrt:
                return 0.0
            _sync(device)
            start = time.perf_counter()
            torch.autograd.grad(outputs, wrt, grads, allow_unused=True)
            _sync(device)
        return (time.perf_counter() - start) * 1e6

    total = timed(inputs + params)
    if not split:
        return total, 0.0, 0.0
    if split == "pipelining":
        return (total, *_pipelining_split_us(module, leaves, kwargs, device, inputs, params))
    return total, timed(inputs), timed(params)


def _forward_again(module, leaves, kwargs) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The layer's outputs that need a gradient, from a forward on clones of ``leaves`` (the
    layer may modify its inputs in place), and an upstream gradient of ones for each; call it
    with gradients enabled."""
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in leaves]
    outputs = [t for t in tensors(module(*copies, **kwargs)) if t.requires_grad]
    return outputs, [torch.ones_like(t) for t in outputs]


def _pipelining_split_us(module, leaves, kwargs, device, inputs, params) -> tuple[float, float]:
    """The layer's input and weight gradients in µs as PyTorch's pipeline runtime computes
    them for its ``I`` and ``W`` actions (``stage_backward_input``, which also keeps what the
    weight gradients need, then ``stage_backward_weight``): dearer than one backward, and
    dearer than either alone, by its bookkeeping. Gradients land in ``.grad`` (the profile
    clears the module's afterwards)."""
    from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

    with torch.enable_grad():
        outputs, grads = _forward_again(module, leaves, kwargs)
        if not outputs:
            return 0.0, 0.0
        _sync(device)
        start = time.perf_counter()
        _, groups = stage_backward_input(outputs, grads, inputs, iter(params))
        _sync(device)
        middle = time.perf_counter()
        if params:  # a layer without parameters has no W to run (as in the other split)
            stage_backward_weight(iter(params), groups)
            _sync(device)
        end = time.perf_counter() if params else middle
    for leaf in inputs:
        leaf.grad = None
    return (middle - start) * 1e6, (end - middle) * 1e6


def _measure(
    module, inputs, device, chosen, orphans, reps, warmup, loss_fn, split_backward
) -> _Measured:
    """Runs ``warmup + reps`` forward and backward passes of ``module`` with hooks on the
    ``chosen`` layers: the first pass finds the layers and edges, the timed ones time each
    layer's forward in the model and its backward alone (see ``_backward_us``)."""
    result = _Measured()
    forward: dict[str, list[float]] = {}
    backward: dict[str, list[float]] = {}
    input_grad: dict[str, list[float]] = {}
    weight_grad: dict[str, list[float]] = {}
    # `alone`: a layer is being run by itself to time its backward; its hooks stand aside.
    state = {"step": 0, "timed": False, "alone": False}
    calls: dict[str, int] = {}
    started: dict[str, float] = {}
    pending: list[tuple[str, torch.nn.Module, tuple, dict]] = []
    of_fn: dict = {}
    of_id: dict[int, str] = {}
    inplace = {q for q, m in chosen.items() if getattr(m, "inplace", False)}

    def name(qualname: str) -> str:
        k = calls.get(qualname, 0)
        calls[qualname] = k + 1
        return qualname if k == 0 else f"{qualname}#{k}"

    hooks = []
    for qualname, m in chosen.items():
        current: list[str] = []

        def pre(m, args, kwargs, qualname=qualname, current=current):
            if state["alone"]:
                return
            layer = name(qualname)
            current.append(layer)
            if state["step"] == 0:
                result.layers.append(layer)
                producers: set[str] = set()
                used: set[int] = set()
                for t in tensors(list(args) + list(kwargs.values())):
                    producers |= _producers(t, of_fn, of_id, orphans, used)
                for i in sorted(used):
                    users = result.orphan_users.setdefault(i, [])
                    if layer not in users:
                        users.append(layer)
                result.edges.extend((p, layer) for p in sorted(producers) if p != layer)
            if state["timed"]:
                # Copies of the inputs as they are now, for the backward measured alone.
                kept = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
                pending.append((layer, m, kept, dict(kwargs)))
            _sync(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
                started[layer + "@mem"] = torch.cuda.memory_allocated(device)
            started[layer] = time.perf_counter()

        def post(m, args, kwargs, output, qualname=qualname, current=current):
            if state["alone"]:
                return
            _sync(device)
            layer = current.pop()
            elapsed = (time.perf_counter() - started[layer]) * 1e6
            if state["timed"]:
                forward.setdefault(layer, []).append(elapsed)
            size = sum(t.numel() * t.element_size() for t in tensors(output))
            result.output_bytes[layer] = 0 if qualname in inplace else size
            if device.type == "cuda":
                peak = torch.cuda.max_memory_allocated(device) - started[layer + "@mem"]
                result.temporary_bytes[layer] = max(0, peak - size)
            if state["step"] == 0:
                for t in tensors(output):
                    if t.grad_fn is not None:
                        of_fn[t.grad_fn] = layer
                    of_id[id(t)] = layer

        hooks.append(m.register_forward_pre_hook(pre, with_kwargs=True))
        hooks.append(m.register_forward_hook(post, with_kwargs=True))
    try:
        for step in range(warmup + reps):
            state["step"], state["timed"] = step, step >= warmup
            calls.clear()
            module.zero_grad(set_to_none=True)
            loss = loss_fn(module(*inputs))
            if isinstance(loss, torch.Tensor) and loss.requires_grad:
                loss.backward()
            of_fn.clear()
            of_id.clear()
            state["alone"] = True
            while pending:
                layer, m, args, kwargs = pending.pop()
                total, dx, dw = _backward_us(m, args, kwargs, device, split_backward)
                backward.setdefault(layer, []).append(total)
                input_grad.setdefault(layer, []).append(dx)
                weight_grad.setdefault(layer, []).append(dw)
            state["alone"] = False
    finally:
        for hook in hooks:
            hook.remove()
        module.zero_grad(set_to_none=True)
    result.forward_us = {k: statistics.median(v) for k, v in forward.items()}
    result.backward_us = {k: statistics.median(v) for k, v in backward.items()}
    result.input_grad_us = {k: statistics.median(v) for k, v in input_grad.items()}
    result.weight_grad_us = {k: statistics.median(v) for k, v in weight_grad.items()}
    return result


def threads_needed(profiled: Profiled, planned: ordo.Planned) -> dict[str, list[str]]:
    """The layers that would wait on threads when the model's own ``forward`` runs
    ``planned`` (a placed plan of ``profiled.model()``), under the GPU-wise criterion
    (``"gpu-topo"``, Baechi-PyTorch's ``isNotWaiting``) and the global one (``"global-topo"``,
    the placement's order of all layers: by their simulated start). The host reaches the layers
    in the order the profile saw them called."""
    placement = planned.placement
    if placement is None:
        raise ordo.OrdoError("threads_needed needs a placed plan (a placer's strategy)")
    layers = profiled.layers
    position = {layer: i for i, layer in enumerate(layers)}
    start = {name: begin for name, begin, _ in ordo.simulate(planned).tasks if name in position}
    global_order = sorted(layers, key=lambda layer: (start.get(layer, 0.0), position[layer]))
    parents: dict[str, list[str]] = {}
    for producer, consumer in profiled.edges:
        parents.setdefault(consumer, []).append(producer)
    args = (layers, parents, placement.device_of, placement.order)
    return {
        "gpu-topo": ordo.reorder_threads(*args),
        "global-topo": ordo.reorder_threads(
            *args, criterion="global-topo", global_order=global_order
        ),
    }


def distribute(
    module: torch.nn.Module,
    placement: Placement,
    *,
    reorder: bool = True,
    criterion: str = "gpu-topo",
    devices=None,
    parallel: bool = True,
    timeout: float = 300.0,
) -> Distributed:
    """Baechi-PyTorch's Assigner: ``module`` run as ``placement`` says, as a module of its
    own (its parameters are ``module``'s; ``loss.backward()`` and ``optimizer.step()`` work
    unchanged).

    Each placed layer's ``forward`` is wrapped (Algorithm 1 of the seed); the model's own
    ``forward`` runs on the caller's thread in code order, and a layer that would make it
    wait for a layer it has not reached waits on a thread instead (``criterion``:
    ``gpu-topo``, the ``isNotWaiting`` check, or ``global-topo``). ``reorder=False`` submits
    the layers in code order (the seed's debugging switch). ``devices``: the torch device of
    each logical device, all CPUs or all GPUs. Default: all ``"cpu"``; logical devices on the
    CPU share its memory, each runs on a thread of its own unless ``parallel=False``. On GPUs
    (``["cuda:0", "cuda:0", "cuda:1"]``: several logical devices may share one) each logical
    device is a CUDA stream of its GPU (its default stream for all with ``parallel=False``),
    with events between streams and the seed's transfer streams (``ordo._cuda``); the module's
    parameters move to the first device's GPU, each layer's to its device's. ``timeout``:
    seconds any wait may take before it is an error (a guard: the protocol does not
    deadlock).
    ``Distributed.steps`` reports, per forward pass, the layers that waited on threads.
    """
    return Distributed(
        module,
        placement,
        devices=devices,
        reorder=reorder,
        criterion=criterion,
        parallel=parallel,
        timeout=timeout,
    )


def pipeline(module: torch.nn.Module, example_inputs, **kwargs):
    """ordo's pipeline of ``module`` on PyTorch's pipeline runtime, one stage per rank: see
    ``ordo.pipelining.pipeline`` (this rank's ``PipelineRunner``)."""
    from ordo import pipelining

    return pipelining.pipeline(module, example_inputs, **kwargs)
