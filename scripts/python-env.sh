#!/usr/bin/env bash
# The Python tests' virtual environment, target/py-venv: torch (CPU is enough; the default wheel
# also runs on a GPU) for ordo.torch's tests, with torchvision's and Hugging Face's models to
# profile and distribute, and onnx for PyTorch's exporters (the public model list,
# scripts/onnx_models.py; onnxscript for the torch.export-based one). No pip cache: the wheels
# would take the disk twice. No byte-compiling of every module at install (a minute of CPU
# that CI spends beside the Rust build): Python compiles what the tests import. A second run
# finds everything installed and takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/py-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir --no-compile "maturin>=1.8,<2" "pytest>=7" \
    "ruff>=0.6" "torch>=2.1" torchvision "transformers>=4.40" numpy networkx onnx onnxscript
