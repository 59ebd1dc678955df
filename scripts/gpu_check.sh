#!/usr/bin/env bash
# The checks that need a CUDA GPU, as one short run: the GPU tests of ordo.torch.distribute,
# a distributed step under compute-sanitizer's racecheck, where a one-device step's time goes
# (PyTorch, a side stream, ordo on either stream), and the GPU benchmark. Logs go to
# the directory given (default: target/gpu-check). Needs a Python with torch (CUDA),
# torchvision, transformers, pytest and the ordo package (maturin develop, or its wheel).
#
#     scripts/gpu_check.sh [LOG_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${1:-target/gpu-check}"
mkdir -p "$logs"
python="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8

nvidia-smi -L | tee "$logs/gpu.txt"
"$python" -c "import torch, ordo; print('torch', torch.__version__, 'ordo', ordo.__file__)" \
    | tee -a "$logs/gpu.txt"

echo "== pytest (CUDA)"
timeout "${TESTS_S:-240}" "$python" -m pytest -q -p no:cacheprovider -o addopts="" \
    --durations=8 ${PYTEST_ARGS:-} crates/ordo-py/tests/test_distribute_cuda.py 2>&1 | tee "$logs/tests.txt"

if [ "${SANITIZE_S:-150}" != 0 ]; then
    echo "== compute-sanitizer --tool racecheck"
    timeout "${SANITIZE_S:-150}" compute-sanitizer --tool racecheck --print-limit 20 \
        "$python" crates/ordo-py/bench/gpu_sanitize.py 2>&1 | tail -40 | tee "$logs/racecheck.txt"
fi

if [ "${OVERHEAD_S:-100}" != 0 ]; then
    echo "== where the time goes"
    timeout "${OVERHEAD_S:-100}" "$python" crates/ordo-py/bench/gpu_overhead.py \
        --models "${OVERHEAD_MODELS:-resnet50,bert}" --batch "${BATCH:-32}" 2>&1 \
        | tee "$logs/overhead.txt"
fi

echo "== benchmark"
timeout "${BENCH_S:-150}" "$python" crates/ordo-py/bench/distribute_gpu.py \
    --models "${MODELS:-resnet50,inception_v3,bert,gpt2}" --reps "${REPS:-11}" ${BENCH_ARGS:-} 2>&1 \
    | tee "$logs/bench.txt"
