#!/usr/bin/env bash
# The test cluster's own images, made in Docker from the programs build.sh built (no
# registry can be reached here): the pause image every Pod starts with, and CoreDNS.
# Each is a single static binary in an otherwise empty image; made again only when missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/kubernetes/versions.sh
. "$here/versions.sh"
bin="$root/.tools/kubernetes/$K8S_VERSION/bin"

# one_file_image IMAGE PROGRAM USER: an image holding /PROGRAM as its entrypoint.
one_file_image() {
  local image=$1 program=$2 user=$3
  docker image inspect "$image" >/dev/null 2>&1 && return
  local tmp
  tmp=$(mktemp -d)
  cp "$bin/$program" "$tmp/$program"
  tar -C "$tmp" --owner=0 --group=0 -cf - "$program" |
    docker import --change "ENTRYPOINT [\"/$program\"]" --change "USER $user" - "$image" >/dev/null
  rm -rf "$tmp"
}
one_file_image "$PAUSE_IMAGE" pause 65535:65535
one_file_image "$COREDNS_IMAGE" coredns 0:0
