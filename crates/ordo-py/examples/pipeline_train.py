"""Pipeline-parallel training with ordo's schedule on PyTorch's pipeline runtime.

    torchrun --standalone --nproc-per-node 2 crates/ordo-py/examples/pipeline_train.py \\
        --schedule auto --steps 3 --out /tmp/run

``ordo.pipelining.pipeline``: rank 0 profiles the model (one micro-batch) and plans the
pipeline with ordo; every rank gets the same schedule from it, builds its stages and trains
them with SGD under ``_PipelineScheduleRuntime`` (Gloo on CPUs). Each rank writes its
stages' parameters to ``OUT/rank<r>.pt``, the last stage's rank also the losses of every
step and micro-batch.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn

import ordo.pipelining as op


def model(blocks: int, width: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        *[nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(blocks)]
    )


def data(batch: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(1))
    y = torch.randn(batch, width, generator=torch.Generator().manual_seed(2))
    return x, y


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((output - target) ** 2).mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--schedule", default="auto", help="auto, or one of " + ", ".join(op.SCHEDULES)
    )
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--modulo", type=int, default=None)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    net = model(args.blocks, args.width)
    x, y = data(args.batch, args.width)
    runner = op.pipeline(
        net,
        x,
        micro_batches=args.micro_batches,
        loss_fn=loss_fn,
        schedule=args.schedule,
        modulo=args.modulo,
    )
    schedule, stages = runner.schedule, runner.stages
    if rank == 0:
        print(f"ordo chose {schedule['schedule']}: stages {schedule['stage_units']}", flush=True)
    optimizer = torch.optim.SGD(runner.parameters(), lr=args.lr)
    losses = []
    for _ in range(args.steps):
        optimizer.zero_grad()
        losses.append(runner.step(inputs=x, target=y))
        optimizer.step()
    os.makedirs(args.out, exist_ok=True)
    state = {f"{i}:{name}": p.detach() for i, m in stages for name, p in m.named_parameters()}
    torch.save(
        {"parameters": state, "losses": losses, "schedule": schedule},
        os.path.join(args.out, f"rank{rank}.pt"),
    )
    dist.barrier()  # every rank past its traffic before any tears its connections down
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
