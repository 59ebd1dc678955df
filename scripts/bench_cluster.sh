#!/usr/bin/env bash
# Time and peak memory of the cluster-scale simulations and the planner, at the sizes the
# planning issue names, one row each (a benchmark, not a test: machines differ).
#
#   scripts/bench_cluster.sh [ORDO_BINARY] [LIMIT_SECONDS]
#
# Each command runs under `timeout LIMIT_SECONDS` (default 300); a row that ran past it says so.
set -euo pipefail
ordo=${1:-target/release/ordo}
limit=${2:-300}
row() {
  local label=$1
  shift
  local out status
  out=$( { /usr/bin/time -f "%e %M" timeout "$limit" "$ordo" "$@" > /dev/null; } 2>&1 ) && status=0 || status=$?
  if [ "$status" -eq 124 ]; then
    echo "| $label | past ${limit} s | |"
  elif [ "$status" -ne 0 ]; then
    echo "| $label | failed ($status): $(echo "$out" | head -1) | |"
  else
    read -r seconds kib <<< "$(echo "$out" | tail -1)"
    echo "| $label | ${seconds} s | $((kib / 1024)) MiB |"
  fi
}
echo "| run | time | peak memory |"
echo "|---|---|---|"
row "data parallel, BERT-base small, 100,000 replicas (tree, 12,500 H100 nodes)" \
  simulate bert_base --small --train --cluster h100x8-ib-ndr --nodes 12500 \
  --data-parallel 100000 --all-reduce tree --first-k 0
row "data parallel, BERT-base, 100,000 replicas, reverse first-k searched" \
  simulate bert_base --train --batch 8 --cluster h100x8-ib-ndr --nodes 12500 \
  --data-parallel 100000 --all-reduce nccl --bucket 25MiB
for m in 64 256 1024; do
  row "pipeline, LLaMA-2 70B bf16, 64 stages x $m micro-batches, 1F1B" \
    simulate llama2_70b --train --precision bf16 --batch "$m" --seq-len 2048 --pipeline 64 \
    --micro-batches "$m" --schedule 1f1b --memory unlimited --devices 64
done
row "pipeline x data, LLaMA-2 70B bf16, 64 stages x 64 micro-batches x 16 copies" \
  simulate llama2_70b --train --precision bf16 --batch 1024 --seq-len 2048 --pipeline 64 \
  --micro-batches 64 --schedule zb-h1 --data-parallel 16 --cluster h100x8-ib-ndr --nodes 128 \
  --memory unlimited
row "planner, LLaMA-2 7B bf16, 64 H100s, batch 256" \
  plan-parallel llama2_7b --cluster h100x8-ib-ndr --nodes 8 --batch 256 --seq-len 2048 \
  --precision bf16 --max-micro-batches 32
row "planner, GPT-3 175B bf16, 1,024 H100s, batch 1,536" \
  plan-parallel gpt3_175b --cluster h100x8-ib-ndr --nodes 128 --batch 1536 --seq-len 2048 \
  --precision bf16 --max-micro-batches 64
row "published runs: Megatron-LM 175B (64 GPUs, 8 stages x 64 micro-batches)" \
  published --model 175B
row "published runs: Megatron-LM 1T (512 GPUs, 64 stages x 512 micro-batches)" \
  published --model 1T
