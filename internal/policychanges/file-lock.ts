/**
 * An exclusive lock on a policy file while a change is applied: a `FILE.agentd-lock` made
 * with O_EXCL beside it, so every process on that file system (servers sharing a volume,
 * two calls in one process) takes turns. A lock older than STALE_MS is a crashed holder's
 * and is broken.
 *
 * Must never: let two holders in at once, or wait forever (ETIMEOUT after WAIT_MS).
 */
import { open, stat, unlink } from "node:fs/promises";
import { basename } from "node:path";
import { AgentdError } from "../errors.ts";

/** An apply holds the lock for a read, a store write and a rename: far less than this. */
const STALE_MS = 30_000;
/** How long a caller waits for the lock: several applies in a row on a loaded machine. */
const WAIT_MS = 20_000;

export async function withFileLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${path}.agentd-lock`;
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      const fh = await open(lock, "wx");
      await fh.writeFile(`${process.pid}\n`);
      await fh.close();
      break;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "EEXIST")
        throw new AgentdError(
          "ECONFLICT",
          `this server cannot write beside the policy file (${code ?? "error"} on ${basename(lock)}): apply the change's diff by hand, or give the server write access to the file's directory`,
          { cause: err },
        );
      const age = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > STALE_MS) await unlink(lock).catch(() => undefined);
      else if (Date.now() > deadline)
        throw new AgentdError("ETIMEOUT", `the policy file is locked by another apply (${lock})`);
      else await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
    }
  }
  try {
    return await fn();
  } finally {
    await unlink(lock).catch(() => undefined);
  }
}
