#!/usr/bin/env bash
# The deploy/compose test drives Debian's docker-compose: it must be installed. As root with
# apt-get, install it; otherwise stop with a message naming what to install.
set -euo pipefail
if command -v docker-compose >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-compose: installing docker-compose (apt-get)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
  command -v docker-compose >/dev/null && exit 0
fi
echo "ensure-compose: docker-compose is not installed. Install it (Debian/Ubuntu: apt-get install -y docker-compose) and run again." >&2
exit 1
