# shellcheck shell=bash
# Runs on the host as root (bash -euo pipefail) after the packages are installed, with
# image.conf's variables set. $1 is the image's root file system (base's: the agent user
# and /workspace are there already).
R="$1"
# Byte code compiled at install time stays; nothing else to do but tidy.
find "$R/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$R/usr/share/doc" -mindepth 1 -type d -empty -delete
