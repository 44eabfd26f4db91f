#!/usr/bin/env bash
# Builds the sandbox images under sandbox-images/ without any image registry: the root
# file system comes from Debian packages (debootstrap), from another of these images (a
# language image starts from base's root) or from the host's static busybox, and is
# imported with `docker import`. See sandbox-images/README.md.
#
#   scripts/build-images.sh [base|test|python|go|rust|java|node|all ...]   (default: all)
#
# Each image is tagged agentd-sandbox-NAME:HASH, HASH being the first 12 hex digits of a
# sha256 over the files in sandbox-images/NAME/, this script, what the image copies from
# the host (image.conf's host_inputs: toolchain versions; the extra CA certificates) and
# the image it starts from, and also agentd-sandbox-NAME:latest. When the HASH tag already
# exists nothing is built. The exact tag is written to sandbox-images/.built/NAME.tag.
#
# Environment: FORCE=1 rebuilds even when the tag exists; DEBIAN_MIRROR overrides the
# mirror (default: the first URIs: line of /etc/apt/sources.list.d/debian.sources);
# BUSYBOX names a static busybox binary (default: /bin/busybox); EXTRA_CA=0 leaves the
# host's /usr/local/share/ca-certificates out of the images.
set -euo pipefail

SCRIPT="$(readlink -f "${BASH_SOURCE[0]}")"
ROOT="$(cd "$(dirname "$SCRIPT")/.." && pwd)"
IMAGES_DIR="$ROOT/sandbox-images"
AGENT_DIR="$IMAGES_DIR/agent"
AGENT_PATH=/usr/local/libexec/agentd-agent
# A static busybox (named busybox: it picks its applet by that name) next to it: agentd injects both, read-only, into images that lack the
# agent (a run's own image, even one without a shell or tar: internal/sandbox/agent-bundle.ts).
BUSYBOX_PATH=/usr/local/libexec/agentd/busybox
BUILT_DIR="$IMAGES_DIR/.built"
PATH_ENV='PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
T0=$SECONDS

say() { printf 'build-images: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
# A progress line: the image, seconds since its build started, the step.
step() { printf 'build-images: %-5s [%4ss] %s\n' "$CUR" "$((SECONDS - IMG_T0))" "$*" >&2; }

# ---------------------------------------------------------------- arguments

all_images() {
  local d
  for d in "$IMAGES_DIR"/*/; do
    [ -f "$d/image.conf" ] && basename "$d"
  done
}

ALL="$(all_images | tr '\n' ' ')"
[ -n "$ALL" ] || die "no images found under $IMAGES_DIR (each needs an image.conf)"
WANT=()
[ $# -eq 0 ] && set -- all
for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,18p' "$SCRIPT" | sed 's/^# \{0,1\}//'; exit 0 ;;
    all) for n in $ALL; do WANT+=("$n"); done ;;
    *) [ -f "$IMAGES_DIR/$arg/image.conf" ] || die "unknown image '$arg' (known: ${ALL% }, all)"
       WANT+=("$arg") ;;
  esac
done
# An image that starts from another (image.conf: FROM) needs that one first.
conf_from() { (FROM=""; . "$IMAGES_DIR/$1/image.conf" >/dev/null 2>&1; echo "${FROM:-}"); }
ORDERED=()
for n in "${WANT[@]}"; do
  f="$(conf_from "$n")"
  if [ -n "$f" ]; then
    [ -f "$IMAGES_DIR/$f/image.conf" ] || die "$IMAGES_DIR/$n/image.conf: FROM names unknown image '$f'"
    ORDERED+=("$f")
  fi
  ORDERED+=("$n")
done
mapfile -t WANT < <(printf '%s\n' "${ORDERED[@]}" | awk '!seen[$0]++')

# ---------------------------------------------------------------- tools

command -v docker >/dev/null 2>&1 ||
  die "docker is not installed. Install a Docker engine (Debian/Ubuntu: apt-get install -y docker.io), or run 'make images', which starts one via scripts/ensure-docker.sh."
docker info >/dev/null 2>&1 ||
  die "the Docker engine does not answer ('docker info' fails). Start it: scripts/ensure-docker.sh (or 'make images')."

# Installs a Debian package on the host when we are root with apt-get; else names it.
need_pkg() { # COMMAND PACKAGE WHY
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing $2 (apt-get), needed $3"
    apt-get update -qq >/dev/null &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null ||
      die "could not install $2; install it by hand (apt-get install -y $2)"
    command -v "$1" >/dev/null 2>&1 && return 0
  fi
  die "$1 is not installed; it is needed $3. Install it (Debian/Ubuntu: apt-get install -y $2)."
}

# The mirror is a property of the machine, not an input of the image: it is not hashed.
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local m=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    m="$(awk 'tolower($1) == "uris:" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)"
  fi
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m="$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)"
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

# ---------------------------------------------------------------- hashing

# The extra CA certificates of the build machine (a corporate or intercepting CA), put
# into every Debian-based image's trust stores; EXTRA_CA=0 leaves them out.
EXTRA_CA_DIR=/usr/local/share/ca-certificates
extra_ca_files() {
  [ "${EXTRA_CA:-1}" = 0 ] && return 0
  [ -d "$EXTRA_CA_DIR" ] || return 0
  (cd "$EXTRA_CA_DIR" && find . -type f -name '*.crt' -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
}

# sha256 over (this script, then every file of the image's folder and of the agent's
# folder by sorted relative path with its content hash, then what image.conf's
# host_inputs prints (the versions of toolchains copied from this machine), the extra CA
# certificates for Debian-based images, and the HASH of the image named by FROM); first
# 12 hex digits. In a subshell: image.conf is sourced.
inputs_hash() {
  (
    BUILDER="" FROM=""
    unset -f host_inputs 2>/dev/null || true
    # shellcheck disable=SC1090
    . "$IMAGES_DIR/$1/image.conf"
    local d
    {
      printf 'build-images.sh %s\n' "$(sha256sum <"$SCRIPT" | cut -c1-64)"
      for d in "$IMAGES_DIR/$1" "$AGENT_DIR"; do
        (cd "$d" && find . -type f ! -name '*~' ! -name '.*.swp' -print0 | LC_ALL=C sort -z |
          xargs -0 -r sha256sum)
      done
      if declare -F host_inputs >/dev/null; then host_inputs | sed 's/^/host: /'; fi
      if [ "$BUILDER" != busybox ]; then extra_ca_files | sed 's/^/ca: /'; fi
      if [ -n "$FROM" ]; then printf 'from %s\n' "$(inputs_hash "$FROM")"; fi
    } | sha256sum | cut -c1-12
  )
}

# ---------------------------------------------------------------- the agent

# The in-container process runner (sandbox-images/agent/agent.c), in every image at
# $AGENT_PATH: one static binary, built with the host's gcc and glibc (Debian's gcc and
# libc6-dev), so it runs on any root file system, busybox's included.
build_agent() { # OUT
  need_pkg gcc gcc "to build the sandbox agent (sandbox-images/agent/agent.c)"
  # A static link needs glibc's libc.a (libc6-dev), which a bare gcc may lack.
  if ! printf 'int main(void){return 0;}' | gcc -static -x c -o /dev/null - >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "installing libc6-dev (apt-get), needed to link the sandbox agent statically"
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libc6-dev >/dev/null ||
        die "could not install libc6-dev; install it by hand (apt-get install -y libc6-dev)"
    else
      die "gcc cannot link statically: install libc6-dev (Debian/Ubuntu: apt-get install -y libc6-dev)"
    fi
  fi
  step "building the agent (gcc -static)"
  gcc -static -O2 -s -Wall -Wextra -Werror -o "$1" "$AGENT_DIR/agent.c" >>"$WORK/build.log" 2>&1 || {
    tail -n 40 "$WORK/build.log" | sed 's/^/    /' >&2
    die "the agent does not compile (gcc -static needs libc6-dev: apt-get install -y gcc libc6-dev)"
  }
}

# ---------------------------------------------------------------- temp dir, cleanup

WORK=""
IMPORTED=""
cleanup() {
  local rc=$?
  if [ -n "$IMPORTED" ]; then docker rmi -f "$IMPORTED" >/dev/null 2>&1 || true; fi
  if [ -n "$WORK" ] && [ -d "$WORK" ]; then
    # A failed debootstrap or package install can leave proc/sys mounted in the root.
    local m
    for m in $(awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r); do
      umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$WORK"
  fi
  if [ "$rc" != 0 ]; then say "failed after $((SECONDS - T0)) s (nothing was tagged)"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Prints the end of a step's log when the step fails (the log goes with the temp dir).
run_logged() { # LOG WHAT CMD...
  local log="$1" what="$2"; shift 2
  if ! "$@" >>"$log" 2>&1; then
    say "$CUR: $what failed"
    say "last lines of its log:"
    tail -n 40 "$log" | sed 's/^/    /' >&2
    return 1
  fi
}

# ---------------------------------------------------------------- builders
# A builder fills $ROOTFS. It sees the variables of image.conf.

build_debootstrap() {
  local dir="$1" mirror pkgs log="$WORK/build.log"
  need_pkg debootstrap debootstrap "to build the '$CUR' image (Debian root file system)"
  [ "$(id -u)" = 0 ] || die "building the '$CUR' image needs root (debootstrap and chroot); run as root or with sudo"
  mirror="$(debian_mirror)"
  pkgs="$(sed -e 's/#.*//' "$dir/packages.txt" | tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//')"
  [ -n "$pkgs" ] || die "$dir/packages.txt lists no packages"

  step "debootstrap --variant=${VARIANT:-minbase} $SUITE from $mirror (about 30 s)"
  run_logged "$log" debootstrap debootstrap --variant="${VARIANT:-minbase}" "$SUITE" "$ROOTFS" "$mirror"

  # Packages go in with apt, not with debootstrap --include: debootstrap's resolver does
  # not follow virtual packages (npm needs node-cli-table3, which node-cli-table provides).
  # dpkg leaves out documentation from here on (the policy stays in the image).
  mkdir -p "$ROOTFS/etc/dpkg/dpkg.cfg.d"
  cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/01-agentd-slim" <<'EOF'
# agentd sandbox image: no documentation, manuals or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
  apt_install "$pkgs"
}

# apt-get install of PACKAGES (may be empty) in the chroot at $ROOTFS with the host's
# resolv.conf and network, then the extra CA certificates into its trust stores
# (update-ca-certificates: the system bundle, and Java's cacerts when
# ca-certificates-java is installed), then apt's lists and caches removed.
apt_install() { # PACKAGES
  local pkgs="$1" log="$WORK/build.log" cas=""
  printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"
  chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
  rm -f "$ROOTFS/etc/resolv.conf"
  cp -L /etc/resolv.conf "$ROOTFS/etc/resolv.conf" 2>/dev/null || true
  # A root exported from an image has an empty /dev (Docker supplies it); apt and the
  # maintainer scripts need these. The finishing step empties /dev again.
  mkdir -p "$ROOTFS/dev"
  local n
  for n in null:1:3 zero:1:5 random:1:8 urandom:1:9; do
    [ -e "$ROOTFS/dev/${n%%:*}" ] || { IFS=: read -r d ma mi <<<"$n"; mknod -m 666 "$ROOTFS/dev/$d" c "$ma" "$mi"; }
  done
  # The slim roots have no manuals, but update-alternatives (openjdk's postinst) links
  # man pages and fails when their directory is missing.
  mkdir -p "$ROOTFS/usr/share/man/man1"
  mount -t proc proc "$ROOTFS/proc"
  # image.conf's EXTRA_SUITES (e.g. bookworm-backports): the same mirror, main only, for
  # this install; the image keeps no apt lists, so the file goes again afterwards.
  local suite extra="$ROOTFS/etc/apt/sources.list.d/agentd-extra-suites.list"
  for suite in ${EXTRA_SUITES:-}; do echo "deb $(debian_mirror) $suite main" >>"$extra"; done
  if [ -n "$pkgs" ]; then
    step "apt-get install $(wc -w <<<"$pkgs") packages: $pkgs"
    run_logged "$log" "apt-get install" chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 sh -c "
        set -e
        apt-get update -q -o Acquire::Languages=none
        apt-get install -y -q --no-install-recommends $pkgs
        apt-get clean"
  fi
  rm -f "$extra"
  if [ -n "$(extra_ca_files)" ]; then
    mkdir -p "$ROOTFS$EXTRA_CA_DIR"
    (cd "$EXTRA_CA_DIR" && find . -type f -name '*.crt' -print0 | xargs -0 -r cp --parents -t "$ROOTFS$EXTRA_CA_DIR")
    cas="$(cd "$EXTRA_CA_DIR" && find . -type f -name '*.crt' | tr '\n' ' ')"
    step "extra CA certificates from $EXTRA_CA_DIR: $cas"
  fi
  if [ -x "$ROOTFS/usr/sbin/update-ca-certificates" ]; then
    run_logged "$log" "update-ca-certificates" chroot "$ROOTFS" /usr/bin/env -i \
      PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 update-ca-certificates
  elif [ -n "$cas" ]; then
    die "$CUR: extra CA certificates found but the image has no ca-certificates package"
  fi
  umount "$ROOTFS/proc"
  rm -f "$ROOTFS/usr/sbin/policy-rc.d"
  rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/* "$ROOTFS"/var/cache/debconf/*-old \
    "$ROOTFS"/var/lib/dpkg/*-old "$ROOTFS"/var/cache/ldconfig/aux-cache
  find "$ROOTFS/var/log" -type f -delete 2>/dev/null || true
}

# The root file system of the image named by FROM (built first: the script orders the
# images), exported from a container that never runs; then packages.txt and
# EXTRA_PACKAGES on top with apt_install. Much faster than a debootstrap per image.
build_from() {
  local dir="$1" tag cid pkgs=""
  [ "$(id -u)" = 0 ] || die "building the '$CUR' image needs root (chroot); run as root or with sudo"
  [ -n "$FROM" ] || die "$dir/image.conf: BUILDER=from needs FROM=IMAGE"
  tag="agentd-sandbox-$FROM:$(inputs_hash "$FROM")"
  docker image inspect "$tag" >/dev/null 2>&1 || die "$CUR starts from $tag, which is not built (scripts/build-images.sh $FROM)"
  FROM_TAG="$tag"
  step "root file system of $tag (docker create + export)"
  cid="$(docker create "$tag" /bin/true)"
  if ! docker export "$cid" | tar -x -C "$ROOTFS" --numeric-owner; then
    docker rm -f "$cid" >/dev/null 2>&1 || true
    die "could not export $tag"
  fi
  docker rm -f "$cid" >/dev/null
  if [ -f "$dir/packages.txt" ]; then
    pkgs="$(sed -e 's/#.*//' "$dir/packages.txt" | tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//')"
  fi
  pkgs="$(echo "$pkgs ${EXTRA_PACKAGES:-}" | sed 's/^ *//; s/ *$//')"
  apt_install "$pkgs"
}

# Prints the path of a static busybox: $BUSYBOX, /bin/busybox, or one taken from the
# busybox-static package without installing it on the host.
static_busybox() {
  local bb="${BUSYBOX:-/bin/busybox}"
  if [ ! -x "$bb" ] || ldd "$bb" >/dev/null 2>&1; then
    # Not there, or dynamically linked: take the static one from its Debian package
    # without installing it on the host.
    bb="$WORK/deb/x/bin/busybox"
    if [ ! -x "$bb" ] && command -v apt-get >/dev/null 2>&1; then
      step "no static busybox at ${BUSYBOX:-/bin/busybox}: fetching the busybox-static package"
      mkdir -p "$WORK/deb"
      (cd "$WORK/deb" && apt-get download -q busybox-static >/dev/null 2>&1) &&
        dpkg-deb -x "$WORK/deb"/busybox-static_*.deb "$WORK/deb/x" 2>/dev/null
    fi
    [ -x "$bb" ] && ! ldd "$bb" >/dev/null 2>&1 ||
      die "the '$CUR' image needs a static busybox. Install it (Debian/Ubuntu: apt-get install -y busybox-static) or set BUSYBOX=/path/to/static/busybox."
  fi
  echo "$bb"
}

build_busybox() {
  local bb n count=0
  bb="$(static_busybox)"
  step "busybox root from $bb ($("$bb" 2>/dev/null | head -1 | cut -d' ' -f1-2))"
  mkdir -p "$ROOTFS/bin" "$ROOTFS/usr"
  install -m 755 "$bb" "$ROOTFS/bin/busybox"
  for n in $("$bb" --list); do
    case "$n" in busybox|*/*) continue ;; esac
    ln -s busybox "$ROOTFS/bin/$n"
    count=$((count + 1))
  done
  # One directory holds every applet; the usual other places point at it.
  ln -s bin "$ROOTFS/sbin"
  ln -s ../bin "$ROOTFS/usr/bin"
  ln -s ../bin "$ROOTFS/usr/sbin"
  step "linked $count applets into /bin (/sbin, /usr/bin, /usr/sbin -> /bin)"
}

# ---------------------------------------------------------------- one image

build_image() {
  local name="$1" dir="$IMAGES_DIR/$1" hash repo tag id old
  CUR="$name"
  IMG_T0=$SECONDS
  hash="$(inputs_hash "$name")" || die "$name: could not compute the inputs hash (image.conf)"
  repo="agentd-sandbox-$name"
  tag="$repo:$hash"
  mkdir -p "$BUILT_DIR"

  if [ "${FORCE:-}" != 1 ] && docker image inspect "$tag" >/dev/null 2>&1; then
    docker tag "$tag" "$repo:latest"
    echo "$tag" >"$BUILT_DIR/$name.tag"
    say "$name: $tag up to date"
    return 0
  fi

  # image.conf: BUILDER, its settings, CHANGES (docker import --change lines), SMOKE.
  local BUILDER="" SUITE="" VARIANT="" SMOKE="" FROM="" FROM_TAG="" EXTRA_PACKAGES="" EXTRA_SUITES="" PATH_PREFIX="" CHANGES=()
  unset -f host_inputs 2>/dev/null || true
  # shellcheck disable=SC1091
  . "$dir/image.conf"
  declare -F "build_$BUILDER" >/dev/null || die "$dir/image.conf: unknown BUILDER '$BUILDER' (debootstrap, from, busybox)"

  step "building $tag (builder: $BUILDER)"
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/agentd-image-$name.XXXXXX")"
  ROOTFS="$WORK/rootfs"
  mkdir -p "$ROOTFS"
  "build_$BUILDER" "$dir"

  if [ -f "$dir/customize.sh" ]; then
    step "customize.sh"
    # In its own bash, with image.conf's variables set.
    run_logged "$WORK/build.log" customize.sh env ROOTFS="$ROOTFS" IMAGE_NAME="$name" IMAGE_DIR="$dir" \
      AGENTD_ROOT="$ROOT" bash -c 'set -euo pipefail; . "$IMAGE_DIR/image.conf"; . "$IMAGE_DIR/customize.sh"' \
      customize.sh "$ROOTFS"
  fi

  build_agent "$WORK/agentd-agent"
  install -D -m 755 "$WORK/agentd-agent" "$ROOTFS$AGENT_PATH"
  install -D -m 755 "$(static_busybox)" "$ROOTFS$BUSYBOX_PATH"

  # Docker supplies /dev, /proc, /sys, /etc/hosts, /etc/hostname and /etc/resolv.conf;
  # the host's copies and build leftovers do not belong in the image.
  step "finishing the root file system"
  rm -rf --one-file-system "${ROOTFS:?}"/dev/* "$ROOTFS"/proc/* "$ROOTFS"/sys/* "$ROOTFS"/run/* \
    "$ROOTFS"/debootstrap "$ROOTFS"/tmp/* "$ROOTFS"/var/tmp/* 2>/dev/null || true
  mkdir -p "$ROOTFS"/dev "$ROOTFS"/proc "$ROOTFS"/sys "$ROOTFS"/etc "$ROOTFS"/tmp "$ROOTFS"/run
  chmod 1777 "$ROOTFS/tmp"
  rm -f "$ROOTFS/etc/resolv.conf" "$ROOTFS/etc/hostname"
  : >"$ROOTFS/etc/resolv.conf"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOTFS/etc/hosts"

  local args=() c
  # An image made from another keeps its settings (ENV, WORKDIR, USER, CMD): docker
  # import starts from none. image.conf's CHANGES come after and win.
  if [ -n "$FROM_TAG" ]; then
    while IFS= read -r c; do
      case "$c" in PATH=*|'') ;; *) args+=(--change "ENV $c") ;; esac
    done < <(docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$FROM_TAG")
    c="$(docker image inspect -f '{{.Config.WorkingDir}}' "$FROM_TAG")"; [ -z "$c" ] || args+=(--change "WORKDIR $c")
    c="$(docker image inspect -f '{{.Config.User}}' "$FROM_TAG")"; [ -z "$c" ] || args+=(--change "USER $c")
    c="$(docker image inspect -f '{{json .Config.Cmd}}' "$FROM_TAG")"; [ "$c" = null ] || args+=(--change "CMD $c")
  fi
  local path_env="$PATH_ENV"
  [ -z "$PATH_PREFIX" ] || path_env="PATH=$PATH_PREFIX:${PATH_ENV#PATH=}"
  args+=(--change "ENV $path_env" --change "LABEL org.agentd.sandbox.name=$name"
    --change "LABEL org.agentd.sandbox.inputs=$hash" --change "LABEL org.agentd.sandbox.agent=$AGENT_PATH"
    --change "LABEL org.agentd.sandbox.busybox=$BUSYBOX_PATH"
    --message "agentd sandbox image $name ($hash)")
  for c in "${CHANGES[@]}"; do args+=(--change "$c"); done
  step "docker import ($(du -sh "$ROOTFS" | cut -f1) root file system)"
  id="$(tar -C "$ROOTFS" --numeric-owner --sort=name -c . | docker import "${args[@]}" -)"
  IMPORTED="$id"

  if [ -n "$SMOKE" ]; then
    step "smoke test (image.conf: SMOKE)"
    docker run --rm --network none --user 1000:1000 "$id" sh -c "$SMOKE" >"$WORK/smoke.log" 2>&1 || {
      sed 's/^/    /' "$WORK/smoke.log" >&2
      die "$name: the smoke test failed; the image is not tagged"
    }
  fi
  old="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
  docker tag "$id" "$tag"
  docker tag "$id" "$repo:latest"
  IMPORTED=""
  # FORCE=1 replaced an image with the same tag: drop it unless something still uses it.
  if [ -n "$old" ] && [ "$old" != "$id" ]; then docker rmi "$old" >/dev/null 2>&1 || true; fi
  echo "$tag" >"$BUILT_DIR/$name.tag"
  rm -rf --one-file-system "$WORK"
  WORK=""
  step "built $tag, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
}

# Two builds at once (make images twice, parallel tests) would both build: wait instead.
mkdir -p "$BUILT_DIR"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$BUILT_DIR/.lock"
  flock -n 9 || { say "waiting for another build-images.sh to finish"; flock 9; }
fi

for name in "${WANT[@]}"; do
  build_image "$name"
done
