#!/usr/bin/env bash
# Makes sure a Docker engine answers. As root with apt-get, installs it (Debian's docker.io)
# when it is missing and starts it when it is stopped; AGENTD_INSTALL_DOCKER=0 turns the
# install off. Otherwise stops with a message naming what to install or start.
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1 && [ "${AGENTD_INSTALL_DOCKER:-1}" != "0" ]; then
    echo "ensure-docker: installing docker.io (apt-get)" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
    if ! command -v dockerd >/dev/null 2>&1; then
      echo "ensure-docker: apt-get install docker.io did not install dockerd. Install a Docker engine and start it (dockerd &)." >&2
      exit 1
    fi
  else
    echo "ensure-docker: no Docker engine. Install one (Debian/Ubuntu, as root: apt-get install -y docker.io; make does it for you as root) and start it (dockerd &)." >&2
    exit 1
  fi
fi
if [ "$(id -u)" != "0" ]; then
  echo "ensure-docker: the Docker engine is installed but not running; start it (sudo dockerd & or systemctl start docker)." >&2
  exit 1
fi
# A killed engine leaves its pid file behind and then refuses to start.
if ! pgrep -x dockerd >/dev/null 2>&1; then rm -f /var/run/docker.pid; fi
if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "ensure-docker: starting dockerd (log: /var/log/dockerd.log)" >&2
  # A daemon must not keep the caller's other open files (a lock a CI step holds with
  # flock, a pipe a caller waits on to close): only stdin, stdout and stderr go along.
  (
    for fd in /proc/self/fd/*; do
      fd="${fd##*/}"
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec nohup dockerd </dev/null >/var/log/dockerd.log 2>&1
  ) &
fi
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "ensure-docker: dockerd did not become ready in 30 s; see /var/log/dockerd.log" >&2
exit 1
