#!/usr/bin/env bash
# The test command: formatting, lints, and every test against real redis-server processes,
# then (when a Docker engine runs) the docker smoke and one chaos scenario in containers.
# .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
# The report test drives headless Chromium; install it when we can (it says what to do otherwise).
bash scripts/install-chromium.sh || echo "note: chromium unavailable; the browser report test will say so" >&2
cargo fmt --all -- --check
cargo clippy --all-targets --quiet -- -D warnings
# (clippy --all-targets already compiles the benches; building them in release here cost CI
# a second full optimised build.)
# tests/docker_backend.rs needs the offline images (built from this code) when an engine runs;
# without one it prints SKIPPED, and so does the docker step below.
bash scripts/docker-chaos.sh --images-only
# --no-fail-fast: one failing test binary must not hide the others (CI keeps the whole log).
cargo test --quiet --no-fail-fast
# The docker part of CI: compose smoke + one short chaos scenario under --backend docker.
bash scripts/docker-chaos.sh
