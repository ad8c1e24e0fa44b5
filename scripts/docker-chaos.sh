#!/usr/bin/env bash
# CI's docker part: builds the offline images from the current code, runs docker/ci-smoke.sh,
# then two short chaos scenarios under `--backend docker` (five nodes with a kill of a
# minority; the Sentinel failover that loses a lock), and checks that no container or network
# of either run is left.
#
# Without a Docker engine it prints "SKIPPED docker chaos: <reason>" and exits 0 (never a
# silent pass). Usage: scripts/docker-chaos.sh [--images-only]
#   --images-only   just (re)build the images (scripts/test.sh does this before cargo test,
#                   whose tests/docker_backend.rs needs them)
# Environment: LOCKBENCH_BIN (default $CARGO_TARGET_DIR or target, /debug/lockbench, built here if missing),
# DOCKER_CHAOS_SCENARIO (default chaos/06-redlock-minority-loss.toml),
# DOCKER_CHAOS_SENTINEL_SCENARIO (default chaos/05a-failover-loses-lock.toml),
# DOCKER_CHAOS_CLUSTER_SCENARIO (unset by default: the cluster's claim 20a already runs in
# containers in tests/docker_backend.rs; set it, e.g. to chaos/22-cluster-slot-migration-keeps-lock.toml,
# to run a cluster scenario here too).
set -uo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

skip() {
  echo "SKIPPED docker chaos: $*"
  exit 0
}
fail() {
  echo "FAILED docker chaos after $((SECONDS - started)) s: $*" >&2
  exit 1
}

command -v docker >/dev/null 2>&1 || skip "the docker CLI is not on PATH (no Docker engine)"
if ! info_err="$(docker info 2>&1 >/dev/null)"; then
  skip "no Docker engine reachable ($(printf '%s' "$info_err" | tr '\n' ' ' | sed 's/ *$//'))"
fi

bin="${LOCKBENCH_BIN:-${CARGO_TARGET_DIR:-target}/debug/lockbench}"
if [ ! -x "$bin" ] || [ -z "${LOCKBENCH_BIN:-}" ]; then
  cargo build --quiet --bin lockbench || fail "cargo build failed"
fi
export LOCKBENCH_BIN="$bin"
docker/build-images.sh --only redis || fail "building the redis image failed"
docker/build-images.sh --only toxiproxy --rebuild || fail "building the toxiproxy image failed"
[ "${1:-}" = "--images-only" ] && exit 0

LOCKBENCH_CARGO_PROFILE=dev bash docker/ci-smoke.sh || fail "docker/ci-smoke.sh failed"

results="$(mktemp -d "${TMPDIR:-/tmp}/lockbench-docker-chaos.XXXXXX")"
trap 'rm -rf "$results"' EXIT

# run_one <scenario> <name>: runs it under --backend docker (bounded), requires every
# expectation as claimed and nothing of the run left behind.
run_one() {
  local scenario="$1" name="$2" out tag left
  echo "docker chaos: $bin chaos $scenario --backend docker"
  out="$results/$name.txt"
  if ! timeout 180 "$bin" chaos "$scenario" --backend docker --results "$results/$name" >"$out" 2>&1; then
    cat "$out" >&2
    fail "lockbench chaos $scenario --backend docker did not pass"
  fi
  cat "$out"
  tag="$(sed -n 's/^ *docker: network and containers \(.*\)\*$/\1/p' "$out" | head -n 1)"
  [ -n "$tag" ] || fail "no run tag in the output of $scenario"
  left="$(docker ps -aq --filter "name=$tag") $(docker network ls -q --filter "name=$tag")"
  [ -z "${left// /}" ] || fail "left behind by run $tag: $left"
  echo "docker chaos: $scenario passed (run $tag, nothing left behind)"
}

run_one "${DOCKER_CHAOS_SCENARIO:-chaos/06-redlock-minority-loss.toml}" five
run_one "${DOCKER_CHAOS_SENTINEL_SCENARIO:-chaos/05a-failover-loses-lock.toml}" sentinel
if [ -n "${DOCKER_CHAOS_CLUSTER_SCENARIO:-}" ]; then
  run_one "$DOCKER_CHAOS_CLUSTER_SCENARIO" cluster
fi
echo "docker chaos: passed in $((SECONDS - started)) s"
