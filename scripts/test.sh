#!/usr/bin/env bash
# The test command: formatting, lints, and every test against real redis-server processes.
# .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
cargo fmt --all -- --check
cargo clippy --all-targets --quiet -- -D warnings
cargo bench --no-run --quiet
cargo test --quiet
