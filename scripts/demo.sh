#!/usr/bin/env bash
# make demo: the main job on the embedded event log (no Redis needed).
# Today it shows the spine: agentd dev, a queued run, its live event stream, the hash
# chain. The agent itself (sandbox, kernel, worker) lands with the later issues; the demo
# says so instead of pretending.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="$(mktemp -d "${TMPDIR:-/tmp}/agentd-demo.XXXXXX")"
log="$data/agentd.log"
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

echo "==> starting agentd dev (embedded event log in $data)"
"$root/bin/agentd" dev --data-dir "$data" --listen 127.0.0.1:0 >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  addr="$(grep -o '"addr":"[^"]*"' "$log" 2>/dev/null | head -1 | cut -d'"' -f4 || true)"
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "agentd dev did not start"; cat "$log"; exit 1; }
export AGENTD_ADDR="http://$addr"
echo "    listening on $addr"

echo "==> agentctl run --no-wait"
run="$("$root/bin/agentctl" run --prompt "Make the failing test in examples/ pass" --no-wait || true)"
echo "    run $run queued"

echo "==> its events (SSE over HTTP/1.1: curl $AGENTD_ADDR/v1/runs/$run/events)"
"$root/bin/agentctl" events "$run"

echo "==> agentctl verify $run"
"$root/bin/agentctl" verify "$run"

echo "==> agentctl runs"
"$root/bin/agentctl" runs

cat <<'TXT'

Not there yet: no worker picks the run up, so it stays queued. The sandbox, the policy
kernel, the worker loop and the full demo (an agent fixing a failing test, with an
approval) land with the next issues; this demo grows with them.
TXT
