#!/usr/bin/env bash
# The test command: formatting, lints, and every test against real redis-server processes.
# .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
# The report test drives headless Chromium; install it when we can (it says what to do otherwise).
bash scripts/install-chromium.sh || echo "note: chromium unavailable; the browser report test will say so" >&2
cargo fmt --all -- --check
cargo clippy --all-targets --quiet -- -D warnings
cargo bench --no-run --quiet
cargo test --quiet
