#!/usr/bin/env bash
# Tests start their own private redis-server instances: the binary must be installed.
# As root with apt-get, install it; otherwise stop with a message naming what to install.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-redis: installing redis-server (apt-get)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  # The package starts a system instance on 6379; tests use private ones, so stop it.
  (service redis-server stop || pkill -f 'redis-server .*:6379') >/dev/null 2>&1 || true
  command -v redis-server >/dev/null && exit 0
fi
echo "ensure-redis: redis-server is not installed. Install Redis >= 7 (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis) and run again." >&2
exit 1
