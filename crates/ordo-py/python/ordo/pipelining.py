"""ordo's pipeline schedules run by PyTorch's pipeline runtime (``torch.distributed.pipelining``).

``ordo.pytorch_schedule(problem, stages=S, micro_batches=M, schedule=...)`` plans a pipeline
with ordo and returns each rank's actions in PyTorch's format; ``stages_of`` cuts a
``nn.Sequential`` of blocks into the stages the schedule names for one rank, and ``step`` runs
one training step of them under ``_PipelineScheduleRuntime``, which adds the sends and
receives itself (``compute_only`` format). Every rank of the process group calls ``step`` with
the same schedule; the first stage's rank passes the inputs, the last stage's the targets.
"""

from __future__ import annotations

import os
import re
import tempfile

import torch
from torch import nn

import ordo

__all__ = ["stages_of", "step"]

# An action of the compute-only format: stage, kind, micro-batch (`0F3`, `12W0`).
_ACTION = re.compile(r"(\d+)([FBIW])(\d+)")


def stages_of(module: nn.Sequential, schedule: dict, rank: int) -> list[tuple[int, nn.Module]]:
    """The stages ``schedule`` gives ``rank``: ``(stage index, the blocks it runs)``, the
    blocks being ``module``'s children in order, as many per stage as ordo's plan has units
    there."""
    blocks = list(module.children())
    counts = [len(units) for units in schedule["stage_units"]]
    if sum(counts) != len(blocks):
        raise ordo.OrdoError(
            f"the schedule's stages run {sum(counts)} blocks, the module has {len(blocks)}"
        )
    if not 0 <= rank < max(schedule["stage_rank"]) + 1:
        raise ordo.OrdoError(f"rank {rank}: the schedule has ranks 0-{max(schedule['stage_rank'])}")
    stages, start = [], 0
    for stage, count in enumerate(counts):
        if schedule["stage_rank"][stage] == rank:
            stages.append((stage, nn.Sequential(*blocks[start : start + count])))
        start += count
    return stages


def step(
    stages: list[tuple[int, nn.Module]],
    schedule: dict,
    *,
    inputs: torch.Tensor | None,
    target: torch.Tensor | None,
    loss_fn,
    device: torch.device | str = "cpu",
    group=None,
) -> list[torch.Tensor]:
    """One training step of this rank's ``stages`` under ``schedule``: forward and backward of
    every micro-batch as the schedule orders them, gradients accumulated in the stages'
    parameters (scaled by 1 / micro-batches: those of the mean loss). Returns the
    micro-batches' losses on the last stage's rank, else an empty list."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    num_stages = len(schedule["stage_rank"])
    micro_batches = 1 + max(
        int(_ACTION.fullmatch(a).group(3)) for row in schedule["actions"] for a in row
    )
    pipeline_stages = [
        PipelineStage(module, index, num_stages, torch.device(device), group=group)
        for index, module in stages
    ]
    runtime = _PipelineScheduleRuntime(
        pipeline_stages, n_microbatches=micro_batches, loss_fn=loss_fn, scale_grads=True
    )
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "schedule.csv")
        with open(path, "w") as f:
            f.write(schedule["csv"])
        runtime._load_csv(path, format="compute_only")
    losses: list[torch.Tensor] = []
    has_first = any(index == 0 for index, _ in stages)
    has_last = any(index == num_stages - 1 for index, _ in stages)
    args = (inputs,) if has_first else ()
    runtime.step(*args, target=target if has_last else None, losses=losses)
    return losses
