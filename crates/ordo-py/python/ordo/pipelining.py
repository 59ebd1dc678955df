"""ordo's pipeline schedules run by PyTorch's pipeline runtime (``torch.distributed.pipelining``).

``schedule(profiled, stages=S, micro_batches=M, schedule="auto")`` plans a pipeline of a
profiled module with ordo (stage boundaries balanced by the profile's costs; ``"auto"``: every
schedule simulated, the fastest within the memory limit chosen) and returns each rank's
actions in PyTorch's format (``ordo.pytorch_schedule`` does the same for any ordo training
problem); ``stages_of`` cuts a
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

__all__ = ["SCHEDULES", "Runner", "schedule", "stages_of", "step"]

# ordo's pipeline schedules, each a candidate of "auto".
SCHEDULES = ("gpipe", "1f1b", "fast-forward", "zb-h1", "zb-h2")

# An action of the compute-only format: stage, kind, micro-batch (`0F3`, `12W0`).
_ACTION = re.compile(r"(\d+)([FBIW])(\d+)")


def schedule(
    profiled,
    *,
    stages: int,
    micro_batches: int,
    schedule: str = "auto",
    modulo: int | None = None,
    memory: int | str | None = None,
) -> dict:
    """ordo's pipeline of ``profiled`` (``ordo.torch.profile(..., split_backward=True)`` of
    one micro-batch) over ``stages`` ranks: the dict of ``ordo.pytorch_schedule`` with the
    ``schedule`` chosen and ``predicted`` (each candidate's simulated step in µs and peak
    memory in bytes per stage). ``"auto"`` picks the fastest schedule whose stages fit in
    ``memory`` bytes each (a number or text such as ``"4GiB"``; default: no limit)."""
    if stages < 2:
        raise ordo.OrdoError(f"stages={stages}: a pipeline needs at least 2 stages")
    if micro_batches < 1:
        raise ordo.OrdoError(f"micro_batches={micro_batches}: at least 1")
    target = ordo.Target.uniform(stages, memory=memory)
    problem = ordo.Problem(profiled.training_model(), target, mode="training-graph")
    candidates = SCHEDULES if schedule == "auto" else (schedule,)
    predicted = {}
    for name in candidates:
        planned = ordo.plan(
            problem,
            "pipeline",
            stages=stages,
            micro_batches=micro_batches,
            schedule=name,
            modulo=modulo,
        )
        report = ordo.simulate(planned)
        predicted[name] = (report.step_time_us, report.peak_memory_bytes[:stages])
    fitting = [n for n in candidates if all(p <= m for p, m in zip(predicted[n][1], target.memory))]
    if not fitting:
        peaks = {n: max(p) for n, (_, p) in predicted.items()}
        raise ordo.OrdoError(
            f"no schedule fits in {max(target.memory)} bytes per stage: peaks {peaks}"
        )
    chosen = min(fitting, key=lambda n: predicted[n][0])
    result = ordo.pytorch_schedule(
        problem, stages=stages, micro_batches=micro_batches, schedule=chosen, modulo=modulo
    )
    result["schedule"] = chosen
    result["predicted"] = predicted
    return result


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


def _micro_batches(schedule: dict) -> int:
    return 1 + max(int(_ACTION.fullmatch(a).group(3)) for row in schedule["actions"] for a in row)


def _check_batches(schedule: dict, micro_batches: int, stages, inputs, target) -> tuple[bool, bool]:
    """Whether this rank runs the first and the last stage; an error when the inputs (first
    stage) or the targets (last stage) are missing or do not split into the micro-batches."""
    local = {index for index, _ in stages}
    has_first, has_last = 0 in local, len(schedule["stage_rank"]) - 1 in local
    for name, value, needed in [("inputs", inputs, has_first), ("target", target, has_last)]:
        if needed and (value is None or value.shape[0] % micro_batches):
            size = None if value is None else value.shape[0]
            raise ordo.OrdoError(
                f"{name}: a batch of {size} does not split into {micro_batches} micro-batches"
            )
    return has_first, has_last


class Runner:
    """This rank's stages under a schedule, ready to run training steps (PyTorch's runtime,
    built once)."""

    def __init__(
        self,
        stages: list[tuple[int, nn.Module]],
        schedule: dict,
        *,
        loss_fn,
        device: torch.device | str = "cpu",
        group=None,
    ) -> None:
        from torch.distributed.pipelining import PipelineStage
        from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

        if not stages:
            raise ordo.OrdoError("this rank runs no stage of the schedule")
        self.schedule, self.stages = schedule, stages
        self.num_stages = len(schedule["stage_rank"])
        self.micro_batches = _micro_batches(schedule)
        self.pipeline_stages = [
            PipelineStage(module, index, self.num_stages, torch.device(device), group=group)
            for index, module in stages
        ]
        self.runtime = _PipelineScheduleRuntime(
            self.pipeline_stages,
            n_microbatches=self.micro_batches,
            loss_fn=loss_fn,
            scale_grads=True,
        )
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "schedule.csv")
            with open(path, "w") as f:
                f.write(schedule["csv"])
            self.runtime._load_csv(path, format="compute_only")

    def step(self, *, inputs: torch.Tensor | None, target: torch.Tensor | None):
        """One training step (see ``step``); the losses on the last stage's rank."""
        has_first, has_last = _check_batches(
            self.schedule, self.micro_batches, self.stages, inputs, target
        )
        losses: list[torch.Tensor] = []
        args = (inputs,) if has_first else ()
        try:
            self.runtime.step(*args, target=target if has_last else None, losses=losses)
        except Exception as error:
            # A peer that died or stalls surfaces here as a transport error or a timeout of
            # the process group: name the ranks this one exchanges activations and gradients
            # with.
            raise ordo.OrdoError(
                f"rank {self.pipeline_stages[0].group_rank}: the pipeline step failed "
                f"({type(error).__name__}: {error}); the ranks it exchanges activations and "
                f"gradients with, {self._peers()}, may have died or stalled"
            ) from error
        return losses

    def _peers(self) -> list[int]:
        rank, stage_rank = self.pipeline_stages[0].group_rank, self.schedule["stage_rank"]
        return sorted(
            {
                stage_rank[s]
                for i, _ in self.stages
                for s in (i - 1, i + 1)
                if 0 <= s < self.num_stages and stage_rank[s] != rank
            }
        )


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
    micro-batches' losses on the last stage's rank, else an empty list. (``Runner`` builds
    the runtime once for many steps.)"""
    # Before anything is set up (PyTorch's stages need a process group).
    _check_batches(schedule, _micro_batches(schedule), stages, inputs, target)
    runner = Runner(stages, schedule, loss_fn=loss_fn, device=device, group=group)
    return runner.step(inputs=inputs, target=target)
