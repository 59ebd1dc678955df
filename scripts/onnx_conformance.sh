#!/usr/bin/env bash
# Runs ONNX's backend node tests on ordo's CPU kernels and prints pass / fail / unsupported per op.
#
#   scripts/onnx_conformance.sh [ordo conformance options...]   e.g. --cases, --json
#
# Installs the `onnx` Python package (no torch) into a virtual environment ($VENV, default
# target/onnx-venv), finds its node tests (onnx/backend/test/data/node/*: model.onnx and
# test_data_set_0/input_*.pb, output_*.pb), builds `ordo` and runs `ordo conformance` on them.
# The wheels of onnx 1.23 and later no longer ship the node test data, so the default is the
# last release we checked that does; set ONNX_SPEC to pick another (e.g. ONNX_SPEC=onnx==1.18.0).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/target/onnx-venv}"
ONNX_SPEC="${ONNX_SPEC:-onnx==1.22.0}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --only-binary :all: "$ONNX_SPEC"
NODE_DIR="$("$VENV/bin/python" -c 'import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node"))')"
if [ ! -d "$NODE_DIR" ]; then
    echo "error: $ONNX_SPEC has no node tests at $NODE_DIR; set ONNX_SPEC to an onnx release that ships them" >&2
    exit 1
fi
echo "onnx $("$VENV/bin/python" -c 'import onnx; print(onnx.__version__)'): $(ls "$NODE_DIR" | wc -l) node tests in $NODE_DIR" >&2

cd "$ROOT"
cargo build --release --quiet -p ordo-cli
exec "$ROOT/target/release/ordo" conformance "$NODE_DIR" "$@"
