#!/usr/bin/env bash
# Seeds corpus/<target>/ for the fuzz targets with the repository's own files: the cost-graph
# fixtures, the shipped clusters, and a plan and a profile written by a release build of ordo.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
cd "$here"
mkdir -p corpus/costgraph corpus/plan corpus/cluster corpus/profile
cp "$root"/crates/ordo-cost/tests/fixtures/resnet50.json corpus/costgraph/
cp "$root"/crates/ordo-cost/clusters/*.json corpus/cluster/
(cd "$root" && cargo build --release --quiet --bin ordo)
ordo="$root/target/release/ordo"
"$ordo" synth --nodes 12 --out corpus/costgraph/synth12.json > /dev/null
"$ordo" plan corpus/costgraph/synth12.json --devices 2 --algo m-etf --out corpus/plan/synth12.json > /dev/null
"$ordo" profile resnet50 --small --reps 1 --warmup 0 --out corpus/profile/resnet50.json > /dev/null
echo "seeded: $(ls corpus/* | wc -l) files"
