# shellcheck shell=bash
# Runs on the host as root (bash -euo pipefail) after the packages are installed, with
# image.conf's variables set. $1 is the image's root file system (base's).
R="$1"
if [ "$GO_FROM_HOST" = 1 ]; then
  # The distribution without its test suite and documentation (~70 MB); the standard
  # library's sources, the tools and the race runtime stay (go build needs them).
  mkdir -p "$R/usr/local/go"
  tar -C "$GO_ROOT" --exclude=./test --exclude=./doc -c . | tar -C "$R/usr/local/go" -x --no-same-owner
  chown -R 0:0 "$R/usr/local/go"
else
  # Debian's golang-1.23-go lives in /usr/lib/go-1.23: /usr/local/go points there, so
  # PATH_PREFIX and GOROOT are the same as with the machine's Go.
  test -x "$R/usr/lib/go-1.23/bin/go"
  ln -sfn /usr/lib/go-1.23 "$R/usr/local/go"
fi
