#!/usr/bin/env bash
# Every test: the Rust workspace's, then the Python package's (built from crates/ordo-py with
# maturin into the virtual environment of scripts/python-env.sh, linted with ruff, tested with
# pytest against the `ordo` binary of the same build).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace
echo "== Rust tests done at ${SECONDS} s"

scripts/python-env.sh
venv=target/py-venv

python_sources=(crates/ordo-py scripts/onnx_models.py scripts/bench_onnx_import.py)
"$venv/bin/ruff" check --config crates/ordo-py/pyproject.toml "${python_sources[@]}"
"$venv/bin/ruff" format --check --config crates/ordo-py/pyproject.toml "${python_sources[@]}"
VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH" maturin develop -q -m crates/ordo-py/Cargo.toml
echo "== Python package built at ${SECONDS} s"
ORDO_BIN="$PWD/target/debug/ordo" "$venv/bin/python" -m pytest -q --durations=10 crates/ordo-py/tests
