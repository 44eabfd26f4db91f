#!/usr/bin/env bash
# Builds agentd-redis, the Redis image deploy/compose uses, without any image registry (part
# of `make image`): the machine's Debian redis-server and redis-cli binaries with exactly the
# shared libraries they link (ldd), a static busybox for /bin/sh, user redis (999), data in
# /data. Tagged agentd-redis:HASH (a hash of this script and the binaries) and
# agentd-redis:latest. Installs redis-server (apt-get) as root when it is missing. The busybox
# is $BUSYBOX, else the machine's busybox when it is static, else the one in Debian's
# busybox-static package, downloaded and unpacked here without installing it (as
# scripts/build-images.sh does): a fresh machine needs nothing installed by hand.
set -euo pipefail
SCRIPT="$(readlink -f "${BASH_SOURCE[0]}")"
say() { printf 'build-redis-image: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
docker info >/dev/null 2>&1 || die "the Docker engine does not answer (scripts/ensure-docker.sh)"
"$(dirname "$SCRIPT")/ensure-redis.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/agentd-redis-image.XXXXXX")"
trap 'rm -rf --one-file-system "$WORK"' EXIT

is_static() { [ -x "$1" ] && ! ldd "$1" >/dev/null 2>&1; }
# The busybox for /bin/sh in an image with no libc of its own: it must be static.
static_busybox() {
  local bb="${BUSYBOX:-$(command -v busybox 2>/dev/null || true)}"
  if [ -n "$bb" ] && is_static "$bb"; then readlink -f "$bb"; return 0; fi
  say "no static busybox at ${bb:-any place on the PATH}: unpacking Debian's busybox-static package"
  bb="$WORK/deb/x/bin/busybox"
  mkdir -p "$WORK/deb"
  fetch() { (cd "$WORK/deb" && apt-get download -qq busybox-static) >/dev/null 2>&1; }
  if command -v apt-get >/dev/null 2>&1; then
    # apt-get download needs the package lists; a fresh machine may have none yet.
    fetch || { [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && fetch; } || true
    for deb in "$WORK"/deb/busybox-static_*.deb; do
      if [ -f "$deb" ]; then dpkg-deb -x "$deb" "$WORK/deb/x"; fi
    done
  fi
  is_static "$bb" ||
    die "a static busybox is needed for the image's /bin/sh and Debian's busybox-static package could not be fetched. Install it (Debian/Ubuntu: apt-get install -y busybox-static) or set BUSYBOX=/path/to/static/busybox."
  echo "$bb"
}
SERVER="$(readlink -f "$(command -v redis-server)")"
CLI="$(readlink -f "$(command -v redis-cli)")"
BUSYBOX="$(static_busybox)"
LIBS="$( (ldd "$SERVER"; ldd "$CLI") | awk '/=> \// { print $3 } /^[ \t]*\/lib/ { print $1 }' | sort -u)"
# The libraries too: a security update of libssl is a new image.
# shellcheck disable=SC2086
HASH="$(cat "$SCRIPT" "$SERVER" "$CLI" "$BUSYBOX" $LIBS | sha256sum | cut -c1-12)"
TAG="agentd-redis:$HASH"
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  docker tag "$TAG" agentd-redis:latest
  say "$TAG is up to date"; exit 0
fi
R="$WORK/rootfs"
mkdir -p "$R"/{bin,usr/bin,data,tmp,etc}
chmod 1777 "$R/tmp"
cp "$SERVER" "$R/usr/bin/redis-server"
cp "$CLI" "$R/usr/bin/redis-cli"
cp "$BUSYBOX" "$R/bin/busybox"
for tool in sh ls cat id; do ln -sf busybox "$R/bin/$tool"; done
# Every shared library of both binaries, at the path the loader looks for it.
for lib in $LIBS; do
  mkdir -p "$R$(dirname "$lib")"
  cp -L "$lib" "$R$lib"
done
printf 'root:x:0:0:root:/root:/bin/sh\nredis:x:999:999:redis:/data:/bin/sh\n' >"$R/etc/passwd"
printf 'root:x:0:\nredis:x:999:\n' >"$R/etc/group"
chown 999:999 "$R/data"
tar -C "$R" -c . | docker import \
  --change 'ENTRYPOINT ["/usr/bin/redis-server"]' \
  --change 'USER 999:999' \
  --change 'WORKDIR /data' \
  --change 'EXPOSE 6379' \
  --change "LABEL org.opencontainers.image.title=agentd-redis agentd.inputs=$HASH" \
  - "$TAG" >/dev/null
docker tag "$TAG" agentd-redis:latest
docker run --rm --network none "$TAG" --version >/dev/null || die "$TAG does not start"
say "built $TAG (also agentd-redis:latest): $(( $(docker image inspect -f '{{.Size}}' "$TAG") / 1024 / 1024 )) MiB"
