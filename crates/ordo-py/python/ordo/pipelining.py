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
import warnings

import torch
from torch import nn

import ordo
from ordo._pipeline_stages import stages_of

__all__ = [
    "SCHEDULES",
    "PipelineRunner",
    "measure_action_overhead",
    "measure_compute_slowdown",
    "measure_p2p",
    "pipeline",
    "schedule",
    "stages_of",
    "step",
]

# ordo's pipeline schedules, each a candidate of "auto".
SCHEDULES = ("gpipe", "1f1b", "fast-forward", "zb-h1", "zb-h2")

# An action of the compute-only format: stage, kind, micro-batch (`0F3`, `12W0`).
_ACTION = re.compile(r"(\d+)([FBIW])(\d+)")


# The largest compute slowdown a schedule's prediction takes.
_MOST_SLOWDOWN = 100.0


def schedule(
    profiled,
    *,
    stages: int,
    micro_batches: int,
    schedule: str = "auto",
    modulo: int | None = None,
    memory: int | str | None = None,
    action_overhead_us: float = 0.0,
    compute_slowdown: float = 1.0,
) -> dict:
    """ordo's pipeline of ``profiled`` (``ordo.torch.profile(..., split_backward=
    "pipelining")`` of one micro-batch: its ``I`` and ``W`` actions timed as PyTorch's runtime
    runs them) over ``stages`` ranks: the dict of ``ordo.pytorch_schedule`` with the
    ``schedule`` and ``modulo`` chosen and ``predicted`` (each candidate's simulated step in
    µs and peak memory in bytes per stage; an interleaved candidate as ``"1f1b, modulo 2"``).
    ``"auto"`` picks the fastest schedule whose stages fit in ``memory`` bytes each (a number
    or text such as ``"4GiB"``; default: no limit), also interleaved (two groups of units per
    rank) unless ``modulo`` is given.
    ``action_overhead_us``: the runtime's cost per action (``measure_action_overhead``),
    charged in the predictions; ``compute_slowdown``: how much slower work runs while another
    rank works at once (``measure_compute_slowdown``; 1 for ranks on hosts of their own), the
    predictions stretching each task by the share of it that overlaps other ranks' work."""
    if stages < 2:
        raise ordo.OrdoError(f"stages={stages}: a pipeline needs at least 2 stages")
    if micro_batches < 1:
        raise ordo.OrdoError(f"micro_batches={micro_batches}: at least 1")
    if not 1.0 <= compute_slowdown <= _MOST_SLOWDOWN:  # also refuses NaN
        raise ordo.OrdoError(
            f"compute_slowdown={compute_slowdown}: expected a number from 1 to 100"
        )
    target = ordo.Target.uniform(stages, memory=memory)
    problem = ordo.Problem(profiled.training_model(), target, mode="training-graph")
    candidates = _candidates(problem, stages, micro_batches, schedule, modulo)
    predicted, plans = {}, {}
    for name, groups in candidates:
        planned = ordo.plan(
            problem,
            "pipeline",
            stages=stages,
            micro_batches=micro_batches,
            schedule=name,
            modulo=groups,
            action_overhead_us=action_overhead_us,
        )
        report = ordo.simulate(planned, host_slowdown=compute_slowdown)
        key = name if groups == modulo else f"{name}, modulo {groups}"
        predicted[key] = (report.step_time_us, report.peak_memory_bytes[:stages])
        plans[key] = (name, groups)
    fitting = [k for k in predicted if all(p <= m for p, m in zip(predicted[k][1], target.memory))]
    if not fitting:
        peaks = {k: max(p) for k, (_, p) in predicted.items()}
        raise ordo.OrdoError(
            f"no schedule fits in {max(target.memory)} bytes per stage: peaks {peaks}"
        )
    chosen, groups = plans[min(fitting, key=lambda k: predicted[k][0])]
    result = ordo.pytorch_schedule(
        problem, stages=stages, micro_batches=micro_batches, schedule=chosen, modulo=groups
    )
    result["schedule"], result["modulo"], result["predicted"] = chosen, groups, predicted
    return result


def _candidates(problem, stages: int, micro_batches: int, schedule: str, modulo):
    """The (schedule, modulo) pairs to simulate: ``schedule`` at ``modulo``, or for ``"auto"``
    every schedule; ``"auto"`` without a modulo also tries each schedule interleaved, two
    groups of units per rank (PyTorch's interleaved schedules), where the units suffice."""
    names = SCHEDULES if schedule == "auto" else (schedule,)
    pairs = [(name, modulo) for name in names]
    if schedule != "auto" or modulo is not None:
        return pairs
    contiguous = ordo.pytorch_schedule(
        problem, stages=stages, micro_batches=micro_batches, schedule=names[0]
    )
    groups = sum(len(units) for units in contiguous["stage_units"]) // (2 * stages)
    return pairs + [(name, groups) for name in names] if groups >= 1 else pairs


_plan_schedule = schedule  # `pipeline` has an argument of that name


def measure_p2p(
    group=None, sizes: tuple[int, int] = (1 << 10, 1 << 22), reps: int = 7
) -> tuple[float, float]:
    """``(fixed µs, µs per byte)`` of sending a tensor from one rank to another over the
    process group (what ``ordo.torch.profile(comm=...)`` takes): ranks 0 and 1 pass tensors of
    two sizes back and forth, half the median round trip of each fits the line; every rank
    calls it and gets rank 0's figures."""
    import torch.distributed as dist

    from ordo._process_group import from_rank0, global_rank, median_us

    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if world < 2:
        raise ordo.OrdoError("measure_p2p needs at least 2 ranks")
    peer = {0: 1, 1: 0}.get(rank)
    medians = []
    for size in sizes:
        tensor = torch.zeros(max(1, size // 4))

        def round_trip(tensor=tensor):
            if rank == 0:
                dist.send(tensor, global_rank(group, peer), group=group)
                dist.recv(tensor, global_rank(group, peer), group=group)
            elif rank == 1:
                dist.recv(tensor, global_rank(group, peer), group=group)
                dist.send(tensor, global_rank(group, peer), group=group)

        # Half a round trip; the first one, untimed, warms the connection.
        medians.append(median_us(round_trip, reps=reps, warmup=1, group=group) / 2)
    us_per_byte = max((medians[1] - medians[0]) / (sizes[1] - sizes[0]), 0.0)
    fixed = max(0.0, medians[0] - us_per_byte * sizes[0])
    fixed, us_per_byte = from_rank0([fixed, us_per_byte], group)
    return fixed, us_per_byte


def measure_compute_slowdown(
    module: nn.Module, example_inputs, *, loss_fn=None, group=None, reps: int = 5
) -> float:
    """How much slower rank 0 trains while every rank trains at once than while it trains
    alone, as a factor of at least 1: ranks that share a host's cores and memory slow each
    other (1 for ranks on hosts of their own), which a profile taken by one rank does not
    see. Each run is one forward and backward of ``module`` on ``example_inputs``
    (``loss_fn(output)``, default the sum of the outputs); the ratio of the medians of
    ``reps`` runs each way, each run started by a barrier; the module's gradients are left
    unset. Every rank calls it and gets rank 0's figure (``schedule(compute_slowdown=)`` takes
    it)."""
    import torch.distributed as dist

    from ordo._outputs import default_loss
    from ordo._process_group import from_rank0, median_us

    if reps < 1:
        raise ordo.OrdoError(f"reps={reps}: at least one timed run")
    if dist.get_world_size(group) < 2:
        return 1.0
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    rank = dist.get_rank(group)

    def train() -> None:
        output = module(*inputs)
        (loss_fn(output) if loss_fn else default_loss(output)).backward()
        module.zero_grad(set_to_none=True)

    # Alone: the other ranks wait in the next run's barrier (blocked, not spinning).
    alone = median_us(train if rank == 0 else lambda: None, reps=reps, warmup=1, group=group)
    together = median_us(train, reps=reps, warmup=1, group=group)
    return from_rank0([max(1.0, together / alone)], group)[0]


def measure_action_overhead(
    group=None, *, micro_batches: int = 8, comm: tuple[float, float] | None = None, reps: int = 7
) -> float:
    """What PyTorch's pipeline runtime spends per action beyond the work ordo predicts, in
    µs: a pipeline of tiny blocks (one per rank, ``1f1b``, ``micro_batches``) run on the
    group, its median step less ordo's prediction of it (with ``comm``, default
    ``measure_p2p``), per action of a rank. Every rank calls it and gets rank 0's figure."""
    import torch.distributed as dist

    from ordo._process_group import from_rank0, global_rank, median_us

    world, rank = dist.get_world_size(group), dist.get_rank(group)
    comm = measure_p2p(group) if comm is None else comm
    torch.manual_seed(0)
    tiny = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(world)])
    x, y = torch.randn(2 * micro_batches, 8), torch.randn(2 * micro_batches, 8)
    box: list[dict | None] = [None]
    if rank == 0:
        import ordo.torch as ot

        profiled = ot.profile(tiny, x[:2], reps=3, warmup=1, split_backward="pipelining", comm=comm)
        box[0] = _plan_schedule(
            profiled, stages=world, micro_batches=micro_batches, schedule="1f1b"
        )
    dist.broadcast_object_list(box, src=global_rank(group, 0), group=group)
    plan = box[0]
    runner = PipelineRunner(stages_of(tiny, plan, rank), plan, loss_fn=_mse, group=group)
    measured = median_us(
        lambda: runner.step(inputs=x, target=y),
        reps=reps,
        warmup=2,
        group=group,
        fence_after=True,
    )
    per_action = max(0.0, (measured - plan["predicted"]["1f1b"][0]) / len(plan["actions"][0]))
    return from_rank0([per_action], group)[0]


def _mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((output - target) ** 2).mean()


def pipeline(
    module: nn.Module,
    example_inputs: torch.Tensor,
    *,
    micro_batches: int,
    loss_fn,
    stages: int | None = None,
    schedule: str = "auto",
    modulo: int | None = None,
    memory: int | str | None = None,
    group=None,
    reps: int = 3,
) -> PipelineRunner:
    """Every rank's one call (under ``torchrun``): rank 0 profiles ``module`` on the first
    micro-batch of ``example_inputs`` (one step's batch), its transfers costed as the group
    sends them (``measure_p2p``), each action charged what the runtime spends on it
    (``measure_action_overhead``) and the work stretched by what ranks computing at once cost
    each other (``measure_compute_slowdown``), plans its pipeline over ``stages``
    ranks (default: the group's size) with ``schedule`` (see ``schedule``), and sends the plan
    to every rank; each rank gets a ``PipelineRunner`` of its stages (``runner.schedule`` is
    the plan, ``runner.parameters()`` its stages' parameters, for the optimizer)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    stages = world if stages is None else stages
    if stages != world:
        raise ordo.OrdoError(f"stages={stages}: the process group has {world} ranks, one per stage")
    if micro_batches < 1 or example_inputs.shape[0] % micro_batches:
        raise ordo.OrdoError(
            f"inputs: a batch of {example_inputs.shape[0]} does not split into "
            f"{micro_batches} micro-batches"
        )
    rank = dist.get_rank(group)
    micro = micro_of(example_inputs, micro_batches)
    comm = measure_p2p(group) if world > 1 else (0.0, 0.0)
    overhead = (
        measure_action_overhead(group, micro_batches=micro_batches, comm=comm) if world > 1 else 0.0
    )
    slowdown = measure_compute_slowdown(module, micro, group=group, reps=reps)
    if slowdown > _MOST_SLOWDOWN:
        # A busy machine (other work on the ranks' cores) can measure hundreds: the figure
        # only shapes the predictions, so the plan is made, at the most it takes, and said so.
        warnings.warn(
            f"ranks measured {slowdown:.0f}x slower together than alone: the machine is busy; "
            f"the predictions assume {_MOST_SLOWDOWN:.0f}x",
            stacklevel=2,
        )
        slowdown = _MOST_SLOWDOWN
    box: list[dict | None] = [None]
    if rank == 0:  # profiles are timings: one rank plans, so that every rank runs one plan
        import ordo.torch as ot

        profiled = ot.profile(
            module, micro, reps=reps, warmup=1, split_backward="pipelining", comm=comm
        )
        box[0] = _plan_schedule(
            profiled,
            stages=stages,
            micro_batches=micro_batches,
            schedule=schedule,
            modulo=modulo,
            memory=memory,
            action_overhead_us=overhead,
            compute_slowdown=slowdown,
        )
    from ordo._process_group import global_rank

    dist.broadcast_object_list(box, src=global_rank(group, 0), group=group)
    plan = box[0]
    # An nn.Sequential is cut at its children; another module by PyTorch's tracer.
    traced = None if isinstance(module, nn.Sequential) else micro_of(example_inputs, micro_batches)
    stages = stages_of(module, plan, rank, example_inputs=traced, group=group)
    return PipelineRunner(stages, plan, loss_fn=loss_fn, group=group)


def micro_of(inputs: torch.Tensor, micro_batches: int) -> torch.Tensor:
    """The first micro-batch of a step's ``inputs``."""
    return inputs[: inputs.shape[0] // micro_batches]


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


class PipelineRunner:
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
        from torch.distributed.pipelining.stage import _PipelineStageBase

        if not stages:
            raise ordo.OrdoError("this rank runs no stage of the schedule")
        self.schedule, self.stages = schedule, stages
        self.num_stages = len(schedule["stage_rank"])
        self.micro_batches = _micro_batches(schedule)
        self.pipeline_stages = [
            module
            if isinstance(module, _PipelineStageBase)  # built by PyTorch's tracer's split
            else PipelineStage(module, index, self.num_stages, torch.device(device), group=group)
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

    def parameters(self) -> list[nn.Parameter]:
        """The parameters of this rank's stages."""
        return [
            p for _, module in self.stages for p in getattr(module, "submod", module).parameters()
        ]

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
    micro-batches' losses on the last stage's rank, else an empty list. (``PipelineRunner`` builds
    the runtime once for many steps.)"""
    # Before anything is set up (PyTorch's stages need a process group).
    _check_batches(schedule, _micro_batches(schedule), stages, inputs, target)
    runner = PipelineRunner(stages, schedule, loss_fn=loss_fn, device=device, group=group)
    return runner.step(inputs=inputs, target=target)
