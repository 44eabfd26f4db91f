/**
 * agentd's marks in a run's container — the workspace was filled in this boot, a recovery
 * is under way — kept in a directory of root's in /tmp (mode 0700, the one the agent makes
 * at start: agent.c OWNER_DIR): the sandbox user can neither make, remove nor see them, so
 * a run's process cannot get its container replaced on purpose (a bit told across a
 * takeover), and a restart empties the tmpfs with them. The agent keeps them (its `M`
 * frame: docker-handle.ts `mark`); this module is the way without one: one `docker exec`
 * as root, with the container's two capabilities (no file capability needed: root owns
 * the directory). Must never: follow a link or trust a directory that is not root's alone
 * (such a look fails, never answers), or run anything of the run's as root.
 */
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import { demux, exitCodeOf } from "./docker-stream.ts";

export const MARK_DIR = "/tmp/.agentd-root";
export type MarkName = "filled" | "recovering";
export type MarkOp = "set" | "clear" | "test";

/**
 * $1 op, $2 name. Exit 0: done (test: there); 1: test: not there; 3: the directory is not
 * root's alone (made by someone else, a link, open to others). `mkdir -m` makes it 0700
 * where the agent has not (the fallback without an agent); -h on test: never a link.
 */
const MARK_SCRIPT = `d=${MARK_DIR}
mkdir -m 0700 "$d" 2>/dev/null
[ -d "$d" ] && [ ! -h "$d" ] && [ "$(stat -c %u:%a "$d")" = 0:700 ] || { echo "$d is not root's alone" >&2; exit 3; }
case "$1" in
  set) : > "$d/$2" ;;
  clear) rm -f "$d/$2" ;;
  test) [ -f "$d/$2" ] && [ ! -h "$d/$2" ] ;;
  *) exit 2 ;;
esac`;

/** One mark operation in `container`; true when done (test: the mark is there). */
export async function rootMark(
  container: Docker.Container,
  env: Readonly<Record<string, string>>,
  name: MarkName,
  op: MarkOp,
): Promise<boolean> {
  const exec = await container.exec({
    Cmd: ["sh", "-c", MARK_SCRIPT, "agentd-mark", op, name],
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    User: "0:0",
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = (await exec.start({ hijack: true, stdin: false })) as unknown as Duplex;
  let stderr = "";
  demux(stream, (_, chunk) => {
    if (stderr.length < 1024) stderr += chunk.toString("utf8");
  });
  await new Promise((resolve) => {
    stream.on("end", resolve);
    stream.on("close", resolve);
    stream.on("error", resolve);
  });
  const code = await exitCodeOf(exec);
  if (code === 0) return true;
  if (code === 1 && op === "test") return false;
  throw new AgentdError(
    "EIO",
    `cannot ${op} agentd's mark "${name}" in the sandbox (exit ${code}): ${stderr.trim().slice(0, 300)}`,
  );
}
