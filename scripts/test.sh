#!/usr/bin/env bash
# Every test: the Rust workspace's, then the Python package's (built from crates/ordo-py with
# maturin into the virtual environment of scripts/python-env.sh, linted with ruff, tested with
# pytest against the `ordo` binary of the same build).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/python-env.sh
venv=target/py-venv
# PyO3's build reads the interpreter that maturin names below; naming the same one here lets
# maturin reuse this build of PyO3 (the signature is maturin's: implementation, version, bits).
export PYO3_PYTHON="$PWD/$venv/bin/python"
PYO3_ENVIRONMENT_SIGNATURE=$("$PYO3_PYTHON" -c 'import sys; v = sys.version_info; print(f"{sys.implementation.name}-{v[0]}.{v[1]}-{64 if sys.maxsize > 2**32 else 32}bit")')
export PYO3_ENVIRONMENT_SIGNATURE

cargo test --workspace
echo "== Rust tests done at ${SECONDS} s"

python_sources=(crates/ordo-py scripts/onnx_models.py scripts/bench_onnx_import.py)
"$venv/bin/ruff" check --config crates/ordo-py/pyproject.toml "${python_sources[@]}"
"$venv/bin/ruff" format --check --config crates/ordo-py/pyproject.toml "${python_sources[@]}"
# The test profile (the dev profile's settings) so that maturin reuses what `cargo test` built.
VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH" maturin develop -q --profile test -m crates/ordo-py/Cargo.toml
echo "== Python package built at ${SECONDS} s"
ORDO_BIN="$PWD/target/debug/ordo" "$venv/bin/python" -m pytest -q --durations=10 crates/ordo-py/tests
