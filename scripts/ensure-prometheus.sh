#!/usr/bin/env bash
# The observability tests start their own Prometheus server (and run promtool): Debian's
# prometheus package must be installed. As root with apt-get, install it; otherwise stop
# with a message naming what to install.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-prometheus: installing prometheus (apt-get)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package starts a system instance on :9090; tests start private ones, so stop it.
  (service prometheus stop || pkill -x prometheus) >/dev/null 2>&1 || true
  command -v prometheus >/dev/null && exit 0
fi
echo "ensure-prometheus: prometheus is not installed. Install Prometheus >= 2 with promtool (Debian/Ubuntu: apt-get install -y prometheus; macOS: brew install prometheus) and run again." >&2
exit 1
