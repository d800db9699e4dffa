#!/usr/bin/env bash
# Makes sure `promtool` (Prometheus's checker; the server's metrics test runs
# `promtool check metrics`) is on PATH: installs Debian's `prometheus` package when it is
# missing. Idempotent and quick when promtool is there. Needs root and apt (CI and the
# development machines have both); anywhere else it fails saying what to install.
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-promtool: promtool is missing and apt-get is not available; install Prometheus's promtool by hand" >&2
  exit 1
fi
SUDO=''
if [ "$(id -u)" != 0 ]; then
  SUDO='sudo'
fi
echo "ensure-promtool: installing Debian's prometheus package (for promtool)" >&2
$SUDO apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >&2
command -v promtool >/dev/null
