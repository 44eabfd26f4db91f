/**
 * The sandbox's /cache in and out (issue #24): restored from an archive before a setup (or
 * when a run resumes in a new container), archived after a successful setup. Both run as
 * the sandbox user through the ordinary exec path, so they work with the agent and with
 * `docker exec`. The archive leaves the sandbox base64-encoded on stdout: exec output is
 * text, and the bound (`maxBytes`) keeps it to what the worker may hold in memory.
 *
 * Must never: write outside /cache in the sandbox, or return a partial archive as a whole.
 */
import { AgentdError } from "../errors.ts";
import { CACHE_DIR } from "../sandbox/cache-env.ts";
import type { SandboxHandle } from "../sandbox/port.ts";

/** How long a transfer may take (a large cache on a loaded host). */
const TRANSFER_TIMEOUT_MS = 10 * 60_000;

/**
 * Names sorted and owners numeric, so the same files give the same archive. Sockets and the
 * like are left out by tar itself. mtimes are kept: build tools (Go, Cargo) compare them.
 */
const ARCHIVE_SCRIPT = `cd ${CACHE_DIR} && { tar --sort=name --numeric-owner --owner=0 --group=0 -c -f - .; echo "agentd-tar-exit:$?" >&2; } | base64 -w 0`;

/** Unpacks `data` into /cache. */
export async function restoreCache(
  box: SandboxHandle,
  data: Uint8Array,
  signal?: AbortSignal,
): Promise<void> {
  const r = await box.exec({
    argv: ["tar", "-x", "-f", "-", "-C", CACHE_DIR],
    cwd: CACHE_DIR,
    stdin: data,
    timeoutMs: TRANSFER_TIMEOUT_MS,
    maxOutputBytes: 64 * 1024,
    ...(signal === undefined ? {} : { signal }),
  });
  if (r.exitCode !== 0)
    throw new AgentdError(
      "EIO",
      `cannot restore the dependency cache into ${CACHE_DIR}: tar exited ${r.exitCode}: ${r.stderr.trim().slice(0, 500)}`,
    );
}

/** /cache as a tar, at most `maxBytes` (ETOOLARGE past it). */
export async function archiveCache(
  box: SandboxHandle,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const r = await box.exec({
    // pipefail is not in every sh: tar's own status comes on stderr.
    argv: ["sh", "-c", ARCHIVE_SCRIPT],
    cwd: CACHE_DIR,
    timeoutMs: TRANSFER_TIMEOUT_MS,
    maxOutputBytes: Math.ceil(maxBytes / 3) * 4 + 64 * 1024,
    ...(signal === undefined ? {} : { signal }),
  });
  if (r.truncated)
    throw new AgentdError("ETOOLARGE", `the dependency cache is larger than ${maxBytes} bytes`);
  if (r.exitCode !== 0 || r.timedOut || !r.stderr.includes("agentd-tar-exit:0"))
    throw new AgentdError(
      "EIO",
      `cannot archive ${CACHE_DIR}: exit ${r.exitCode}${r.timedOut ? " (timed out)" : ""}: ${r.stderr.trim().slice(0, 500)}`,
    );
  const data = Buffer.from(r.stdout.trim(), "base64");
  // A tar ends with at least two zero blocks: anything shorter was cut.
  if (data.byteLength < 1024 || data.byteLength % 512 !== 0)
    throw new AgentdError("EIO", `the archive of ${CACHE_DIR} is not a whole tar`);
  if (data.byteLength > maxBytes)
    throw new AgentdError("ETOOLARGE", `the dependency cache is larger than ${maxBytes} bytes`);
  return data;
}
