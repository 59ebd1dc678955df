"""ordo.torch on one GPU: profiling and placement time, the step of models distributed over
logical devices that share the GPU (one CUDA stream each) next to ordo's prediction, and the
wrappers' overhead on a one-device module (the goal: under 2%).

    python crates/ordo-py/bench/distribute_gpu.py [--models resnet50,bert] [--reps 15]

Timings: medians of steps, each ended by a synchronisation of the GPU; the overhead is the
median ratio of pairs of steps run back to back, alternating which goes first.
"""

from __future__ import annotations

import argparse
import collections
import copy
import cProfile
import pstats
import statistics
import time

import distribute
import torch
from distribute import MODELS, loss_of

import ordo.torch as ot


def step_seconds(module, x) -> float:
    module.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    start = time.perf_counter()
    loss_of(module(x)).backward()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def paired(a_module, b_module, x, reps: int) -> tuple[float, float, float]:
    """Median step of each, and the median ratio b/a of steps run back to back."""
    return distribute.paired(step_seconds, a_module, b_module, x, reps, warmup=3)


def wrapper_cost_us(layers: int = 300, reps: int = 30, profile: bool = False) -> float:
    """The wrappers' own host cost per layer call on a GPU, in µs: a chain of tiny layers
    without gradients (their kernels cost less than their launches), with and without them."""
    gpu = torch.device("cuda", 0)
    chain = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(layers)]).to(gpu)
    x = torch.randn(1, 2, device=gpu)
    profiled = ot.profile(chain, x, reps=1, warmup=0)
    one = ot.Placement.of(profiled, dict.fromkeys(profiled.layers, 0))
    wrapped = ot.distribute(copy.deepcopy(chain), one, devices=["cuda:0"])

    def seconds(module) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            module(x)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(3):
        seconds(chain), seconds(wrapped)
    if profile:  # where the host's time goes in the wrappers
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(5):
            seconds(wrapped)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    plain = statistics.median(seconds(chain) for _ in range(reps))
    distributed = statistics.median(seconds(wrapped) for _ in range(reps))
    wrapped.close()
    return (distributed - plain) / layers * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,inception_v3,bert,gpt2")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--profile", action="store_true", help="cProfile the wrappers")
    args = parser.parse_args()
    gpu = torch.device("cuda", 0)
    print(f"{torch.cuda.get_device_name(gpu)}, torch {torch.__version__}")
    cost = wrapper_cost_us(profile=args.profile)
    print(f"the wrappers cost {cost:.1f} us per layer call (300 tiny layers)")
    errors = []
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, x, leaf = MODELS[name](name, args.batch)
        model, x = model.to(gpu), x.to(gpu)
        start = time.perf_counter()
        profiled = ot.profile(model, x, leaf_modules=leaf, reps=3, warmup=1, loss_fn=loss_of)
        profile_s = time.perf_counter() - start
        print(
            f"== {name} (batch {args.batch}): {len(profiled.layers)} layers, profiled in "
            f"{profile_s:.2f} s"
        )
        one = ot.Placement.of(profiled, dict.fromkeys(profiled.layers, 0))
        wrapped = ot.distribute(copy.deepcopy(model), one, devices=["cuda:0"])
        plain_s, wrapped_s, ratio = paired(model, wrapped, x, args.reps)
        wrapped.close()
        print(
            f"  one logical device: module {plain_s * 1e3:.2f} ms, distributed "
            f"{wrapped_s * 1e3:.2f} ms per step: median pair ratio {ratio - 1:+.2%}"
        )
        for devices in (2, 4):
            for algo in ("m-etf", "m-sct"):
                start = time.perf_counter()
                placement = ot.place(profiled, devices, algo)
                place_s = time.perf_counter() - start
                used = sorted(collections.Counter(placement.device_of.values()).values())
                dist = ot.distribute(copy.deepcopy(model), placement, devices=["cuda:0"] * devices)
                _, measured_s, vs_plain = paired(model, dist, x, args.reps)
                report = dist.steps[-1]
                predicted = ot.predict(placement)
                error = predicted.step_us / (measured_s * 1e6) - 1
                errors.append(abs(error))
                dist.close()
                print(
                    f"  {algo} x{devices}: placed in {place_s * 1e3:.0f} ms, layers per "
                    f"device {used}, threads {len(report.threads)}; step predicted "
                    f"{predicted.step_us / 1e3:.2f} ms, measured {measured_s * 1e3:.2f} ms "
                    f"({error:+.1%}); vs the module on one stream {vs_plain:.3f}x"
                )
    print(f"median |predicted - measured| / measured: {statistics.median(errors):.1%}")


if __name__ == "__main__":
    main()
