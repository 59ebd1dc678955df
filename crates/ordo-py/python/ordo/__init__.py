"""ordo: plan, simulate and run deep-learning training across devices, out of order.

The Rust core as Python objects::

    import ordo

    model = ordo.Model.zoo("resnet50", small=True).training()
    problem = ordo.Problem(model, ordo.Target.uniform(2, cluster="cpu"))
    planned = ordo.plan(problem, "m-etf")
    print(ordo.simulate(planned).step_time_us)
    runner = ordo.Runner(problem, planned)
    print(runner.step())

Every error is an ``ordo.OrdoError`` whose message names what is at fault.
"""

from ordo._ordo import (
    LayerGraph,
    Model,
    OrdoError,
    Placement,
    Planned,
    Problem,
    Report,
    Runner,
    Target,
    __version__,
    data_parallel_plan,
    global_order,
    place,
    plan,
    plan_parallel,
    plan_placement,
    pytorch_schedule,
    reorder_threads,
    simulate,
    zoo_models,
)

__all__ = [
    "LayerGraph",
    "Model",
    "OrdoError",
    "Placement",
    "Planned",
    "Problem",
    "Report",
    "Runner",
    "Target",
    "__version__",
    "data_parallel_plan",
    "global_order",
    "place",
    "plan",
    "plan_parallel",
    "plan_placement",
    "pytorch_schedule",
    "reorder_threads",
    "simulate",
    "zoo_models",
]
