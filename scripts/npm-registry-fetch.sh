#!/usr/bin/env bash
# Unpacks the newest version of an npm registry package within one major version into a
# directory, with nothing but curl, coreutils and perl (a fresh Debian has perl-base): how
# scripts/ensure-node.sh gets Node.js and npm onto a machine that has neither.
#
#   scripts/npm-registry-fetch.sh PACKAGE MAJOR DEST
#
# The registry is $npm_config_registry (default https://registry.npmjs.org/). The tarball
# is checked against the registry's sha512 integrity before it is unpacked. Must never:
# unpack a tarball whose integrity does not match, or write outside DEST.
set -euo pipefail
pkg="${1:?package}" major="${2:?major version}" dest="${3:?destination directory}"
registry="${npm_config_registry:-https://registry.npmjs.org/}"
registry="${registry%/}"
die() { echo "npm-registry-fetch: $*" >&2; exit 1; }
[[ "$major" =~ ^[0-9]+$ ]] || die "MAJOR must be a number, not '$major'"
command -v curl >/dev/null 2>&1 || die "curl is missing (apt-get install -y curl)"
get() { curl -fsSL --retry 3 --connect-timeout 20 "$@"; }

# The abbreviated document lists every version; the newest of the major wins.
versions="$(get -H 'Accept: application/vnd.npm.install-v1+json' "$registry/$pkg")" ||
  die "could not read $registry/$pkg"
version="$(grep -o "\"$major\\.[0-9]*\\.[0-9]*\":" <<<"$versions" | tr -d '":' | sort -V | tail -n 1 || true)"
[ -n "$version" ] || die "$registry/$pkg has no version $major.x"
manifest="$(get "$registry/$pkg/$version")" || die "could not read $registry/$pkg/$version"
tarball="$(grep -o '"tarball": *"[^"]*"' <<<"$manifest" | head -n 1 | sed 's/.*"\(http[^"]*\)"$/\1/')"
integrity="$(grep -o '"integrity": *"sha512-[^"]*"' <<<"$manifest" | head -n 1 | sed 's/.*"sha512-\([^"]*\)"$/\1/')"
[ -n "$tarball" ] && [ -n "$integrity" ] || die "$pkg@$version: the registry names no tarball or sha512 integrity"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "npm-registry-fetch: $pkg@$version from $registry" >&2
get -o "$tmp/p.tgz" "$tarball" || die "could not download $tarball"
got="$(sha512sum "$tmp/p.tgz" | cut -d' ' -f1 | perl -ne 'chomp; print pack("H*", $_)' | base64 -w0)"
[ "$got" = "$integrity" ] || die "$pkg@$version: sha512 of the download does not match the registry's integrity"
mkdir -p "$dest"
# npm tarballs hold one folder, package/; nothing else is unpacked.
tar -xzf "$tmp/p.tgz" -C "$dest" --strip-components=1 --no-same-owner package/
echo "$version"
