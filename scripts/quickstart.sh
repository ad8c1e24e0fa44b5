#!/usr/bin/env bash
# The main job on the embedded default (local redis-server processes, no Docker):
# builds lockbench and compares the lock strategies on five local nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
cargo build --release --quiet
exec target/release/lockbench run \
  --topology five \
  --strategy single,single-fenced,redlock,redlock-fenced \
  --clients 32 --resources 8 --hold 1ms --ttl 2s --duration 5s "$@"
