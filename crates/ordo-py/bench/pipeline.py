"""ordo's pipeline schedules against PyTorch's own, side by side on one split (run under
torchrun; one thread per process, as torchrun sets):

    MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=4294967296 \
        torchrun --standalone --nproc-per-node 2 crates/ordo-py/bench/pipeline.py --pin

(glibc's allocator otherwise moves its mmap threshold with what was freed, so that a 128 KiB
activation is mapped afresh in one run and reused in the next: the schedules' order changed
from run to run; ``--pin`` puts each rank on a core of its own.)

A chain of blocks (Linear + GELU), the same stage boundaries for every schedule; for each:
the median step time over --steps steps after two of warm-up (the schedules taking turns
step by step), the throughput relative to
PyTorch's ScheduleGPipe, the peak bytes each rank holds saved for backward during a step
(``ordo.torch.SavedTensorsPeak``: a CPU has no allocator statistics), and for ordo's own
schedules its predicted step and peak memory per stage (simulated from rank 0's profile;
parameters, gradients and optimizer state included), calibrated as ``ordo.pipelining.pipeline``
calibrates: the transfers, the runtime's cost per action, the slowdown of ranks computing at
once, dX and dW timed as PyTorch's runtime computes them. Then: how well the predictions rank
and size the measured steps (with the slowdown and without it), one process training the
same micro-batches against the profile's prediction of it (the machine's drift between the
profile and the measurements), and ``auto``'s choice against PyTorch's best schedule.
"""

from __future__ import annotations

import argparse
import json
import os
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


def timed_in_turns(runs: list, steps: int) -> list[list[float]]:
    """The step times of each of ``runs``, which take turns step by step (so that a slow
    spell of the machine hits them all alike), after two warm-up steps each."""
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
    return times


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation of two samples, ties given their average rank."""

    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        result = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                result[order[k]] = (i + j) / 2
            i = j + 1
        return result

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    norm = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / norm if norm else 0.0


def median_error(rows: list[tuple], column: int) -> float:
    """The median of |predicted - measured| / measured over ``rows`` (label, measured seconds,
    ...), the prediction in µs in ``column``."""
    return statistics.median(abs(r[column] / 1e6 - r[1]) / r[1] for r in rows)


def pairs_in_order(rows: list[tuple], column: int = 2) -> tuple[int, int]:
    """Of the pairs of ``rows`` predicted (``column``) at least 5% apart, how many there are
    and how many measured (column 1) in the predicted order: near-ties drown in the noise,
    these are what a ranking must get right."""
    pairs = [
        (a, b)
        for i, a in enumerate(rows)
        for b in rows[i + 1 :]
        if abs(a[column] - b[column]) >= 0.05 * min(a[column], b[column])
    ]
    return len(pairs), sum((a[column] < b[column]) == (a[1] < b[1]) for a, b in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--micro-batches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument(
        "--split",
        default="pipelining",
        type=lambda v: v == "true" or v,
        help="how the profile times dX and dW apart: pipelining (as PyTorch's runtime) or true",
    )
    parser.add_argument("--pin", action="store_true", help="each rank on a core of its own")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.pin:
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    net = blocks(args.blocks, args.width)
    x = torch.randn(args.batch, args.width)
    y = torch.randn(args.batch, args.width)
    m = args.micro_batches
    comm = op.measure_p2p()
    overhead = op.measure_action_overhead(micro_batches=m, comm=comm)
    micro = x[: args.batch // m]
    slowdown = op.measure_compute_slowdown(net, micro)
    plans = [None]
    if rank == 0:
        profiled = ot.profile(net, micro, reps=5, warmup=2, split_backward=args.split, comm=comm)
        # The profile's own prediction of one process training the M micro-batches.
        graph = json.loads(profiled.to_json())
        one_process_us = m * sum(n["forward_us"] + n["backward_us"] for n in graph["nodes"])
        # Each schedule planned with the measured slowdown and without it (factor 1), to
        # compare the predictions of both in one run.
        plans[0] = {
            (name, modulo, factor): op.schedule(
                profiled,
                stages=world,
                micro_batches=m,
                schedule=name,
                modulo=modulo,
                action_overhead_us=overhead,
                compute_slowdown=factor,
            )
            for name in op.SCHEDULES
            for modulo in (None, args.blocks // (2 * world))
            for factor in (1.0, slowdown)
        }
        plans[0]["one process"] = one_process_us
    dist.broadcast_object_list(plans, src=0)
    plans = plans[0]
    results = []

    def measure(label, build, name=None, modulo=None):
        model = blocks(args.blocks, args.width)
        run = build(model)
        with ot.SavedTensorsPeak(exclude=list(model.parameters())) as saved:
            run()
        peaks = [None] * world
        dist.all_gather_object(peaks, saved.peak)
        predicted = plans[(name, modulo, slowdown)]["predicted"][name] if name else None
        unslowed = plans[(name, modulo, 1.0)]["predicted"][name][0] if name else None
        results.append([label, run, predicted, peaks, unslowed])

    def ordo_runner(plan):
        def build(model):
            stages = op.stages_of(model, plan, rank)
            runner = op.PipelineRunner(stages, plan, loss_fn=loss_fn)
            return lambda: runner.step(inputs=x, target=y)

        return build

    def torch_runner(cls, modulo):
        plan = plans[("1f1b", modulo, 1.0)]  # its stage boundaries, for the same split

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

    def one_process(model):
        # Rank 0 trains the whole model on the micro-batches in turn; the others wait.
        def run():
            if rank == 0:
                for micro_x, micro_y in zip(x.chunk(m), y.chunk(m)):
                    (loss_fn(model(micro_x), micro_y) / m).backward()

        return run

    measure("torch GPipe", torch_runner(ScheduleGPipe, None))
    measure("torch 1F1B", torch_runner(Schedule1F1B, None))
    for name in op.SCHEDULES:
        measure(f"ordo {name}", ordo_runner(plans[(name, None, 1.0)]), name)
    modulo = args.blocks // (2 * world)
    measure("torch interleaved 1F1B", torch_runner(ScheduleInterleaved1F1B, modulo))
    measure("torch interleaved ZB", torch_runner(ScheduleInterleavedZeroBubble, modulo))
    for name in op.SCHEDULES:
        measure(f"ordo {name} interleaved", ordo_runner(plans[(name, modulo, 1.0)]), name, modulo)
    measure("one process (rank 0)", one_process)
    spread = {}
    for result, samples in zip(results, timed_in_turns([r[1] for r in results], args.steps)):
        result[1] = statistics.median(samples)
        quartiles = statistics.quantiles(samples, n=4)
        spread[result[0]] = (quartiles[2] - quartiles[0]) / result[1]
    if rank == 0:
        base = results[0][1]
        print(
            f"{args.blocks} blocks of {args.width}, batch {args.batch}, {m} micro-batches, "
            f"{world} ranks; median of {args.steps} steps; transfers {comm[0]:.0f} us + "
            f"{comm[1] * 1e3:.3f} us/KB, runtime {overhead:.0f} us per action, ranks computing "
            f"at once {slowdown:.2f}x slower (measured)"
        )
        print(
            f"{'schedule':30} {'step ms':>8} {'IQR':>5} {'vs GPipe':>9} {'predicted ms':>13}  "
            f"{'saved for backward, peak per rank':>34}  predicted peak per stage"
        )
        mib = 2**20
        for label, seconds, predicted, measured, _ in results:
            step = f"{predicted[0] / 1e3:.1f}" if predicted else "-"
            peaks = " ".join(f"{p / mib:.1f}MiB" for p in predicted[1]) if predicted else "-"
            saved = " ".join(f"{p / mib:.2f}MiB" for p in measured)
            print(
                f"{label:30} {seconds * 1e3:8.1f} {spread[label]:5.0%} {base / seconds:8.2f}x "
                f"{step:>13}  "
                f"{saved:>34}  {peaks}"
            )
        ours = [(label, seconds, p[0], u) for label, seconds, p, _, u in results if p]
        by_measured = [r[0] for r in sorted(ours, key=lambda r: r[1])]
        print("ordo's schedules, measured fastest first:", ", ".join(by_measured))
        for column, title in [(2, "with the slowdown"), (3, "without it")]:
            by_predicted = [r[0] for r in sorted(ours, key=lambda r: r[column])]
            rho = spearman([r[1] for r in ours], [r[column] for r in ours])
            print(
                f"predicted {title}, fastest first: {', '.join(by_predicted)}; Spearman's "
                f"rank correlation with the measured {rho:.2f} (ties averaged), median "
                f"|predicted - measured| / measured {median_error(ours, column):.0%}"
            )
        pairs, agree = pairs_in_order(ours)
        print(
            f"pairs of ordo's schedules predicted at least 5% apart: {pairs}, measured in "
            f"the predicted order: {agree}"
        )
        # The machine's speed drifts between the profile and the measurements: the profile's
        # prediction of one process, against that process measured in the turns.
        one = results[-1][1] * 1e6
        drift = one / plans["one process"]
        scaled = [(r[0], r[1], r[2] * drift) for r in ours]
        print(
            f"one process: measured {one / 1e3:.1f} ms, the profile predicts "
            f"{plans['one process'] / 1e3:.1f} ms ({drift:.2f}x); the predictions scaled by "
            f"that: median error {median_error(scaled, 2):.0%}"
        )
        # An experiment: calibrate on one schedule's measured step (ordo's contiguous 1f1b),
        # predict the others. The drift scales the work; what the scaled prediction of 1f1b
        # still misses is charged per action (the cost of an action at the model's sizes).
        one_f_one_b = next(r for r in ours if r[0] == "ordo 1f1b")
        actions = len(plans[("1f1b", None, 1.0)]["actions"][0])
        bare = {
            (name, groups): op.schedule(
                profiled,
                stages=world,
                micro_batches=m,
                schedule=name,
                modulo=groups,
                compute_slowdown=slowdown,
            )["predicted"][name][0]
            for name in op.SCHEDULES
            for groups in (None, modulo)
        }
        per_action = max(0.0, one_f_one_b[1] * 1e6 - drift * bare[("1f1b", None)]) / actions
        calibrated = {
            key: drift
            * op.schedule(
                profiled,
                stages=world,
                micro_batches=m,
                schedule=key[0],
                modulo=key[1],
                compute_slowdown=slowdown,
                action_overhead_us=per_action / drift,
            )["predicted"][key[0]][0]
            for key in bare
        }
        key_of = {
            f"ordo {name}{' interleaved' if groups else ''}": (name, groups)
            for name, groups in bare
        }
        others = [(r[0], r[1], calibrated[key_of[r[0]]]) for r in ours if r[0] != "ordo 1f1b"]
        pairs, agree = pairs_in_order(others)
        rho = spearman([r[1] for r in others], [r[2] for r in others])
        print(
            f"calibrated on ordo 1f1b's step ({per_action / 1e3:.2f} ms per action at the "
            f"model's sizes), the other {len(others)}: median error "
            f"{median_error(others, 2):.0%}, Spearman {rho:.2f}, pairs at least 5% apart "
            f"{pairs}, measured in that order {agree}"
        )
        # `auto` simulates the same candidates: every schedule, contiguous and interleaved.
        chosen = min(ours, key=lambda r: r[2])
        best_torch = min((r for r in results if r[0].startswith("torch")), key=lambda r: r[1])
        print(
            f"auto's choice, {chosen[0]}: {best_torch[1] / chosen[1]:.3f}x the throughput of "
            f"PyTorch's best built-in schedule here ({best_torch[0]}); the best of ordo's "
            f"measured: {min(ours, key=lambda r: r[1])[0]}"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
