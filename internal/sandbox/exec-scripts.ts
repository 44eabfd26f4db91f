/**
 * The tiny shell programs every sandbox relies on; POSIX sh, so they run on any image
 * (busybox ash, dash, bash). They run as the sandbox user (uid 1000), never as root.
 *
 * RUN: the exec's own shell starts the command in the background (so it is not a process
 * group leader), the child calls setsid (which therefore does not fork) and execs the
 * command: the command leads a new session and process group whose id is `$!`, written
 * to a pid file. A watchdog in a session of its own kills that group when the call's
 * timeout passes: the timeout holds inside the container even if the worker that started
 * the call died (a `docker exec` keeps running when its client goes away). The outer shell
 * waits, kills what is left of the group (nothing a call started outlives it: no background
 * daemons, no fork-bomb remnants; `kill` is a builtin, so this works even at the pids
 * limit), stops the watchdog (its group, and its pid in case it has not reached its
 * setsid yet) and returns the command's exit status (255 when processes kept appearing).
 * The command can kill this shell (same user): the exec then ends by a signal, and the
 * worker, seeing a status of 128 or more, kills everything itself (docker-handle.ts).
 *
 * With stdin, fd 0 is saved on fd 3 first: a background command's stdin is /dev/null
 * before any explicit redirection is applied (POSIX), so `<&0` would not do.
 *
 * `kill -KILL "-$p"` (no `--`): dash's builtin kill refuses `--`, busybox and dash both
 * read a negative operand after the signal as a process group.
 *
 * Must never: run as root, or leave a process of a call running after the call ended.
 */

export const PID_DIR = "/tmp/.agentd-exec";

/**
 * Every process in the container but PID 1, the main process (the earliest-started child
 * of PID 1: a start time cannot be forged, a recycled pid can) and this shell, whatever
 * session or group they escaped to, killed until a scan of /proc finds none left (forks
 * racing the kill are caught by the next round). Zombies are skipped (the init reaps them),
 * unless one is a thread group leader whose other threads still run (its main thread
 * exited: /proc shows it as a zombie while the process goes on).
 * Returns 0 once clean, 4 if processes keep appearing. A process may vanish between the
 * scan and a read of its /proc files: stderr is sent away before any such file is opened
 * (redirections apply left to right), so the call's own stderr never carries the noise.
 */
const KILL_ALL_FN = `agentd_killall() {
  self=$$; main=; mst=
  for d in /proc/[0-9]*; do
    { read -r line < "$d/stat"; } 2>/dev/null || continue
    rest=\${line##*) }; set -- $rest
    [ "$2" = 1 ] || continue
    if [ -z "$mst" ] || [ "\${20}" -lt "$mst" ]; then main=\${d#/proc/}; mst=\${20}; fi
  done
  i=0
  while :; do
    n=0
    for d in /proc/[0-9]*; do
      p=\${d#/proc/}
      case "$p" in 1|"$self"|"$main") continue ;; esac
      { read -r line < "$d/stat"; } 2>/dev/null || continue
      rest=\${line##*) }; set -- $rest
      if [ "$1" = Z ]; then
        t=1
        while read -r k v; do [ "$k" = Threads: ] && t=$v; done 2>/dev/null < "$d/status"
        [ "$t" -lt 2 ] 2>/dev/null && continue
      fi
      kill -KILL "$p" 2>/dev/null
      n=$((n+1))
    done
    [ "$n" -eq 0 ] && { killall_rounds=$i; return 0; }
    i=$((i+1)); [ "$i" -ge 500 ] && { killall_left=$n; return 4; }
  done
}
`;

/**
 * Arguments: exec id, timeout in seconds (the watchdog), then the command's argv. Each call
 * gets a HOME of its own, removed when it ends: dotfiles a call writes (~/.gitconfig with a
 * hook, Python's usercustomize, ~/.bashrc) cannot make a later call run code the kernel
 * never saw. When the command ends, everything it left running — its group, and whatever
 * escaped to another session (setsid, a double fork) — is killed: nothing a call started
 * outlives it, so no process of one call can change the workspace during the next.
 */
const RUN_BODY = (start: string): string =>
  `${KILL_ALL_FN}` +
  'd=/tmp/.agentd-exec; f="$d/$1"; t="$2"; h="/tmp/.agentd-home/$1"; shift 2; ' +
  'mkdir -p "$d" "$h" 2>/dev/null; export HOME="$h" XDG_CONFIG_HOME="$h/.config" XDG_CACHE_HOME="$h/.cache" GIT_CONFIG_NOSYSTEM=1; ' +
  `${start} p=$!; echo "$p" >"$f"; ` +
  'setsid sh -c \'sleep "$1"; kill -KILL "-$2"\' agentd-watchdog "$t" "$p" </dev/null >/dev/null 2>&1 & w=$!; ' +
  'wait "$p"; rc=$?; kill -KILL "-$p" 2>/dev/null; kill -KILL "-$w" 2>/dev/null; kill -KILL "$w" 2>/dev/null; ' +
  'agentd_killall || rc=255; rm -rf "$f" "$h" 2>/dev/null; exit "$rc"';

export const RUN_SCRIPT = RUN_BODY('setsid "$@" </dev/null &');

export const RUN_SCRIPT_STDIN = RUN_BODY('exec 3<&0; setsid "$@" <&3 3<&- & exec 3<&-;');

/** Kills the process group of exec `$1` (and its leader), waiting briefly for its pid file. */
export const KILL_SCRIPT =
  'f=/tmp/.agentd-exec/$1; i=0; while [ ! -s "$f" ] && [ "$i" -lt 20 ]; do sleep 0.05; i=$((i+1)); done; ' +
  'p=$(cat "$f" 2>/dev/null); [ -n "$p" ] || exit 3; kill -KILL "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; exit 0';

/**
 * Kills every process in the container except PID 1 (the init), the container's main
 * process (the control loop: the earliest-started child of PID 1 — a start time cannot be
 * forged, a pid can be recycled) and itself, whatever session or group they escaped to,
 * and repeats until a scan finds none left (forks racing the kill are caught by the next
 * round). Prints "agentd-killall ROUNDS" and exits 0 once the container is clean; 4 if
 * processes keep appearing. Zombies are skipped (already dead; the init reaps them).
 */
export const KILL_ALL_SCRIPT = `${KILL_ALL_FN}agentd_killall; rc=$?
if [ "$rc" -eq 0 ]; then echo "agentd-killall $killall_rounds"; else echo "agentd-killall: $killall_left processes left" >&2; fi
exit "$rc"`;

/**
 * The workspace as a tar on stdout. The sandbox user owns every file it made but may have
 * taken away its own read permission (chmod 000): give it back first (owner-only bits), so
 * nothing the run wrote is left out of a snapshot or a diff. GNU tar writes the POSIX (pax)
 * format: each entry's mtime to the nanosecond (a snapshot keeps it, so make still sees a
 * target built in the same second as its source's later edit as older), without atime and
 * ctime (nobody restores them), and in name order (`--sort=name`): never the directories'
 * listing order, which a program chooses (a directory renamed away and back is listed last)
 * and which a reader of a snapshot would see. Any other tar (busybox) writes ustar (whole
 * seconds) in listing order (docs/policy.md says so). No `exec` and no `exit`: the control
 * loop runs this inline and reads its status.
 */
export const EXPORT_SCRIPT =
  "chmod u+rwx /workspace 2>/dev/null; chmod -R u+rwX /workspace 2>/dev/null; " +
  'case "$(tar --version 2>/dev/null)" in ' +
  '*"GNU tar"*) tar --format=posix --pax-option=delete=atime,delete=ctime --sort=name -c -f - -C /workspace . ;; ' +
  "*) tar -c -f - -C /workspace . ;; esac";

/**
 * PID 1's child in every sandbox: a small control loop on the container's attached
 * stdin/stdout (attached before the start, so nothing is missed). It reads the size of the
 * run's workspace archive, unpacks that many bytes as the sandbox user and says so; then
 * it answers "export NONCE" with the workspace as a tar and a trailer naming the nonce and
 * tar's exit status. Handing a workspace over and taking it back are pipe transfers, not
 * docker cp calls (which cannot reach the tmpfs /workspace anyway). When stdin closes (the
 * worker went away) it sleeps, so a worker taking the run over finds the container. The
 * archive was validated and normalised before (relative paths, owned by uid 1000, no
 * set-id bits).
 */
export const CONTROL_LOOP = `read -r n || exit 1
head -c "$n" | tar -x -p -f - -C /workspace || exit 1
echo agentd-ready
while read -r cmd nonce; do
  [ "$cmd" = export ] || break
  ${EXPORT_SCRIPT}; s=$?
  printf '\\nagentd-done %s %s\\n' "$nonce" "$s"
done
exec sleep 2147483647`;

/**
 * ExecRequest.cwdWithin for `docker exec`: arguments root, cwd, then the argv. The agent
 * does the same check itself (agent.c, flag 2), without this extra shell.
 */
export const CWD_WITHIN_SCRIPT =
  'cd -P -- "$2" 2>/dev/null || { echo "agentd: cwd does not exist: $2" >&2; exit 126; }; ' +
  'case "$PWD" in "$1"|"$1"/*) ;; *) echo "agentd: cwd leaves the workspace" >&2; exit 126;; esac; ' +
  'shift 2; exec "$@"';

/** Prints the cgroup's OOM-kill counter (cgroup v1 or v2). */
export const OOM_COUNT_SCRIPT =
  "cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || cat /sys/fs/cgroup/memory.events 2>/dev/null";
