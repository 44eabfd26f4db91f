/**
 * The two tiny shell programs every exec relies on; POSIX sh, so they run on any image
 * (busybox ash, dash, bash).
 *
 * RUN: the exec's own shell starts the command in the background (so it is not a process
 * group leader), the child calls setsid (which therefore does not fork) and execs the
 * command: the command leads a new session and process group whose id is `$!`, written
 * to a pid file. The outer shell waits, kills what is left of the group (nothing a call
 * started outlives it: no background daemons, no fork-bomb remnants; `kill` is a builtin,
 * so this works even at the pids limit) and returns the command's exit status.
 *
 * With stdin, fd 0 is saved on fd 3 first: a background command's stdin is /dev/null
 * before any explicit redirection is applied (POSIX), so `<&0` would not do.
 *
 * `kill -KILL "-$p"` (no `--`): dash's builtin kill refuses `--`, busybox and dash both
 * read a negative operand after the signal as a process group.
 *
 * KILL: kills that whole process group (and its leader), waiting briefly for the pid file
 * of an exec that has just started.
 */

export const PID_DIR = "/tmp/.agentd-exec";

export const RUN_SCRIPT =
  'd=/tmp/.agentd-exec; f="$d/$1"; shift; mkdir -p "$d" 2>/dev/null; ' +
  'setsid "$@" </dev/null & p=$!; echo "$p" >"$f"; wait "$p"; rc=$?; kill -KILL "-$p" 2>/dev/null; rm -f "$f"; exit "$rc"';

export const RUN_SCRIPT_STDIN =
  'd=/tmp/.agentd-exec; f="$d/$1"; shift; mkdir -p "$d" 2>/dev/null; ' +
  'exec 3<&0; setsid "$@" <&3 3<&- & p=$!; exec 3<&-; echo "$p" >"$f"; wait "$p"; rc=$?; kill -KILL "-$p" 2>/dev/null; rm -f "$f"; exit "$rc"';

export const KILL_SCRIPT =
  'f=/tmp/.agentd-exec/$1; i=0; while [ ! -s "$f" ] && [ "$i" -lt 20 ]; do sleep 0.05; i=$((i+1)); done; ' +
  'p=$(cat "$f" 2>/dev/null); [ -n "$p" ] || exit 3; kill -KILL "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; exit 0';

/** Prints the cgroup's OOM-kill counter (cgroup v1 or v2). */
export const OOM_COUNT_SCRIPT =
  "cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || cat /sys/fs/cgroup/memory.events 2>/dev/null";
