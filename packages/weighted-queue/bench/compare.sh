#!/usr/bin/env bash
# A/B benchmark against an earlier commit, on a shared (noisy) machine: extracts the
# commit's weighted-queue, kv-storage and raft-core into a temp dir (git archive; this
# worktree's node_modules linked in), then runs this worktree's bench.ts against the old
# sources and against these, alternately, so that a busy neighbour hurts both alike; last,
# bench/interleaved.ts runs both in one process in alternating slices (the steadiest ratio).
#
#   bench/compare.sh <commit> [rounds=3]     (BENCH_SECONDS, BENCH_ONLY as for bench.ts;
#                                             BENCH_ONLY defaults to memory)
set -euo pipefail
commit=${1:?usage: bench/compare.sh <commit> [rounds]}
rounds=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
base=$(mktemp -d "${TMPDIR:-/tmp}/wq-compare-XXXXXX")
trap 'rm -rf "$base"' EXIT
git -C "$root" archive "$commit" packages/weighted-queue packages/kv-storage packages/raft-core package.json |
  tar -x -C "$base"
ln -s "$root/node_modules" "$base/node_modules"
for p in weighted-queue kv-storage raft-core; do cp -a "$root/packages/$p/node_modules" "$base/packages/$p/"; done
cp "$here/bench/bench.ts" "$base/packages/weighted-queue/bench/bench.ts"
export BENCH_ONLY=${BENCH_ONLY:-memory}
for i in $(seq "$rounds"); do
  for side in "$commit:$base/packages/weighted-queue" "working tree:$here"; do
    echo "## round $i, ${side%%:*}"
    (cd "${side#*:}" && node --conditions=source --import tsx bench/bench.ts | tail -n +3)
  done
done
echo "## interleaved in one process (memory, batch 100)"
(cd "$here" && node --conditions=source --import tsx bench/interleaved.ts "$base" "$root")
