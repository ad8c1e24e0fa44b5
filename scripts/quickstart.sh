#!/usr/bin/env bash
# The main job on the embedded default (local redis-server processes, no Docker): builds
# lockbench, runs every shipped claim scenario, then the strategy × fault matrix (--quick), and
# ends with the path of matrix.html, which links the claims' comparison report.
# Extra arguments go to both commands (e.g. --results /tmp/r).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
echo "building lockbench (cargo build --release; several minutes on a fresh clone)..." >&2
cargo build --release
lockbench="${CARGO_TARGET_DIR:-target}/release/lockbench"
results=results
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = "--results" ] && [ $((i + 1)) -lt ${#args[@]} ]; then
        results=${args[$((i + 1))]}
    fi
done
# Claims first: their exit code (1 = some claim not as claimed) is kept for the end.
claims=0
"$lockbench" chaos chaos/ "$@" || claims=$?
comparison="$(readlink -f "$results/latest")/comparison/comparison.html"
link=()
if [ -f "$comparison" ]; then
    link=(--link-report "$comparison")
fi
matrix=0
# The four Redis strategies next to the alternatives the reference articles name.
strategies=single,single-fenced,redlock,redlock-fenced,pg-advisory,pg-advisory-fenced,etcd-lease
"$lockbench" matrix --quick --strategies "$strategies" "${link[@]}" "$@" || matrix=$?
echo
echo "open this (matrix, linking the claim scenarios): $(readlink -f "$results/latest")/matrix.html"
if [ "$claims" -ne 0 ]; then
    exit "$claims"
fi
exit "$matrix"
