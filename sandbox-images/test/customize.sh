# shellcheck shell=bash
# Runs on the host (as root, with bash -euo pipefail) after busybox is in place.
# $1 is the image's root file system.
R="$1"

mkdir -p "$R/etc" "$R/root" "$R/home/agent" "$R/workspace" "$R/tmp" "$R/var/tmp"
cat >"$R/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
agent:x:1000:1000:agent:/home/agent:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$R/etc/group" <<'GROUP'
root:x:0:
agent:x:1000:
nogroup:x:65534:
GROUP
chmod 644 "$R/etc/passwd" "$R/etc/group"
chmod 700 "$R/root"
chmod 1777 "$R/tmp" "$R/var/tmp"
chown 1000:1000 "$R/home/agent" "$R/workspace"
chmod 755 "$R/home/agent" "$R/workspace"
