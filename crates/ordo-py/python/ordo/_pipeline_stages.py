"""A rank's pipeline stages: the parts of a module that ordo's schedule gives the rank.

An ``nn.Sequential`` of blocks is cut at its children, as many per stage as the schedule has
units there. Any other module is split by PyTorch's tracer (``torch.distributed.pipelining.
pipeline``, which exports the module's graph) before the first unit of each stage after the
first: ordo's units are the model's numbered blocks (``blocks.3``, ``encoder.layer.7``) or its
layers, so each is a submodule the tracer can split at.
"""

from __future__ import annotations

import torch
from torch import nn

import ordo


def stages_of(
    module: nn.Module,
    schedule: dict,
    rank: int,
    *,
    example_inputs=None,
    device: torch.device | str = "cpu",
    group=None,
) -> list[tuple[int, object]]:
    """The stages ``schedule`` gives ``rank``, as ``(stage index, stage)``. Without
    ``example_inputs``, ``module`` is an ``nn.Sequential`` whose children are the schedule's
    units and each stage a ``nn.Sequential`` of its blocks; with them (one micro-batch: a
    tensor or a tuple of the forward's arguments), ``module`` is split by PyTorch's tracer
    and each stage is PyTorch's pipeline stage (on ``device``, in ``group``)."""
    ranks = schedule["stage_rank"]
    if not 0 <= rank <= max(ranks):
        raise ordo.OrdoError(f"rank {rank}: the schedule has ranks 0-{max(ranks)}")
    if example_inputs is None:
        if not isinstance(module, nn.Sequential):
            raise ordo.OrdoError(
                f"a {type(module).__name__} is not an nn.Sequential of blocks: pass "
                "example_inputs (one micro-batch) to split it with PyTorch's tracer"
            )
        return _sequential_stages(module, schedule, rank)
    return _traced_stages(module, schedule, rank, example_inputs, device, group)


def _sequential_stages(module: nn.Sequential, schedule: dict, rank: int):
    blocks = list(module.children())
    counts = [len(units) for units in schedule["stage_units"]]
    if sum(counts) != len(blocks):
        raise ordo.OrdoError(
            f"the schedule's stages run {sum(counts)} blocks, the module has {len(blocks)}"
        )
    stages, start = [], 0
    for stage, count in enumerate(counts):
        if schedule["stage_rank"][stage] == rank:
            stages.append((stage, nn.Sequential(*blocks[start : start + count])))
        start += count
    return stages


def _traced_stages(module, schedule, rank, example_inputs, device, group):
    from torch.distributed.pipelining import SplitPoint, pipeline

    names = {name for name, _ in module.named_modules()}
    split_spec = {}
    for stage, units in enumerate(schedule["stage_units"][1:], start=1):
        first = units[0]
        if first not in names:
            raise ordo.OrdoError(
                f"stage {stage} starts at `{first}`, which is not a submodule of the "
                f"{type(module).__name__}: plan the schedule from this module's profile"
            )
        split_spec[first] = SplitPoint.BEGINNING
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    try:
        pipe = pipeline(module, args, split_spec=split_spec)
    except Exception as error:  # the tracer's errors are of many kinds
        raise ordo.OrdoError(
            f"PyTorch's tracer could not split the {type(module).__name__} before "
            f"{sorted(split_spec)}: {type(error).__name__}: {error}"
        ) from error
    if pipe.num_stages != len(schedule["stage_rank"]):
        raise ordo.OrdoError(
            f"PyTorch's tracer split the module into {pipe.num_stages} stages, the schedule "
            f"has {len(schedule['stage_rank'])}"
        )
    return [
        (index, pipe.build_stage(index, torch.device(device), group))
        for index, owner in enumerate(schedule["stage_rank"])
        if owner == rank
    ]
