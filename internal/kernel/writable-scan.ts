/**
 * One scan of every place of a sandbox a call could leave bytes in, for secret containment
 * (secret-taint.ts): path → digest of what a later call could read there. Every writable
 * mount is scanned (the roots agentd names, and every read-write mount /proc/mounts shows:
 * /dev/shm, an image VOLUME's tmpfs), and the entries of the calls' HOME directory, which the
 * sandbox user cannot list, come from the agent (ExecRequest.listHomes).
 *
 * A digest covers everything of an entry a program can read back: for a file its content
 * (sha256) and its type, mode, owner, size, mtime and ctime (a change of extended attributes,
 * ACLs or the link count moves the ctime, and no program can set a ctime); for a link its
 * target and the same metadata; for a directory its type, mode and owner — its times move
 * with every entry made in it, so instead of hashing them `--wipe` resets them to the time
 * of the scan (`touch`, which no call can steer).
 *
 * `--wipe` (the scan after a secret-carrying call, once nothing of the call runs) also removes
 * every System V IPC object (shared memory, message queues, semaphores) and every POSIX
 * message queue: their bytes are in no file a scan could hash, so none survives such a call.
 *
 * Must never: let a file's content leave the sandbox (only its sha256 does; metadata and link
 * targets come out and are hashed here before anything is kept), or answer with a scan that
 * could have missed something (any doubt: undefined, and the caller taints every root).
 */
import { createHash } from "node:crypto";
import type { SandboxHandle } from "../sandbox/port.ts";

/** Path → digest ("dir:…", "file:…", "link:…", "other:…"). */
export type WritableScan = Map<string, string>;

// POSIX sh (busybox ash, dash). Names holding a newline cannot be told apart in line output:
// UNSAFE (the caller taints every root). /tmp/.agentd-home is root's, 01733, under the
// agent: the sandbox user may make entries there but not list it, so it is pruned from the
// walk of /tmp and its entries come after --agentd-homes (listed by the agent); unreadable
// without that list: exit 3. /tmp/.agentd-root (agentd's root marks, root's 0700) holds
// nothing the sandbox user could write: pruned. Mounts under /proc and /sys are the kernel's (what Docker masks
// there is root's), mqueue is wiped, not scanned (a queue's messages are in no file).
const SCAN_SCRIPT = `
set -f
nl='
'
wipe=0
[ "$1" = --wipe ] && { wipe=1; shift; }
h=/tmp/.agentd-home
roots=; homes=; listed=0
for a in "$@"; do
  case "$a" in *"$nl"*) echo UNSAFE; exit 0 ;; esac
  if [ "$a" = --agentd-homes ]; then listed=1
  elif [ "$listed" = 1 ]; then homes="$homes$a$nl"
  else roots="$roots$a$nl"; fi
done
while read -r dev mnt type opts rest; do
  case "$opts" in rw|rw,*) ;; *) continue ;; esac
  case "$type" in proc|sysfs|cgroup|cgroup2|devpts|mqueue|securityfs|debugfs|tracefs|bpf|pstore|configfs|fusectl|binfmt_misc|nsfs) continue ;; esac
  case "$mnt" in /proc|/proc/*|/sys|/sys/*) continue ;; *\\\\*) echo UNSAFE; exit 0 ;; esac
  case "$nl$roots" in *"$nl$mnt$nl"*) ;; *) roots="$roots$mnt$nl" ;; esac
done < /proc/mounts || exit 3
p=
if [ -d "$h" ] && [ ! -r "$h" ]; then
  [ "$listed" = 1 ] || exit 3
  p="-path $h -prune -o"
fi
# agentd's root marks (sandbox/root-marks.ts): root's, 0700, nothing of the sandbox user's
# can be in it; pruned only when it is exactly that (made by anyone else, it is scanned).
m=/tmp/.agentd-root
if [ -d "$m" ] && [ ! -h "$m" ] && [ "$(stat -c %u:%a "$m")" = 0:700 ]; then
  p="$p -path $m -prune -o"
fi
# Under docker exec this scan has a HOME and a pid file of its own (exec-scripts.ts): they
# come and go with each scan and are no call's writes.
case "$HOME" in "$h"/*)
  i=\${HOME#"$h"/}
  case "$i" in */*|*' '*) ;; *) p="$p -path $HOME -prune -o -path /tmp/.agentd-exec/$i -prune -o" ;; esac
esac
all="$roots$homes"
if [ "$wipe" = 1 ]; then
  for k in m:shm q:msg s:sem; do
    f=/proc/sysvipc/\${k#*:}
    [ -r "$f" ] || exit 3
    { read -r _; while read -r _ id _; do ipcrm -"\${k%%:*}" "$id" || exit 3; done; } < "$f" || exit 3
    [ "$(wc -l < "$f")" -le 1 ] || exit 3
  done
  grep -q '^[^ ]* /dev/mqueue mqueue ' /proc/mounts || exit 3
  find /dev/mqueue -mindepth 1 -maxdepth 1 -exec rm -f {} + || exit 3
  [ -z "$(ls -A /dev/mqueue)" ] || exit 3
  IFS=$nl
  for r in $all; do unset IFS; find "$r" -xdev $p -type d -exec touch -c {} + 2>/dev/null; done
  unset IFS
fi
IFS=$nl
for r in $all; do
  unset IFS
  [ -e "$r" ] || [ -L "$r" ] || { IFS=$nl; continue; }
  if [ -n "$(find "$r" -xdev $p -name "*$nl*" -print 2>/dev/null | head -n 1)" ]; then echo UNSAFE; exit 0; fi
  find "$r" -xdev $p -exec stat -c 'M %f %u %g %s %y %z  %n' {} + || exit 3
  find "$r" -xdev $p -type f -exec sha256sum {} + || exit 3
  find "$r" -xdev $p -type l -exec sh -c '
nl="
"
for l do
  t=$(readlink -- "$l"; echo .) || exit 3
  t=\${t%.}; t=\${t%"$nl"}
  case "$t" in *"$nl"*) echo UNSAFE; exit 0 ;; esac
  printf "L %s\\n%s\\n" "$l" "$t"
done' agentd-links {} + || exit 3
  IFS=$nl
done
unset IFS
echo END
`;

/**
 * One scan through the sandbox's agent (`wipe`: the scan after a secret-carrying call, see
 * the header). Undefined: unsure.
 */
export async function scanWritable(
  sandbox: SandboxHandle,
  roots: readonly string[],
  opts: { signal?: AbortSignal; wipe?: boolean } = {},
): Promise<WritableScan | undefined> {
  let r: Awaited<ReturnType<SandboxHandle["exec"]>>;
  try {
    r = await sandbox.exec({
      argv: ["sh", "-c", SCAN_SCRIPT, "agentd-taint", ...(opts.wipe ? ["--wipe"] : []), ...roots],
      cwd: "/",
      timeoutMs: 120_000,
      maxOutputBytes: 256 * 1024 * 1024,
      listHomes: true,
      ...(sandbox.toolEnv === undefined ? {} : { env: { ...sandbox.toolEnv } }),
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
    });
  } catch {
    return undefined;
  }
  if (r.exitCode !== 0 || r.truncated || r.timedOut || r.cancelled) return undefined;
  return parseScan(r.stdout);
}

const sha = (s: string): string => createHash("sha256").update(s).digest("hex");
const SHA_LINE = /^[0-9a-f]{64}$/;

/** The raw facts of one path a scan printed. */
interface Seen {
  meta?: string;
  content?: string;
  target?: string;
}

/** The scan's lines as digests; undefined unless it ended with END and had no UNSAFE. */
export function parseScan(stdout: string): WritableScan | undefined {
  const lines = stdout.split("\n");
  if (lines.at(-1) === "") lines.pop();
  if (lines.pop() !== "END") return undefined;
  const seen = new Map<string, Seen>();
  const at = (path: string): Seen => {
    const s = seen.get(path) ?? {};
    seen.set(path, s);
    return s;
  };
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i] as string;
    if (line === "UNSAFE") return undefined;
    if (line.startsWith("L ")) {
      const target = lines[++i];
      if (target === undefined) return undefined;
      at(line.slice(2)).target = target;
      continue;
    }
    const gap = line.indexOf("  ");
    if (line.startsWith("M ")) {
      if (gap <= 2) return undefined;
      at(line.slice(gap + 2)).meta = line.slice(2, gap);
      continue;
    }
    // sha256sum: GNU marks an escaped name with a leading backslash.
    const escaped = line.startsWith("\\");
    if (escaped) line = line.slice(1);
    const i2 = line.indexOf("  ");
    if (i2 <= 0 || !SHA_LINE.test(line.slice(0, i2))) return undefined;
    let path = line.slice(i2 + 2);
    if (escaped) path = path.replace(/\\\\/g, "\\");
    at(path).content = line.slice(0, i2);
  }
  const out: WritableScan = new Map();
  for (const [path, s] of seen) {
    // Content without metadata: the file appeared between two walks (a call still ran);
    // leaving it out makes it new to a later scan, which is the cautious side.
    if (s.meta !== undefined) out.set(path, digestOf(s.meta, s));
  }
  return out;
}

/** An entry's digest from its metadata line ("%f %u %g %s %y %z") and what else was read. */
export function digestOf(meta: string, s: Seen): string {
  const [rawMode = "", uid = "", gid = ""] = meta.split(" ");
  const type = Number.parseInt(rawMode, 16) & 0o170000;
  if (type === 0o040000) return `dir:${sha(`${rawMode} ${uid} ${gid}`)}`;
  // A fact a walk missed (the entry changed between walks) digests as "?": never equal to a
  // complete one, so the entry counts as changed.
  if (type === 0o100000) return `file:${sha(`${meta}\n${s.content ?? "?"}`)}`;
  if (type === 0o120000)
    return `link:${sha(`${meta}\n${s.target === undefined ? "?" : `=${s.target}`}`)}`;
  return `other:${sha(meta)}`;
}
