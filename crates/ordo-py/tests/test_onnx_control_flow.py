"""Control flow as PyTorch exports it: a TorchScript module's loops over a shape and a constant
range, an `if` on the data, a split into a sequence and a list appended to in a loop (the
TorchScript exporter's `Loop`, `If`, `SplitToSequence`, `SequenceInsert`,
`ConcatFromSequence`), and `torch.cond` (the torch.export-based
exporter's `If`). ordo resolves them at import: its forward pass on the CPU kernels gives
PyTorch's outputs (`ordo conformance` on a case written from PyTorch's own run), and training
gives bitwise the same losses on one and on three devices."""

import json
import pathlib
import subprocess
import warnings

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402
from test_onnx_models import cli  # noqa: E402


class _TwoLayers(torch.nn.Module):
    """The layers the models below run their control flow around."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)


class Loopy(_TwoLayers):
    def forward(self, x):
        h = x
        for _ in range(3):
            h = torch.tanh(self.lin(h))
        acc = torch.zeros_like(h[0])
        for i in range(x.shape[0]):
            acc = acc + h[i]
        h = h + acc
        if bool(x.sum() > 0):
            h = h * 2
        else:
            h = -h
        parts = torch.split(h, 4, dim=1)
        return self.head(torch.cat(list(parts), dim=1))


class Appender(_TwoLayers):
    """A list appended to in a loop over the batch, stacked: `SequenceEmpty`, a `Loop`
    carrying the sequence, `SequenceInsert`, `ConcatFromSequence`."""

    def forward(self, x):
        outs: list[torch.Tensor] = []
        h = x
        for i in range(x.shape[0]):
            h = torch.tanh(self.lin(h))
            outs.append(h[i])
        return self.head(torch.stack(outs, 0))


class Cond(_TwoLayers):
    def forward(self, x):
        h = torch.cond(
            x.sum() > 0,
            lambda x: torch.relu(self.lin(x)),
            lambda x: torch.tanh(self.lin(x)),
            (x,),
        )
        return self.head(h)


def export(model, x, path, **options):
    """`model` (a module or a scripted one) exported with the TorchScript-based exporter at
    opset 17, input `x`, output `y` (or with `options`), its warnings silenced."""
    options = {"dynamo": False, "opset_version": 17, **options}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"], **options)


def write_case(folder, x, y):
    """A conformance case's test data: input `x` and expected output `y`."""
    data = folder / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    for file, tensor, name in [("input_0.pb", x, "x"), ("output_0.pb", y, "y")]:
        array = tensor.detach().numpy()
        (data / file).write_bytes(numpy_helper.from_array(array, name).SerializeToString())


def _scripted(module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.script(module)


def _export(name, tmp_path):
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    path = tmp_path / "case" / "model.onnx"
    path.parent.mkdir()
    if name == "torch.export":
        pytest.importorskip("onnxscript", reason="the torch.export-based exporter needs it")
        model = Cond().eval()
        export(model, x, path, dynamo=True, opset_version=None)
    else:
        model = _scripted((Loopy() if name == "torchscript" else Appender()).eval())
        export(model, x, path)
    with torch.no_grad():
        write_case(path.parent, x, model(x))
    return path


def _ordo(*args) -> str:
    out = subprocess.run([cli(), *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("exporter", ["torchscript", "list append", "torch.export"])
def test_exported_control_flow_runs_as_pytorch_and_trains_on_any_placement(exporter, tmp_path):
    path = _export(exporter, tmp_path)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    expected = {
        "torchscript": {"If", "Loop", "SplitToSequence"},
        "list append": {"Loop", "SequenceEmpty", "ConcatFromSequence"},
        "torch.export": {"If"},
    }[exporter]
    assert expected <= ops, ops
    result = json.loads(_ordo("conformance", str(path.parent), "--json"))
    assert result["pass"] == 1, result["cases"]

    def losses(devices):
        args = ["run", str(path), "--train", "--steps", "2", "--devices", devices]
        # Roofline costs: a profile of the debug build is not what is tested.
        args += ["--loss", "cross-entropy", "--json", "--roofline"]
        return json.loads(_ordo(*args))["losses"]

    one = losses("cpu:1")
    assert len(one) == 2 and all(loss == loss for loss in one), one
    assert one == losses("cpu:3")


def test_a_run_time_condition_is_noted(tmp_path):
    path = _export("torchscript", tmp_path)
    out = subprocess.run([cli(), "inspect", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "an If whose condition is known only at run time" in out.stderr
    assert pathlib.Path(path).exists()


def test_a_loop_over_the_batch_follows_it_or_is_refused(tmp_path):
    """Exported with a dynamic batch, a loop over it runs once per item at any `--batch`;
    exported without, its count is a literal of the file's batch, which `--batch` refuses,
    naming the loop."""
    model = _scripted(Appender())
    paths = {}
    for dynamic in (True, False):
        path = tmp_path / f"appender_{dynamic}.onnx"
        export(
            model, torch.randn(4, 8), path, dynamic_axes={"x": {0: "batch"}} if dynamic else None
        )
        paths[dynamic] = str(path)
    text = _ordo("inspect", paths[True], "--batch", "6")
    assert "/Loop/5/" in text and "/Loop/6/" not in text, text
    out = subprocess.run(
        [cli(), "inspect", paths[False], "--batch", "6"], capture_output=True, text=True
    )
    assert out.returncode != 0
    assert "loop `/Loop` runs" in out.stderr and "the file's size 4" in out.stderr, out.stderr
