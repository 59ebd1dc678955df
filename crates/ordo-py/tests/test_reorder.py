"""ordo.reorder_threads: the Assigner's reordering decision, on the seed's figures and on a
profiled PyTorch model placed by ordo."""

import pytest
import torch
from torch import nn

import ordo
import ordo.torch as ot


def test_figure_2_global_and_gpu_wise():
    parents = {"B": ["A"], "C": ["A"], "D": ["C"], "E": ["B"], "F": ["D", "E"]}
    common = dict(
        code_order=list("ABCDEF"),
        parents=parents,
        device_of=dict.fromkeys("ABCDEF", 0),
        device_order=[list("ABECDF")],
    )
    assert ordo.reorder_threads(**common) == ["C", "D"]
    global_order = list("ABECDF")
    spawned = ordo.reorder_threads(**common, criterion="global-topo", global_order=global_order)
    assert spawned == ["C", "D"]


def test_figure_3_gpu_wise_spawns_three_where_global_spawns_five():
    parents = {"B": ["A"], "C": ["B"], "D": ["C"], "E": ["D"], "F": ["E"]}
    device_of = {"A": 0, "B": 0, "C": 0, "D": 1, "E": 0, "F": 0, "G": 1}
    common = dict(
        code_order=list("ABCDEFG"),
        parents=parents,
        device_of=device_of,
        device_order=[list("ABCEF"), list("GD")],
    )
    assert ordo.reorder_threads(**common) == ["D", "E", "F"]
    globally = ordo.reorder_threads(**common, criterion="global-topo", global_order=list("AGBCDEF"))
    assert globally == ["B", "C", "D", "E", "F"]


def test_a_profiled_model_placed_in_code_order_needs_no_thread():
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
    profiled = ot.profile(net, torch.randn(4, 8), reps=1, warmup=0, comm=(100.0, 0.0))
    problem = ordo.Problem(profiled.model(), ordo.Target.uniform(2), mode="training")
    placement = ordo.place(problem, "m-etf")
    parents = {}
    for producer, consumer in profiled.edges:
        parents.setdefault(consumer, []).append(producer)
    spawned = ordo.reorder_threads(profiled.layers, parents, placement.device_of, placement.order)
    assert spawned == [], "a chain's code order is every device's order"


@pytest.mark.parametrize(
    "change, culprit",
    [
        (dict(code_order=["A", "A"]), "twice"),
        (dict(parents={"B": ["Z"]}), "Z"),
        (dict(device_of={"A": 0}), "B"),
        (dict(device_order=[["A"], ["B", "Q"]]), "Q"),
        (dict(criterion="random"), "random"),
        (dict(criterion="global-topo"), "global_order"),
        (dict(device_of={"A": 0, "B": 0}), "placed on device 0"),
    ],
)
def test_bad_orders_are_ordo_errors(change, culprit):
    args = dict(
        code_order=["A", "B"],
        parents={"B": ["A"]},
        device_of={"A": 0, "B": 1},
        device_order=[["A"], ["B"]],
    )
    args.update(change)
    with pytest.raises(ordo.OrdoError, match=culprit):
        ordo.reorder_threads(**args)


def test_threads_needed_by_a_profiled_model_under_both_criteria():
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.resnet18(num_classes=10)
    profiled = ot.profile(model, torch.randn(2, 3, 64, 64), reps=1, warmup=0, comm=(20.0, 1e-4))
    problem = ordo.Problem(profiled.model(), ordo.Target.uniform(2), mode="training")
    for algo in ["m-etf", "m-sct", "round-robin"]:
        needed = ot.threads_needed(profiled, ordo.plan(problem, algo))
        assert set(needed) == {"gpu-topo", "global-topo"}
        for layers in needed.values():
            assert set(layers) <= set(profiled.layers)
    chain = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    chained = ot.profile(chain, torch.randn(2, 8), reps=1, warmup=0, comm=(1.0, 0.0))
    chain_problem = ordo.Problem(chained.model(), ordo.Target.uniform(2), mode="training")
    needed = ot.threads_needed(chained, ordo.plan(chain_problem, "round-robin"))
    assert needed == {"gpu-topo": [], "global-topo": []}, "a chain's code order is its order"
    with pytest.raises(ordo.OrdoError, match="placed plan"):
        ot.threads_needed(
            chained, ordo.plan(ordo.Problem(chained.model(), ordo.Target.uniform(1)), "inorder")
        )
