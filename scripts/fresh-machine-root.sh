# shellcheck shell=bash
# The clean Debian root of scripts/fresh-machine.sh, as a Docker image: debootstrap (minbase)
# plus $PACKAGES and the machine's extra CA certificates, imported with `docker import` and
# tagged agentd-fresh-machine:<hash of what went in>, so a second run starts at once.
# Sourced by fresh-machine.sh (SUITE, PACKAGES, STATE, REBUILD, say, die). Must never: add
# anything of this project or of this machine's toolchains to the root.

fresh_mirror() {
  local m=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    m="$(awk 'tolower($1) == "uris:" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)"
  fi
  echo "${DEBIAN_MIRROR:-${m:-http://deb.debian.org/debian}}"
}

# The machine's own CA certificates (not Debian's bundle): what a proxy that intercepts TLS
# needs every machine behind it to trust.
fresh_extra_cas() { find /usr/local/share/ca-certificates -name '*.crt' -type f 2>/dev/null | sort; }

# Prints the image's tag, building it when it is missing or REBUILD=1.
fresh_root_image() {
  local key tag
  key="$( { echo "$SUITE $PACKAGES $(fresh_mirror)"; fresh_extra_cas | xargs -r cat; } | sha256sum | cut -c1-12)"
  tag="agentd-fresh-machine:$key"
  if [ "$REBUILD" != 1 ] && docker image inspect "$tag" >/dev/null 2>&1; then
    say "clean root: $tag (cached; --rebuild makes it again)"
    echo "$tag"; return
  fi
  fresh_build_root "$tag" >&2
  echo "$tag"
}

fresh_build_root() { # TAG
  local tag="$1" work log="$STATE/debootstrap.log" t0=$SECONDS
  work="$(mktemp -d "$STATE/root.XXXXXX")"
  # shellcheck disable=SC2064
  trap "fresh_unmount '$work'; rm -rf --one-file-system '$work'; trap - RETURN" RETURN
  say "debootstrap --variant=minbase $SUITE from $(fresh_mirror) (log: $log)"
  debootstrap --variant=minbase "$SUITE" "$work" "$(fresh_mirror)" >"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "debootstrap failed"; }
  cp -L /etc/resolv.conf "$work/etc/resolv.conf"
  say "apt-get install $PACKAGES"
  chroot "$work" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES" >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "apt-get install in the root failed"; }
  local ca
  for ca in $(fresh_extra_cas); do cp "$ca" "$work/usr/local/share/ca-certificates/"; done
  chroot "$work" update-ca-certificates >>"$log" 2>&1
  rm -f "$work/etc/resolv.conf"
  tar -C "$work" --numeric-owner -c . | docker import -c 'CMD ["bash"]' - "$tag" >/dev/null
  say "clean root: $tag ($((SECONDS - t0)) s)"
}

fresh_unmount() { # DIR
  local m
  for m in $(awk -v w="$1/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
}
