"""The Python package against the command line: the same facade reached two ways must agree
(placements, simulated steps, losses), and bad input raises OrdoError with ordo's message."""

import json
import os
import pathlib
import subprocess

import pytest

import ordo

ROOT = pathlib.Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "crates" / "ordo-cost" / "tests" / "fixtures"


def cli() -> str:
    """The `ordo` binary the tests compare against (ORDO_BIN, else the debug build)."""
    path = os.environ.get("ORDO_BIN") or str(ROOT / "target" / "debug" / "ordo")
    assert pathlib.Path(path).exists(), f"no ordo binary at {path}: build it or set ORDO_BIN"
    return path


def run_cli(*args: str) -> dict:
    out = subprocess.run([cli(), *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("algo", ["m-topo", "m-etf", "m-sct", "balanced"])
def test_placements_equal_the_command_line(algo):
    sample = str(SAMPLES / "inception_v3.json")
    model = ordo.Model.load(sample)
    problem = ordo.Problem(model, ordo.Target.uniform(4), mode="forward-only")
    placement = ordo.place(problem, algo)
    expected = run_cli(
        "place", sample, "--devices", "4", "--forward-only", "--algo", algo, "--json"
    )
    assert placement.algo == algo
    assert placement.device_of == expected["device_of"]
    assert placement.makespan_us == expected["makespan_us"]
    assert placement.peak_memory_bytes == expected["peak_memory_bytes"]
    written = json.loads(placement.to_json())
    assert written["format"] == "ordo.placement/1"
    assert written["device_of"] == expected["device_of"]
    # Every node is placed, on a device that exists, and each device's order holds its nodes.
    assert len(placement.device_of) == problem.nodes == model.nodes
    for device, nodes in enumerate(placement.order):
        assert all(placement.device_of[name] == device for name in nodes)


def test_simulated_steps_equal_the_command_line():
    model = ordo.Model.zoo("gnmt", small=True).training()
    for strategy, devices, args in [
        ("m-etf", 2, ["--algo", "m-etf"]),
        ("ooo", 1, ["--schedule", "ooo"]),
    ]:
        problem = ordo.Problem(model, ordo.Target.uniform(devices))
        args = ["--devices", str(devices), *args]
        planned = ordo.plan(problem, strategy)
        report = ordo.simulate(planned)
        expected = run_cli("simulate", "gnmt", "--small", "--train", *args, "--json")
        assert report.step_time_us == expected["step_time_us"], strategy
        assert report.peak_memory_bytes == expected["peak_memory_bytes"][: planned.devices]
        assert report.lower_bound_us <= report.step_time_us
        assert len(report.tasks) == planned.tasks
        assert json.loads(report.chrome_trace())["traceEvents"]
        assert report.gantt_svg().startswith("<svg")


def test_pipelines_and_data_parallel_plan_and_simulate():
    model = ordo.Model.zoo("bert_base", small=True).training()
    problem = ordo.Problem(model, ordo.Target.uniform(2))
    expected = run_cli(
        "compare",
        "bert_base",
        "--small",
        "--train",
        "--batch",
        "8",
        "--devices",
        "2",
        "--pipeline",
        "2",
        "--micro-batches",
        "4",
        "--json",
    )
    # The command line splits a batch of 8 into micro-batches of 2: the small variant's batch,
    # which the problem above was built at.
    for row in expected["schedules"]:
        schedule = row["schedule"]
        planned = ordo.plan(problem, "pipeline", stages=2, micro_batches=4, schedule=schedule)
        report = ordo.simulate(planned)
        assert report.step_time_us == row["step_time_us"], schedule
        assert report.peak_memory_bytes[:2] == row["peak_memory_bytes"], schedule
    dp = ordo.plan(ordo.Problem(model, ordo.Target.uniform(1)), "data-parallel", replicas=2)
    assert dp.devices == 2 and dp.placement is None


def test_training_losses_equal_the_command_line():
    model = ordo.Model.zoo("resnet50", small=True).training()
    problem = ordo.Problem(model, ordo.Target.uniform(2, cluster="cpu"))
    planned = ordo.plan(problem, "m-etf")
    runner = ordo.Runner(problem, planned, seed=0)
    losses = [runner.step() for _ in range(3)]
    expected = run_cli(
        "run",
        "resnet50",
        "--small",
        "--train",
        "--steps",
        "3",
        "--devices",
        "cpu:2",
        "--algo",
        "m-etf",
        "--roofline",
        "--warmup-seconds",
        "0",
        "--json",
    )
    # The same kernels in the same order per op: bitwise equal, whatever the placement.
    assert losses == pytest.approx(expected["losses"], rel=0, abs=0)
    assert losses[-1] < losses[0]
    assert runner.predict_us() > 0


def test_auto_reports_where_it_started_and_targets_take_memory_as_text():
    model = ordo.Model.zoo("transformer", small=True)
    target = ordo.Target.uniform(4, memory="64MiB")
    assert target.memory == [64 << 20] * 4
    problem = ordo.Problem(model, target)
    placement = ordo.place(problem, "auto", budget=0.05)
    assert placement.algo == "auto" and placement.winner
    assert max(placement.peak_memory_bytes) <= 64 << 20
    assert "roofline" in problem.costs


@pytest.mark.parametrize(
    "call, culprit",
    [
        (lambda: ordo.Model.zoo("no_such_model"), "no_such_model"),
        (lambda: ordo.Model.load("/no/such/file.onnx"), "/no/such/file.onnx"),
        (lambda: ordo.Model.zoo("resnet50", batch=0), "batch"),
        (lambda: ordo.Model.zoo("resnet50").training("lion"), "lion"),
        (lambda: ordo.Target.uniform(0), "devices"),
        (lambda: ordo.Target.uniform(2, memory="-5GiB"), "memory"),
        (lambda: ordo.Target.uniform(2, memory=0), "memory"),
        (lambda: ordo.Target.cluster("no-such-cluster"), "no-such-cluster"),
        (lambda: ordo.Target.uniform(2).with_profile("/no/such/profile.json"), "profile.json"),
        (lambda: ordo.place(_gnmt(), "m-foo"), "m-foo"),
        (lambda: ordo.place(_gnmt(), "auto", budget=float("nan")), "budget"),
        (lambda: ordo.place(_gnmt(), "m-sct", sct_threshold=-1), "sct_threshold"),
        (lambda: ordo.plan(_gnmt(), "pipeline", stages=2), "micro_batches"),
        (lambda: ordo.plan(_gnmt(), "pipeline", stages=2, micro_batches=2, schedule="x"), "x"),
        (lambda: ordo.plan(_gnmt(), "data-parallel", replicas=0), "replicas"),
        (lambda: ordo.simulate(ordo.plan(_gnmt(), "m-etf"), channel="carrier"), "carrier"),
        (lambda: ordo.Problem(_gnmt_model(), ordo.Target.uniform(2), mode="x"), "mode"),
        (lambda: ordo.Runner(_sample(), ordo.plan(_sample(), "m-etf")), "kernels"),
        (lambda: ordo.Runner(_gnmt(), ordo.plan(_gnmt(), "m-etf"), lr=float("inf")), "lr"),
    ],
)
def test_bad_input_raises_ordo_error_naming_the_culprit(call, culprit):
    with pytest.raises(ordo.OrdoError) as error:
        call()
    assert culprit.lower() in str(error.value).lower()


def _gnmt_model():
    return ordo.Model.zoo("gnmt", small=True).training()


def _gnmt():
    return ordo.Problem(_gnmt_model(), ordo.Target.uniform(2))


def _sample():
    model = ordo.Model.load(str(SAMPLES / "gnmt.json"))
    return ordo.Problem(model, ordo.Target.uniform(2), mode="forward-only")


def test_the_zoo_and_the_version():
    assert "resnet50" in ordo.zoo_models() and len(ordo.zoo_models()) == 12
    assert ordo.__version__
    assert repr(ordo.Model.zoo("gnmt", small=True)).startswith("ordo.Model(")


def test_symbolic_dimensions_of_an_onnx_file_take_sizes_by_name():
    path = str(ROOT / "crates" / "ordo-onnx" / "tests" / "fixtures" / "bad_symbolic_dim.onnx")
    with pytest.raises(ordo.OrdoError, match=r"`N` \(input `x`, axis 0: --batch\)"):
        ordo.Model.load(path)
    by_name = ordo.Model.load(path, dims={"N": 6})
    by_batch = ordo.Model.load(path, batch=6)
    assert by_name.nodes == by_batch.nodes == 2
    target = ordo.Target.uniform(1)
    forward = "forward-only"
    a = ordo.simulate(ordo.plan(ordo.Problem(by_name, target, mode=forward), "inorder"))
    b = ordo.simulate(ordo.plan(ordo.Problem(by_batch, target, mode=forward), "inorder"))
    assert a.peak_memory_bytes == b.peak_memory_bytes, "the same shapes either way"
    smaller = ordo.Model.load(path, dims={"N": 3})
    c = ordo.simulate(ordo.plan(ordo.Problem(smaller, target, mode=forward), "inorder"))
    assert c.peak_memory_bytes[0] * 2 == a.peak_memory_bytes[0], "N=3 holds half of N=6"
    with pytest.raises(ordo.OrdoError, match="not one"):
        ordo.Model.load("resnet50", dims={"N": 6})


def test_a_data_dependent_size_is_planned_at_its_largest_and_noted():
    path = str(ROOT / "crates" / "ordo-onnx" / "tests" / "fixtures" / "bad_data_dependent.onnx")
    model = ordo.Model.load(path)
    assert len(model.notes) == 1 and "node `nonzero`" in model.notes[0], model.notes
    assert "planned at its largest" in model.notes[0]
    assert ordo.Model.zoo("gnmt", small=True).notes == []


def test_a_run_time_if_is_noted_and_plans_both_branches():
    fixtures = ROOT / "crates" / "ordo-onnx" / "tests" / "fixtures"
    model = ordo.Model.load(str(fixtures / "control_flow.onnx"))
    assert len(model.notes) == 1 and "node `if_runtime`" in model.notes[0], model.notes
    assert "both branches are computed" in model.notes[0]
    assert ordo.Model.load(str(fixtures / "control_flow_unrolled.onnx")).notes == []
    assert model.runnable, "the If's Where and the unrolled loops have kernels"


def test_frozen_weights_of_an_onnx_file_train_as_the_command_line_says():
    fixtures = ROOT / "crates" / "ordo-onnx" / "tests" / "fixtures"
    path = str(fixtures / "convnet.onnx")
    expected = run_cli("inspect", path, "--freeze", "conv2.weight", "--json")["params"]
    assert run_cli("inspect", path, "--json")["params"] - expected == 16 * 8 * 3 * 3
    # masks.onnx ends in its loss: its one weight frozen, nothing is left to train.
    masks = str(fixtures / "masks.onnx")
    assert ordo.Model.load(masks).training().is_training
    with pytest.raises(ordo.OrdoError, match="no trainable parameters"):
        ordo.Model.load(masks, frozen={"w"}).training()
    with pytest.raises(ordo.OrdoError, match="did you mean `conv2.weight`"):
        ordo.Model.load(path, frozen={"conv2.weigth"})
    with pytest.raises(ordo.OrdoError, match="not one"):
        ordo.Model.load("resnet50", frozen={"fc.weight"})


def test_errors_name_parameters_as_python_does():
    """The facade's parameter errors reach Python as keywords, never as command-line flags."""
    model = ordo.Model.zoo("resnet50", small=True)
    with pytest.raises(ordo.OrdoError, match=r"drop loss to train from it"):
        model.training(loss="cross-entropy")
    with pytest.raises(ordo.OrdoError, match=r"loss=mse: expected cross-entropy"):
        model.training(loss="mse")
    with pytest.raises(ordo.OrdoError, match=r"^micro_batches must be at least 1$"):
        ordo.pytorch_schedule(
            ordo.Problem(model.training(), ordo.Target.uniform(2)), stages=2, micro_batches=0
        )
    with pytest.raises(ordo.OrdoError, match=r"schedule=gpipe disagrees with the strategy, ooo"):
        ordo.plan(ordo.Problem(model.training(), ordo.Target.uniform(1)), "ooo", schedule="gpipe")


def test_transformers_of_any_size_from_a_hugging_face_config_or_fields():
    """A Hugging Face ``config.json`` (LLaMA-2 70B's, with grouped-query attention) and the
    same architecture by its fields make the same graph; its small variant trains."""
    path = ROOT / "crates/ordo-models/tests/configs/llama-2-70b-hf.json"
    from_file = ordo.Model.load(str(path), seq_len=16)
    fields = "llama:layers=80,hidden=8192,heads=64,kv_heads=8,intermediate=28672"
    assert ordo.Model.load(fields, seq_len=16).nodes == from_file.nodes
    with pytest.raises(ordo.OrdoError, match="kv_heads 7 does not divide heads 64"):
        ordo.Model.load("llama:heads=64,kv_heads=7")
    small = ordo.Model.load(str(path), small=True).training(optimizer="adam")
    problem = ordo.Problem(small, ordo.Target.uniform(1), mode="training-graph")
    runner = ordo.Runner(problem, ordo.plan(problem, "ooo"))
    losses = [runner.step() for _ in range(3)]
    assert losses[-1] < losses[0]


def test_mixed_precision_is_planned_and_simulated_but_not_run():
    model = ordo.Model.zoo("gpt2_small", small=True).training()
    fast = ordo.Model.zoo("gpt2_small").training(optimizer="adam")
    times = {}
    for precision in ["fp32", "bf16"]:
        target = ordo.Target.uniform(1, cluster="a100x8-nvlink")
        problem = ordo.Problem(fast.in_precision(precision), target, mode="training-graph")
        times[precision] = ordo.simulate(ordo.plan(problem, "inorder")).step_time_us
    # Tensor cores at 312 TFLOP/s against 19.5 for fp32: the step is several times faster.
    assert times["fp32"] > 4 * times["bf16"], times
    bf16 = model.in_precision("bf16")
    problem = ordo.Problem(bf16, ordo.Target.uniform(1), mode="training-graph")
    with pytest.raises(ordo.OrdoError, match="mixed precision is planned and simulated, not run"):
        ordo.Runner(problem, ordo.plan(problem, "ooo"))
    with pytest.raises(ordo.OrdoError, match="precision `fp8`"):
        model.in_precision("fp8")


def test_a_plan_of_every_replica_is_bounded_where_a_simulation_is_not():
    """A plan holds every replica's tasks, so a hundred thousand replicas are refused (they
    used to end the process in an allocation failure); the steady state by symmetry is not."""
    model = ordo.Model.zoo("gpt2_small", small=True).training()
    problem = ordo.Problem(model, ordo.Target.uniform(1), mode="training-graph")
    with pytest.raises(ordo.OrdoError, match="replicas=100000: a plan of every replica"):
        ordo.plan(problem, "data-parallel", replicas=100000)


def test_copies_past_a_plans_size_are_refused_before_anything_is_allocated():
    """Micro-batches times a graph's nodes past a plan's 2^23 tasks are refused at once (they
    used to run for hours or end the process in an allocation failure), naming the count."""
    model = ordo.Model.zoo("resnet50", small=True).training()
    problem = ordo.Problem(model, ordo.Target.uniform(2), mode="training-graph")
    with pytest.raises(ordo.OrdoError, match=r"100000 micro-batches of a graph of \d+ nodes"):
        ordo.plan(problem, "pipeline", stages=2, micro_batches=100000)
    with pytest.raises(ordo.OrdoError, match="at most 8388608"):
        ordo.pytorch_schedule(problem, stages=2, micro_batches=10**6)


def test_a_plan_runs_only_on_the_problem_it_fits():
    """A plan made for three devices, or for more memory than the problem gives, is refused
    by the runner with what differs, instead of running."""
    model = ordo.Model.zoo("resnet50", small=True).training()
    two, three = (
        ordo.Problem(model, ordo.Target.uniform(n), mode="training-graph") for n in (2, 3)
    )
    with pytest.raises(ordo.OrdoError, match="runs on 3 devices; the problem .* has 2"):
        ordo.Runner(two, ordo.plan(three, "m-etf"))
    small = ordo.Problem(model, ordo.Target.uniform(2, memory="64KiB"), mode="training-graph")
    with pytest.raises(ordo.OrdoError, match=r"at its peak on device \d, more than the 64 KiB"):
        ordo.Runner(small, ordo.plan(two, "m-etf"))
    ordo.Runner(two, ordo.plan(two, "m-etf"))  # its own problem: runs
