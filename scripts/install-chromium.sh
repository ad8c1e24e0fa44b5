#!/usr/bin/env bash
# Installs Debian's `chromium` (and the DejaVu fonts it renders report text with) for the
# headless browser check in tests/report_browser.rs. Does nothing when chromium is present.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "chromium already installed: $(command -v chromium)"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "chromium is missing and this is not root: run 'sudo apt-get install -y chromium fonts-dejavu-core'" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium fonts-dejavu-core
command -v chromium
