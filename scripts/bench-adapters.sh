#!/usr/bin/env bash
# The adapter side of BENCHMARKS.md: redis-py's Lock through lockbench's adapter protocol
# (`-s adapter:redis-py`) next to a plain Python loop calling the same library
# (adapters/python/plain_loop_redis_py.py) on the same redis-server, in the same run, and the
# harness's own overhead per adapter request (summary.json `harness.adapter_overhead`).
#
# Starts its own redis-server on a free 127.0.0.1 port in a temporary directory (never 6379,
# never a server it did not start) and removes both on exit, Ctrl-C or error. Every lockbench
# run uses --topology external --direct (no proxy between the library and the node, as for the
# plain loop), no contention (one resource per client), hold 0, no audit.
#
#   scripts/bench-adapters.sh            # CLIENTS=64 DURATION=5s
#
# Environment: CLIENTS (default 64), DURATION (default 5s), LOCKBENCH (default
# target/release/lockbench, built if missing), PYTHON (default .adapters/venv/bin/python),
# LABEL (a prefix for every row's first cell, e.g. the build measured), and lockbench's own
# LOCKBENCH_ADAPTERS_DIR (another checkout's adapters/, to measure its Python adapters with
# this lockbench). Prints one Markdown table row per measurement, each with the 1-minute load
# average taken just before it; the legs are the overhead's p50s (lockbench / to the adapter /
# inside it before the library call / back, `summary.json` `harness.adapter_overhead_legs`).
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-5s}
LOCKBENCH=${LOCKBENCH:-target/release/lockbench}
PYTHON=${PYTHON:-.adapters/venv/bin/python}
LABEL=${LABEL:+$LABEL: }
secs=${DURATION%s}

bash scripts/adapters-setup.sh
if [[ ! -x "$LOCKBENCH" ]]; then
  nice -n 10 cargo build --release --bin lockbench >&2
fi
work=$(mktemp -d /tmp/lockbench-bench-adapters.XXXXXX)
redis_pid=""
cleanup() {
  if [[ -n "$redis_pid" ]]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" &
redis_pid=$!
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done
url="redis://127.0.0.1:$port"

load() { cut -d' ' -f1 /proc/loadavg; }

plain() { # threads
  local l; l=$(load)
  "$PYTHON" adapters/python/plain_loop_redis_py.py --url "$url" --threads "$1" \
    --seconds "$secs" --key-prefix "plain$1:" |
    jq -r --arg l "$l" --arg b "$LABEL" '"| \($b)plain Python loop, \(.threads) thread(s) | \(.cycles_per_s) | - | - | - | \($l) |"'
}

adapter() { # clients, extra flags…
  local c=$1; shift
  local l; l=$(load)
  local res="$work/results-$c-$#"
  "$LOCKBENCH" run -s adapter:redis-py --topology external --url "$url" --direct \
    -c "$c" -r "$c" -d "$DURATION" --no-audit --no-progress --results "$res" "$@" \
    >/dev/null 2>"$work/lockbench.err" || { cat "$work/lockbench.err" >&2; return 1; }
  jq -r --arg l "$l" --arg c "$c" --arg f "$*" --arg b "$LABEL" '.strategies[0] |
    (.harness.adapter_overhead_legs // {}) as $g |
    "| \($b)adapter:redis-py, \($c) client(s) \($f) | \(.throughput_ops_s | floor) | \(.harness.adapter_overhead.p50_us // "-") | \(.harness.adapter_overhead.p99_us // "-") | \([$g.lockbench.p50_us, $g.to_adapter.p50_us, $g.in_adapter.p50_us, $g.from_adapter.p50_us] | map(. // "-" | tostring) | join(" / ")) | \($l) |"' \
    "$res"/latest/summary.json
}

echo "| what | acquire+release cycles/s | overhead p50 µs | overhead p99 µs | legs p50 µs | load avg (1 min) |"
echo "|---|---|---|---|---|---|"
plain 1
adapter 1
plain "$CLIENTS"
adapter "$CLIENTS"
adapter "$CLIENTS" --shared-connection
plain 1
