"""A pipeline step under torchrun in which one rank dies or stalls (for test_pipelining.py).

torchrun --standalone --nproc-per-node 2 pipeline_fault.py --mode kill|stall --timeout 10
"""

import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch import nn

import ordo
import ordo.pipelining as op


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["kill", "stall"], required=True)
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(4)])
    problem = ordo.Problem(
        ordo.Model.zoo("transformer", small=True, batch=2).training(), ordo.Target.uniform(2)
    )
    plan = ordo.pytorch_schedule(problem, stages=2, micro_batches=4, schedule="1f1b")
    stages = op.stages_of(net, plan, rank)
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    for step in range(3):
        if rank == 1 and step == 1:
            if args.mode == "kill":
                os._exit(3)
            time.sleep(3600)
        op.step(stages, plan, inputs=x, target=y, loss_fn=lambda o, t: ((o - t) ** 2).mean())
        print(f"rank {rank} finished step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
