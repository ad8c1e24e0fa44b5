#!/usr/bin/env bash
# The redis-benchmark side of BENCHMARKS.md: what plain Redis commands cost on this machine, to
# put the lock benches' numbers in proportion. Starts its own redis-server on a free 127.0.0.1
# port (never 6379, never a server it did not start) and tears everything down on exit,
# Ctrl-C or error.
#
#   scripts/bench-compare.sh               # redis-benchmark only
#   scripts/bench-compare.sh --lockbench   # also the ratio table: lockbench run vs redis-benchmark,
#                                          # audit on vs off, proxy vs direct, latency toxic added
#                                          # vs asked (builds target/release/lockbench if missing)
#   scripts/bench-compare.sh --table       # only print the last `cargo bench` results as a
#                                          # Markdown table (median, 95% CI; needs jq)
#
# Environment: CLIENTS (default 64), REQUESTS (default 200000), DURATION for lockbench run
# (default 10s), LOCKBENCH (the binary to compare; default target/release/lockbench).
# On a machine shared with builds, run it as `chrt -f 10 scripts/bench-compare.sh --lockbench`
# (root): everything it starts then runs at real-time priority and the rest gets idle time only.
# HAProxy, when installed, is measured as a reference forwarder beside the embedded proxy.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-64}
REQUESTS=${REQUESTS:-200000}
DURATION=${DURATION:-10s}
WITH_LOCKBENCH=0
TABLE_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --lockbench) WITH_LOCKBENCH=1 ;;
    --table) TABLE_ONLY=1 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done

# Median and its 95% confidence interval of every bench in target/criterion (the last run).
criterion_table() {
  command -v jq >/dev/null || { echo "error: --table needs jq: apt-get install jq" >&2; exit 1; }
  local dir=target/criterion
  [[ -d $dir ]] || { echo "error: no $dir: run \`cargo bench\` first" >&2; exit 1; }
  echo "| bench | median | 95% CI of the median |"
  echo "|---|---|---|"
  find "$dir" -path '*/new/estimates.json' | sort | while read -r est; do
    local id
    id=$(jq -r .full_id "$(dirname "$est")/benchmark.json")
    jq -r --arg id "$id" '
      def t: if . >= 1e6 then "\(. / 1e6 * 100 | round / 100) ms"
             elif . >= 1e3 then "\(. / 1e3 * 10 | round / 10) µs"
             else "\(. * 100 | round / 100) ns" end;
      "| `\($id)` | \(.median.point_estimate | t) | \(.median.confidence_interval.lower_bound | t) … \(.median.confidence_interval.upper_bound | t) |"
    ' "$est"
  done
}
if [[ $TABLE_ONLY == 1 ]]; then
  criterion_table
  exit 0
fi

for cmd in redis-server redis-cli redis-benchmark; do
  command -v "$cmd" >/dev/null || {
    echo "error: $cmd not found: install it with \`apt-get install redis-server redis-tools\`" >&2
    exit 1
  }
done

WORK=$(mktemp -d -t lockbench-compare.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    # Bounded wait: SIGKILL whatever has not exited after ~2 s.
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A port nothing listens on (random in 20000..59999; 6379 is never in range).
free_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  echo "error: no free port found on 127.0.0.1" >&2
  exit 1
}

# wait_for DESCRIPTION COMMAND...: polls COMMAND every 50 ms for up to 20 s (a loaded machine is slow to start).
wait_for() {
  local what=$1
  shift
  for _ in $(seq 400); do
    "$@" >/dev/null 2>&1 && return
    sleep 0.05
  done
  echo "error: $what did not come up within 20 s" >&2
  # Whatever the process said (e.g. a port another process took meanwhile).
  for log in "$WORK"/*.log; do
    [[ -s $log ]] && { echo "--- $log" >&2; tail -n 5 "$log" >&2; }
  done
  exit 1
}

PORT=$(free_port)
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
  --logfile "$WORK/redis.log" --daemonize no &
PIDS+=($!)
wait_for "redis-server on port $PORT" redis-cli -p "$PORT" ping

# The release script of `single` / `redlock` (src/strategy/scripts.rs, RELEASE_LUA).
RELEASE_LUA="
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"
SHA=$(redis-cli -p "$PORT" script load "$RELEASE_LUA")

echo "# machine"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "cpu:     $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "memory:  $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
echo "kernel:  $(uname -r)"
echo "redis:   $(redis-server --version | grep -o 'v=[0-9.]*')"
echo "load:    $(uptime | sed 's/.*load average: //') (1, 5, 15 min)"
echo

bench() { # bench LABEL PORT ARGS...: one redis-benchmark line, labelled
  local label=$1 port=$2
  shift 2
  printf '%-34s ' "$label"
  redis-benchmark -p "$port" -c "$CLIENTS" -n "$REQUESTS" -r 1000000 -q "$@" |
    tr '\r' '\n' | grep -E 'requests per second' | tail -1
}

echo "# redis-benchmark direct: port $PORT, -c $CLIENTS -n $REQUESTS, keys lock:<random of 1M>"
bench "SET NX PX (acquire)" "$PORT" SET lock:__rand_int__ owner NX PX 60000
# After the SET run most keys exist with value `owner`: the first EVALSHA on a key deletes it,
# later ones find it gone (GET + compare only).
bench "EVALSHA release (compare-and-del)" "$PORT" EVALSHA "$SHA" 1 lock:__rand_int__ owner
bench "PING" "$PORT" PING
# One client, one request at a time: the round-trip floor under the uncontended lock benches.
printf '%-34s ' "PING, -c 1 (one round trip)"
redis-benchmark -p "$PORT" -c 1 -n 20000 -q PING | tr '\r' '\n' |
  grep -E 'requests per second' | tail -1
echo

if [[ $WITH_LOCKBENCH == 1 ]]; then
  LOCKBENCH=${LOCKBENCH:-${CARGO_TARGET_DIR:-target}/release/lockbench}
  if [[ ! -x $LOCKBENCH ]]; then
    echo "building $LOCKBENCH (cargo build --release)..." >&2
    cargo build --release --quiet
  fi
  command -v jq >/dev/null || { echo "error: --lockbench needs jq: apt-get install jq" >&2; exit 1; }

  API_PORT=$(free_port)
  PLAIN_PORT=$(free_port)
  while [[ $PLAIN_PORT == "$API_PORT" ]]; do PLAIN_PORT=$(free_port); done
  printf '[{"name": "plain", "listen": "127.0.0.1:%s", "upstream": "127.0.0.1:%s"}]\n' \
    "$PLAIN_PORT" "$PORT" >"$WORK/proxies.json"
  "$LOCKBENCH" toxiproxy --listen "127.0.0.1:$API_PORT" --config "$WORK/proxies.json" \
    >"$WORK/toxiproxy.log" 2>&1 &
  PIDS+=($!)
  wait_for "lockbench toxiproxy on port $API_PORT" redis-cli -p "$PLAIN_PORT" ping

  rps() { # rps PORT ARGS...: redis-benchmark requests per second (number only)
    local port=$1
    shift
    redis-benchmark -p "$port" -c "$CLIENTS" -n "$REQUESTS" -r 1000000 -q "$@" |
      tr '\r' '\n' | grep -oE '[0-9]+(\.[0-9]+)? requests per second' | tail -1 | cut -d' ' -f1
  }
  p50_ms() { # p50_ms PORT [N]: one client, one PING at a time, median latency in ms
    redis-benchmark -p "$1" -c 1 -n "${2:-2000}" -t ping_inline --precision 3 2>/dev/null |
      tr '\r' '\n' | grep -A8 -i 'latency summary' | awk 'NR==3 {print $3}'
  }
  toxic() { # toxic LATENCY_MS|none: (re)sets a downstream latency toxic on the proxy
    curl -fsS -X DELETE "http://127.0.0.1:$API_PORT/proxies/plain/toxics/lat" >/dev/null 2>&1 || true
    [[ $1 == none ]] && return
    curl -fsS -X POST "http://127.0.0.1:$API_PORT/proxies/plain/toxics" \
      -d "{\"name\": \"lat\", \"type\": \"latency\", \"stream\": \"downstream\", \"attributes\": {\"latency\": $1}}" >/dev/null
  }
  # cycles ARGS...: one `lockbench run` against the private node; prints "cycles_per_s cpu_s"
  # (CPU = user + sys of the whole process, from bash's `time`).
  cycles() {
    local out="$WORK/run-$RANDOM" t
    t=$( { TIMEFORMAT='%U %S'; time "$LOCKBENCH" run --topology external --direct \
      --url "redis://127.0.0.1:$PORT" -s single -c "$CLIENTS" -r 100000 --hold 0ms -d "$DURATION" \
      --no-progress --results "$out" --key-prefix "cmp$RANDOM:" "$@" >/dev/null 2>&1; } 2>&1 )
    echo "$(jq -r '.strategies[0] | .acquired / .elapsed_s' "$out/latest/summary.json") $(awk '{print $1 + $2}' <<<"$t")"
  }

  echo "# ratio table: one private node, back to back, -c $CLIENTS (lockbench: $DURATION per run)"
  set_direct=$(rps "$PORT" SET lock:__rand_int__ owner NX PX 60000)
  ping_direct=$(rps "$PORT" PING)
  set_proxy=$(rps "$PLAIN_PORT" SET lock:__rand_int__ owner NX PX 60000)
  ping_proxy=$(rps "$PLAIN_PORT" PING)
  # A reference forwarder in the same run, when installed: HAProxy in TCP mode, one thread.
  # What any user-space TCP proxy costs on this machine (the bound for ours), not a target.
  set_ref=0
  if command -v haproxy >/dev/null; then
    REF_PORT=$(free_port)
    printf 'global\n  nbthread 1\n  maxconn 4096\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\nlisten plain\n  bind 127.0.0.1:%s\n  server n1 127.0.0.1:%s\n' \
      "$REF_PORT" "$PORT" >"$WORK/haproxy.cfg"
    haproxy -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 &
    PIDS+=($!)
    wait_for "haproxy on port $REF_PORT" redis-cli -p "$REF_PORT" ping
    set_ref=$(rps "$REF_PORT" SET lock:__rand_int__ owner NX PX 60000)
  fi
  read -r lb_noaudit lb_noaudit_cpu <<<"$(cycles --no-audit)"
  read -r lb_audit _ <<<"$(cycles)"
  rb_cpu=$( { TIMEFORMAT='%U %S'; time redis-benchmark -p "$PORT" -c "$CLIENTS" -n "$REQUESTS" \
    -r 1000000 -q SET lock:__rand_int__ owner NX PX 60000 >/dev/null 2>&1; } 2>&1 | awk '{print $1 + $2}')
  base=$(p50_ms "$PLAIN_PORT")
  declare -A added
  for l in 0.5 1 5 50; do
    toxic "$l"
    n=2000
    [[ $l == 50 ]] && n=100
    added[$l]=$(awk -v a="$(p50_ms "$PLAIN_PORT" $n)" -v b="$base" 'BEGIN {printf "%.3f", a - b}')
  done
  toxic none

  awk -v sd="$set_direct" -v pd="$ping_direct" -v sp="$set_proxy" -v pp="$ping_proxy" -v sr="$set_ref" \
    -v na="$lb_noaudit" -v au="$lb_audit" -v nacpu="$lb_noaudit_cpu" -v rbcpu="$rb_cpu" \
    -v req="$REQUESTS" -v dur="${DURATION%s}" -v base="$base" \
    -v a05="${added[0.5]}" -v a1="${added[1]}" -v a5="${added[5]}" -v a50="${added[50]}" 'BEGIN {
    printf "| measure | value | ratio | target |\n|---|---|---|---|\n"
    printf "| redis-benchmark SET NX PX, direct | %.0f rps | 1.00 | |\n", sd
    printf "| lockbench run single --no-audit (2 round trips per cycle) | %.0f cycles/s = %.0f round trips/s | %.2f of redis-benchmark | >= 0.90 |\n", na, 2 * na, 2 * na / sd
    printf "| lockbench run single, audited (history + ledger) | %.0f cycles/s | %.2f of --no-audit | >= 0.75 |\n", au, au / na
    printf "| client CPU per round trip, lockbench --no-audit / redis-benchmark | %.1f / %.1f us | %.2f | |\n", nacpu * 1e6 / (2 * na * dur), rbcpu * 1e6 / req, (nacpu / (2 * na * dur)) / (rbcpu / req)
    printf "| redis-benchmark SET NX PX through the proxy | %.0f rps | %.2f of direct | >= 0.85 |\n", sp, sp / sd
    printf "| redis-benchmark PING through the proxy | %.0f rps | %.2f of direct | >= 0.85 |\n", pp, pp / pd
    if (sr > 0)
      printf "| reference: SET NX PX through HAProxy (tcp mode, 1 thread) | %.0f rps | %.2f of direct | |\n", sr, sr / sd
    else
      printf "| reference: SET NX PX through HAProxy | not installed | | |\n"
    printf "| one-client PING p50 through the proxy, no toxic | %.3f ms | | |\n", base
    split("0.5 1 5 50", L, " ")
    A[1] = a05; A[2] = a1; A[3] = a5; A[4] = a50
    for (i = 1; i <= 4; i++)
      printf "| latency toxic %s ms (downstream): added at p50 | %.3f ms | %.2f of asked | within max(0.1 ms, 5%%) |\n", L[i], A[i], A[i] / L[i]
  }'
  echo
  echo "load after: $(uptime | sed 's/.*load average: //')"
fi
