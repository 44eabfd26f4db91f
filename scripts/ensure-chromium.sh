#!/usr/bin/env bash
# The browser tests (internal/testing/browser.ts) drive Debian's chromium with playwright-core:
# it must be installed. Prints the chromium executable path on stdout (and nothing else). As
# root with apt-get, installs it when missing; otherwise stops with a message naming what to
# install.
set -euo pipefail
find_chromium() { command -v chromium || command -v chromium-browser; }
if path="$(find_chromium 2>/dev/null)"; then echo "$path"; exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: installing chromium (apt-get)" >&2
  # Quiet (dpkg's and debconf's chatter goes to a log), but the log is shown when it fails.
  log="$(mktemp)"
  trap 'rm -f "$log"' EXIT
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 \
    apt-get install -y -qq --no-install-recommends chromium; } >"$log" 2>&1; then
    cat "$log" >&2
  fi
  if path="$(find_chromium 2>/dev/null)"; then echo "$path"; exit 0; fi
fi
echo "ensure-chromium: chromium is not installed. Install it (Debian/Ubuntu: apt-get install -y chromium; elsewhere set AGENTD_CHROMIUM to a Chromium or Chrome executable) and run again." >&2
exit 1
