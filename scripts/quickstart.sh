#!/usr/bin/env bash
# The main job on the embedded default (local redis-server processes, no Docker): builds
# lockbench, runs every shipped chaos scenario, and ends with the comparison report's path.
# Extra arguments go to `lockbench chaos` (e.g. --results /tmp/r).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
cargo build --release --quiet
exec target/release/lockbench chaos chaos/ "$@"
