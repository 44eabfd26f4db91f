/**
 * Archives an ended run (its events as stored, its chain head, every blob it names) to
 * `DIR/<tenant>/<run_id>/` (layout.ts), atomically: written into a temporary directory
 * beside it, every file and directory fsynced, then renamed into place, so an archive is
 * complete or absent. Archiving a run already archived verifies the archive (openArchive)
 * and that it holds the run's current head, and writes nothing. This is what the run
 * deletion's `beforeDelete` hook calls (archiveBeforeDelete): a throw stops the deletion.
 * Must never: archive a live run, name a file after anything the run chose, or leave a
 * partial archive under the final name.
 */
import { randomBytes } from "node:crypto";
import { lstat, mkdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { ArtifactStore } from "../artifacts/port.ts";
import { AgentdError } from "../errors.ts";
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import type { EventLog, RunHead } from "../eventlog/port.ts";
import { syncDir, writeDurable } from "./durable-files.ts";
import {
  type ArchivedHead,
  BLOBS_DIR,
  blobPath,
  checkIds,
  EVENTS_FILE,
  FORMAT,
  HEAD_FILE,
  MANIFEST_FILE,
  type Manifest,
  type ManifestFile,
  ownedDigests,
} from "./layout.ts";
import { openArchive } from "./open-archive.ts";

export interface ArchiveDeps {
  /** Where the run's events are read. */
  log: EventLog;
  /** Where its blobs are read. */
  artifacts: ArtifactStore;
  /** The archive directory (`--archive-dir`). */
  dir: string;
  /** Clock for the manifest's archivedAt. Default Date.now. */
  now?: () => number;
}

/** What archiveRun did. */
export interface ArchivedRun {
  /** The run's archive directory. */
  path: string;
  /** False when the run was archived already (the archive was verified, nothing written). */
  written: boolean;
  head: ArchivedHead;
}

/** The run's archive directory under `dir`. */
export function archivePathOf(dir: string, tenantId: string, runId: string): string {
  checkIds(tenantId, runId);
  return join(dir, tenantId, runId);
}

/**
 * Creates a directory when missing and refuses one that is not a directory. `DIR` itself
 * may be a symlink (the operator's choice); a tenant directory inside it may not (it could
 * lead writes elsewhere).
 */
async function realDirectory(path: string, follow = false): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o750 });
  const st = follow ? await stat(path) : await lstat(path);
  if (st.isSymbolicLink() || !st.isDirectory())
    throw new AgentdError("EIO", `archive directory ${path} is not a directory (a symlink?)`);
}

async function readAll(log: EventLog, runId: string): Promise<LoggedEvent[]> {
  const out: LoggedEvent[] = [];
  for (;;) {
    const page = await log.read(runId, out.length, 1000);
    out.push(...page);
    if (page.length < 1000) return out;
  }
}

/** The run's events as stored, checked against its head and its own chain. */
async function eventsOf(log: EventLog, head: RunHead): Promise<LoggedEvent[]> {
  const events = await readAll(log, head.runId);
  const v = verifyChain(events.map((e) => e.json));
  if (!v.ok)
    throw new AgentdError(
      "EIO",
      `run ${head.runId}: its stored chain is broken at seq ${v.seq} (${v.reason}); not archived`,
    );
  if (v.count !== head.seq || v.headHash !== head.hash)
    throw new AgentdError(
      "EIO",
      `run ${head.runId}: its head moved while it was archived; not archived`,
    );
  return events;
}

async function writeBlobs(deps: ArchiveDeps, tmp: string, digests: string[]) {
  const files: ManifestFile[] = [];
  const absent: string[] = [];
  await mkdir(join(tmp, BLOBS_DIR));
  for (const d of digests) {
    if ((await deps.artifacts.stat(d)) === undefined) {
      absent.push(d);
      continue;
    }
    const w = await writeDurable(join(tmp, blobPath(d)), deps.artifacts.read(d));
    if (w.sha256 !== d)
      throw new AgentdError(
        "EIO",
        `artifact ${d}: the store served content with sha256 ${w.sha256}; not archived`,
      );
    files.push({ path: blobPath(d), ...w });
  }
  await syncDir(join(tmp, BLOBS_DIR));
  return { files, absent };
}

async function writeTemp(deps: ArchiveDeps, tmp: string, head: RunHead, events: LoggedEvent[]) {
  await mkdir(tmp, { mode: 0o750 });
  const last = events[events.length - 1] as LoggedEvent;
  const archived: ArchivedHead = {
    runId: head.runId,
    tenantId: head.tenantId,
    sessionId: head.sessionId,
    seq: head.seq,
    hash: head.hash,
    ended: last.type,
  };
  const files: ManifestFile[] = [
    {
      path: EVENTS_FILE,
      ...(await writeDurable(
        join(tmp, EVENTS_FILE),
        events.map((e) => `${e.json}\n`),
      )),
    },
    {
      path: HEAD_FILE,
      ...(await writeDurable(join(tmp, HEAD_FILE), [`${JSON.stringify(archived)}\n`])),
    },
  ];
  const blobs = await writeBlobs(deps, tmp, ownedDigests(events));
  const manifest: Manifest = {
    format: FORMAT,
    runId: head.runId,
    tenantId: head.tenantId,
    archivedAt: new Date((deps.now ?? Date.now)()).toISOString(),
    files: [...files, ...blobs.files],
    absent: blobs.absent,
  };
  await writeDurable(join(tmp, MANIFEST_FILE), [`${JSON.stringify(manifest, null, 1)}\n`]);
  await syncDir(tmp);
  return archived;
}

/** Verifies the archive at `path` holds exactly the run at `head`. */
async function verifyExisting(path: string, head: RunHead): Promise<ArchivedRun> {
  const a = await openArchive(path);
  if (a.head.seq !== head.seq || a.head.hash !== head.hash || a.head.tenantId !== head.tenantId)
    throw new AgentdError(
      "EIO",
      `archive ${path} holds seq ${a.head.seq} hash ${a.head.hash}, but the run's head is seq ${head.seq} hash ${head.hash}`,
    );
  return { path, written: false, head: a.head };
}

/**
 * Archives the ended run `runId` of `tenantId` under `deps.dir`; a no-op that verifies the
 * archive when it exists. Throws ENOTFOUND (no such run for the tenant), ECONFLICT (the run
 * has not ended) or EIO (a broken chain, an existing archive that is damaged or holds another
 * head, a write that failed: an operator must look, so never ECONFLICT, which a retention
 * sweep reads as "live, later"); nothing is left under the final name then.
 */
export async function archiveRun(
  deps: ArchiveDeps,
  tenantId: string,
  runId: string,
): Promise<ArchivedRun> {
  const path = archivePathOf(deps.dir, tenantId, runId);
  const head = await deps.log.head(runId);
  if (head === undefined || head.tenantId !== tenantId)
    throw new AgentdError(
      "ENOTFOUND",
      `run ${runId} of tenant ${tenantId} is not in the event log`,
    );
  if (head.ended === undefined)
    throw new AgentdError("ECONFLICT", `run ${runId} has not ended: only an ended run is archived`);
  const parent = join(deps.dir, tenantId);
  await realDirectory(deps.dir, true);
  await realDirectory(parent);
  if ((await lstat(path).catch(() => undefined)) !== undefined) return verifyExisting(path, head);
  const events = await eventsOf(deps.log, head);
  // A dot name: the shelf never serves it, and a crash leaves it visibly unfinished.
  const tmp = join(parent, `.${runId}.tmp-${randomBytes(6).toString("hex")}`);
  try {
    const archived = await writeTemp(deps, tmp, head, events);
    await rename(tmp, path);
    await syncDir(parent);
    return { path, written: true, head: archived };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    // Another archiver renamed its copy into place first: verify that one.
    if (code === "ENOTEMPTY" || code === "EEXIST") return verifyExisting(path, head);
    throw err;
  }
}

/**
 * The run deletion's hook (lifecycle/delete-run.ts `beforeDelete`): archives the run before
 * anything of it is removed; a failure throws, and the deletion removes nothing.
 */
export function archiveBeforeDelete(
  deps: ArchiveDeps,
): (tenantId: string, runId: string) => Promise<void> {
  return async (tenantId, runId) => {
    await archiveRun(deps, tenantId, runId);
  };
}
