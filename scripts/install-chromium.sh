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
# As scripts/ensure-deps.sh: no recommended extras (avahi, cups, upower…) and no system
# service started by the packages (policy-rc.d 101 = "do not start").
guard=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    guard=/usr/sbin/policy-rc.d
    trap 'rm -f "$guard"' EXIT
fi
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
command -v chromium
