"""ordo's data-parallel plans (buckets, reverse first-k) against PyTorch's
DistributedDataParallel, side by side in one run (under torchrun; one thread per process):

    torchrun --standalone --nproc-per-node 2 crates/ordo-py/bench/data_parallel.py

For each engine (DDP; ordo with k = 0; ordo with k chosen by its simulator; ordo deferring
every layer): blocks of --steps training steps (SGD with momentum), the engines taking turns
block by block, each block ending with every update applied (``flush``); the median step
time of each engine over --rounds blocks, its ratio to DDP's, and ordo's predicted steady
step (simulated from rank 0's profile and the measured all-reduce network).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import ordo.data_parallel as odp
import ordo.torch as ot


def mlp(layers: int, width: int) -> nn.Sequential:
    torch.manual_seed(0)
    body = [m for _ in range(layers) for m in (nn.Linear(width, width), nn.Tanh())]
    return nn.Sequential(*body, nn.Linear(width, 10))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64, help="per rank")
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    parser.add_argument("--steps", type=int, default=5, help="per timed block")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, args.width, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)
    loss_fn = nn.CrossEntropyLoss()
    network = odp.measure_network()
    bucket_bytes = int(args.bucket_mb * (1 << 20))

    plans = {}
    if rank == 0:
        profiled = ot.profile(mlp(args.layers, args.width), x, split_backward=True, reps=5)
        for k in (0, "auto", args.layers + 1):
            plans[k] = odp.plan(
                profiled, replicas=world, first_k=k, bucket_bytes=bucket_bytes, network=network
            )

    engines = {}
    for name, k in [
        ("DDP", None),
        ("ordo k=0", 0),
        ("ordo k=auto", "auto"),
        ("ordo k=all", args.layers + 1),
    ]:
        model = mlp(args.layers, args.width)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        if k is None:
            wrapped = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
            flush = None
        else:
            wrapped = odp.DataParallel(model, plans.get(k), optimizer=optimizer)
            flush = wrapped.flush
            if k == "auto":
                name = f"ordo k=auto ({wrapped.first_k})"
        engines[name] = (wrapped, optimizer, flush, plans.get(k))

    def block(wrapped, optimizer, flush) -> float:
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.steps):
            optimizer.zero_grad()
            loss_fn(wrapped(x), y).backward()
            optimizer.step()
        if flush is not None:
            flush()
        dist.barrier()
        return (time.perf_counter() - start) / args.steps

    times = {name: [] for name in engines}
    for engine in engines.values():  # warm-up
        block(*engine[:3])
    for _ in range(args.rounds):
        for name, engine in engines.items():
            times[name].append(block(*engine[:3]))

    if rank == 0:
        gbps, latency = network
        print(
            f"{world} ranks, {args.layers} x Linear({args.width}) + Tanh, batch {args.batch} per "
            f"rank, buckets {args.bucket_mb} MB; all-reduce network {gbps:.2f} Gbit/s, "
            f"{latency:.0f} us latency"
        )
        base = statistics.median(times["DDP"])
        print(f"{'engine':24} {'step ms':>8} {'vs DDP':>7} {'predicted ms':>13}")
        for name, (_, _, _, plan) in engines.items():
            median = statistics.median(times[name])
            predicted = f"{plan['predicted']['chosen'] / 1e3:13.1f}" if plan else f"{'':13}"
            print(f"{name:24} {median * 1e3:8.1f} {base / median:6.2f}x {predicted}")
        tried = plans["auto"]["predicted"]["tried"]
        print("simulated k -> step ms:", ", ".join(f"{k}: {us / 1e3:.1f}" for k, us, _ in tried))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
