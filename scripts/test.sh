#!/usr/bin/env bash
# Every test: the Rust workspace's, then the Python package's (built from crates/ordo-py with
# maturin into a virtual environment under target/, linted with ruff, tested with pytest
# against the `ordo` binary of the same build).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace
echo "== Rust tests done at ${SECONDS} s"

venv=target/py-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# torch (CPU is enough; the default wheel also runs on a GPU) for ordo.torch's tests, with
# torchvision's and Hugging Face's models to profile and distribute, and onnx for PyTorch's
# exporters (the public model list, scripts/onnx_models.py; onnxscript for the torch.export-based
# one). No pip cache: the wheels would take the disk twice.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir "maturin>=1.8,<2" "pytest>=7" \
    "ruff>=0.6" "torch>=2.1" torchvision "transformers>=4.40" numpy networkx onnx onnxscript
python_sources=(crates/ordo-py scripts/onnx_models.py scripts/bench_onnx_import.py)
"$venv/bin/ruff" check --config crates/ordo-py/pyproject.toml "${python_sources[@]}"
"$venv/bin/ruff" format --check --config crates/ordo-py/pyproject.toml "${python_sources[@]}"
VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH" maturin develop -q -m crates/ordo-py/Cargo.toml
ORDO_BIN="$PWD/target/debug/ordo" "$venv/bin/python" -m pytest -q --durations=10 crates/ordo-py/tests
