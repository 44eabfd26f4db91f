#!/usr/bin/env bash
# Installs the Debian packages the tests and image builds call as programs, when one is
# missing: as root with apt-get it installs them; otherwise it stops with a message naming
# what to install. Each line: the program, the package that brings it, what needs it.
#
#   scripts/ensure-packages.sh            (all of them)
set -euo pipefail
NEEDS=(
  "docker-registry docker-registry the tests of a run's own image (a private registry on 127.0.0.1)"
  "htpasswd apache2-utils the registry's password file in those tests"
  "setcap libcap2-bin the agentd image's iptables capabilities (make image)"
  "iptables iptables the egress guard of allowlist runs"
  "busybox busybox-static the agent bundle of a run's own image, and the redaction tests' busybox tools"
  "xxd xxd the redaction tests (hex dumps from the real tool)"
  "hexdump bsdextrautils the redaction tests (hexdump's formats)"
  "redis-sentinel redis-sentinel the Redis failover tests and bench (real Sentinel)"
)
missing=()
why=()
for line in "${NEEDS[@]}"; do
  read -r prog pkg what <<<"$line"
  command -v "$prog" >/dev/null 2>&1 && continue
  missing+=("$pkg")
  why+=("$pkg ($prog, for $what)")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-packages: installing ${missing[*]} (apt-get)" >&2
  apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null &&
    exit 0
fi
echo "ensure-packages: missing: ${why[*]}. Install them (Debian/Ubuntu: apt-get install -y ${missing[*]}) and run again." >&2
exit 1
