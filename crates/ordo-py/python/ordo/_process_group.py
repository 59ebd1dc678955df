"""What the modules running on a ``torch.distributed`` process group share: rank numbers,
timed collectives, and figures every rank takes from rank 0 (measurements differ from rank
to rank; one rank's must be the plan's)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist


def global_rank(group, rank: int) -> int:
    """The global rank of ``group``'s rank ``rank`` (the default group's ranks are global)."""
    return dist.get_global_rank(group, rank) if group is not None else rank


def median_us(run, *, reps: int, warmup: int = 0, group=None, fence_after: bool = False) -> float:
    """The median wall time of ``run()`` in µs over ``reps`` runs, after ``warmup`` untimed
    ones. Every rank calls it: each run starts when all ranks reach it (a barrier) and, with
    ``fence_after``, ends when all are done."""
    times = []
    for i in range(warmup + reps):
        dist.barrier(group=group)
        start = time.perf_counter()
        run()
        if fence_after:
            dist.barrier(group=group)
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e6)
    return sorted(times)[len(times) // 2]


def from_rank0(values: list[float], group=None) -> list[float]:
    """``values`` as rank 0 has them, on every rank."""
    figures = torch.tensor(values, dtype=torch.float64)
    dist.broadcast(figures, src=global_rank(group, 0), group=group)
    return [float(v) for v in figures]
