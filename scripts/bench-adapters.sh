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
# Rows: the plain loop at 1 thread, lockbench at 1 client; the plain loop at CLIENTS threads in
# one process, lockbench at CLIENTS clients with one adapter process each (the default); the
# plain loop at CLIENTS threads over PROCESSES processes, lockbench with --adapter-processes
# PROCESSES (the same layout: PROCESSES interpreters, CLIENTS threads calling the library); with
# SHARED=1 also --shared-connection (one process); the plain loop at 1 thread again.
# ORDER=grouped-first measures the --adapter-processes pair before the one-process-per-client
# pair (to alternate them over repeated runs).
#
# Environment: CLIENTS (default 64), PROCESSES (default: CPU cores), DURATION (default 5s), LOCKBENCH (default
# target/release/lockbench, built if missing), PYTHON (default .adapters/venv/bin/python),
# LABEL (a prefix for every row's first cell, e.g. the build measured), and lockbench's own
# LOCKBENCH_ADAPTERS_DIR (another checkout's adapters/, to measure its Python adapters with
# this lockbench). Prints one Markdown table row per measurement, each with the 1-minute load
# average taken just before it; the legs are the overhead's p50s (lockbench / to the adapter /
# inside it before the library call / back, `summary.json` `harness.adapter_overhead_legs`).
# CPU per cycle (user + system, from /proc, whatever the load): lockbench's own process, the
# Python processes (the adapters, or the plain loop's own count), and redis-server, over the
# measured window divided by the cycles in it.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-64}
PROCESSES=${PROCESSES:-$(nproc)}
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
now() { date +%s.%N; }
# User + system CPU time of the given processes so far, in clock ticks (gone ones count 0).
ticks() {
  local t=0 p f
  for p in "$@"; do
    f=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || continue
    set -- $f
    t=$((t + ${12} + ${13}))
  done
  echo "$t"
}
hz=$(getconf CLK_TCK)
# CPU µs per cycle from a tick difference, a rate (cycles/s) and a window (s).
per_cycle() { awk -v d="$1" -v r="$2" -v w="$3" -v hz="$hz" 'BEGIN { if (r * w > 0) printf "%.0f", d / hz * 1e6 / (r * w); else printf "-" }'; }

plain() { # threads [processes]
  local l; l=$(load)
  local r0 t0 out; r0=$(ticks "$redis_pid"); t0=$(now)
  out=$("$PYTHON" adapters/python/plain_loop_redis_py.py --url "$url" --threads "$1" \
    --processes "${2:-1}" --seconds "$secs" --key-prefix "plain$1-${2:-1}:")
  local rd; rd=$(( $(ticks "$redis_pid") - r0 ))
  local rate; rate=$(jq -r .cycles_per_s <<<"$out")
  local redis_us; redis_us=$(per_cycle "$rd" "$rate" "$secs")
  jq -r --arg l "$l" --arg b "$LABEL" --arg r "$redis_us" '"| \($b)plain Python loop, \(.threads) thread(s) in \(.processes) process(es) | \(.cycles_per_s) | - | - | - | - / \(.cpu_us_per_cycle | floor) / \($r) | \($l) |"' <<<"$out"
}

adapter() { # clients, extra flags…
  local c=$1; shift
  local l; l=$(load)
  local res="$work/results-$c-$#"
  "$LOCKBENCH" run -s adapter:redis-py --topology external --url "$url" --direct \
    -c "$c" -r "$c" -d "$DURATION" --no-audit --no-progress --results "$res" "$@" \
    >/dev/null 2>"$work/lockbench.err" &
  local lb=$!
  # CPU per cycle while it measures: from its first summary (the clients connected and
  # started) to 1 s before the planned end.
  local i
  for i in $(seq 1200); do
    [[ -e "$res/latest/summary.json" ]] && break
    kill -0 "$lb" 2>/dev/null || break
    sleep 0.1
  done
  local kids; kids=$(pgrep -P "$lb" | tr '\n' ' ')
  local l0 a0 r0 t0; l0=$(ticks "$lb"); a0=$(ticks $kids); r0=$(ticks "$redis_pid"); t0=$(now)
  sleep "$(awk -v s="$secs" 'BEGIN { print (s > 2.5 ? s - 1.5 : s / 2) }')"
  local ld ad rd w alive=1
  kill -0 "$lb" 2>/dev/null || alive=""
  ld=$(( $(ticks "$lb") - l0 )); ad=$(( $(ticks $kids) - a0 )); rd=$(( $(ticks "$redis_pid") - r0 ))
  w=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  wait "$lb" || { cat "$work/lockbench.err" >&2; return 1; }
  local rate; rate=$(jq -r '.strategies[0].throughput_ops_s' "$res"/latest/summary.json)
  local cpu
  if [[ -n "$alive" && -n "$kids" ]]; then
    cpu="$(per_cycle "$ld" "$rate" "$w") / $(per_cycle "$ad" "$rate" "$w") / $(per_cycle "$rd" "$rate" "$w")"
  else # it ended before the window closed: no figure rather than a wrong one
    cpu="- / - / -"
  fi
  jq -r --arg l "$l" --arg c "$c" --arg f "$*" --arg b "$LABEL" --arg cpu "$cpu" '.strategies[0] |
    (.harness.adapter_overhead_legs // {}) as $g |
    "| \($b)adapter:redis-py, \($c) client(s) \($f) | \(.throughput_ops_s | floor) | \(.harness.adapter_overhead.p50_us // "-") | \(.harness.adapter_overhead.p99_us // "-") | \([$g.lockbench.p50_us, $g.to_adapter.p50_us, $g.in_adapter.p50_us, $g.from_adapter.p50_us] | map(. // "-" | tostring) | join(" / ")) | \($cpu) | \($l) |"' \
    "$res"/latest/summary.json
}

echo "| what | acquire+release cycles/s | overhead p50 µs | overhead p99 µs | legs p50 µs | CPU µs per cycle: lockbench / Python / redis-server | load avg (1 min) |"
echo "|---|---|---|---|---|---|---|"
plain 1
adapter 1
per_client() { plain "$CLIENTS"; adapter "$CLIENTS"; }
grouped() { plain "$CLIENTS" "$PROCESSES"; adapter "$CLIENTS" --adapter-processes "$PROCESSES"; }
if [[ "${ORDER:-}" == grouped-first ]]; then grouped; per_client; else per_client; grouped; fi
if [[ -n "${SHARED:-}" ]]; then adapter "$CLIENTS" --shared-connection; fi
plain 1
