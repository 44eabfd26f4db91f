/**
 * The diff of a run's workspace against the workspace it started from, as one git patch that
 * `git apply` accepts and that is safe to apply: no symlink leading out of the tree, nothing
 * a `.gitignore` ignores (for untracked paths, as git), binary files as git binary patches,
 * secret values redacted from text and binary files holding one left out; `.git/` is never
 * part of it. What is left out is reported with the reason.
 *
 * The current workspace is read as a tar stream, twice: pass 1 hashes every file as it goes
 * by and decides what changed; pass 2 (only when something did) keeps the content of the
 * changed files alone. Memory stays near the size of the patch, never the workspace's. The
 * base is in memory (a list of files) or streamed (the run's upload from the artifact store):
 * then it is read twice too, a scan first and the old content of the changed files alone after.
 *
 * Must never hold a whole export, read content before the size check allows it, or return a
 * patch over `maxPatchBytes`.
 */
import { AgentdError } from "../errors.ts";
import type { WorkspaceFile } from "./workspace-archive.ts";
import { type Omission, planChanges } from "./workspace-changes.ts";
import { formatChanges, PATCH_LIMIT_FIELD } from "./workspace-patch.ts";
import {
  readContents,
  scanExport,
  scanFiles,
  type WorkspaceEntry,
  type WorkspaceScan,
} from "./workspace-scan.ts";

export type { Omission } from "./workspace-changes.ts";
export { PATCH_LIMIT_FIELD } from "./workspace-patch.ts";

/** Default `maxPatchBytes` of `diffWorkspaces` (64 MiB, the largest workspace upload). */
export const DEFAULT_MAX_PATCH_BYTES = 64 * 1024 * 1024;

/** The patch of a workspace and what it holds. */
export interface WorkspaceDiffResult {
  /** The git patch (`git apply` accepts it); "" when nothing changed. */
  patch: string;
  /** Paths the patch creates, changes, removes (a path changed from file to symlink is modified). */
  added: string[];
  modified: string[];
  deleted: string[];
  /** Paths in `added`/`modified`/`deleted` written as git binary patches. */
  binary: string[];
  /** Changed paths left out of the patch (they keep their base version), with the reason. */
  omitted: Omission[];
  /** Paths in the patch whose text had secret values replaced by `[REDACTED]`. */
  redactedFiles: string[];
  /** New paths left out because a `.gitignore` of the workspace ignores them. */
  ignored: number;
}

/** A stored archive read afresh on each `open()` (the run's upload, sandbox/port.ts WorkspaceSource). */
export interface StreamedBase {
  open(): AsyncIterable<Uint8Array>;
}

export interface DiffWorkspaceOptions {
  /** The workspace the run started from (the uploaded, normalised one): files, or streamed. */
  base: readonly WorkspaceFile[] | StreamedBase;
  /** A tar stream of the current workspace; called once or twice, each a fresh export. */
  openExport: () => AsyncIterable<Uint8Array>;
  /** Largest patch, bytes (policy limits.maxPatchSize): past it ETOOLARGE. */
  maxPatchBytes: number;
  /** Replaces every secret value in a text with `[REDACTED]` (the run's redactor). */
  redact?: (text: string) => string;
  signal?: AbortSignal;
  /** Most files and directories the workspace may hold: past it ETOOLARGE. Default 500,000. */
  maxEntries?: number;
}

const unchanged = (s: string): string => s;

/** The files whose new content the patch needs, keyed by the path the content is read at. */
function wantedContents(changes: ReturnType<typeof planChanges>["changes"]) {
  const wanted = new Map<string, WorkspaceEntry>();
  for (const { path, old, neu } of changes) {
    if (neu?.kind !== "file" || neu.data !== undefined) continue;
    if (old?.kind === "file" && old.id === neu.id) continue;
    wanted.set(neu.contentPath ?? path, neu);
  }
  return wanted;
}

/**
 * The base files whose old content the patch needs and has not (a streamed base), keyed by
 * the path the content is read at: a changed or removed file, unless only its mode changed.
 */
function wantedOld(changes: ReturnType<typeof planChanges>["changes"]) {
  const wanted = new Map<string, WorkspaceEntry>();
  for (const { path, old, neu } of changes) {
    if (old?.kind !== "file" || old.data !== undefined) continue;
    if (neu !== undefined && neu.id === old.id) continue;
    wanted.set(old.contentPath ?? path, old);
  }
  return wanted;
}

/** Fails before any content is read when the changed files alone exceed the limit. */
function checkSize(
  wanted: ReadonlyMap<string, WorkspaceEntry>,
  max: number,
  show: (p: string) => string,
  side = "the run's changes",
): void {
  let total = 0;
  let largest: [string, number] = ["", -1];
  for (const [path, e] of wanted) {
    total += e.size;
    if (e.size > largest[1]) largest = [path, e.size];
  }
  if (total <= max) return;
  const others = wanted.size > 1 ? ` and ${wanted.size - 1} other files` : "";
  throw new AgentdError(
    "ETOOLARGE",
    `${side} (${total} bytes in ${show(largest[0])}${others}) exceed ${PATCH_LIMIT_FIELD} (${max} bytes)`,
    { field: PATCH_LIMIT_FIELD },
  );
}

type ReadContents = (wanted: ReadonlyMap<string, WorkspaceEntry>) => Promise<Map<string, Buffer>>;

async function buildPatch(
  base: WorkspaceScan,
  current: WorkspaceScan,
  read: ReadContents,
  opts: { maxPatchBytes: number; redact: (s: string) => string; signal?: AbortSignal },
  readOld?: ReadContents,
): Promise<WorkspaceDiffResult> {
  const plan = planChanges(base, current, opts.redact);
  const wanted = wantedContents(plan.changes);
  const show = (p: string) => JSON.stringify(opts.redact(p));
  checkSize(wanted, opts.maxPatchBytes, show);
  const olds = wantedOld(plan.changes);
  if (readOld !== undefined && olds.size > 0) {
    // The old side of the changed files, read from the streamed base: bounded like the new
    // side (a removed file's whole content is in the patch; a changed one's mostly is).
    checkSize(olds, opts.maxPatchBytes, show, "the changed files' original content");
    const got = await readOld(olds);
    for (const [key, e] of olds) e.data = got.get(key);
  }
  const contents = wanted.size > 0 ? await read(wanted) : new Map<string, Buffer>();
  const f = await formatChanges(plan.changes, { ...opts, contents });
  const result: WorkspaceDiffResult = {
    patch: f.patch,
    added: [],
    modified: [],
    deleted: [],
    binary: f.binary,
    omitted: [...plan.omitted, ...f.omitted],
    redactedFiles: f.redactedFiles,
    ignored: plan.ignored,
  };
  for (const c of f.included) {
    (c.old ? (c.neu ? result.modified : result.deleted) : result.added).push(c.path);
  }
  return result;
}

/**
 * The patch from `base` to the workspace `openExport` streams, read in two bounded passes.
 * Fails with ETOOLARGE (field limits.maxPatchSize) when the changes exceed `maxPatchBytes`,
 * ECONFLICT when the workspace changed between the passes, EIO on a corrupt export.
 */
export async function diffWorkspace(opts: DiffWorkspaceOptions): Promise<WorkspaceDiffResult> {
  const redact = opts.redact ?? unchanged;
  const scanOpts = {
    signal: opts.signal,
    show: (p: string) => JSON.stringify(redact(p)),
    maxEntries: opts.maxEntries,
  };
  const current = await scanExport(opts.openExport(), scanOpts);
  const base = opts.base;
  const patchOpts = { maxPatchBytes: opts.maxPatchBytes, redact, signal: opts.signal };
  const readNew: ReadContents = (wanted) => readContents(opts.openExport(), wanted, scanOpts);
  const was = "open" in base ? await scanExport(base.open(), scanOpts) : scanFiles(base);
  if (!("open" in base)) return buildPatch(was, current, readNew, patchOpts);
  return buildPatch(was, current, readNew, patchOpts, (w) =>
    readContents(base.open(), w, scanOpts),
  );
}

/**
 * The same patch for two workspaces already in memory (callers that hold both).
 * `maxPatchBytes` defaults to DEFAULT_MAX_PATCH_BYTES.
 */
export async function diffWorkspaces(
  before: readonly WorkspaceFile[],
  after: readonly WorkspaceFile[],
  opts: { maxPatchBytes?: number; redact?: (text: string) => string } = {},
): Promise<WorkspaceDiffResult> {
  const current = scanFiles(after);
  return buildPatch(scanFiles(before), current, async () => new Map(), {
    maxPatchBytes: opts.maxPatchBytes ?? DEFAULT_MAX_PATCH_BYTES,
    redact: opts.redact ?? unchanged,
  });
}
