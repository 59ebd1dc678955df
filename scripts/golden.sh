#!/usr/bin/env bash
# Golden outputs: what a refactoring must leave unchanged. Writes, for one `ordo` binary, the
# placements, plans, simulated steps, exported schedules and training losses of every strategy
# on a set of built-in models, each in a file of its own under OUT_DIR, with the fields that
# measure this machine (wall times, placement times) removed.
#
#   scripts/golden.sh ORDO_BINARY OUT_DIR
#
# Run it on the commit before a change and after it, then `diff -r BEFORE AFTER`: a refactoring
# with no behaviour change leaves no difference. `ordo run` costs its nodes by the roofline
# (`--roofline`), so that its placements do not depend on a measured profile.
set -euo pipefail
ordo=${1:?usage: scripts/golden.sh ORDO_BINARY OUT_DIR}
out=${2:?usage: scripts/golden.sh ORDO_BINARY OUT_DIR}
ordo=$(realpath "$ordo")
mkdir -p "$out"
cd "$out"

# Drops the keys that measure the machine rather than the plan from a JSON document on stdin.
strip() {
    python3 -c '
import json, sys
MEASURED = {"time_ms", "placement_ms", "elapsed_ms", "wall_us", "measured_us", "measured",
            "seconds", "search_ms", "time_s", "step_times_us", "median_us", "warmup_steps",
            "profile", "spread", "placement_time_ms", "runtime_ms", "iqr_us", "mean_us",
            "placement_seconds", "note"}
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if k not in MEASURED}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
json.dump(clean(json.load(sys.stdin)), sys.stdout, indent=1, sort_keys=True)
print()'
}

# golden NAME COMMAND...: the command's JSON output, stripped, into NAME.json (its error, when
# it fails, into NAME.err: a refusal is an output too).
golden() {
    local name=$1
    shift
    if "$ordo" "$@" --json > "$name.raw" 2> "$name.err"; then
        rm -f "$name.err"
    fi
    # A command that fails may still print its JSON (`compare` with every placer failing
    # prints why each failed): keep it beside the error.
    if [ -s "$name.raw" ]; then
        strip < "$name.raw" > "$name.json"
    fi
    rm -f "$name.raw"
}

models=(resnet50 inception_v3 gnmt transformer bert_base densenet121 mobilenet_v3_large gpt2_small)

# Placements (Baechi's placers, forward and training graph) and their plans.
for model in "${models[@]}"; do
    for algo in m-topo m-etf m-sct; do
        "$ordo" place "$model" --devices 4 --memory 16GiB --algo "$algo" --forward-only \
            --out "place-$model-$algo.raw" > /dev/null 2> "place-$model-$algo.err" &&
            strip < "place-$model-$algo.raw" > "place-$model-$algo.json" &&
            rm "place-$model-$algo.err" "place-$model-$algo.raw"
        "$ordo" plan "$model" --train --small --devices 2 --algo "$algo" \
            --out "plan-$model-$algo.json" > /dev/null 2> "plan-$model-$algo.err" &&
            rm "plan-$model-$algo.err"
    done
done

# Every placer side by side (auto without the clock, so that its search is the same anywhere).
for model in gnmt transformer inception_v3; do
    golden "cmp-$model-placers" compare "$model" --devices 4 --memory 8GiB --budget 200ms \
        --reproducible
done
golden "cmp-gnmt-placers-too-small" compare gnmt --devices 4 --memory 300MiB --budget 100ms \
    --reproducible

# Simulated steps of every strategy.
for model in resnet50 bert_base gpt2_small; do
    for schedule in inorder ooo; do
        golden "sim-$model-$schedule" simulate "$model" --train --batch 8 --devices 1 \
            --cluster a100x4-nvlink --schedule "$schedule" --concurrent-kernels
        golden "sim-$model-$schedule-steady" simulate "$model" --train --batch 8 --devices 1 \
            --cluster a100x4-nvlink --schedule "$schedule" --steady-state
    done
    golden "sim-$model-dp" simulate "$model" --train --batch 8 --data-parallel 4 \
        --cluster a100x4-nvlink --first-k 3
    golden "sim-$model-dp-auto" simulate "$model" --train --batch 8 --data-parallel 4 \
        --cluster a100x4-nvlink --first-k auto --network-gbps 10
    for schedule in gpipe 1f1b fast-forward zb-h1 zb-h2; do
        golden "sim-$model-pp-$schedule" simulate "$model" --train --batch 16 --pipeline 4 \
            --micro-batches 8 --cluster a100x8-nvlink --schedule "$schedule"
        "$ordo" export-schedule "$model" --batch 16 --stages 4 --micro-batches 8 \
            --schedule "$schedule" --output "csv-$model-$schedule.csv" > /dev/null \
            2> "csv-$model-$schedule.err" && rm "csv-$model-$schedule.err"
    done
    golden "sim-$model-pp-modulo" simulate "$model" --train --batch 16 --pipeline 4 \
        --micro-batches 8 --cluster a100x8-nvlink --schedule 1f1b --modulo 1
    golden "cmp-$model-schedules" compare "$model" --train --batch 4 --devices 1 \
        --cluster a100x4-nvlink --schedules
    golden "cmp-$model-pp" compare "$model" --train --batch 16 --cluster a100x8-nvlink \
        --pipeline 4 --micro-batches 8
done

# Losses of training runs on CPU devices, every kind of plan (bitwise: printed as JSON floats).
run() {
    local name=$1
    shift
    if "$ordo" run "$@" --small --train --roofline --warmup-seconds 0 --json \
        > "$name.raw" 2> "$name.err"; then
        python3 -c '
import json, sys
r = json.load(sys.stdin)
steps = r.get("steps") or r.get("losses")
json.dump({"losses": [s.get("loss") if isinstance(s, dict) else s for s in steps],
           "plan": r.get("plan") or r.get("strategy")}, sys.stdout, indent=1)
print()' < "$name.raw" > "$name.json"
        rm -f "$name.err"
    fi
    rm -f "$name.raw"
}
for model in resnet50 bert_base gpt2_small; do
    run "run-$model-etf" "$model" --steps 3 --devices cpu:2 --algo m-etf
    run "run-$model-ooo" "$model" --steps 3 --schedule ooo
    run "run-$model-defer" "$model" --steps 4 --schedule ooo --defer 3
    run "run-$model-dp" "$model" --steps 4 --data-parallel 2 --first-k 2 --unroll 2
    run "run-$model-dp-wait" "$model" --steps 2 --data-parallel 2 --sync device-wait
    for schedule in gpipe 1f1b fast-forward zb-h1 zb-h2; do
        run "run-$model-pp-$schedule" "$model" --batch 8 --steps 2 --pipeline 2 \
            --micro-batches 4 --schedule "$schedule"
    done
done
ls | wc -l
