#!/usr/bin/env bash
# CI smoke test of the docker topology. With a Docker engine: builds the offline images
# (docker/build-images.sh), brings up the `single` profile of docker/compose.yml under a unique
# project name on random host ports, PINGs the node directly and through the Toxiproxy proxy,
# and tears everything down (also on failure or Ctrl-C). Without an engine it prints
# "SKIPPED docker smoke: no Docker engine (<reason>)" and exits 0.
#
# The proxied PING needs lockbench's `toxiproxy` subcommand in the stand-in image: when the
# image's binary lacks it (`lockbench toxiproxy --help` fails), the smoke fails before bringing
# anything up. There is no partial pass: the direct and the proxied PING must both succeed.
#
# Environment: REDIS_IMAGE / TOXIPROXY_IMAGE (default: the local images, built here; other
# images are used as given, e.g. redis:7 and Shopify's Toxiproxy where a registry is reachable),
# LOCAL_REDIS_IMAGE / LOCAL_TOXIPROXY_IMAGE (names of the local images), SMOKE_TIMEOUT_S
# (default 120, per wait), LOCKBENCH_CARGO_PROFILE (default dev: reuses the test build).
# Exit codes: 0 passed or skipped (see the last line), 1 failed.
set -uo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
started=$SECONDS
timeout_s="${SMOKE_TIMEOUT_S:-120}"

log() { printf 'docker smoke: %s\n' "$*"; }
fail() {
  printf 'FAILED docker smoke after %d s: %s\n' "$((SECONDS - started))" "$*" >&2
  exit 1
}

# ---- is there an engine? ------------------------------------------------------------------
if ! command -v docker >/dev/null 2>&1; then
  echo "SKIPPED docker smoke: no Docker engine (the docker CLI is not on PATH)"
  exit 0
fi
if ! info_err="$(docker info 2>&1 >/dev/null)"; then
  echo "SKIPPED docker smoke: no Docker engine ($(printf '%s' "$info_err" | tr '\n' ' ' | sed 's/ *$//'))"
  exit 0
fi
if docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
else
  fail "a Docker engine is running but there is no Compose tool: install it (Debian: apt-get install docker-compose)"
fi

# ---- images ---------------------------------------------------------------------------------
export LOCKBENCH_CARGO_PROFILE="${LOCKBENCH_CARGO_PROFILE:-dev}"
export LOCAL_REDIS_IMAGE="${LOCAL_REDIS_IMAGE:-lockbench/redis:7.0-local}"
export LOCAL_TOXIPROXY_IMAGE="${LOCAL_TOXIPROXY_IMAGE:-lockbench/toxiproxy:local}"
export REDIS_IMAGE="${REDIS_IMAGE:-$LOCAL_REDIS_IMAGE}"
export TOXIPROXY_IMAGE="${TOXIPROXY_IMAGE:-$LOCAL_TOXIPROXY_IMAGE}"
# Local images are built here; any other image (e.g. the public ones) is used as given.
if [ "$REDIS_IMAGE" = "$LOCAL_REDIS_IMAGE" ]; then
  "$script_dir/build-images.sh" --only redis || fail "building $REDIS_IMAGE failed"
fi
if [ "$TOXIPROXY_IMAGE" = "$LOCAL_TOXIPROXY_IMAGE" ]; then
  # Rebuilt every time so that the stand-in carries the code under test.
  "$script_dir/build-images.sh" --only toxiproxy --rebuild || fail "building $TOXIPROXY_IMAGE failed"
  # The stand-in must have the `toxiproxy` subcommand: clap exits 2 ("unrecognized
  # subcommand") when it is missing, 0 when `--help` of the subcommand is printed.
  if ! sub_help="$(docker run --rm --entrypoint /usr/local/bin/lockbench "$TOXIPROXY_IMAGE" toxiproxy --help 2>&1)"; then
    fail "$TOXIPROXY_IMAGE has no \`lockbench toxiproxy\` subcommand, which the proxied PING needs: $(printf '%s' "$sub_help" | head -n 3 | tr '\n' ' ')"
  fi
fi

# ---- bring up `single` --------------------------------------------------------------------
export COMPOSE_PROJECT_NAME="lbsmoke$$"
export COMPOSE_FILE="$script_dir/compose.yml"
# Port 0: Docker picks free host ports, so the smoke never collides with anything running.
export LB_BIND=127.0.0.1 LB_SINGLE_API_PORT=0 LB_SINGLE_N1_PORT=0 LB_SINGLE_N1_DIRECT_PORT=0

teardown() {
  "${compose[@]}" --profile single down -v --remove-orphans --timeout 3 >/dev/null 2>&1 ||
    log "warning: '${compose[*]} down' failed for project $COMPOSE_PROJECT_NAME"
}
trap teardown EXIT
trap 'exit 130' INT TERM

log "starting profile single as project $COMPOSE_PROJECT_NAME (redis $REDIS_IMAGE, toxiproxy $TOXIPROXY_IMAGE)"
if ! up_out="$("${compose[@]}" --profile single up -d 2>&1)"; then
  printf '%s\n' "$up_out" >&2
  fail "'${compose[*]} --profile single up -d' failed"
fi

# host_port SERVICE CONTAINER_PORT: the published host port, e.g. 32768.
host_port() {
  "${compose[@]}" port "$1" "$2" 2>/dev/null | sed -n 's/.*:\([0-9][0-9]*\)$/\1/p' | head -n 1
}

# resp_ping PORT: 0 when 127.0.0.1:PORT answers PING with +PONG (no redis-cli needed).
resp_ping() {
  local fd reply=""
  { exec {fd}<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&"$fd"
  IFS= read -r -t 2 reply <&"$fd" || true
  exec {fd}>&-
  [[ "$reply" == "+PONG"* ]]
}

# http_status PORT PATH: the HTTP status line of GET PATH on 127.0.0.1:PORT.
http_status() {
  local fd line=""
  { exec {fd}<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&"$fd"
  IFS= read -r -t 2 line <&"$fd" || true
  exec {fd}>&-
  printf '%s\n' "${line%$'\r'}"
}

# wait_for DESCRIPTION COMMAND...: polls every 0.2 s until COMMAND succeeds or timeout_s passes.
wait_for() {
  local what="$1" deadline=$((SECONDS + timeout_s))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
  log "$what ok after $((SECONDS - started)) s"
}

direct_port="$(host_port single-n1 6379)"
[ -n "$direct_port" ] || fail "no published port for single-n1:6379"
wait_for "direct PING 127.0.0.1:$direct_port (single-n1)" resp_ping "$direct_port" ||
  fail "single-n1 did not answer PING on 127.0.0.1:$direct_port within $timeout_s s"

api_port="$(host_port single-toxiproxy 8474)"
proxy_port="$(host_port single-toxiproxy 16101)"
if [ -z "$api_port" ] || [ -z "$proxy_port" ]; then
  fail "single-toxiproxy has no published ports (is it running? $("${compose[@]}" logs --tail 20 single-toxiproxy 2>&1))"
fi
api_ok() { http_status "$api_port" /version | grep -q ' 200'; }
wait_for "Toxiproxy API GET /version on 127.0.0.1:$api_port" api_ok ||
  fail "the Toxiproxy API did not answer on 127.0.0.1:$api_port: $("${compose[@]}" logs --tail 20 single-toxiproxy 2>&1)"
http_status "$api_port" /proxies/n1 | grep -q ' 200' ||
  fail "proxy n1 was not created from --config (GET /proxies/n1: $(http_status "$api_port" /proxies/n1))"
wait_for "proxied PING 127.0.0.1:$proxy_port (proxy n1)" resp_ping "$proxy_port" ||
  fail "PING through proxy n1 on 127.0.0.1:$proxy_port got no PONG within $timeout_s s"

teardown
trap - EXIT
leftover="$(docker ps -aq --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME")"
[ -z "$leftover" ] || fail "containers left behind after down: $leftover"

log "passed in $((SECONDS - started)) s (direct PING ok; proxied PING ok)"
