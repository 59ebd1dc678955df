"""The placer's global order, computed in Rust (``ordo.global_order``), against the Python
implementation it replaced: a topological order of the layer graph and the device orders
together, earliest simulated start first, then the profile's order."""

import heapq

import pytest
import torch
from test_distribute import random_dag_placement

import ordo
import ordo.torch as ot


def merged_order(profiled, device_of, device_order, start) -> list[str]:
    """The Python implementation of ``_placement._merged_order`` before it moved to Rust."""
    position = {layer: i for i, layer in enumerate(profiled.layers)}
    successors: dict[str, set[str]] = {layer: set() for layer in profiled.layers}
    for producer, consumer in profiled.edges:
        successors[producer].add(consumer)
    for order in device_order:
        for before, after in zip(order, order[1:]):
            successors[before].add(after)
    indegree = {layer: 0 for layer in profiled.layers}
    for targets in successors.values():
        for t in targets:
            indegree[t] += 1

    def key(layer: str):
        return (start.get(layer, 0.0), position[layer], layer)

    ready = [key(layer) for layer, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        layer = heapq.heappop(ready)[2]
        order.append(layer)
        for t in successors[layer]:
            indegree[t] -= 1
            if indegree[t] == 0:
                heapq.heappush(ready, key(t))
    return order


def python_order(placement) -> list[str]:
    start = {name: begin for name, begin, _ in ordo.simulate(placement.planned).tasks}
    return merged_order(placement.profiled, placement.device_of, placement.device_order, start)


@pytest.mark.parametrize("seed", range(30))
def test_random_placements_get_the_same_global_order(seed):
    placement = random_dag_placement(seed)[2]
    assert placement.global_order == python_order(placement)


@pytest.mark.parametrize("algorithm", ["m-topo", "m-etf", "m-sct"])
def test_placers_placements_get_the_same_global_order(algorithm):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        *[torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()) for _ in range(6)]
    )
    profiled = ot.profile(net, torch.randn(8, 16), reps=1, warmup=0)
    placement = ot.place(profiled, 3, algorithm)
    assert sorted(placement.global_order) == sorted(profiled.layers)
    assert placement.global_order == python_order(placement)


def test_a_plan_without_a_placement_has_no_global_order():
    model = ordo.Model.zoo("resnet50", small=True).training()
    problem = ordo.Problem(model, ordo.Target.uniform(1))
    planned = ordo.plan(problem, "ooo")
    with pytest.raises(ordo.OrdoError, match="needs a placement"):
        ordo.global_order(problem, planned)
