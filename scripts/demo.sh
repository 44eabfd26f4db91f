#!/usr/bin/env bash
# make demo: the main job, on the embedded event log (no Redis needed).
#
# An agent fixes the failing test of examples/fix-failing-test in a Docker sandbox:
#   1. agentd dev starts on a free port with a temp data dir and the example's policy
#      (examples/fix-failing-test/agentd-policy.yaml: every patch waits for a person);
#   2. the model: with OPENAI_API_KEY (and optional OPENAI_BASE_URL, AGENTD_MODEL) a live
#      model; without it the bundled replay model plays examples/fix-failing-test/
#      transcript.json. The demo says on screen which one runs;
#   3. `agentctl run --repo examples/fix-failing-test --prompt … --follow` uploads the
#      example and renders the run live: the tests fail, the agent reads the code and
#      proposes a patch, the approval preview is shown;
#   4. the approval (see "Approving" below), then the tests pass inside the sandbox;
#   5. `agentctl artifact get RUN --out examples/fix-failing-test/agentd.patch` (git-ignored),
#      checked with `git apply` on a copy of the example whose tests then pass on the host;
#      `agentctl verify RUN` checks the hash chain; `agentctl replay RUN` tells the run's
#      story again from its events.
#
# Approving. On a terminal (stdin and stdout are TTYs) agentctl's inline prompt asks you.
# Anywhere else (CI, `make demo | tee`, no terminal) the demo approves for you: a
# background loop lists pending approvals through the API (ListApprovals, Connect JSON)
# and runs `agentctl approve ID --reason demo`. AGENTD_DEMO_APPROVE=auto or =inline forces
# either way. The loop reads the API's JSON, never the renderer's text, so it works
# whatever the live view prints. On a terminal it never approves anything itself.
#
# Environment: OPENAI_API_KEY / OPENAI_BASE_URL / AGENTD_MODEL (live model),
# AGENTD_DEMO_APPROVE (auto|inline), AGENTCTL (the agentctl to run; default bin/agentctl).
# Docker must run (scripts/ensure-docker.sh starts it as root) and the sandbox image must be
# built (`make demo` runs `make images` first).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
example="$root/examples/fix-failing-test"
agentctl="${AGENTCTL:-$root/bin/agentctl}"
node="$("$root/scripts/ensure-node.sh")"
image="agentd-sandbox-base:latest"
prompt="The test suite of this repository fails. Find the bug, fix it with a minimal patch, and make sure all tests pass."

say() { printf '\n==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }

# --- Docker and the sandbox image -------------------------------------------------------
"$root/scripts/ensure-docker.sh"
if ! docker image inspect "$image" >/dev/null 2>&1; then
  echo "demo: the sandbox image $image is not built: run 'make images' (or 'make demo', which does)" >&2
  exit 1
fi

# --- The model --------------------------------------------------------------------------
model_args=()
if [ -n "${OPENAI_API_KEY:-}" ]; then
  model_desc="live model ${AGENTD_MODEL:-gpt-4o-mini} at ${OPENAI_BASE_URL:-https://api.openai.com/v1} (OPENAI_API_KEY is set)"
else
  model_args=(--replay "$example/transcript.json")
  model_desc="no OPENAI_API_KEY: the bundled replay model (examples/fix-failing-test/transcript.json, a recorded transcript, not a live model; set OPENAI_API_KEY for one)"
fi

# --- Approving: inline on a terminal, by the demo elsewhere ------------------------------
approve_mode="${AGENTD_DEMO_APPROVE:-}"
if [ -z "$approve_mode" ]; then
  if [ -t 0 ] && [ -t 1 ]; then approve_mode=inline; else approve_mode=auto; fi
fi
case "$approve_mode" in auto | inline) ;; *)
  echo "demo: AGENTD_DEMO_APPROVE must be auto or inline, not '$approve_mode'" >&2
  exit 2
  ;;
esac

# --- agentd dev -------------------------------------------------------------------------
data="$(mktemp -d "${TMPDIR:-/tmp}/agentd-demo.XXXXXX")"
log="$data/agentd.log"
pid=""
approver=""
# On exit: stop the approver and agentd; after a failure, show the end of agentd's log
# (that is where the reason is).
cleanup() {
  local rc=$?
  [ -n "$approver" ] && kill "$approver" 2>/dev/null
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  if [ "$rc" -ne 0 ] && [ -s "$log" ]; then
    echo "demo: failed (exit $rc); the end of agentd's log ($log):" >&2
    tail -n 25 "$log" >&2
  fi
  return "$rc"
}
trap cleanup EXIT

say "starting agentd dev (embedded event log in $data)"
note "model: $model_desc"
"$root/bin/agentd" dev --data-dir "$data" --listen 127.0.0.1:0 \
  --policy "$example/agentd-policy.yaml" "${model_args[@]}" >"$log" 2>&1 &
pid=$!
addr=""
for _ in $(seq 1 100); do
  addr="$(grep -o '"addr":"[^"]*"' "$log" 2>/dev/null | head -1 | cut -d'"' -f4 || true)"
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "demo: agentd dev did not start in 10 s" >&2; cat "$log" >&2; exit 1; }
export AGENTD_ADDR="http://$addr"
# agentd's own word on the model (its log line), so nobody mistakes a recording for a model.
model_line="$(grep -o '"msg":"[^"]*model[^"]*"' "$log" | head -1 | cut -d'"' -f4 || true)"
note "listening on $addr; agentd says: ${model_line:-?}"

# rpc METHOD JSON: one unary call of the API in Connect's JSON protocol (HTTP/1.1), the
# response JSON on stdout. Independent of agentctl's output formats.
rpc() {
  # shellcheck disable=SC2016 # JavaScript template literals, not shell expansions
  "$node" -e '
    const [addr, method, body] = process.argv.slice(1);
    fetch(`${addr}/agentd.v1.RunService/${method}`, {
      method: "POST", headers: { "content-type": "application/json" }, body,
    }).then(async (r) => {
      const t = await r.text();
      if (!r.ok) { process.stderr.write(`${method}: ${t}\n`); process.exit(1); }
      process.stdout.write(t);
    }, (e) => { process.stderr.write(`${method}: ${e.message}\n`); process.exit(1); });
  ' "$AGENTD_ADDR" "$1" "$2"
}
# json EXPR: evaluates EXPR over the JSON on stdin (named j); prints it, an array one per line.
json() {
  # shellcheck disable=SC2016 # JavaScript template literals, not shell expansions
  "$node" -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      const v = new Function("j", `return (${process.argv[1]});`)(JSON.parse(s || "{}"));
      if (v !== undefined && v !== null) console.log(Array.isArray(v) ? v.join("\n") : String(v));
    });
  ' "$1"
}

# The approver (background, auto mode): approves what is pending, a moment after the
# preview is shown (like a person reading it). The worker holds the run and its container
# while the approval waits (agentd dev --approval-hold-ms, 60 s), so the run goes on at once.
approver_loop() {
  set +e # a failed poll is retried at the next turn, never the end of the loop
  local approved=" " id
  while kill -0 "$pid" 2>/dev/null; do
    for id in $(rpc ListApprovals '{}' 2>/dev/null | json '(j.approvals ?? []).map((a) => a.approvalId)' || true); do
      case "$approved" in *" $id "*) continue ;; esac
      sleep 1
      say "demo: approving $id (no terminal here, so the demo is the person: agentctl approve $id --reason demo)"
      "$agentctl" approve "$id" --reason "demo" || note "agentctl approve failed; approve it yourself: $agentctl approve $id"
      approved="$approved$id "
    done
    sleep 0.3
  done
}
if [ "$approve_mode" = auto ]; then
  approver_loop &
  approver=$!
fi

# --- The run ----------------------------------------------------------------------------
say "agentctl run --repo examples/fix-failing-test --prompt \"…\" --follow"
if [ "$approve_mode" = inline ]; then
  note "the patch waits for your approval: agentctl shows the preview and asks"
  note "(or approve from another terminal: AGENTD_ADDR=$AGENTD_ADDR $root/bin/agentctl approvals / approve ID)"
else
  note "not on a terminal: the demo approves the patch for you once agentctl shows the preview"
fi
set +e
"$agentctl" run --repo "$example" --prompt "$prompt" --follow
rc=$?
set -e
run="$(rpc ListRuns '{"pageSize":1}' | json 'j.runs?.[0]?.runId')"
if [ "$rc" -ne 0 ] || [ -z "$run" ]; then
  echo "demo: the run did not complete (agentctl exit $rc; run ${run:-none})" >&2
  exit 1
fi
# A denied patch (or a live model that changed nothing) completes the run without one.
if ! "$agentctl" events "$run" --json | grep -q '"name":"patch"'; then
  echo "demo: run $run completed without a patch artifact (was the patch denied?); see: $agentctl replay $run" >&2
  exit 1
fi

# --- The patch artifact, the hash chain, the replay -------------------------------------
say "agentctl artifact get $run --out examples/fix-failing-test/agentd.patch"
"$agentctl" artifact get "$run" --out "$example/agentd.patch"
cat "$example/agentd.patch"
check="$(mktemp -d "${TMPDIR:-/tmp}/agentd-demo-apply.XXXXXX")"
cp -R "$example/." "$check/"
rm -f "$check/agentd.patch"
(cd "$check" && git apply "$example/agentd.patch" && "$node" --test >/dev/null 2>&1) ||
  { echo "demo: the patch does not apply, or the example's tests still fail with it ($check)" >&2; exit 1; }
rm -rf "$check"
note "git apply: the patch applies to the example, and its tests pass on the host with it"

say "agentctl verify $run"
"$agentctl" verify "$run"

say "agentctl replay $run (the same story, told from the stored events)"
"$agentctl" replay "$run"

cat <<TXT

Done: run $run completed; the patch is examples/fix-failing-test/agentd.patch
(apply it with: cd examples/fix-failing-test && git apply agentd.patch).
The run's events stay in $data. To look at them again:
  bin/agentd dev --data-dir $data --listen 127.0.0.1:7070 &
  bin/agentctl replay $run        # or: events $run, verify $run, artifact get $run --out FILE
TXT
