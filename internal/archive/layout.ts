/**
 * The run archive's on-disk format (docs/operations.md, "Run archives"): one directory per
 * run, `DIR/<tenant>/<run_id>/`, holding
 *
 *   events.jsonl     the run's events, one stored canonical JSON per line, byte for byte
 *   head.json        the chain head: { runId, tenantId, sessionId, seq, hash, ended }
 *   blobs/<sha256>   every artifact and snapshot the run names, named by its digest
 *   manifest.json    { format, runId, tenantId, archivedAt, files: [{path,size,sha256}], absent }
 *
 * Every name in an archive is one of these forms: nothing taken from the run (an artifact's
 * name, a path) ever becomes a file name. Must never: accept a path outside these forms.
 */
import { DIGEST_RE } from "../artifacts/port.ts";
import { TENANT_RE } from "../auth/tokens.ts";
import { AgentdError } from "../errors.ts";

export const FORMAT = "agentd-run-archive/1";
export const EVENTS_FILE = "events.jsonl";
export const HEAD_FILE = "head.json";
export const MANIFEST_FILE = "manifest.json";
export const BLOBS_DIR = "blobs";

/** Largest manifest read (a run with 10,000 blobs has a manifest of ~1.3 MB). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** Most files one manifest may list. */
export const MAX_FILES = 20_000;
/** Largest events.jsonl or head.json read (they are held in memory to be served). */
export const MAX_EVENTS_BYTES = 512 * 1024 * 1024;
export const MAX_HEAD_BYTES = 64 * 1024;

/** One file of the archive as the manifest lists it. */
export interface ManifestFile {
  path: string;
  size: number;
  sha256: string;
}

export interface Manifest {
  format: typeof FORMAT;
  runId: string;
  tenantId: string;
  /** When the archive was written (ISO 8601). */
  archivedAt: string;
  files: ManifestFile[];
  /** Digests the events name that the artifact store did not hold when archived (e.g. image digests). */
  absent: string[];
}

/** The chain head as head.json holds it. */
export interface ArchivedHead {
  runId: string;
  tenantId: string;
  sessionId: string;
  seq: number;
  hash: string;
  /** The terminal event's type. */
  ended: string;
}

/** Run ids are ULIDs (Crockford base32, 26 characters). */
export const RUN_ID_RE = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** True when `path` is one of the file names an archive may hold. */
export function isArchivePath(path: string): boolean {
  if (path === EVENTS_FILE || path === HEAD_FILE) return true;
  const blob = path.startsWith(`${BLOBS_DIR}/`) ? path.slice(BLOBS_DIR.length + 1) : "";
  return DIGEST_RE.test(blob);
}

/** The archive path of a blob. */
export function blobPath(digest: string): string {
  return `${BLOBS_DIR}/${digest}`;
}

/** Refuses a tenant or run id that could not be a directory name of its own. */
export function checkIds(tenantId: string, runId: string): void {
  if (!TENANT_RE.test(tenantId))
    throw new AgentdError("EVALIDATION", `tenant ${JSON.stringify(tenantId)} is not a tenant id`, {
      field: "tenant_id",
    });
  if (!RUN_ID_RE.test(runId))
    throw new AgentdError("EVALIDATION", `run ${JSON.stringify(runId)} is not a run id`, {
      field: "run_id",
    });
}

/**
 * Event types whose digests are not the run's own: dependency caches are shared by a
 * tenant's runs and are neither needed to replay nor verify a run.
 */
const SHARED_BLOB_TYPES: ReadonlySet<string> = new Set(["cache.restored", "cache.saved"]);

const DIGEST_MEMBER = /[A-Za-z]igest":"([0-9a-f]{64})"/g;

/**
 * The digests the run's events name (every `digest` / `…Digest` member of 64 hex, the
 * rule of lifecycle/run-digests.ts), except those of shared caches; each once, in order.
 */
export function ownedDigests(events: Iterable<{ json: string; type: string }>): string[] {
  const out = new Set<string>();
  for (const ev of events) {
    if (SHARED_BLOB_TYPES.has(ev.type)) continue;
    for (const m of ev.json.matchAll(DIGEST_MEMBER)) out.add(m[1] as string);
  }
  return [...out];
}
