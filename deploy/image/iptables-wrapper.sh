#!/bin/sh
# `iptables` and `ip6tables` in the agentd image (/usr/local/sbin, both names): the egress
# firewall (internal/sandbox/egress-guard.ts) must write its rules with the backend the
# Docker engine uses in this network namespace, nf_tables or legacy, or they would sit in
# tables the engine never reads and its own rules would be listed from the other. The
# engine's mark is its chain DOCKER-USER in the filter table: nf_tables when iptables-nft
# lists it, else legacy when iptables-legacy does, else nf_tables (Debian's default).
# AGENTD_IPTABLES_MODE=nft|legacy decides instead.
#
# The xtables binaries carry file capabilities (cap_net_admin, cap_net_raw): they act for
# user 10001 only in a container given NET_ADMIN and NET_RAW, and not under
# no-new-privileges (Kubernetes: allowPrivilegeEscalation must be true).
#
# Must never: probe the legacy tables when nf_tables already holds Docker's chain (a probe
# can make the kernel create empty legacy tables, which changes how a dind starting later
# in this namespace chooses its own backend).
set -u
# Legacy iptables takes a lock file (-w); the root file system is read-only.
export XTABLES_LOCKFILE="${XTABLES_LOCKFILE:-/tmp/xtables.lock}"
mode="${AGENTD_IPTABLES_MODE:-}"
case "$mode" in
nft | legacy) ;;
"")
  mode=nft
  if ! /usr/sbin/xtables-nft-multi iptables -n -L DOCKER-USER >/dev/null 2>&1 &&
    /usr/sbin/xtables-legacy-multi iptables -w 5 -n -L DOCKER-USER >/dev/null 2>&1; then
    mode=legacy
  fi
  ;;
*)
  echo "${0##*/}: AGENTD_IPTABLES_MODE must be nft or legacy, not '$mode'" >&2
  exit 2
  ;;
esac
exec "/usr/sbin/xtables-$mode-multi" "${0##*/}" "$@"
