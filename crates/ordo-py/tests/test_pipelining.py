"""ordo's pipeline schedules in PyTorch's format: PyTorch's own parser, lowering and
simulator read what ordo writes, and PyTorch's runtime runs it across processes (Gloo) to the
gradients of single-process training on the same micro-batches."""

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def run_rank(rank, world, init_file, jobs):
    """Runs each (plan, result directory) of `jobs` in turn on one process group (a launch
    costs seconds of imports, so the cases share one), then measures the compute slowdown
    with every rank pinned to one core (see `slowdown_on_one_core`)."""
    import torch.distributed as dist

    import ordo.pipelining as op

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        for plan, result_dir in jobs:
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
            dist.barrier()  # every rank past this plan's traffic before the next one's
        slowdown_on_one_core(rank, os.path.dirname(init_file))
    finally:
        dist.destroy_process_group()


def slowdown_on_one_core(rank, out_dir):
    """Pins this rank to the first core it may use (every rank to the same one), measures the
    compute slowdown and writes it to `slowdown_{rank}.txt` in `out_dir`."""
    import ordo.pipelining as op

    torch.set_num_threads(1)
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)])
    # A run of ~20 ms, several of the scheduler's time slices: rank 0 alone on the core for
    # its first slice finishes at about (2 - slice / run) times its time alone. At batch 64
    # (4 ms a run) that was 1.27 on one CI machine; at 512 it is near 2.
    factor = op.measure_compute_slowdown(net, torch.randn(512, 256), reps=5)
    assert all(p.grad is None for p in net.parameters())
    with open(os.path.join(out_dir, f"slowdown_{rank}.txt"), "w") as f:
        f.write(repr(factor))


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


RUNTIME_CASES = [(s, None) for s in SCHEDULES] + [("1f1b", 1), ("zb-h1", 1)]


@pytest.fixture(scope="module")
def runtime_runs(tmp_path_factory):
    """Every case of RUNTIME_CASES run by PyTorch's runtime on two processes: its plan and the
    directory of the ranks' gradients and losses, by (schedule, modulo)."""
    stages, micro_batches = 2, 4

    def plan_of(schedule, modulo):
        return ordo.pytorch_schedule(
            transformer_problem(stages, micro_batches),
            stages=stages,
            micro_batches=micro_batches,
            schedule=schedule,
            modulo=modulo,
        )

    return run_on_two_ranks(tmp_path_factory.mktemp("runtime"), RUNTIME_CASES, plan_of, run_rank)


def run_on_two_ranks(root, cases, plan_of, worker):
    """Each (schedule, modulo) of `cases` planned by `plan_of`, then all run by `worker` on one
    pair of processes (a launch costs seconds of imports): {case: (plan, the directory of the
    ranks' results)}."""
    jobs = {}
    for schedule, modulo in cases:
        directory = root / f"{schedule}-{modulo}"
        directory.mkdir()
        jobs[schedule, modulo] = (plan_of(schedule, modulo), str(directory))
    mp.spawn(worker, args=(2, str(root / "init"), list(jobs.values())), nprocs=2, join=True)
    return jobs


@pytest.mark.parametrize("schedule, modulo", RUNTIME_CASES)
def test_pytorchs_runtime_runs_ordos_schedule_to_single_process_gradients(
    schedule, modulo, runtime_runs
):
    """Bitwise: the same kernels on the same micro-batches, gradients accumulated over the
    micro-batches in the same order and scaled once at the end. With modulo allocation each
    rank runs two of the four stages (interleaved)."""
    stages, micro_batches = 2, 4
    plan, result_dir = runtime_runs[schedule, modulo]
    assert len(plan["stage_rank"]) == (4 if modulo else 2)
    tmp_path = Path(result_dir)
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


class Residual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc, self.act = nn.Linear(width, width), nn.Tanh()

    def forward(self, h):
        return h + self.act(self.fc(h))


class NotSequential(nn.Module):
    """Blocks in a ModuleList called in a loop, an embedding and a head around them: a model
    that only PyTorch's tracer can cut into stages."""

    def __init__(self, count: int = 4) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([Residual(16) for _ in range(count)])
        self.head = nn.Linear(16, 8)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def run_traced_rank(rank, world, init_file, jobs):
    """Runs each (plan, result directory) of `jobs` in turn on one process group."""
    import torch.distributed as dist

    import ordo.pipelining as op

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        for plan, result_dir in jobs:
            x, y = traced_data()
            micro = x[: x.shape[0] // op._micro_batches(plan)]
            stages = op.stages_of(NotSequential(), plan, rank, example_inputs=micro)
            runner = op.PipelineRunner(stages, plan, loss_fn=loss_fn)
            losses = runner.step(inputs=x, target=y)
            grads = {
                name: p.grad for _, stage in stages for name, p in stage.submod.named_parameters()
            }
            torch.save({"grads": grads, "losses": losses}, os.path.join(result_dir, f"{rank}.pt"))
            dist.barrier()
    finally:
        dist.destroy_process_group()


def traced_data():
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(8, 8, generator=torch.Generator().manual_seed(2))
    return x, y


TRACED_CASES = [("1f1b", None), ("zb-h2", None), ("zb-h1", 1)]
TRACED_MICRO_BATCHES = 4


@pytest.fixture(scope="module")
def traced_runs(tmp_path_factory):
    """Every case of TRACED_CASES planned from the module's profile and run on two processes:
    its plan and the directory of the ranks' results, by (schedule, modulo)."""
    import ordo.pipelining as op
    import ordo.torch as ot

    x, _ = traced_data()
    profiled = ot.profile(NotSequential(), x[:2], reps=1, warmup=0, split_backward=True)

    def plan_of(schedule, modulo):
        return op.schedule(
            profiled,
            stages=2,
            micro_batches=TRACED_MICRO_BATCHES,
            schedule=schedule,
            modulo=modulo,
        )

    return run_on_two_ranks(
        tmp_path_factory.mktemp("traced"), TRACED_CASES, plan_of, run_traced_rank
    )


@pytest.mark.parametrize("schedule, modulo", TRACED_CASES)
def test_a_module_that_is_not_sequential_is_split_by_pytorchs_tracer(schedule, modulo, traced_runs):
    """Stage boundaries from ordo's plan of the module's profile (its numbered blocks), the
    module cut there by PyTorch's tracer: gradients and losses equal one process's on the
    same micro-batches, bitwise."""
    micro_batches = TRACED_MICRO_BATCHES
    x, y = traced_data()
    plan, result_dir = traced_runs[schedule, modulo]
    tmp_path = Path(result_dir)
    assert plan["stage_units"][1][0].startswith("blocks.")
    model = NotSequential()
    want_losses = []
    for xs, ys in zip(x.chunk(micro_batches), y.chunk(micro_batches)):
        loss = loss_fn(model(xs), ys)
        loss.backward()
        want_losses.append(loss.detach())
    got_grads, got_losses = {}, []
    for rank in range(2):
        result = torch.load(tmp_path / f"{rank}.pt")
        got_grads.update(result["grads"])
        got_losses += result["losses"]
    want = {name: p.grad / micro_batches for name, p in model.named_parameters()}
    assert got_grads.keys() == want.keys()
    for name, grad in want.items():
        assert torch.equal(got_grads[name], grad), name
    assert torch.equal(torch.stack(got_losses), torch.stack(want_losses))


EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "pipeline_train.py")


def load_example():
    import importlib.util

    spec = importlib.util.spec_from_file_location("pipeline_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("schedule, modulo", [("auto", None), ("zb-h1", 1)])
def test_torchrun_trains_as_one_process_does(schedule, modulo, tmp_path):
    """`torchrun --nproc-per-node 2` of the example: ordo plans on rank 0, both ranks run the
    plan; after three SGD steps every parameter and every micro-batch's loss equal those of
    one process training on the same micro-batches (bitwise: one thread per process, as
    torchrun sets, in both). The example's own choice and its modulo flag; every schedule's
    numerics on PyTorch's runtime are `runtime_runs`' (one launch for all of them, where a
    torchrun launch of the example costs about 14 s on 2 cores)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node", "2", EXAMPLE, "--schedule", schedule, "--steps", "3"]
    command += ["--out", str(tmp_path)] + (["--modulo", str(modulo)] if modulo else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_trained_as_one_process(tmp_path, schedule, steps=3)


@pytest.mark.parametrize("ranks, per_rank, micro_batches", [(2, 2, 8), (2, 3, 4), (4, 2, 8)])
def test_interleaved_1f1b_is_megatrons_order_as_pytorch_writes_it(ranks, per_rank, micro_batches):
    """Under modulo allocation ordo's 1f1b is interleaved 1F1B in Megatron's order: each rank's
    actions are those of PyTorch's ScheduleInterleaved1F1B (its order computed by its own code,
    built without a process group)."""
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B

    import ordo.pipelining as op
    import ordo.torch as ot

    stages = ranks * per_rank
    profiled = ot.profile(blocks(stages), torch.randn(2, 8), reps=1, warmup=0, split_backward=True)
    plan = op.schedule(
        profiled, stages=ranks, micro_batches=micro_batches, schedule="1f1b", modulo=1
    )
    assert plan["stage_rank"] == [s % ranks for s in range(stages)]
    theirs = ScheduleInterleaved1F1B.__new__(ScheduleInterleaved1F1B)
    theirs.pp_group_size, theirs.n_local_stages, theirs.number_of_stages = ranks, per_rank, stages
    theirs._n_microbatches = theirs.n_microbatches = micro_batches
    theirs.microbatches_per_round = ranks
    for rank in range(ranks):
        theirs.rank = rank
        actions = theirs._calculate_single_rank_operations(rank)
        assert plan["actions"][rank] == [str(a) for a in actions if a is not None], rank


def test_ordos_choice_and_bad_pipelines_are_ordo_errors():
    import ordo.pipelining as op
    import ordo.torch as ot

    net = blocks(4)
    profiled = ot.profile(net, torch.randn(2, 8), reps=1, warmup=0, split_backward=True)
    plan = op.schedule(profiled, stages=2, micro_batches=4)
    assert plan["schedule"] in op.SCHEDULES
    fastest = min(plan["predicted"], key=lambda s: plan["predicted"][s][0])
    chosen = plan["schedule"] + ("" if plan["modulo"] is None else f", modulo {plan['modulo']}")
    assert chosen == fastest, "auto picks the fastest predicted schedule"
    # Each schedule contiguous and interleaved (4 blocks, 2 ranks: groups of 1 block).
    assert set(plan["predicted"]) == {*op.SCHEDULES, *(f"{s}, modulo 1" for s in op.SCHEDULES)}
    assert len(plan["stage_rank"]) == (2 if plan["modulo"] is None else 4)
    given = op.schedule(profiled, stages=2, micro_batches=4, modulo=2)
    assert set(given["predicted"]) == set(op.SCHEDULES), "a given modulo is kept"
    assert given["modulo"] == 2
    # A runtime's cost per action is charged on every rank's actions: a split backward has
    # more of them (F, I, W against F, B).
    charged = op.schedule(profiled, stages=2, micro_batches=4, action_overhead_us=1000)
    for name, (step_us, _) in charged["predicted"].items():
        actions = 12 if name.startswith("zb") else 8
        assert step_us >= plan["predicted"][name][0] + 1000 * actions / 2, name
    with pytest.raises(ordo.OrdoError, match="action_overhead_us=-1"):
        op.schedule(profiled, stages=2, micro_batches=4, action_overhead_us=-1)
    # Ranks that slow each other stretch the work they overlap, never more than the factor.
    slowed = op.schedule(profiled, stages=2, micro_batches=4, compute_slowdown=2.0)
    for name, (step_us, _) in slowed["predicted"].items():
        assert plan["predicted"][name][0] < step_us <= 2 * plan["predicted"][name][0] + 1, name
    for bad in (0.5, float("nan"), 101.0):
        with pytest.raises(ordo.OrdoError, match=f"compute_slowdown={bad}"):
            op.schedule(profiled, stages=2, micro_batches=4, compute_slowdown=bad)
    problem = transformer_problem(2, 4)
    cases = [
        (lambda: ordo.pytorch_schedule(problem, stages=0, micro_batches=4), "stages"),
        (lambda: ordo.pytorch_schedule(problem, stages=2, micro_batches=0), "micro_batches"),
        (lambda: ordo.pytorch_schedule(problem, stages=2, micro_batches=4, schedule="x"), "`x`"),
        (lambda: ordo.pytorch_schedule(problem, stages=9, micro_batches=4), "9 stages"),
        (lambda: op.schedule(profiled, stages=1, micro_batches=4), "at least 2 stages"),
        (lambda: op.schedule(profiled, stages=2, micro_batches=4, memory=1000), "no schedule fits"),
        (lambda: op.schedule(profiled, stages=5, micro_batches=4), "5 stages"),
        (lambda: op.stages_of(blocks(3), plan, 0), "the module has 3"),
        (lambda: op.stages_of(net, plan, 2), "rank 2"),
        (lambda: op.stages_of(NotSequential(), plan, 0), "pass example_inputs"),
        (
            lambda: op.stages_of(NotSequential(), plan, 0, example_inputs=torch.randn(2, 8)),
            "which is not a submodule of the NotSequential",
        ),
        (
            lambda: op.step(
                op.stages_of(net, plan, 0),
                plan,
                inputs=torch.randn(6, 8),
                target=None,
                loss_fn=None,
            ),
            "a batch of 6 does not split into 4 micro-batches",
        ),
    ]
    unsplit = ot.profile(net, torch.randn(2, 8), reps=1, warmup=0)
    cases.append((lambda: op.schedule(unsplit, stages=2, micro_batches=4), "split_backward=True"))
    for call, message in cases:
        with pytest.raises(ordo.OrdoError, match=re.escape(message)):
            call()


def test_the_compute_slowdown_sees_ranks_sharing_a_core(runtime_runs):
    """Two ranks pinned to one core take turns on it: training together takes about twice as
    long as alone, which ``measure_compute_slowdown`` reports (every rank rank 0's figure;
    measured by the ranks of ``runtime_runs`` after their cases)."""
    root = Path(next(iter(runtime_runs.values()))[1]).parent
    factors = [float((root / f"slowdown_{rank}.txt").read_text()) for rank in range(2)]
    assert factors[0] == factors[1]
    # About 2 on an idle machine; a run of the suite measured 1.24 once (the rank waiting in
    # the barrier while rank 0 trains alone does not always leave the core idle): the bound
    # checks that the sharing is seen (1 when it is not), not how much it costs.
    assert 1.15 <= factors[0] <= 3.0, factors


def test_pipeline_refuses_a_split_the_group_cannot_run(tmp_path):
    """``ordo.torch.pipeline`` checks its arguments against the process group (of one rank
    here) before profiling anything."""
    import torch.distributed as dist

    import ordo.torch as ot

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        net, x = blocks(4), torch.randn(8, 8)
        cases = [
            (dict(micro_batches=4, stages=2), "stages=2: the process group has 1 ranks"),
            (dict(micro_batches=3), "a batch of 8 does not split into 3 micro-batches"),
            (dict(micro_batches=4), "at least 2 stages"),
        ]
        for kwargs, message in cases:
            with pytest.raises(ordo.OrdoError, match=re.escape(message)):
                ot.pipeline(net, x, loss_fn=loss_fn, **kwargs)
        import ordo.pipelining as op

        assert op.measure_compute_slowdown(net, x) == 1.0, "one rank shares with no other"
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("mode", ["kill", "stall"])
def test_a_rank_that_dies_or_stalls_fails_the_others_within_the_timeout(mode):
    """Rank 1 exits (or sleeps) before its second step: torchrun exits with an error within
    the process group's timeout (5 s), never a hang. A stalled rank 1: rank 0 fails with an
    error naming the rank it waits for. A dead rank 1: torchrun names it (exit code 3) and
    stops rank 0, which by then may or may not have raised its own error (a race between
    torchrun's agent and the transport noticing the closed connection)."""
    script = os.path.join(os.path.dirname(__file__), "ranks", "pipeline_fault.py")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node", "2", script, "--mode", mode, "--timeout", "5"]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    output = done.stdout + done.stderr
    assert done.returncode != 0
    ours = "ordo.OrdoError: rank 0: the pipeline step failed" in output
    if mode == "stall" or ours:
        assert ours, output[-3000:]
        assert "with, [1], may have died or stalled" in output
    if mode == "kill":
        assert re.search(r"rank\s*: 1 \(local_rank: 1\)\s*exitcode\s*: 3", output), output[-3000:]
    assert "rank 0 finished step 0" in output and "rank 0 finished step 1" not in output
    assert elapsed < 90, f"{elapsed:.0f} s"


def assert_trained_as_one_process(out_dir, schedule: str, steps: int) -> None:
    """The example's two ranks wrote parameters and losses equal, bitwise, to those of one
    process training on the same micro-batches for `steps` SGD steps."""
    example = load_example()
    ranks = [torch.load(out_dir / f"rank{r}.pt") for r in range(2)]
    plan = ranks[0]["schedule"]
    if schedule != "auto":
        assert plan["schedule"] == schedule
    micro_batches = 4
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        net = example.model(8, 32)
        x, y = example.data(16, 32)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
        want_losses = []
        for _ in range(steps):
            optimizer.zero_grad()
            step_losses = []
            for xs, ys in zip(x.chunk(micro_batches), y.chunk(micro_batches)):
                loss = example.loss_fn(net(xs), ys)
                loss.backward()
                step_losses.append(loss.detach())
            for p in net.parameters():
                p.grad /= micro_batches
            optimizer.step()
            want_losses.append(step_losses)
    finally:
        torch.set_num_threads(threads)
    want, start, children = {}, 0, list(net.children())
    for stage, units in enumerate(plan["stage_units"]):
        for name, p in nn.Sequential(*children[start : start + len(units)]).named_parameters():
            want[f"{stage}:{name}"] = p.detach()
        start += len(units)
    got = {**ranks[0]["parameters"], **ranks[1]["parameters"]}
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert torch.equal(got[key], value), key
    losses = [r["losses"] for r in ranks if r["losses"] and r["losses"][0]][0]
    assert all(torch.equal(torch.stack(g), torch.stack(w)) for g, w in zip(losses, want_losses))


def test_two_torchrun_nodes_rendezvous_on_localhost():
    """Multi-node: two `torchrun --nnodes 2` launches (one process each) rendezvous on
    127.0.0.1 and train as one process does."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        launches = []
        for node in range(2):
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2"]
            command += ["--node-rank", str(node), "--nproc-per-node", "1"]
            command += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}"]
            command += ["--rdzv-id", "ordo-test", EXAMPLE, "--schedule", "zb-h1"]
            command += ["--steps", "2", "--out", out]
            launches.append(
                subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                )
            )
        for launch in launches:
            output, _ = launch.communicate(timeout=300)
            assert launch.returncode == 0, output[-3000:]
        assert_trained_as_one_process(Path(out), "zb-h1", steps=2)
