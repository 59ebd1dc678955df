"""A short distributed training run on one GPU for CUDA's compute-sanitizer: a branching
module on three logical devices (three streams, events, transfer streams), two steps, the
result checked against the module on the default stream.

    compute-sanitizer --tool racecheck python crates/ordo-py/bench/gpu_sanitize.py
"""

from __future__ import annotations

import copy

import torch
from torch import nn

import ordo.torch as ot


class Branches(nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.left = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.right = nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU())
        self.head = nn.Linear(16 * 8 * 8, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        h = self.stem(x)
        both = torch.cat([self.left(h), self.right(h)], dim=1)
        return self.norm(self.head(both.flatten(1)).softmax(-1))


def main() -> None:
    torch.manual_seed(0)
    gpu = torch.device("cuda", 0)
    net = Branches()
    x = torch.randn(4, 3, 8, 8)
    profiled = ot.profile(net, x, reps=1, warmup=0)
    layers = profiled.layers
    device_of = {layer: i % 3 for i, layer in enumerate(layers)}
    placement = ot.Placement.of(profiled, device_of, devices=3)
    reference = copy.deepcopy(net).to(gpu)
    dist = ot.distribute(copy.deepcopy(net), placement, devices=["cuda:0"] * 3)
    dist._assigner.copy_between_logical_devices = True
    for step in range(2):
        x = torch.randn(4, 3, 8, 8, device=gpu)
        outputs = []
        for module in (reference, dist):
            module.zero_grad(set_to_none=True)
            out = module(x)
            out.sum().backward()
            outputs.append(out.detach())
        assert torch.equal(outputs[0], outputs[1]), f"step {step}: outputs differ"
    torch.cuda.synchronize()
    print(
        f"ok: {len(layers)} layers on 3 streams, {len(dist._assigner.transfers)} transfer "
        f"streams, 2 steps equal to the default stream's"
    )


if __name__ == "__main__":
    main()
