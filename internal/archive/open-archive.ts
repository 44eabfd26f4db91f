/**
 * Opens a run archive (layout.ts) and verifies all of it before anything is served: the
 * manifest's shape and limits, that the directory holds exactly the files it lists (regular
 * files, no symlinks, sizes and sha256 as listed), the events' hash chain, the chain head,
 * and that every blob the events name is held or listed absent. A damaged or hostile
 * archive is refused with an ArchiveError naming the file and what is wrong.
 * Must never: read or write outside the archive directory, or trust the manifest's sizes.
 */
import type { Dirent } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { z } from "zod";
import { DIGEST_RE } from "../artifacts/port.ts";
import { TENANT_RE } from "../auth/tokens.ts";
import { LoggedEvent, TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { ArchiveError, readChecked } from "./archive-files.ts";
import {
  type ArchivedHead,
  BLOBS_DIR,
  blobPath,
  EVENTS_FILE,
  FORMAT,
  HEAD_FILE,
  isArchivePath,
  MANIFEST_FILE,
  MAX_EVENTS_BYTES,
  MAX_FILES,
  MAX_HEAD_BYTES,
  MAX_MANIFEST_BYTES,
  type Manifest,
  type ManifestFile,
  ownedDigests,
  RUN_ID_RE,
} from "./layout.ts";

/** A verified archive, its events in memory, its blobs on disk. */
export interface OpenedArchive {
  dir: string;
  manifest: Manifest;
  head: ArchivedHead;
  events: LoggedEvent[];
  /** The size of a blob the archive holds, or undefined. */
  blobSize(digest: string): number | undefined;
}

/** The largest blob an archive may hold (64 GiB): a bound, not a quota. */
const MAX_BLOB_BYTES = 64 * 1024 ** 3;

const ManifestSchema = z
  .object({
    format: z.literal(FORMAT),
    runId: z.string().regex(RUN_ID_RE, "must be a run id"),
    tenantId: z.string().regex(TENANT_RE, "must be a tenant id"),
    archivedAt: z.string().max(64),
    files: z
      .array(
        z
          .object({
            path: z.string().max(256),
            size: z.number().int().nonnegative().max(MAX_BLOB_BYTES),
            sha256: z.string().regex(DIGEST_RE, "must be 64 lowercase hex characters"),
          })
          .strict(),
      )
      .max(MAX_FILES),
    absent: z
      .array(z.string().regex(DIGEST_RE, "must be 64 lowercase hex characters"))
      .max(MAX_FILES),
  })
  .strict();

const HeadSchema = z
  .object({
    runId: z.string(),
    tenantId: z.string(),
    sessionId: z.string(),
    seq: z.number().int().positive(),
    hash: z.string().regex(DIGEST_RE),
    ended: z.string(),
  })
  .strict();

/** The first problem zod found, as "field: message". */
function firstIssue(err: z.ZodError): string {
  const i = err.issues[0];
  const at =
    i?.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("") ?? "";
  return `${at.replace(/^\./, "") || "(top level)"}: ${i?.message ?? "invalid"}`;
}

function parseJson(dir: string, rel: string, bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch (err) {
    throw new ArchiveError(dir, rel, `is not JSON (${(err as Error).message})`);
  }
}

async function readManifest(dir: string): Promise<Manifest> {
  const bytes = await readChecked(dir, MANIFEST_FILE, { max: MAX_MANIFEST_BYTES, keep: true });
  const parsed = ManifestSchema.safeParse(parseJson(dir, MANIFEST_FILE, bytes));
  if (!parsed.success) throw new ArchiveError(dir, MANIFEST_FILE, firstIssue(parsed.error));
  const m = parsed.data as Manifest;
  const seen = new Set<string>();
  m.files.forEach((f, i) => {
    if (!isArchivePath(f.path))
      throw new ArchiveError(
        dir,
        MANIFEST_FILE,
        `files[${i}].path ${JSON.stringify(f.path)} is not a file an archive holds (${EVENTS_FILE}, ${HEAD_FILE} or ${BLOBS_DIR}/<sha256>)`,
      );
    if (seen.has(f.path))
      throw new ArchiveError(dir, MANIFEST_FILE, `files[${i}].path ${f.path} is listed twice`);
    seen.add(f.path);
    if (f.path.startsWith(`${BLOBS_DIR}/`) && f.path !== blobPath(f.sha256))
      throw new ArchiveError(dir, MANIFEST_FILE, `files[${i}]: a blob's sha256 must be its name`);
  });
  for (const must of [EVENTS_FILE, HEAD_FILE])
    if (!seen.has(must)) throw new ArchiveError(dir, MANIFEST_FILE, `does not list ${must}`);
  return m;
}

/** Every file in the directory, relative; refuses what is no part of an archive. */
async function presentFiles(dir: string): Promise<Set<string>> {
  const out = new Set<string>();
  const kind = (e: Dirent) =>
    e.isSymbolicLink() ? "is a symbolic link" : e.isFile() ? "" : "is not a regular file";
  for (const e of await readdir(dir, { withFileTypes: true })) {
    if (e.name === MANIFEST_FILE) continue;
    if (e.name === BLOBS_DIR && e.isDirectory()) {
      const blobs = await readdir(`${dir}/${BLOBS_DIR}`, { withFileTypes: true });
      if (blobs.length > MAX_FILES)
        throw new ArchiveError(dir, BLOBS_DIR, `holds over ${MAX_FILES} files`);
      for (const b of blobs) {
        const rel = `${BLOBS_DIR}/${b.name}`;
        if (kind(b) !== "") throw new ArchiveError(dir, rel, kind(b));
        out.add(rel);
      }
      continue;
    }
    if (kind(e) !== "") throw new ArchiveError(dir, e.name, kind(e));
    out.add(e.name);
  }
  return out;
}

function parseEvents(dir: string, runId: string, bytes: Buffer): LoggedEvent[] {
  const text = bytes.toString("utf8");
  if (text.length > 0 && !text.endsWith("\n"))
    throw new ArchiveError(dir, EVENTS_FILE, "its last line is not terminated (truncated)");
  const lines = text === "" ? [] : text.slice(0, -1).split("\n");
  const verdict = verifyChain(lines);
  if (!verdict.ok)
    throw new ArchiveError(
      dir,
      EVENTS_FILE,
      `hash chain broken at seq ${verdict.seq}: ${verdict.reason}`,
    );
  return lines.map((json, i) => {
    const ev = new LoggedEvent(runId, i + 1, json);
    const owner = (JSON.parse(json) as { runId?: unknown }).runId;
    if (owner !== runId)
      throw new ArchiveError(
        dir,
        EVENTS_FILE,
        `seq ${i + 1} belongs to run ${String(owner)}, not ${runId}`,
      );
    return ev;
  });
}

function checkHead(dir: string, m: Manifest, bytes: Buffer, events: LoggedEvent[]): ArchivedHead {
  const parsed = HeadSchema.safeParse(parseJson(dir, HEAD_FILE, bytes));
  if (!parsed.success) throw new ArchiveError(dir, HEAD_FILE, firstIssue(parsed.error));
  const h = parsed.data;
  if (h.runId !== m.runId || h.tenantId !== m.tenantId)
    throw new ArchiveError(dir, HEAD_FILE, "names another run or tenant than the manifest");
  const last = events[events.length - 1];
  const lastHash =
    last === undefined ? "" : String((JSON.parse(last.json) as { hash: unknown }).hash);
  if (last === undefined || h.seq !== last.seq || h.hash !== lastHash)
    throw new ArchiveError(
      dir,
      HEAD_FILE,
      `says seq ${h.seq} hash ${h.hash} but ${EVENTS_FILE} ends at seq ${last?.seq ?? 0} hash ${lastHash || "(none)"}`,
    );
  if (!TERMINAL_TYPES.has(last.type) || h.ended !== last.type)
    throw new ArchiveError(dir, HEAD_FILE, `the run's last event is ${last.type}, not its end`);
  return h;
}

/** Opens and verifies the archive in `dir`; throws an ArchiveError naming what is wrong. */
export async function openArchive(dir: string): Promise<OpenedArchive> {
  const st = await lstat(dir).catch(() => undefined);
  if (st === undefined || st.isSymbolicLink() || !st.isDirectory())
    throw new ArchiveError(dir, ".", st === undefined ? "no such directory" : "is not a directory");
  const manifest = await readManifest(dir);
  const present = await presentFiles(dir);
  const listed = new Map<string, ManifestFile>(manifest.files.map((f) => [f.path, f]));
  for (const p of present)
    if (!listed.has(p)) throw new ArchiveError(dir, p, "is not listed in the manifest");
  const blobs = new Map<string, number>();
  let eventBytes: Buffer = Buffer.alloc(0);
  let headBytes: Buffer = Buffer.alloc(0);
  for (const f of manifest.files) {
    if (!present.has(f.path))
      throw new ArchiveError(dir, f.path, "is missing (the manifest lists it)");
    const isEvents = f.path === EVENTS_FILE;
    const isHead = f.path === HEAD_FILE;
    const max = isEvents ? MAX_EVENTS_BYTES : isHead ? MAX_HEAD_BYTES : MAX_BLOB_BYTES;
    const bytes = await readChecked(dir, f.path, { ...f, max, keep: isEvents || isHead });
    if (isEvents) eventBytes = bytes;
    else if (isHead) headBytes = bytes;
    else blobs.set(f.sha256, f.size);
  }
  const events = parseEvents(dir, manifest.runId, eventBytes);
  const head = checkHead(dir, manifest, headBytes, events);
  const absent = new Set(manifest.absent);
  for (const d of ownedDigests(events))
    if (!blobs.has(d) && !absent.has(d))
      throw new ArchiveError(
        dir,
        blobPath(d),
        "is missing: the events name it and the manifest neither lists it nor lists it absent",
      );
  return { dir, manifest, head, events, blobSize: (d) => blobs.get(d) };
}
