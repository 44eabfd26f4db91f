/**
 * An exclusive lock on a policy file while a change is applied: a `FILE.agentd-lock` made
 * with O_EXCL beside it, so every process on that file system (servers sharing a volume,
 * two calls in one process) takes turns. A lock older than STALE_MS is a crashed holder's
 * and is broken by one breaker at a time (`LOCK.break`, O_EXCL), which removes it only if
 * it is still the very file judged stale (same inode, still old): a racer that judged it
 * stale a moment ago never removes the fresh lock taken since. A holder removes the lock
 * only while it is still its own. Known limit: two breakers at once happen only when one
 * died holding `LOCK.break` and two others removed that at once (a double fault).
 *
 * Must never: let two holders in at once, or wait forever (ETIMEOUT after WAIT_MS).
 */
import { open, stat, unlink } from "node:fs/promises";
import { basename } from "node:path";
import { AgentdError } from "../errors.ts";

/** An apply holds the lock for a read, a store write and a rename: far less than this. */
const STALE_MS = 30_000;
/** A breaker holds `LOCK.break` for a stat and an unlink: far less than this. */
const BREAK_STALE_MS = 10_000;
/** How long a caller waits for the lock: several applies in a row on a loaded machine. */
const WAIT_MS = 20_000;

export async function withFileLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${path}.agentd-lock`;
  const deadline = Date.now() + WAIT_MS;
  let ours: number | undefined;
  while (ours === undefined) {
    ours = await tryTake(lock);
    if (ours !== undefined) break;
    const seen = await stat(lock).catch(() => undefined);
    if (seen !== undefined && Date.now() - seen.mtimeMs > STALE_MS)
      await breakStale(lock, seen.ino);
    else if (Date.now() > deadline)
      throw new AgentdError("ETIMEOUT", `the policy file is locked by another apply (${lock})`);
    else await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
  }
  try {
    return await fn();
  } finally {
    await releaseIfOurs(lock, ours);
  }
}

/** The lock's inode once made by this call; undefined when another holds it. */
async function tryTake(lock: string): Promise<number | undefined> {
  try {
    const fh = await open(lock, "wx");
    try {
      await fh.writeFile(`${process.pid}\n`);
      return (await fh.stat()).ino;
    } finally {
      await fh.close();
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return undefined;
    throw new AgentdError(
      "ECONFLICT",
      `this server cannot write beside the policy file (${code ?? "error"} on ${basename(lock)}): apply the change's diff by hand, or give the server write access to the file's directory`,
      { cause: err },
    );
  }
}

/**
 * Removes the lock judged stale (inode `ino`), and nothing else: under `LOCK.break` (one
 * breaker at a time), only while the lock is still that file and still stale. A breaker
 * that died holding `LOCK.break` leaves it: past BREAK_STALE_MS it is removed.
 */
async function breakStale(lock: string, ino: number): Promise<void> {
  const breaker = `${lock}.break`;
  try {
    await (await open(breaker, "wx")).close();
  } catch {
    const b = await stat(breaker).catch(() => undefined);
    if (b !== undefined && Date.now() - b.mtimeMs > BREAK_STALE_MS)
      await unlink(breaker).catch(() => undefined);
    return;
  }
  try {
    const now = await stat(lock).catch(() => undefined);
    if (now?.ino === ino && Date.now() - now.mtimeMs > STALE_MS)
      await unlink(lock).catch(() => undefined);
  } finally {
    await unlink(breaker).catch(() => undefined);
  }
}

async function releaseIfOurs(lock: string, ino: number): Promise<void> {
  const now = await stat(lock).catch(() => undefined);
  if (now?.ino === ino) await unlink(lock).catch(() => undefined);
}
