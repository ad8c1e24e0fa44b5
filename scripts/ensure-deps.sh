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
# The alternatives to Redis (pg-advisory, etcd-lease): a PostgreSQL server (Debian puts it in
# /usr/lib/postgresql/<version>/bin, off PATH) and etcd.
need_cmd postgres || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
need_cmd etcd || missing+=(etcd-server)
# PgBouncer in front of PostgreSQL (`--pooler pgbouncer`); Debian puts it in /usr/sbin.
need_cmd pgbouncer || [[ -x /usr/sbin/pgbouncer ]] || missing+=(pgbouncer)
# The TLS tests (tests/tls.rs) make their CA and certificates with the openssl CLI.
need_cmd openssl || missing+=(openssl)
# Cluster-bus partitions (`link = "bus"`) drop packets with nft, which needs root anyway:
# installed when root; otherwise a scenario with such a step is refused (exit 2) when named alone and
# skipped, saying so, in a directory of scenarios (the main job's claims), and everything else runs.
if ! need_cmd nft && [[ ! -x /usr/sbin/nft ]]; then
  if [[ $(id -u) -eq 0 ]]; then
    missing+=(nftables)
  else
    echo "note: nft (package nftables) is missing: scenarios with link = \"bus\" need it and root" >&2
  fi
fi

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && need_cmd apt-get; then
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # lockbench starts its own servers in each run directory: keep the packages from starting
    # (or creating) system services (policy-rc.d 101 = "do not start"; no main PostgreSQL cluster).
    guard=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
      guard=/usr/sbin/policy-rc.d
    fi
    if [[ " ${missing[*]} " == *" postgresql "* && ! -e /etc/postgresql-common/createcluster.conf ]]; then
      mkdir -p /etc/postgresql-common
      echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
    fi
    apt-get install -y -qq "${missing[@]}" >&2
    if [[ -n "$guard" ]]; then rm -f "$guard"; fi
  else
    echo "error: missing ${missing[*]}." >&2
    echo "  Debian/Ubuntu: sudo apt-get install ${missing[*]}" >&2
    echo "  other systems: install Redis 7 (redis-server, redis-sentinel, redis-cli, redis-benchmark)," >&2
    echo "  PostgreSQL (postgres, initdb), PgBouncer and etcd 3.4+ on PATH" >&2
    exit 1
  fi
fi

# The Python virtual environment of the shipped lock-client adapters (adapters/python/). Not
# fatal: without it only the adapter:* strategies are unavailable (they say how to make it).
bash "$(dirname "${BASH_SOURCE[0]}")/adapters-setup.sh" \
  || echo "note: the adapters' Python environment could not be made; adapter:* strategies are unavailable" >&2
