"""ordo.plan_parallel: the planner's answer in Python is the command line's."""

import json
import os
import subprocess

import pytest

import ordo

MODEL = "llama:layers=4,hidden=64,heads=4,intermediate=128,vocab=256"
ARGS = dict(cluster="h100x8-ib-ndr", nodes=1, batch=32, seq_len=16, max_micro_batches=4)


def test_the_planner_answers_as_the_command_line_does(tmp_path):
    plans = ordo.plan_parallel(MODEL, **ARGS)
    steps = [c["step_time_us"] for c in plans["candidates"]]
    assert steps == sorted(steps) and steps
    assert all(c["data"] * c["tensor"] * c["stages"] == 8 for c in plans["candidates"])
    assert any(c["tensor"] == 2 for c in plans["candidates"])
    assert any("units" in r["reason"] for r in plans["rejected"])
    best, export = plans["candidates"][0], plans["export"]
    for key in ("tensor_groups", "pipeline_groups", "data_groups"):
        ranks = sorted(r for group in export[key] for r in group)
        assert ranks == list(range(8)), key
    assert len(export["data_groups"]) == best["stages"] * best["tensor"]
    assert export["micro_batch_size"] * best["data"] * best["micro_batches"] == 32
    assert (export["csv"] is None) == (best["stages"] == 1)
    binary = os.environ.get("ORDO_BIN")
    if binary is None:
        pytest.skip("ORDO_BIN names no ordo binary")
    flags = ["--cluster", "h100x8-ib-ndr", "--nodes", "1", "--batch", "32", "--seq-len", "16"]
    out = subprocess.run(
        [
            binary,
            "plan-parallel",
            MODEL,
            *flags,
            "--max-micro-batches",
            "4",
            "--json",
            "--top",
            "1000",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    cli = json.loads(out.stdout)
    if export["csv"] is not None:
        exported = tmp_path / "best"
        subprocess.run(
            [
                binary,
                "plan-parallel",
                MODEL,
                *flags,
                "--max-micro-batches",
                "4",
                "--export",
                str(exported),
            ],
            check=True,
            capture_output=True,
        )
        assert (exported / "schedule.csv").read_text() == export["csv"]
    assert [c["step_time_us"] for c in cli["candidates"]] == steps
    assert cli["simulated"] == plans["simulated"] and cli["pruned"] == plans["pruned"]


def test_bad_requests_name_the_keyword():
    cases = [
        (dict(ARGS, batch=0), "batch"),
        (dict(ARGS, gpus=0), "gpus=0|gpus must be"),
        (dict(ARGS, nodes=0), "nodes=0"),
        (dict(ARGS, all_reduce="mesh"), "all_reduce="),
        (dict(ARGS, precision="fp8"), "fp8"),
        (dict(ARGS, optimizer="lion"), "lion"),
        (dict(ARGS, max_micro_batches=0), "max_micro_batches"),
        (dict(ARGS, tensor_parallel=0), "tensor_parallel must be at least 1"),
        (dict(ARGS, recompute="sometimes"), "recompute=sometimes"),
        (dict(ARGS, granularity="coarse"), 'granularity="coarse"'),
        (dict(ARGS, cluster="no-such-cluster"), "no-such-cluster"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ordo.OrdoError, match=message):
            ordo.plan_parallel(MODEL, **kwargs)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "fast-forward", "zb-h1", "zb-h2"])
def test_reduce_grad_actions_stand_where_pytorch_puts_them(tmp_path, schedule):
    """The schedule of copies of a pipeline, read by PyTorch's own parser and validator, with
    each stage's REDUCE_GRAD where PyTorch's _add_reduce_grad adds it."""
    from torch.distributed.pipelining import schedules as pt

    binary = os.environ.get("ORDO_BIN")
    if binary is None:
        pytest.skip("ORDO_BIN names no ordo binary")
    csv = tmp_path / "schedule.csv"
    args = ["--batch", "16", "--pipeline", "2", "--micro-batches", "4", "--schedule", schedule]
    subprocess.run(
        [binary, "simulate", "transformer", "--small", "--train", *args]
        + ["--data-parallel", "2", "--pytorch-schedule", str(csv)],
        check=True,
        capture_output=True,
    )
    rows = [line.split(",") for line in csv.read_text().splitlines()]
    ours = {rank: [pt._Action.from_str(a) for a in row] for rank, row in enumerate(rows)}
    reduction = (pt.REDUCE_GRAD, pt.WAIT_REDUCE_GRAD)
    compute = {
        rank: [a for a in actions if a.computation_type not in reduction]
        for rank, actions in ours.items()
    }
    pt._validate_schedule(compute, 2, 2, 4)
    for rank, actions in ours.items():
        assert actions == pt._add_reduce_grad(compute[rank], 4), rank
        reduced = [a.stage_index for a in actions if a.computation_type == pt.REDUCE_GRAD]
        assert reduced == [rank]
