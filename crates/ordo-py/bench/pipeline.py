"""ordo's pipeline schedules against PyTorch's own, side by side on one split (run under
torchrun; one thread per process, as torchrun sets):

    torchrun --standalone --nproc-per-node 2 crates/ordo-py/bench/pipeline.py

A chain of blocks (Linear + GELU), the same stage boundaries for every schedule; for each:
the median step time over --steps steps after two of warm-up (the schedules taking turns
step by step), the throughput relative to
PyTorch's ScheduleGPipe, the peak bytes each rank holds saved for backward during a step
(``ordo.torch.SavedTensorsPeak``: a CPU has no allocator statistics), and for ordo's own
schedules its predicted step and peak memory per stage (simulated from rank 0's profile;
parameters, gradients and optimizer state included).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import (
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
)

import ordo.pipelining as op
import ordo.torch as ot


def blocks(count: int, width: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(count)])


def loss_fn(output, target):
    return ((output - target) ** 2).mean()


def timed_in_turns(runs: list, steps: int) -> list[float]:
    """The median step time of each of ``runs``, which take turns step by step (so that a
    slow spell of the machine hits them all alike), after two warm-up steps each."""
    for run in runs:
        for _ in range(2):
            run()
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(steps):
        for run, samples in zip(runs, times):
            dist.barrier()
            start = time.perf_counter()
            run()
            dist.barrier()
            samples.append(time.perf_counter() - start)
    return [statistics.median(samples) for samples in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--micro-batches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=7)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    net = blocks(args.blocks, args.width)
    x = torch.randn(args.batch, args.width)
    y = torch.randn(args.batch, args.width)
    m = args.micro_batches
    comm = op.measure_p2p()
    overhead = op.measure_action_overhead(micro_batches=m, comm=comm)
    plans = [None]
    if rank == 0:
        micro = x[: args.batch // m]
        profiled = ot.profile(net, micro, reps=5, warmup=2, split_backward=True, comm=comm)
        plans[0] = {
            (name, modulo): op.schedule(
                profiled,
                stages=world,
                micro_batches=m,
                schedule=name,
                modulo=modulo,
                action_overhead_us=overhead,
            )
            for name in op.SCHEDULES
            for modulo in (None, args.blocks // (2 * world))
        }
    dist.broadcast_object_list(plans, src=0)
    plans = plans[0]
    results = []

    def measure(label, build, predicted=None):
        model = blocks(args.blocks, args.width)
        run = build(model)
        with ot.SavedTensorsPeak(exclude=list(model.parameters())) as saved:
            run()
        peaks = [None] * world
        dist.all_gather_object(peaks, saved.peak)
        results.append([label, run, predicted, peaks])

    def ordo_runner(plan):
        def build(model):
            stages = op.stages_of(model, plan, rank)
            runner = op.Runner(stages, plan, loss_fn=loss_fn)
            return lambda: runner.step(inputs=x, target=y)

        return build

    def torch_runner(cls, modulo):
        plan = plans[("1f1b", modulo)]  # its stage boundaries, for the same split

        def build(model):
            stages = op.stages_of(model, plan, rank)
            pipeline_stages = [
                PipelineStage(mod, index, len(plan["stage_rank"]), torch.device("cpu"))
                for index, mod in stages
            ]
            stage_arg = pipeline_stages if modulo else pipeline_stages[0]
            schedule = cls(stage_arg, n_microbatches=m, loss_fn=loss_fn)
            first, last = plan["stage_rank"][0] == rank, plan["stage_rank"][-1] == rank

            def run():
                args_ = (x,) if first else ()
                schedule.step(*args_, target=y if last else None, losses=[] if last else None)

            return run

        return build

    measure("torch GPipe", torch_runner(ScheduleGPipe, None))
    measure("torch 1F1B", torch_runner(Schedule1F1B, None))
    for name in op.SCHEDULES:
        plan = plans[(name, None)]
        measure(f"ordo {name}", ordo_runner(plan), plan["predicted"][name])
    modulo = args.blocks // (2 * world)
    measure("torch interleaved 1F1B", torch_runner(ScheduleInterleaved1F1B, modulo))
    measure("torch interleaved ZB", torch_runner(ScheduleInterleavedZeroBubble, modulo))
    for name in ("1f1b", "zb-h1", "zb-h2"):
        plan = plans[(name, modulo)]
        measure(f"ordo {name} interleaved", ordo_runner(plan), plan["predicted"][name])
    for result, seconds in zip(results, timed_in_turns([r[1] for r in results], args.steps)):
        result[1] = seconds
    if rank == 0:
        base = results[0][1]
        print(
            f"{args.blocks} blocks of {args.width}, batch {args.batch}, {m} micro-batches, "
            f"{world} ranks; median of {args.steps} steps; transfers {comm[0]:.0f} us + "
            f"{comm[1] * 1e3:.3f} us/KB, runtime {overhead:.0f} us per action (measured)"
        )
        print(
            f"{'schedule':28} {'step ms':>8} {'vs GPipe':>9} {'predicted ms':>13}  "
            f"{'saved for backward, peak per rank':>34}  predicted peak per stage"
        )
        mib = 2**20
        for label, seconds, predicted, measured in results:
            step = f"{predicted[0] / 1e3:.1f}" if predicted else "-"
            peaks = " ".join(f"{p / mib:.1f}MiB" for p in predicted[1]) if predicted else "-"
            saved = " ".join(f"{p / mib:.2f}MiB" for p in measured)
            print(
                f"{label:28} {seconds * 1e3:8.1f} {base / seconds:8.2f}x {step:>13}  "
                f"{saved:>34}  {peaks}"
            )
        ours = [(label, seconds, p[0]) for label, seconds, p, _ in results if p]
        by_measured = [label for label, _, _ in sorted(ours, key=lambda r: r[1])]
        by_predicted = [label for label, _, _ in sorted(ours, key=lambda r: r[2])]
        print("ordo's schedules, measured fastest first: ", ", ".join(by_measured))
        print("ordo's schedules, predicted fastest first:", ", ".join(by_predicted))
        rank_of = {label: i for i, label in enumerate(by_measured)}
        d2 = sum((rank_of[label] - i) ** 2 for i, label in enumerate(by_predicted))
        n = len(ours)
        print(f"Spearman's rank correlation, predicted vs measured: {1 - 6 * d2 / (n**3 - n):.2f}")
        errors = sorted(abs(p / 1e3 - s * 1e3) / (s * 1e3) for _, s, p in ours)
        print(f"median |predicted - measured| / measured: {errors[len(errors) // 2]:.0%}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
