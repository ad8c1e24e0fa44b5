#!/usr/bin/env bash
# The adapter side of BENCHMARKS.md: redis-py's Lock through lockbench's adapter protocol
# (`-s adapter:redis-py`) next to a plain Python loop calling the same library
# (adapters/python/plain_loop_redis_py.py) on the same redis-server, in the same run, and the
# harness's own overhead per adapter request (summary.json `harness.adapter_overhead`).
#
# Starts its own redis-server on a free 127.0.0.1 port in a temporary directory (never 6379,
# never a server it did not start) and removes both on exit, Ctrl-C or error. Every lockbench
# run uses --topology external --direct (no proxy between the library and the node, as for the
# plain loop), hold 0, no audit, --connect-timeout 60s (64 interpreters starting on a loaded
# machine take more than the default 1 s; start-up is not measured), and RESOURCES resources
# (default 100000), so that its clients' random picks almost never collide: the plain loop's
# threads each have a key of their own, and a busy acquire costs a round trip but completes no
# cycle.
#
#   scripts/bench-adapters.sh            # CLIENTS=64 DURATION=5s
#
# Pairs, each a plain-loop row then the lockbench row of the same layout (the same number of
# Python interpreters, the same number of threads calling the library), the lockbench row
# saying its ratio to the plain row just above it:
#   - 1 thread in 1 process            | 1 client;
#   - CLIENTS threads in CLIENTS processes | CLIENTS clients, one adapter process each (the default);
#   - CLIENTS threads in PROCESSES processes | CLIENTS clients, --adapter-processes PROCESSES;
#   - with SHARED=1, CLIENTS threads in 1 process | CLIENTS clients, --shared-connection.
# ORDER=grouped-first measures the --adapter-processes pair before the one-process-per-client
# pair (to alternate them over repeated runs). With RATE (ops/s, default 200; RATE= to skip),
# two open-loop rows follow: CLIENTS clients at --rate RATE, one adapter process each and with
# --adapter-processes PROCESSES: below saturation, so their overhead is the harness's own, not
# a wait for a CPU (their ratio cell says "open loop": the rate is what was asked). The plain
# loop at 1 thread runs again last. PAIRS (e.g. "grouped one") runs only the pairs named, in
# that order: one, per_client, grouped, shared, open_loop.
#
# Environment: CLIENTS (default 64), PROCESSES (default: CPU cores), DURATION (default 5s),
# RESOURCES (default 100000), RATE (default 200), TIMEOUT_MS (the library's socket timeout on
# both sides: the plain loop's --timeout-ms and lockbench's --node-timeout, default 100), LOCKBENCH (default target/release/lockbench,
# built if missing), PYTHON (default .adapters/venv/bin/python), LABEL (a prefix for every
# row's first cell, e.g. the build measured), WRAP (a command prefix for redis-server, the plain
# loop and lockbench alike, e.g. `taskset -c 1`: every side gets the same treatment), and
# lockbench's own LOCKBENCH_ADAPTERS_DIR (another checkout's adapters/, to measure its Python
# adapters with this lockbench). Prints one Markdown table row per measurement, each with the
# 1-minute load average taken just before it; the legs are the overhead's p50s (lockbench / to
# the adapter / inside it before the library call / back, `summary.json`
# `harness.adapter_overhead_legs`). CPU per cycle (user + system, from /proc, whatever the
# load): lockbench's own process, the Python processes (the adapters, or the plain loop's own
# count), and redis-server, over the measured window divided by the cycles in it; context
# switches per cycle (voluntary + involuntary, every thread's, from /proc) and run-queue wait
# per cycle (how long their threads waited for a CPU while runnable, /proc schedstat) likewise:
# the wait is what a saturated machine adds to the overhead, the CPU is the work. For the
# plain rows redis-server's figures span the plain loop's whole life, start-up included (an
# upper bound).
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-64}
PROCESSES=${PROCESSES:-$(nproc)}
DURATION=${DURATION:-5s}
RESOURCES=${RESOURCES:-100000}
RATE=${RATE-200}
TIMEOUT_MS=${TIMEOUT_MS:-100}
read -r -a wrap <<<"${WRAP:-}"
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
"${wrap[@]}" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" &
redis_pid=$!
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done
url="redis://127.0.0.1:$port"

load() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
# sum_proc FILE AWK PID…: the AWK program's total over /proc/PID/FILE of the given processes
# so far (a glob in FILE reaches every thread; gone processes and threads count 0).
sum_proc() {
  local file=$1 prog=$2 files=() p
  shift 2
  for p in "$@"; do files+=(/proc/"$p"/$file); done
  [[ ${#files[@]} -gt 0 ]] || { echo 0; return; }
  cat "${files[@]}" 2>/dev/null | awk "$prog"' END { printf "%.0f\n", t + 0 }' || true
}
# User + system CPU time, in clock ticks.
ticks() { sum_proc stat '{ sub(/^.*\) /, ""); t += $12 + $13 }' "$@"; }
# Context switches, voluntary + involuntary, every thread's.
switches() { sum_proc 'task/*/status' '/ctxt_switches:/ { t += $2 }' "$@"; }
# Time every thread waited for a CPU while runnable, ns (schedstat).
waited() { sum_proc 'task/*/schedstat' '{ t += $2 }' "$@"; }
hz=$(getconf CLK_TCK)
# CPU µs per cycle from a tick difference, a rate (cycles/s) and a window (s).
per_cycle() { awk -v d="$1" -v r="$2" -v w="$3" -v hz="$hz" 'BEGIN { if (r * w > 0) printf "%.0f", d / hz * 1e6 / (r * w); else printf "-" }'; }
# Context switches per cycle from a count difference, a rate (cycles/s) and a window (s).
# µs of run-queue wait per cycle from a ns difference, a rate (cycles/s) and a window (s).
wait_per_cycle() { awk -v d="$1" -v r="$2" -v w="$3" 'BEGIN { if (r * w > 0) printf "%.0f", d / 1e3 / (r * w); else printf "-" }'; }
switches_per_cycle() { awk -v d="$1" -v r="$2" -v w="$3" 'BEGIN { if (r * w > 0) printf "%.1f", d / (r * w); else printf "-" }'; }

plain() { # threads [processes]
  local l; l=$(load)
  local r0 rs0 rw0 out; r0=$(ticks "$redis_pid"); rs0=$(switches "$redis_pid"); rw0=$(waited "$redis_pid")
  out=$("${wrap[@]}" "$PYTHON" adapters/python/plain_loop_redis_py.py --url "$url" --threads "$1" \
    --processes "${2:-1}" --seconds "$secs" --timeout-ms "$TIMEOUT_MS" --key-prefix "plain$1-${2:-1}:")
  local rd rsd rwd; rd=$(( $(ticks "$redis_pid") - r0 )); rsd=$(( $(switches "$redis_pid") - rs0 ))
  rwd=$(( $(waited "$redis_pid") - rw0 ))
  local rate; rate=$(jq -r .cycles_per_s <<<"$out")
  plain_rate=$rate
  # redis-server's figures over the plain loop's whole life (its start-up included: an upper
  # bound) divided by the cycles it measured.
  local redis_us; redis_us=$(per_cycle "$rd" "$rate" "$secs")
  local redis_sw; redis_sw=$(switches_per_cycle "$rsd" "$rate" "$secs")
  local redis_wait; redis_wait=$(wait_per_cycle "$rwd" "$rate" "$secs")
  jq -r --arg l "$l" --arg b "$LABEL" --arg r "$redis_us" --arg rs "$redis_sw" --arg rw "$redis_wait" '"| \($b)plain Python loop, \(.threads) thread(s) in \(.processes) process(es) | \(.cycles_per_s) | - | - | - | - | - / \(.cpu_us_per_cycle | floor) / \($r) | - / \(.switches_per_cycle) / \($rs) | - / \(.run_queue_wait_us_per_cycle | floor) / \($rw) | \($l) |"' <<<"$out"
}

plain_rate=""
runs=0
adapter() { # clients, extra flags… (a --rate makes it an open-loop row)
  local c=$1; shift
  local open=""
  [[ " $* " == *" --rate "* ]] && open=1
  local l; l=$(load)
  runs=$((runs + 1))
  local res="$work/results-$runs"
  "${wrap[@]}" "$LOCKBENCH" run -s adapter:redis-py --topology external --url "$url" --direct \
    -c "$c" -r "$RESOURCES" -d "$DURATION" --connect-timeout 60s --node-timeout "${TIMEOUT_MS}ms" --no-audit --no-progress --results "$res" "$@" \
    >/dev/null 2>"$work/lockbench.err" &
  local lb=$!
  # With WRAP the lockbench process is WRAP's child's image (taskset/chrt exec it): same pid.
  # CPU per cycle while it measures: from its first summary (the clients connected and
  # started) to 2 s before the planned end (half the run when it is 6 s or shorter).
  local i
  for i in $(seq 1200); do
    [[ -e "$res/latest/summary.json" ]] && break
    kill -0 "$lb" 2>/dev/null || break
    sleep 0.1
  done
  local kids; kids=$(pgrep -P "$lb" | tr '\n' ' ' || true)
  local l0 a0 r0 t0; l0=$(ticks "$lb"); a0=$(ticks $kids); r0=$(ticks "$redis_pid"); t0=$(now)
  local ls0 as0 rs0; ls0=$(switches "$lb"); as0=$(switches $kids); rs0=$(switches "$redis_pid")
  local lw0 aw0 rw0; lw0=$(waited "$lb"); aw0=$(waited $kids); rw0=$(waited "$redis_pid")
  sleep "$(awk -v s="$secs" 'BEGIN { print (s > 6 ? s - 3 : s / 2) }')"
  local ld ad rd w alive=1
  kill -0 "$lb" 2>/dev/null || alive=""
  ld=$(( $(ticks "$lb") - l0 )); ad=$(( $(ticks $kids) - a0 )); rd=$(( $(ticks "$redis_pid") - r0 ))
  local lsd asd rsd; lsd=$(( $(switches "$lb") - ls0 )); asd=$(( $(switches $kids) - as0 )); rsd=$(( $(switches "$redis_pid") - rs0 ))
  local lwd awd rwd; lwd=$(( $(waited "$lb") - lw0 )); awd=$(( $(waited $kids) - aw0 )); rwd=$(( $(waited "$redis_pid") - rw0 ))
  w=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  wait "$lb" || { cat "$work/lockbench.err" >&2; return 1; }
  local rate; rate=$(jq -r '.strategies[0].throughput_ops_s' "$res"/latest/summary.json)
  local ratio="open loop"
  if [[ -z "$open" ]]; then
    ratio=$(awk -v a="$rate" -v p="$plain_rate" 'BEGIN { if (p > 0) printf "%.2f×", a / p; else printf "-" }')
  fi
  local cpu sw rq
  if [[ -n "$alive" && -n "$kids" ]]; then
    cpu="$(per_cycle "$ld" "$rate" "$w") / $(per_cycle "$ad" "$rate" "$w") / $(per_cycle "$rd" "$rate" "$w")"
    sw="$(switches_per_cycle "$lsd" "$rate" "$w") / $(switches_per_cycle "$asd" "$rate" "$w") / $(switches_per_cycle "$rsd" "$rate" "$w")"
    rq="$(wait_per_cycle "$lwd" "$rate" "$w") / $(wait_per_cycle "$awd" "$rate" "$w") / $(wait_per_cycle "$rwd" "$rate" "$w")"
  else # it ended before the window closed: no figure rather than a wrong one
    echo "note: no CPU figures for $c client(s) $*: lockbench alive at the window's end: ${alive:-no}; adapter processes: $(wc -w <<<"$kids")" >&2
    cpu="- / - / -"
    sw="- / - / -"
    rq="- / - / -"
  fi
  jq -r --arg l "$l" --arg c "$c" --arg f "$*" --arg b "$LABEL" --arg cpu "$cpu" --arg sw "$sw" --arg rq "$rq" --arg ratio "$ratio" '.strategies[0] |
    (.harness.adapter_overhead_legs // {}) as $g |
    "| \($b)adapter:redis-py, \($c) client(s) \($f) | \(.throughput_ops_s | floor) (\(.contended) busy) | \($ratio) | \(.harness.adapter_overhead.p50_us // "-") | \(.harness.adapter_overhead.p99_us // "-") | \([$g.lockbench.p50_us, $g.to_adapter.p50_us, $g.in_adapter.p50_us, $g.from_adapter.p50_us] | map(. // "-" | tostring) | join(" / ")) | \($cpu) | \($sw) | \($rq) | \($l) |"' \
    "$res"/latest/summary.json
}

echo "| what | acquire+release cycles/s | vs the plain row above | overhead p50 µs | overhead p99 µs | legs p50 µs | CPU µs per cycle: lockbench / Python / redis-server | context switches per cycle: lockbench / Python / redis-server | run-queue wait µs per cycle: lockbench / Python / redis-server | load avg (1 min) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
one() { plain 1; adapter 1; }
per_client() { plain "$CLIENTS" "$CLIENTS"; adapter "$CLIENTS"; }
grouped() { plain "$CLIENTS" "$PROCESSES"; adapter "$CLIENTS" --adapter-processes "$PROCESSES"; }
shared() { plain "$CLIENTS" 1; adapter "$CLIENTS" --shared-connection; }
open_loop() {
  adapter "$CLIENTS" --rate "$RATE"
  adapter "$CLIENTS" --adapter-processes "$PROCESSES" --rate "$RATE"
}
if [[ -n "${PAIRS:-}" ]]; then
  for pair in $PAIRS; do "$pair"; done
else
  one
  if [[ "${ORDER:-}" == grouped-first ]]; then grouped; per_client; else per_client; grouped; fi
  if [[ -n "${SHARED:-}" ]]; then shared; fi
  if [[ -n "$RATE" ]]; then open_loop; fi
  plain 1
fi
