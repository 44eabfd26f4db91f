#!/usr/bin/env bash
# The deploy/kubernetes test renders the overlays with `kubectl kustomize`: it must be installed. As root with
# apt-get, install it; otherwise stop with a message naming what to install.
set -euo pipefail
if command -v kubectl >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-kubectl: installing kubernetes-client (apt-get)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
  command -v kubectl >/dev/null && exit 0
fi
echo "ensure-kubectl: kubectl is not installed. Install it (Debian/Ubuntu: apt-get install -y kubernetes-client) and run again." >&2
exit 1
