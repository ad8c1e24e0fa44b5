#!/usr/bin/env bash
# Makes sure the tools lockbench needs are on this machine, installing what is missing when it
# can (root + apt-get), or stopping with a message that says what to install.
# Sourced by scripts/quickstart.sh and scripts/test.sh.
set -euo pipefail

need_cmd() { command -v "$1" >/dev/null 2>&1; }

if ! need_cmd cargo; then
  echo "error: cargo not found. Install Rust (https://rustup.rs), then run this again." >&2
  exit 1
fi

missing=()
need_cmd redis-server || missing+=(redis-server)
need_cmd redis-sentinel || missing+=(redis-sentinel)
need_cmd redis-cli || missing+=(redis-tools)
need_cmd redis-benchmark || { [[ " ${missing[*]-} " == *" redis-tools "* ]] || missing+=(redis-tools); }

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && need_cmd apt-get; then
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
  else
    echo "error: missing ${missing[*]}." >&2
    echo "  Debian/Ubuntu: sudo apt-get install ${missing[*]}" >&2
    echo "  other systems: install Redis 7 (redis-server, redis-sentinel, redis-cli, redis-benchmark) on PATH" >&2
    exit 1
  fi
fi
