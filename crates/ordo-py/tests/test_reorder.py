"""ordo.reorder_threads: the Assigner's reordering decision, on the seed's figures and on a
profiled PyTorch model placed by ordo; and the Rust bookkeeping that makes the same decision
during a step (``HostStep``): its waits, their timeout and the step's failure."""

import threading
import time

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


def placed_plan(device_of, device_order, edges=()):
    """A problem of one-microsecond layers (``device_of``'s keys, in order) and its plan
    placed by hand."""
    graph = ordo.LayerGraph("layers", comm=(0.0, 0.0))
    index = {name: graph.add_layer(name, op_type="Test", forward_us=1.0) for name in device_of}
    for producer, consumer in edges:
        graph.add_edge(index[producer], index[consumer])
    problem = ordo.Problem(graph.model(), ordo.Target.uniform(len(device_order)), mode="training")
    return problem, ordo.plan_placement(problem, device_of, device_order)


def host_step(reorder=True, criterion="gpu-topo"):
    """A -> B on device 0, C alone on device 1; the Assigner's Rust bookkeeping of one step."""
    from ordo._ordo import AssignerPlan

    device_of = {"A": 0, "B": 0, "C": 1}
    plan = AssignerPlan.of_plan(*placed_plan(device_of, [["A", "B"], ["C"]], [("A", "B")]))
    assert plan.layers == ["A", "B", "C"]
    modules = {name: i for i, name in enumerate(plan.modules)}
    return plan.step(reorder, criterion, [True] * 3), modules


def test_host_step_waits_for_submissions_and_names_what_never_came():
    step, module = host_step(reorder=False)
    # B reached before A (code the profile did not see): it runs on the host after A submits.
    layer, how = step.arrive(module["B"])
    assert how == 1
    with pytest.raises(
        ordo.OrdoError, match=r"layer `B` waited 0\.2 s for layers \[\"A\"\] to start"
    ):
        step.wait_submitted(layer, 0.2)
    assert step.unreached_dependency([layer]) == (layer, 0)
    # A thread waiting for A wakes when A submits, another one when the step fails.
    results = []
    waiter = threading.Thread(target=lambda: results.append(step.wait_submitted(layer, 30)))
    waiter.start()
    time.sleep(0.1)
    a, how_a = step.arrive(module["A"])
    assert how_a == 0
    step.mark_submitted(a)
    waiter.join(10)
    assert results == [True] and not waiter.is_alive()
    assert step.code_order() == ["B", "A"]

    failed, module = host_step()
    failed.arrive(module["C"])
    b = 1
    waiter = threading.Thread(target=lambda: results.append(failed.wait_submitted(b, 30)))
    failed.arrive(module["A"])
    failed.arrive(module["B"])
    waiter.start()
    time.sleep(0.1)
    failed.fail()
    waiter.join(10)
    assert results == [True, False] and not waiter.is_alive()


def test_host_step_refuses_calls_the_placement_lacks():
    step, module = host_step()
    step.arrive(module["A"])
    with pytest.raises(ordo.OrdoError, match=r"layer `A#1` is not in the placement"):
        step.arrive(module["A"])
    with pytest.raises(ordo.OrdoError, match=r"module 9: no such wrapped module"):
        step.arrive(9)
    with pytest.raises(ordo.OrdoError, match=r"timeout=-1"):
        step.wait_submitted(0, -1.0)
    # The layers the host never reached count as submitted at the end: nothing waits for them.
    step.release_unreached()
    assert step.unreached_dependency([0, 1, 2]) is None


def test_assigner_plans_need_a_placement_and_refuse_bad_steps():
    from ordo._ordo import AssignerPlan

    graph = ordo.LayerGraph("layers", comm=(0.0, 0.0), split_backward=True)
    graph.add_layer("A", op_type="Test", forward_us=1.0, persistent_bytes=4)
    problem = ordo.Problem(graph.training_model(), ordo.Target.uniform(1), mode="training-graph")
    unplaced = ordo.plan(problem, "inorder")
    with pytest.raises(ordo.OrdoError, match="the global order needs a placement"):
        AssignerPlan.of_plan(problem, unplaced)
    good = AssignerPlan.of_plan(*placed_plan({"A": 0}, [["A"]]))
    with pytest.raises(ordo.OrdoError, match="criterion `fastest`"):
        good.step(True, "fastest", [True])
    with pytest.raises(ordo.OrdoError, match="runs_inline has 2 entries for 1 layers"):
        good.step(True, "gpu-topo", [True, False])
