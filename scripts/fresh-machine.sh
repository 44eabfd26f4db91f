#!/usr/bin/env bash
# Proves the README's two commands on a fresh machine: builds a clean Debian root file
# system with debootstrap (only what a person who clones a repository has: git, make and
# the CA certificates), starts it as a privileged container with its own Docker engine
# (inside it the project's scripts install and start one), clones this repository into it
# and runs `make demo` and `make test` there, printing how long each took.
#
#   scripts/fresh-machine.sh [--ref REF] [--only demo|test] [--keep] [--rebuild]
#
#   --ref REF      the commit to clone (default HEAD; uncommitted changes are not seen)
#   --only WHAT    run only `make demo` or only `make test`
#   --keep         leave the container and its engine's volume for a look afterwards
#   --rebuild      debootstrap the clean root again instead of the cached one
#
# Must never: install anything into the fresh root by hand (every package the commands
# need comes from the project's own scripts), or reuse a Docker engine, images or
# dependencies of this machine. Only the machine's network setting goes in: its extra CA
# certificates (a proxy that intercepts TLS) and the CA variables of its environment, as
# any machine behind that proxy has them. Needs root and a Docker engine on this machine
# (scripts/ensure-docker.sh starts one). Log of each command: .tools/fresh-machine/*.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE=bookworm
PACKAGES="git make ca-certificates"
say() { printf 'fresh-machine: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

REF=HEAD ONLY="" KEEP=0 REBUILD=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ref) [ $# -ge 2 ] || die "--ref needs a commit"; REF="$2"; shift 2 ;;
    --only) [ $# -ge 2 ] || die "--only needs demo or test"; ONLY="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --rebuild) REBUILD=1; shift ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (--ref, --only, --keep, --rebuild, --help)" ;;
  esac
done
case "$ONLY" in "" | demo | test) ;; *) die "--only takes demo or test, not '$ONLY'" ;; esac
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, and a privileged container for its Docker engine)"
COMMIT="$(git -C "$ROOT" rev-parse --verify "$REF^{commit}" 2>/dev/null)" || die "--ref: '$REF' is not a commit of $ROOT"
"$ROOT/scripts/ensure-docker.sh"
command -v debootstrap >/dev/null 2>&1 || {
  say "installing debootstrap (apt-get)"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
} || die "install debootstrap (apt-get install -y debootstrap)"

STATE="$ROOT/.tools/fresh-machine"
mkdir -p "$STATE"
# shellcheck source=scripts/fresh-machine-root.sh
. "$ROOT/scripts/fresh-machine-root.sh"
IMAGE="$(fresh_root_image)"

# What --privileged gives, spelled out: some engines (this kind of machine's among them)
# cannot grant every capability (CAP_SYS_RESOURCE here), and --privileged then fails.
PRIVILEGES=(--cap-add ALL --device-cgroup-rule 'a *:* rwm'
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined --security-opt systempaths=unconfined)
bounding=$((16#$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)))
if (((bounding >> 24) & 1)); then :; else # bit 24: CAP_SYS_RESOURCE
  PRIVILEGES+=(--cap-drop SYS_RESOURCE)
fi

NAME="agentd-fresh-$(date +%s)-$$"
VOLUME="$NAME-docker"
cleanup() {
  local rc=$?
  if [ "$KEEP" = 1 ]; then
    say "kept: container $NAME (docker exec -it $NAME bash), volume $VOLUME"
  else
    docker rm -f "$NAME" >/dev/null 2>&1 || true
    docker volume rm -f "$VOLUME" >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The machine's CA variables go in as they are (they name files inside the root too).
envs=()
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR GIT_SSL_CAINFO CURL_CA_BUNDLE PIP_CERT REQUESTS_CA_BUNDLE; do
  [ -n "${!v:-}" ] && envs+=(-e "$v=${!v}")
done
say "starting $NAME from $IMAGE (its own Docker engine on volume $VOLUME)"
docker volume create "$VOLUME" >/dev/null
docker run -d --init "${PRIVILEGES[@]}" --name "$NAME" --hostname fresh-machine \
  -v "$VOLUME:/var/lib/docker" -v "$ROOT/.git:/src.git:ro" \
  "${envs[@]}" -e CI= "$IMAGE" sleep infinity >/dev/null
# /sys and the cgroup hierarchies come read-only without --privileged; an engine inside
# needs them writable (the container has CAP_SYS_ADMIN for its own mounts).
docker exec "$NAME" sh -c 'mount -o remount,rw /sys && for m in $(awk '\''$3 == "cgroup" || $3 == "cgroup2" { print $2 }'\'' /proc/self/mounts); do mount -o remount,bind,rw "$m"; done' ||
  die "could not make /sys and the cgroups writable in the fresh machine"

inside() { docker exec -w /root/agentd "$NAME" bash -lc "$1"; }
docker exec "$NAME" git clone -q /src.git /root/agentd
docker exec -w /root/agentd "$NAME" git checkout -q "$COMMIT"
say "cloned $(git -C "$ROOT" log -1 --format='%h %s' "$COMMIT" | cut -c1-70)"

# Runs one README command in the fresh machine; its output goes to a log and its tail to
# the screen when it fails. Sets RESULT_<what>.
run_step() { # WHAT
  local what="$1" log="$STATE/$1.log" t0 rc=0
  say "make $what (log: $log)"
  t0=$SECONDS
  inside "make $what" >"$log" 2>&1 || rc=$?
  local secs=$((SECONDS - t0))
  printf -v "RESULT_$what" '%s' "make $what: $([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)") in $((secs / 60)) m $((secs % 60)) s"
  if [ "$rc" != 0 ]; then
    say "make $what failed; last lines of its log:"
    tail -n 30 "$log" | sed 's/^/    /' >&2
  fi
  return "$rc"
}

status=0
steps=(demo test)
[ -n "$ONLY" ] && steps=("$ONLY")
for s in "${steps[@]}"; do run_step "$s" || status=1; done

echo "fresh machine: Debian $SUITE ($PACKAGES), commit $(git -C "$ROOT" rev-parse --short "$COMMIT"), $(nproc) cores"
for s in "${steps[@]}"; do v="RESULT_$s"; echo "${!v:-make $s: not run}"; done
summary="$(grep -E '^(#|ℹ) (tests|pass|fail|cancelled|skipped) ' "$STATE/test.log" 2>/dev/null | sed 's/^[#ℹ] //' | tr '\n' ' ' || true)"
[ -n "$summary" ] && [[ " ${steps[*]} " == *" test "* ]] && echo "make test: $summary"
exit "$status"
