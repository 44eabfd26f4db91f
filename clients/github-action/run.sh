#!/usr/bin/env bash
# The step of agentd's GitHub Action (action.yml maps the inputs to INPUT_* variables and
# runs this): masks the token, makes the repo path absolute, then runs main.ts
#
#   - in the agentd image (input image, default agentd:latest): `docker run` with the
#     image's Node.js and agentctl, on the runner's network (--network host: an address
#     the runner reaches, the container reaches), as the runner's user, read-only, with no
#     capabilities; mounted: this directory (read-only), the repo (read-only), RUNNER_TEMP
#     (the patch goes there), the files of GITHUB_OUTPUT and GITHUB_STEP_SUMMARY, the CA file;
#   - or, when input agentctl names one, with the runner's node (>= 24) and that agentctl.
#
# action.yml runs it with exec: it is the step's process, which a cancelled job signals.
# Never puts the token on a command line: it travels in INPUT_TOKEN (docker -e NAME copies
# a variable by name) and reaches agentctl as AGENTD_TOKEN.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"

# Mask the token in the log before anything could print it: every line of it, trimmed (a
# secret pasted with a line break is masked whole; main.ts then refuses inner whitespace).
if [ -n "${INPUT_TOKEN:-}" ]; then
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line//$'\r'/}"
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    if [ -n "$line" ]; then echo "::add-mask::$line"; fi
  done <<<"$INPUT_TOKEN"
fi

# Relative paths are the workspace's, as in a `run:` step.
base="${GITHUB_WORKSPACE:-$PWD}"
absolute() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$base" "$1" ;; esac; }
repo="$(absolute "${INPUT_REPO:-.}")"
if [ -d "$repo" ]; then repo="$(cd "$repo" && pwd -P)"; fi
export INPUT_REPO="$repo"
if [ -n "${INPUT_CA_FILE:-}" ]; then export INPUT_CA_FILE="$(absolute "$INPUT_CA_FILE")"; fi
export RUNNER_TEMP="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"

if [ -n "${INPUT_AGENTCTL:-}" ]; then
  command -v node >/dev/null 2>&1 ||
    { echo "::error title=agentd action::input agentctl is set, so the runner's node is used, and there is none on the PATH (actions/setup-node with node-version 24)"; exit 64; }
  node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 24 ? 0 : 1)' ||
    { echo "::error title=agentd action::the runner's node is $(node --version); Node.js 24 or later is needed (actions/setup-node with node-version 24), or leave input agentctl empty to use the agentd image"; exit 64; }
  AGENTCTL="$(absolute "$INPUT_AGENTCTL")" exec node "$here/main.ts"
fi

image="${INPUT_IMAGE:-agentd:latest}"
command -v docker >/dev/null 2>&1 ||
  { echo "::error title=agentd action::docker is needed to run the agentd image (or set input agentctl to an agentctl on the runner)"; exit 64; }
args=(run --rm --network host --user "$(id -u):$(id -g)" --read-only --cap-drop ALL
  --security-opt no-new-privileges --tmpfs /agentd-tmp -e HOME=/agentd-tmp -e TMPDIR=/agentd-tmp
  -e AGENTCTL=agentctl -v "$here:/agentd-action:ro" -w /agentd-tmp --entrypoint node)
# Variables copied by name (docker -e NAME): their values never appear on this command line.
while IFS= read -r name; do
  case "$name" in INPUT_* | GITHUB_* | RUNNER_TEMP | TRACEPARENT | TRACESTATE) args+=(-e "$name") ;; esac
done < <(compgen -e)
mount() { if [ -e "$1" ]; then args+=(-v "$1:$1$2"); fi; }
mount "$RUNNER_TEMP" ""
if [ "$repo" != "$RUNNER_TEMP" ]; then mount "$repo" ":ro"; fi
if [ -n "${INPUT_CA_FILE:-}" ]; then mount "$INPUT_CA_FILE" ":ro"; fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then mount "$GITHUB_OUTPUT" ""; fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then mount "$GITHUB_STEP_SUMMARY" ""; fi

# A cancelled job: the runner signals the step's process, which is this one (action.yml
# execs it), SIGINT then SIGTERM, and after 10 s kills the process tree, which would leave
# the container behind. So docker runs in the background and a signal stops the container
# (main.ts, its PID 1, then stops waiting and exits 130); before the container exists, the
# docker client is stopped instead.
name="agentd-action-${GITHUB_RUN_ID:-local}-$$"
args+=(--name "$name")
docker "${args[@]}" "$image" /agentd-action/main.ts &
pid=$!
stop_container() {
  docker stop --time 5 "$name" >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
}
trap stop_container INT TERM
code=0
wait "$pid" || code=$?
# A trapped signal ends `wait` early: wait again for docker's own exit code.
while kill -0 "$pid" 2>/dev/null; do
  code=0
  wait "$pid" || code=$?
done
exit "$code"
