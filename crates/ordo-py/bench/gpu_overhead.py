"""Where a one-device ``ordo.torch.distribute`` loses time on a GPU: the same model's training
step run as PyTorch runs it, on a side stream without ordo, through ordo on the default stream
(``parallel=False``) and through ordo on a stream of its own, with each step's host time
(until ``forward`` and ``backward`` return) next to its wall time.

    python crates/ordo-py/bench/gpu_overhead.py [--models resnet50,bert] [--batch 32] [--profile]

``--profile`` adds torch.profiler's view of each variant (``--out DIR``: and its Chrome trace of
one step, gzipped), ``--cprofile`` the host's Python calls in ordo's two variants.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gzip
import os
import pstats
import shutil
import statistics
import time

import torch
from distribute import MODELS, loss_of
from torch.profiler import ProfilerActivity, profile

import ordo.torch as ot


class SideStream(torch.nn.Module):
    """The model's forward on a stream of its own, as ordo's one logical device runs it, but
    with nothing of ordo: the stream waits for the caller's, the caller's for it after."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module
        self.stream = torch.cuda.Stream()

    def forward(self, x):
        caller = torch.cuda.current_stream()
        self.stream.wait_stream(caller)
        with torch.cuda.stream(self.stream):
            y = self.module(x)
        caller.wait_stream(self.stream)
        for leaf in torch.utils._pytree.tree_leaves(y):
            if isinstance(leaf, torch.Tensor):
                leaf.record_stream(caller)
        return y


def step(module, x) -> tuple[float, float, float]:
    """Wall time of one training step, and the host's time until forward and backward
    returned."""
    module.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = module(x)
    forward = time.perf_counter()
    loss_of(out).backward()
    backward = time.perf_counter()
    torch.cuda.synchronize()
    end = time.perf_counter()
    return end - start, forward - start, backward - start


def report(name: str, module, x, reps: int) -> float:
    for _ in range(3):
        step(module, x)
    runs = [step(module, x) for _ in range(reps)]
    wall, fwd, bwd = (statistics.median(r[i] for r in runs) * 1e3 for i in range(3))
    print(f"  {name:<22} wall {wall:7.2f} ms  host: forward {fwd:7.2f} ms, +backward {bwd:7.2f}")
    return wall


def profiled(name: str, module, x, out: str | None) -> None:
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=activities) as prof:
        for _ in range(3):
            step(module, x)
    events = prof.key_averages()
    runtime = [e for e in events if e.key.startswith("cuda") or e.key.startswith("cu")]
    runtime.sort(key=lambda e: -e.self_cpu_time_total)
    print(f"  -- {name}: CUDA runtime calls over 3 steps (count, host ms)")
    for e in runtime[:10]:
        print(f"     {e.key:<40} {e.count:7d} {e.self_cpu_time_total / 1e3:9.2f}")
    kernels = [e for e in events if getattr(e, "self_device_time_total", 0) > 0]
    device_ms = sum(e.self_device_time_total for e in kernels) / 1e3 / 3
    print(f"     device time (kernels and copies) per step: {device_ms:.2f} ms")
    kernels.sort(key=lambda e: -e.self_device_time_total)
    for e in kernels[:6]:
        print(f"     {e.key[:60]:<60} {e.count:6d} {e.self_device_time_total / 3e3:8.2f} ms")
    if out:
        with profile(activities=activities) as one:
            step(module, x)
        path = os.path.join(out, f"{name}.json")
        one.export_chrome_trace(path)
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)


def host_profile(name: str, module, x) -> None:
    """cProfile of the host's forward and backward, five steps."""
    for _ in range(2):
        step(module, x)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        step(module, x)
    profiler.disable()
    print(f"  -- {name}: the host's calls over 5 steps")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumtime").print_stats("ordo", 25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,bert")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--out")
    parser.add_argument("--profile", action="store_true", help="torch.profiler of each variant")
    parser.add_argument("--cprofile", action="store_true", help="cProfile ordo's host calls")
    args = parser.parse_args()
    gpu = torch.device("cuda", 0)
    print(f"{torch.cuda.get_device_name(gpu)}, torch {torch.__version__}")
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, x, leaf = MODELS[name](name, args.batch)
        model, x = model.to(gpu), x.to(gpu)
        prof = ot.profile(model, x, leaf_modules=leaf, reps=1, warmup=1, loss_fn=loss_of)
        one = ot.Placement.of(prof, dict.fromkeys(prof.layers, 0))
        variants = {
            "pytorch": model,
            "pytorch-side-stream": SideStream(copy.deepcopy(model)),
            "ordo-default-stream": ot.distribute(
                copy.deepcopy(model), one, devices=["cuda:0"], parallel=False
            ),
            "ordo-own-stream": ot.distribute(copy.deepcopy(model), one, devices=["cuda:0"]),
        }
        print(f"== {name} (batch {args.batch}, {len(prof.layers)} layers)")
        for label, module in variants.items():
            report(label, module, x, args.reps)
        # The same, with record_stream a no-op (unsafe in general; here every step ends with
        # a synchronisation, so it only tells what record_stream costs).
        real = torch.Tensor.record_stream
        torch.Tensor.record_stream = lambda self, stream: None
        try:
            report("ordo-own, no rec_stream", variants["ordo-own-stream"], x, args.reps)
            report("side, no record_stream", variants["pytorch-side-stream"], x, args.reps)
        finally:
            torch.Tensor.record_stream = real
        if args.cprofile:
            host_profile(f"{name}-ordo-default-stream", variants["ordo-default-stream"], x)
            host_profile(f"{name}-ordo-own-stream", variants["ordo-own-stream"], x)
        for label, module in variants.items() if args.profile else ():
            profiled(f"{name}-{label}", module, x, args.out)
        for module in variants.values():
            if hasattr(module, "close"):
                module.close()


if __name__ == "__main__":
    main()
