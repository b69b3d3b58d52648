#!/usr/bin/env bash
# Installs Debian's `prometheus` package (the server and `promtool`) for the tests, if missing.
# Idempotent: does nothing when both commands are on PATH. Needs root (CI runs as root) or sudo.
# Debian's package registers a system service; where an init system runs it may start one on
# :9090. The tests never use it: they start their own server on a free port.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-prometheus.sh: no apt-get here; install Prometheus >= 2.42 (prometheus and promtool on PATH)" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
prometheus --version | head -1
