#!/usr/bin/env bash
# Creates the Python virtual environment of the shipped lock-client adapters (adapters/python/)
# at .adapters/venv (gitignored) and installs the libraries they test from PyPI at the exact
# versions in adapters/python/requirements.txt. Idempotent: does nothing when the environment
# already has those pins (a stamp file holds the requirements it was built from).
# Needs python3 (3.8+) with the venv module. Called by scripts/ensure-deps.sh; run it by hand
# after changing a pin. lockbench finds the interpreter at .adapters/venv/bin/python, or at
# $LOCKBENCH_ADAPTER_PYTHON when set.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.adapters/venv"
reqs="$root/adapters/python/requirements.txt"
stamp="$venv/.lockbench-requirements"
if [[ -x "$venv/bin/python" && -f "$stamp" ]] && cmp -s "$reqs" "$stamp"; then
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "error: python3 not found; the adapters need Python 3.8+ with venv (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
echo "adapters: creating $venv from $reqs" >&2
rm -rf "$venv"
python3 -m venv "$venv" || {
  echo "error: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
  exit 1
}
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$reqs" >&2
cp "$reqs" "$stamp"
