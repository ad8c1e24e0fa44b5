#!/usr/bin/env bash
# CI's docker part: builds the offline images from the current code, runs docker/ci-smoke.sh,
# then one short chaos scenario under `--backend docker` (five nodes, a kill of a minority),
# and checks that no container or network of that run is left.
#
# Without a Docker engine it prints "SKIPPED docker chaos: <reason>" and exits 0 (never a
# silent pass). Usage: scripts/docker-chaos.sh [--images-only]
#   --images-only   just (re)build the images (scripts/test.sh does this before cargo test,
#                   whose tests/docker_backend.rs needs them)
# Environment: LOCKBENCH_BIN (default $CARGO_TARGET_DIR or target, /debug/lockbench, built here if missing),
# DOCKER_CHAOS_SCENARIO (default chaos/06-redlock-minority-loss.toml).
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

scenario="${DOCKER_CHAOS_SCENARIO:-chaos/06-redlock-minority-loss.toml}"
results="$(mktemp -d "${TMPDIR:-/tmp}/lockbench-docker-chaos.XXXXXX")"
trap 'rm -rf "$results"' EXIT
echo "docker chaos: $bin chaos $scenario --backend docker"
out="$results/out.txt"
if ! timeout 180 "$bin" chaos "$scenario" --backend docker --results "$results/r" >"$out" 2>&1; then
  cat "$out" >&2
  fail "lockbench chaos --backend docker did not pass"
fi
cat "$out"
tag="$(sed -n 's/^ *docker: network and containers \(.*\)\*$/\1/p' "$out" | head -n 1)"
[ -n "$tag" ] || fail "no run tag in the output"
left="$(docker ps -aq --filter "name=$tag") $(docker network ls -q --filter "name=$tag")"
[ -z "${left// /}" ] || fail "left behind by run $tag: $left"
echo "docker chaos: passed in $((SECONDS - started)) s (run $tag, nothing left behind)"
