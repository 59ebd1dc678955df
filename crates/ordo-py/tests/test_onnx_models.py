"""The public model list (scripts/onnx_models.py): models exported to ONNX as users export them
(PyTorch's exporter, training mode, batch 2) import with the exporter's trainable parameter
count, place on 4 devices and simulate, and train 2 steps with bitwise the same losses on 1
and on 3 CPU devices. The CI runs the small ones; ORDO_ONNX_MODELS=all runs every model of the
list (tens of minutes and gigabytes; the figures are in doc/onnx.md)."""

import importlib.util
import os
import pathlib
import sys

import pytest

pytest.importorskip("onnx", reason="the exporter needs the onnx package")

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _load_list():
    spec = importlib.util.spec_from_file_location(
        "onnx_models", ROOT / "scripts" / "onnx_models.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["onnx_models"] = module
    spec.loader.exec_module(module)
    return module


models = _load_list()
EVERY = os.environ.get("ORDO_ONNX_MODELS") == "all"


def cli() -> str:
    path = os.environ.get("ORDO_BIN") or str(ROOT / "target" / "debug" / "ordo")
    assert pathlib.Path(path).exists(), f"no ordo binary at {path}: build it or set ORDO_BIN"
    return path


def _names():
    return [s.name for s in models.specs() if EVERY or s.name in models.CI_MODELS]


@pytest.mark.parametrize("name", _names())
def test_exported_model_imports_places_and_trains_the_same_on_any_placement(name, tmp_path):
    (spec,) = [s for s in models.specs() if s.name == name]
    if spec.build is None:
        pytest.skip(f"{spec.library} is not installed")
    result = models.check(spec, cli(), str(tmp_path))
    assert "error" not in result, result["error"]
    assert result["ordo_params"] == result["params"]
    assert result["simulated_step_ms"] > 0
    assert len(result["losses"]) == 2
    assert all(loss == loss and loss > 0 for loss in result["losses"]), result["losses"]


def test_the_ci_models_are_in_the_list():
    names = [s.name for s in models.specs()]
    assert len(set(names)) == len(names), "names are unique"
    assert models.CI_MODELS <= set(names)
    # Every torchvision classification model, the dozen timm models, five Hugging Face ones.
    assert sum(s.library == "torchvision" for s in models.specs()) >= 80
    assert sum(s.library == "timm" for s in models.specs()) == 12
    assert sum(s.library == "transformers" for s in models.specs()) == 5


def test_a_mismatched_parameter_count_or_loss_is_reported(tmp_path, monkeypatch):
    (spec,) = [s for s in models.specs() if s.name == "squeezenet1_1"]
    real = models.export

    def overcounting(spec, path):
        figures = real(spec, path)
        figures["params"] += 1
        return figures

    monkeypatch.setattr(models, "export", overcounting)
    result = models.check(spec, cli(), str(tmp_path))
    assert "trainable parameters" in result["error"], result
