#!/usr/bin/env bash
# Runs ordo's speed benchmarks on this checkout and on an earlier commit, alternating, on the
# same machine in the same run: placement times (ordo-place bench), the simulator's speed
# (ordo-sim speed) and the runtime's overhead per task (ordo-exec overhead).
#
#   scripts/bench_against.sh BASE_COMMIT [ROUNDS] [place|sim|exec ...]
#
# The base commit is checked out in a temporary worktree and built in release with its own
# target directory. Output: each benchmark's printout, labelled `base` or `head`, ROUNDS times
# (default 2); compare the medians they print side by side. Name benchmarks to run only those.
set -euo pipefail
base=${1:?usage: scripts/bench_against.sh BASE_COMMIT [ROUNDS]}
rounds=${2:-2}
shift $(($# < 2 ? $# : 2))
chosen=${*:-place sim exec}
top=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$top" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$top" worktree add --detach "$work/base" "$base" >/dev/null

benches=()
for name in $chosen; do
    case $name in
        place) benches+=("-p ordo-place --test bench placement_times") ;;
        sim) benches+=("-p ordo-sim --test speed") ;;
        exec) benches+=("-p ordo-exec --test overhead") ;;
        *) echo "unknown benchmark $name: place, sim or exec" >&2; exit 2 ;;
    esac
done
run() { # label dir target bench...
    local label=$1 dir=$2 target=$3
    shift 3
    echo "=== $label: cargo test --release $*"
    (cd "$dir" && CARGO_TARGET_DIR=$target cargo test --release --quiet "$@" -- --ignored \
        --nocapture --test-threads=1 2>&1 | grep -v -E '^(running|test result|$)')
}
for dir in "$work/base" "$top"; do
    (cd "$dir" && CARGO_TARGET_DIR=$dir/target cargo build --release --quiet --workspace --all-targets)
done
for round in $(seq "$rounds"); do
    for bench in "${benches[@]}"; do
        # shellcheck disable=SC2086
        run "base round $round" "$work/base" "$work/base/target" $bench
        # shellcheck disable=SC2086
        run "head round $round" "$top" "$top/target" $bench
    done
done
