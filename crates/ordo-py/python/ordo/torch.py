"""Baechi-PyTorch's profiler on ordo: a PyTorch module as an ordo cost graph of its layers.

``profile(module, example_inputs)`` decomposes the module into layers (its atomic modules, or
the modules the user names: the seed's user-chosen granularity), captures the dependencies
between them with ``torch.fx`` (operations that are not layers, such as ``x + y`` or
``torch.cat``, are shunted: a layer depends on the layers whose outputs reach it through
them), and times every layer's forward and backward pass with module hooks (medians after
warm-up; the device is synchronised around each call on a GPU, wall clock on a CPU). Each layer
records the seed's memory categories: (a) its parameters, (b) its output, (c) = (a) for the
gradients of its parameters, (d) = (b) for the upstream gradient, and (e) the temporary memory
of its forward pass where it can be measured (a GPU's allocator; 0 on a CPU). An in-place layer
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
import warnings
from dataclasses import dataclass, field

import torch
import torch.fx

import ordo

__all__ = ["Profiled", "measure_copy", "profile"]


@dataclass
class Profiled:
    """A profiled module: its layers in execution order and its cost graph."""

    layers: list[str]
    forward_us: dict[str, float]
    backward_us: dict[str, float]
    edges: list[tuple[str, str]]
    costgraph: dict = field(repr=False)

    def to_json(self) -> str:
        """The cost graph as JSON text (ordo's node-link format)."""
        return json.dumps(self.costgraph)

    def save(self, path: str) -> None:
        """Writes the cost graph to ``path`` (``ordo place PATH`` reads it)."""
        with open(path, "w") as f:
            f.write(self.to_json())

    def model(self) -> ordo.Model:
        """The cost graph as an ``ordo.Model`` to place and simulate."""
        return ordo.Model.from_costgraph_json(self.to_json(), self.costgraph["graph"]["name"])


class _LayerTracer(torch.fx.Tracer):
    """Stops at atomic modules and at the modules the user names (by name or type)."""

    def __init__(self, names: set[str], types: tuple[type, ...]):
        super().__init__()
        self.names, self.types = names, types

    def is_leaf_module(self, module: torch.nn.Module, qualname: str) -> bool:
        if qualname in self.names or (self.types and isinstance(module, self.types)):
            return True
        return next(module.children(), None) is None


def _tensors(value) -> list[torch.Tensor]:
    """Every tensor in a (nested) output."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


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


def _loss(output) -> torch.Tensor:
    """What backward starts from when the caller gives no loss: the sum of the outputs."""
    return sum(t.float().sum() for t in _tensors(output) if t.requires_grad)


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
) -> Profiled:
    """Profiles ``module`` on ``example_inputs`` (a tensor or a tuple of them) into an ordo
    cost graph of its layers.

    ``leaf_modules``: names (``"layer1.0"``) or types (``torchvision.models.inception.BasicConv2d``)
    of modules to keep whole as one layer. ``training``: each layer's weight is its forward plus
    backward time (both run on its device), else its forward time. ``loss_fn(output)`` gives the
    loss to run backward from (default: the sum of the outputs). ``comm``: ``(fixed_us,
    us_per_byte)`` of a transfer (default: ``measure_copy`` on this machine).
    """
    if reps < 1 or warmup < 0:
        raise ordo.OrdoError(f"reps={reps}, warmup={warmup}: at least one timed run")
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    leaf_names = {m for m in leaf_modules if isinstance(m, str)}
    leaf_types = tuple(m for m in leaf_modules if isinstance(m, type))
    unknown = leaf_names - {n for n, _ in module.named_modules()}
    if unknown:
        raise ordo.OrdoError(f"leaf_modules: no module named {sorted(unknown)}")
    graph = _LayerTracer(leaf_names, leaf_types).trace(module)

    # Layers in call order; a module called twice (tied weights) is two layers, `name#1`.
    calls: dict[str, int] = {}
    layer_of: dict[torch.fx.Node, str] = {}
    for node in graph.nodes:
        if node.op == "call_module":
            k = calls.get(node.target, 0)
            calls[node.target] = k + 1
            layer_of[node] = node.target if k == 0 else f"{node.target}#{k}"
    if not layer_of:
        raise ordo.OrdoError("the module has no layers to place (no submodule is called)")

    # Dependencies through the operations that are not layers (shunting).
    sources: dict[torch.fx.Node, frozenset[str]] = {}
    for node in graph.nodes:
        if node in layer_of:
            sources[node] = frozenset([layer_of[node]])
        else:
            sources[node] = frozenset().union(*(sources[a] for a in node.all_input_nodes))
    edges = []
    for node, layer in layer_of.items():
        for producer in sorted(frozenset().union(*(sources[a] for a in node.all_input_nodes))):
            edges.append((producer, layer))
    layers = list(layer_of.values())
    forward, backward, out_bytes, temporary = _measure(
        module, inputs, calls, reps, warmup, loss_fn or _loss
    )
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    fixed_us, us_per_byte = comm if comm is not None else measure_copy(device, device)
    modules = dict(module.named_modules())

    def target(layer: str) -> str:
        return layer.split("#")[0]

    def persistent(layer: str) -> int:
        if "#" in layer:  # a second call: its parameters live with the first
            return 0
        params = modules[target(layer)].parameters()
        return sum(p.numel() * p.element_size() for p in params)

    # Layers that share a parameter (a module called twice, tied embeddings) are one
    # colocation group: ordo places them on one device, where the parameter lives.
    owner: dict[int, str] = {}
    group: dict[str, str] = {}
    for layer in layers:
        params = list(modules[target(layer)].parameters())
        shared = next((owner[id(p)] for p in params if id(p) in owner), layer)
        for p in params:
            owner.setdefault(id(p), shared)
        group[layer] = shared
    index = {layer: i for i, layer in enumerate(layers)}
    nodes = []
    for layer in layers:
        fwd, bwd = forward.get(layer, 0.0), backward.get(layer, 0.0)
        weight = fwd + bwd if training else fwd
        nodes.append(
            {
                "id": index[layer],
                "name": layer,
                "weight": max(1, round(weight)),
                "temporary_memory": int(temporary.get(layer, 0)),
                "persistent_memory": persistent(layer),
                "output_memory": [int(out_bytes.get(layer, 0))],
                "op_type": type(modules[target(layer)]).__name__,
                "colocation_group": group[layer],
                "forward_us": round(fwd, 3),
                "backward_us": round(bwd, 3),
            }
        )
    links = []
    for producer, consumer in edges:
        size = int(out_bytes.get(producer, 0))
        weight = max(0, round(fixed_us + us_per_byte * size))
        tensor = {"name": f"{producer}:0", "num_bytes": size, "weight": weight}
        links.append(
            {
                "source": index[producer],
                "target": index[consumer],
                "weight": weight,
                "tensor": [tensor],
            }
        )
    label = name or type(module).__name__
    costgraph = {
        "directed": True,
        "multigraph": False,
        "graph": {
            "name": label,
            "source": "ordo.torch.profile",
            "device": str(device),
            "reps": reps,
            "training": training,
            "comm_fixed_us": fixed_us,
            "comm_us_per_byte": us_per_byte,
        },
        "nodes": nodes,
        "links": links,
    }
    return Profiled(layers, forward, backward, edges, costgraph)


def _measure(module, inputs, calls, reps, warmup, loss_fn):
    """Each layer's median forward and backward time in µs, output bytes and (on a GPU)
    temporary bytes, over ``reps`` steps after ``warmup``, with module hooks."""
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    modules = dict(module.named_modules())
    seen: dict[str, int] = {}
    fwd: dict[str, list[float]] = {}
    bwd: dict[str, list[float]] = {}
    out_bytes: dict[str, int] = {}
    temporary: dict[str, int] = {}
    started: dict[str, float] = {}
    handles = []
    inplace = []
    # Full backward hooks cannot wrap an in-place module: profile it out of place, and count
    # no output of its own (it writes its input).
    for target in calls:
        m = modules[target]
        if getattr(m, "inplace", False):
            inplace.append(m)
            m.inplace = False
    inplace_targets = {t for t in calls if modules[t] in inplace}

    def layer(target: str) -> str:
        k = seen.get(target, 0)
        seen[target] = k + 1
        return target if k == 0 else f"{target}#{k}"

    for target in calls:
        m = modules[target]
        order: list[str] = []

        def pre(_m, _args, target=target, order=order):
            name = layer(target)
            order.append(name)
            _sync(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
                started[name + "@mem"] = torch.cuda.memory_allocated(device)
            started[name] = time.perf_counter()

        def post(_m, _args, output, target=target, order=order):
            _sync(device)
            name = order[-1]
            fwd.setdefault(name, []).append((time.perf_counter() - started[name]) * 1e6)
            size = sum(t.numel() * t.element_size() for t in _tensors(output))
            out_bytes[name] = 0 if target in inplace_targets else size
            if device.type == "cuda":
                peak = torch.cuda.max_memory_allocated(device) - started[name + "@mem"]
                temporary[name] = max(0, peak - size)

        def bpre(_m, _grad, order=order):
            _sync(device)
            started[order[-1] + "@bwd"] = time.perf_counter()

        def bpost(_m, _gin, _gout, order=order):
            _sync(device)
            name = order.pop()
            elapsed = (time.perf_counter() - started[name + "@bwd"]) * 1e6
            bwd.setdefault(name, []).append(elapsed)

        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
        handles.append(m.register_full_backward_pre_hook(bpre))
        handles.append(m.register_full_backward_hook(bpost))
    try:
        with warnings.catch_warnings():
            # A first layer's inputs need no gradient: its backward hooks fire on its outputs'
            # gradients, and its time is that of its parameters' gradients alone, as it should.
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            for step in range(warmup + reps):
                seen.clear()
                module.zero_grad(set_to_none=True)
                loss = loss_fn(module(*inputs))
                if isinstance(loss, torch.Tensor) and loss.requires_grad:
                    loss.backward()
                if step < warmup:
                    fwd.clear()
                    bwd.clear()
    finally:
        for handle in handles:
            handle.remove()
        for m in inplace:
            m.inplace = True
        module.zero_grad(set_to_none=True)
    median = {k: statistics.median(v) for k, v in fwd.items()}
    median_bwd = {k: statistics.median(v) for k, v in bwd.items()}
    return median, median_bwd, out_bytes, temporary
