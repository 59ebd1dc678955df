"""ordo's pipeline schedules in PyTorch's format: PyTorch's own parser, lowering and
simulator read what ordo writes, and PyTorch's runtime runs it across processes (Gloo) to the
gradients of single-process training on the same micro-batches."""

import os
import tempfile

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

import ordo

pipelining = pytest.importorskip("torch.distributed.pipelining.schedules")

SCHEDULES = ["gpipe", "1f1b", "fast-forward", "zb-h1", "zb-h2"]


def transformer_problem(stages: int, micro_batches: int) -> ordo.Problem:
    model = ordo.Model.zoo("transformer", small=True, batch=2).training()
    return ordo.Problem(model, ordo.Target.uniform(stages))


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("stages, micro_batches, modulo", [(2, 4, None), (2, 6, 1), (4, 8, None)])
def test_pytorch_reads_lowers_and_simulates_ordos_schedules(
    schedule, stages, micro_batches, modulo
):
    problem = transformer_problem(stages, micro_batches)  # 4 blocks
    plan = ordo.pytorch_schedule(
        problem, stages=stages, micro_batches=micro_batches, schedule=schedule, modulo=modulo
    )
    actions = {
        rank: [pipelining._Action.from_str(text) for text in row]
        for rank, row in enumerate(plan["actions"])
    }
    assert [[str(a) for a in row] for row in actions.values()] == plan["actions"]
    num_stages = len(plan["stage_rank"])
    kinds = {"F", "B"} if schedule in ("gpipe", "1f1b") else {"F", "I", "W"}
    for rank, row in actions.items():
        for action in row:
            assert plan["stage_rank"][action.stage_index] == rank
            assert action.computation_type.value in kinds
        # every local stage: each micro-batch's forward and backward exactly once
        local = [s for s, r in enumerate(plan["stage_rank"]) if r == rank]
        assert len(row) == len(local) * micro_batches * len(kinds)
    lowered = pipelining._add_send_recv(
        actions, stage_to_rank=lambda s: plan["stage_rank"][s], num_stages=num_stages
    )
    pipelining._simulate_comms_compute(
        lowered, stage_to_rank=lambda s: plan["stage_rank"][s], num_stages=num_stages
    )  # raises on a deadlock
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "schedule.csv")
        with open(path, "w") as f:
            f.write(plan["csv"])
        import csv

        with open(path, newline="") as f:
            assert [row for row in csv.reader(f)] == plan["actions"]


def blocks(units: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(units)])


def loss_fn(output, target):
    return ((output - target) ** 2).mean()


def run_rank(rank, world, init_file, plan, result_dir):
    import torch.distributed as dist

    import ordo.pipelining as op

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        units = sum(len(u) for u in plan["stage_units"])
        model = blocks(units)
        x, y = (
            torch.randn(8, 8, generator=torch.Generator().manual_seed(1)),
            torch.randn(8, 8, generator=torch.Generator().manual_seed(2)),
        )
        stages = op.stages_of(model, plan, rank)
        losses = op.step(stages, plan, inputs=x, target=y, loss_fn=loss_fn)
        grads = {
            f"{index}:{name}": p.grad
            for index, module in stages
            for name, p in module.named_parameters()
        }
        torch.save({"grads": grads, "losses": losses}, os.path.join(result_dir, f"{rank}.pt"))
    finally:
        dist.destroy_process_group()


def reference(units: int, micro_batches: int, plan):
    """Single-process training on the same micro-batches: the gradients of the mean loss,
    keyed as the ranks key them (stage index, parameter name in the stage)."""
    model = blocks(units)
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(8, 8, generator=torch.Generator().manual_seed(2))
    losses = []
    for xs, ys in zip(x.chunk(micro_batches), y.chunk(micro_batches)):
        loss = loss_fn(model(xs), ys)
        loss.backward()
        losses.append(loss.detach())
    grads, start = {}, 0
    children = list(model.children())
    for stage, units_of_stage in enumerate(plan["stage_units"]):
        stage_module = nn.Sequential(*children[start : start + len(units_of_stage)])
        for name, p in stage_module.named_parameters():
            grads[f"{stage}:{name}"] = p.grad / micro_batches
        start += len(units_of_stage)
    return grads, losses


@pytest.mark.parametrize(
    "schedule, modulo",
    [(s, None) for s in SCHEDULES] + [("1f1b", 1), ("zb-h1", 1)],
)
def test_pytorchs_runtime_runs_ordos_schedule_to_single_process_gradients(
    schedule, modulo, tmp_path
):
    """Bitwise: the same kernels on the same micro-batches, gradients accumulated over the
    micro-batches in the same order and scaled once at the end. With modulo allocation each
    rank runs two of the four stages (interleaved)."""
    stages, micro_batches = 2, 4
    plan = ordo.pytorch_schedule(
        transformer_problem(stages, micro_batches),
        stages=stages,
        micro_batches=micro_batches,
        schedule=schedule,
        modulo=modulo,
    )
    assert len(plan["stage_rank"]) == (4 if modulo else 2)
    init_file = tmp_path / "init"
    mp.spawn(
        run_rank,
        args=(stages, str(init_file), plan, str(tmp_path)),
        nprocs=stages,
        join=True,
    )
    units = sum(len(u) for u in plan["stage_units"])
    want_grads, want_losses = reference(units, micro_batches, plan)
    got_grads, got_losses = {}, []
    for rank in range(stages):
        result = torch.load(tmp_path / f"{rank}.pt")
        got_grads.update(result["grads"])
        got_losses += result["losses"]
    assert got_grads.keys() == want_grads.keys()
    for key, grad in want_grads.items():
        assert torch.equal(got_grads[key], grad), key
    assert torch.equal(torch.stack(got_losses), torch.stack(want_losses))
