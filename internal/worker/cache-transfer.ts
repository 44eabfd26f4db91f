/**
 * The setup's state in and out of the sandbox (issue #24): /cache, and for npm the
 * installed tree /workspace/node_modules, as one tar with the members `cache/…` and
 * `workspace/node_modules/…`. Restored before a setup (or when a run resumes in a new
 * container), archived after a successful setup. Both run as the sandbox user through the
 * ordinary exec path, so they work with the agent and with `docker exec`. The archive
 * leaves the sandbox base64-encoded on stdout (exec output is text); the store's bound, at
 * most MAX_ARCHIVE_BYTES, keeps it to what the worker may hold in memory.
 *
 * Must never: unpack a member outside /cache and /workspace/node_modules (every member is
 * checked in the worker before the archive enters the sandbox), or return a partial
 * archive as a whole.
 */
import { posix } from "node:path";
import * as tar from "tar-stream";
import { AgentdError } from "../errors.ts";
import { CACHE_DIR } from "../sandbox/cache-env.ts";
import type { SandboxHandle } from "../sandbox/port.ts";

/** How long a transfer may take (a large cache on a loaded host). */
const TRANSFER_TIMEOUT_MS = 10 * 60_000;

/** The installed tree of an npm project, archived with /cache (relative to /). */
export const NODE_MODULES = "workspace/node_modules";
const CACHE = CACHE_DIR.slice(1);

/**
 * Names sorted and owners numeric where tar is GNU's, so the same files give the same
 * archive; busybox's tar (Alpine-based images of a run's own, the test image) knows none of
 * those options and archives as it is. Mtimes kept (build tools compare them). tar's own
 * status comes on stderr (no pipefail in every sh).
 */
function archiveScript(trees: readonly string[]): string {
  const optional = trees.map((t) => `$( [ -d ${t} ] && echo ${t} )`).join(" ");
  const gnu = "--sort=name --numeric-owner --owner=0 --group=0";
  return `cd / && { o=""; tar ${gnu} -c -f /dev/null -T /dev/null 2>/dev/null && o="${gnu}"; tar $o -c -f - ${CACHE} ${optional}; echo "agentd-tar-exit:$?" >&2; } | base64 -w 0`;
}

/** What an archive holds: whether it carries an installed tree. */
export interface ArchiveFacts {
  installedTree: boolean;
}

/** Member types an archive of /cache may hold (no devices, fifos or anything else). */
const MEMBER_TYPES = new Set(["file", "contiguous-file", "directory", "symlink", "link"]);

/**
 * A symlink may also point into the image's read-only system tree (a virtualenv's
 * bin/python → /usr/bin/python3): nothing can be written through it.
 */
const SYSTEM_TARGET = "usr";

/** `name` (relative to /, no leading or trailing /) is cache/… or workspace/node_modules/…. */
function insideRoots(name: string): boolean {
  const inside = (root: string) => name === root || name.startsWith(`${root}/`);
  return inside(CACHE) || inside(NODE_MODULES);
}

/** Where a link points, relative to / and normalised ("" for a target that climbs out of /). */
function linkTarget(member: string, type: string, linkname: string): string {
  // A hard link names another member (relative to the archive's root); a symlink is
  // read from the directory it lies in, or from / when absolute.
  const from = type === "link" || linkname.startsWith("/") ? "/" : posix.dirname(`/${member}`);
  const abs = posix.normalize(posix.join(from, linkname));
  return abs.startsWith("/") ? abs.slice(1).replace(/\/$/, "") : "";
}

/** Why a member may not enter a sandbox, or undefined. */
function memberProblem(
  name: string,
  header: tar.Header,
  symlinks: ReadonlySet<string>,
): string | undefined {
  if (name.split("/").includes("..") || name.startsWith("/") || !insideRoots(name))
    return `outside ${CACHE_DIR} and /${NODE_MODULES}`;
  const type = header.type ?? "file";
  if (!MEMBER_TYPES.has(type))
    return `a member of type ${type} (only files, directories and links)`;
  const parts = name.split("/");
  for (let i = 1; i < parts.length; i++)
    if (symlinks.has(parts.slice(0, i).join("/")))
      return "a member below a symlink the archive made";
  if (type !== "symlink" && type !== "link") return undefined;
  const linkname = header.linkname ?? "";
  const target = linkTarget(name, type, linkname);
  const system =
    type === "symlink" && linkname.startsWith("/") && target.startsWith(`${SYSTEM_TARGET}/`);
  if (linkname === "" || target === "" || (!insideRoots(target) && !system))
    return `a ${type === "link" ? "hard link" : "symlink"} to ${JSON.stringify(linkname.slice(0, 200))}, outside ${CACHE_DIR} and /${NODE_MODULES}`;
  return undefined;
}

/**
 * Every member under cache/ or workspace/node_modules/ (no `..`, no absolute path), only
 * files, directories and links, every link's target inside those trees (a symlink: or in
 * /usr), and no member below a symlink of the archive: whatever tar unpacks it (GNU tar,
 * or busybox's in an image of a run's own, which follows links), nothing lands elsewhere,
 * and a later write to /cache cannot reach the run's sources through a link.
 */
export async function checkArchive(data: Uint8Array): Promise<ArchiveFacts> {
  const extract = tar.extract();
  let installedTree = false;
  const symlinks = new Set<string>();
  const done = new Promise<ArchiveFacts>((resolve, reject) => {
    extract.on("entry", (header, stream, next) => {
      const name = header.name.replace(/^\.\//, "").replace(/\/$/, "");
      const problem = memberProblem(name, header, symlinks);
      if (problem !== undefined) {
        reject(
          new AgentdError(
            "EVALIDATION",
            `the cache archive holds ${JSON.stringify(name.slice(0, 200))}: ${problem}`,
          ),
        );
        extract.destroy();
        return;
      }
      if (header.type === "symlink") symlinks.add(name);
      if (name === NODE_MODULES || name.startsWith(`${NODE_MODULES}/`)) installedTree = true;
      stream.on("end", next);
      stream.resume();
    });
    extract.on("finish", () => resolve({ installedTree }));
    extract.on("error", reject);
  });
  extract.end(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  return done;
}

/** Unpacks a checked archive into /cache (and /workspace/node_modules). */
export async function restoreCache(
  box: SandboxHandle,
  data: Uint8Array,
  signal?: AbortSignal,
): Promise<ArchiveFacts> {
  const facts = await checkArchive(data);
  const r = await box.exec({
    argv: ["tar", "-x", "-f", "-", "-C", "/"],
    cwd: CACHE_DIR,
    stdin: data,
    timeoutMs: TRANSFER_TIMEOUT_MS,
    maxOutputBytes: 64 * 1024,
    ...(signal === undefined ? {} : { signal }),
  });
  if (r.exitCode !== 0)
    throw new AgentdError(
      "EIO",
      `cannot restore the dependency cache: tar exited ${r.exitCode}: ${r.stderr.trim().slice(0, 500)}`,
    );
  return facts;
}

/**
 * Most bytes of one archive the worker takes out of a sandbox. The archive leaves it as
 * base64 text collected in one string, which V8 caps at buffer.constants.MAX_STRING_LENGTH
 * (2^29-24 characters): past it the collector throws in the middle of the exec instead of
 * stopping it, and every such transfer holds its archive twice in the worker's memory. A
 * larger cache is not saved (ETOOLARGE, logged), whatever the store's bound.
 */
export const MAX_ARCHIVE_BYTES = 256 * 1024 ** 2;

/** The archive's bound: the store's, at most MAX_ARCHIVE_BYTES. */
export function archiveLimit(storeMaxBytes: number): number {
  return Math.min(storeMaxBytes, MAX_ARCHIVE_BYTES);
}

/** The exec's output cap for an archive of at most `limit` bytes (base64, tar's status). */
export function archiveOutputCap(limit: number): number {
  return Math.ceil(limit / 3) * 4 + 64 * 1024;
}

/** /cache (and the installed trees named) as a tar, at most `maxBytes` (ETOOLARGE past it). */
export async function archiveCache(
  box: SandboxHandle,
  storeMaxBytes: number,
  trees: readonly string[],
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const maxBytes = archiveLimit(storeMaxBytes);
  const r = await box.exec({
    argv: ["sh", "-c", archiveScript(trees)],
    cwd: CACHE_DIR,
    timeoutMs: TRANSFER_TIMEOUT_MS,
    maxOutputBytes: archiveOutputCap(maxBytes),
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
