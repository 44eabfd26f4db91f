# shellcheck shell=bash
# Runs on the host as root (bash -euo pipefail), with image.conf's variables set. $1 is
# the image's root file system (base's: node at /usr/bin/node, npm). Installs corepack
# and lays out its cache, COREPACK_HOME=/usr/local/share/corepack, as `corepack install
# -g` would: v1/NAME/VERSION/ with the package and a .corepack file, and
# lastKnownGood.json naming the default versions. Read-only in the image: corepack only
# reads it for these versions; another version needs the network and a writable
# COREPACK_HOME.
R="$1"
npm_bin="$(command -v npm || true)"
if [ -z "$npm_bin" ] && [ -n "${AGENTD_ROOT:-}" ]; then
  npm_bin="$(dirname "$("$AGENTD_ROOT/scripts/ensure-node.sh")")/npm"
fi
[ -x "$npm_bin" ] || { echo "customize: npm is needed on the host to fetch corepack, pnpm and yarn" >&2; exit 1; }
dl="$(mktemp -d)"
trap 'rm -rf "$dl"' EXIT
fetch_pinned() { # PACKAGE VERSION SHA512: leaves $dl/PACKAGE-VERSION.tgz
  (cd "$dl" && "$npm_bin" pack --silent "$1@$2" >/dev/null)
  local got
  got="$(sha512sum "$dl/$1-$2.tgz" | cut -d' ' -f1)"
  [ "$got" = "$3" ] || { echo "customize: $1-$2.tgz has sha512 $got, image.conf pins $3" >&2; exit 1; }
}

# corepack, laid out like npm: /usr/lib/node_modules/corepack and its shims in /usr/bin.
fetch_pinned corepack "$COREPACK_VERSION" "$COREPACK_SHA512"
mkdir -p "$R/usr/lib/node_modules/corepack"
tar -xzf "$dl/corepack-$COREPACK_VERSION.tgz" -C "$R/usr/lib/node_modules/corepack" --strip-components=1 \
  --no-same-owner --no-same-permissions
chmod -R u=rwX,go=rX "$R/usr/lib/node_modules/corepack"
for b in corepack pnpm pnpx yarn yarnpkg; do
  chmod 755 "$R/usr/lib/node_modules/corepack/dist/$b.js"
  ln -s "../lib/node_modules/corepack/dist/$b.js" "$R/usr/bin/$b"
done

# The cache: v1/NAME/VERSION holds the package (as corepack unpacks it: the tarball
# without its package/ prefix) and .corepack {locator, bin, hash}.
home="$R/usr/local/share/corepack"
seed() { # NAME VERSION SHA512 BIN_JSON
  local to="$home/v1/$1/$2"
  fetch_pinned "$1" "$2" "$3"
  mkdir -p "$to"
  tar -xzf "$dl/$1-$2.tgz" -C "$to" --strip-components=1 --no-same-owner --no-same-permissions
  printf '{"locator":{"name":"%s","reference":"%s"},"bin":%s,"hash":"sha512.%s"}' "$1" "$2" "$4" "$3" >"$to/.corepack"
}
seed pnpm "$PNPM_VERSION" "$PNPM_SHA512" '{"pnpm":"./bin/pnpm.cjs","pnpx":"./bin/pnpx.cjs"}'
seed yarn "$YARN_VERSION" "$YARN_SHA512" '{"yarn":"./bin/yarn.js","yarnpkg":"./bin/yarn.js"}'
printf '{\n  "pnpm": "%s",\n  "yarn": "%s"\n}\n' "$PNPM_VERSION" "$YARN_VERSION" >"$home/lastKnownGood.json"
chown -R 0:0 "$home"
chmod -R u=rwX,go=rX "$home"
