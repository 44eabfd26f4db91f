/**
 * Formats planned workspace changes as one git patch: unified hunks (jsdiff) for text,
 * `GIT binary patch` literals with full `index` lines for binary files, git's extended
 * headers for creations, deletions, mode and type changes. Every text side goes through the
 * redactor first; a binary file holding a secret value is left out; each file's block and
 * the whole patch are checked once more against the redactor. The patch stays under its
 * byte limit or the call fails.
 *
 * Must never emit a block `git apply` would reject, or a value the redactor would hide.
 */
import { formatPatch, type StructuredPatch, type StructuredPatchHunk, structuredPatch } from "diff";
import { AgentdError } from "../errors.ts";
import { formatBinaryLiteral } from "./git-binary-patch.ts";
import { blobId, NULL_BLOB_ID } from "./git-blob-id.ts";
import type { Change, Omission } from "./workspace-changes.ts";
import type { WorkspaceEntry } from "./workspace-scan.ts";

/** The field that names the patch's size limit in errors. */
export const PATCH_LIMIT_FIELD = "limits.maxPatchSize";
/**
 * A line diff taking longer than this falls back to a literal (binary) replacement of the
 * file: still exact, only less readable; jsdiff is O(N·D) and a hostile file can make D big.
 */
const LINE_DIFF_TIMEOUT_MS = 2_000;
/** git looks at this many leading bytes for a NUL to call a file binary. */
const BINARY_SNIFF_BYTES = 8000;

const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const NO_NEWLINE = "\\ No newline at end of file";

export interface PatchFormatOptions {
  signal?: AbortSignal;
  /** New-side contents, keyed by content path (see WorkspaceEntry.contentPath). */
  contents: ReadonlyMap<string, Buffer>;
  redact: (text: string) => string;
  maxPatchBytes: number;
}

export interface FormattedPatch {
  patch: string;
  /** The changes the patch carries. */
  included: Change[];
  /** Paths written as git binary patches. */
  binary: string[];
  /** Paths whose text the redactor changed. */
  redactedFiles: string[];
  omitted: Omission[];
}

/** The text of `data`, or undefined when git would call it binary (or it is not UTF-8). */
export function asText(data: Buffer): string | undefined {
  if (data.subarray(0, BINARY_SNIFF_BYTES).includes(0)) return undefined;
  try {
    return UTF8.decode(data);
  } catch {
    return undefined;
  }
}

function contentOf(path: string, e: WorkspaceEntry, contents: ReadonlyMap<string, Buffer>): Buffer {
  if (e.linkname !== undefined) return Buffer.from(e.linkname, "utf8");
  const data = e.data ?? contents.get(e.contentPath ?? path);
  if (data === undefined) throw new AgentdError("EIO", "workspace patch: a content was not read");
  return data;
}

/**
 * True when every hunk's old side is exactly the original's text at the hunk's line: hunks
 * made from a redacted old side apply to the real file only then.
 */
export function hunksApplyTo(hunks: readonly StructuredPatchHunk[], original: string): boolean {
  const starts = [0];
  for (let i = original.indexOf("\n"); i >= 0 && i + 1 < original.length; ) {
    starts.push(i + 1);
    i = original.indexOf("\n", i + 1);
  }
  const at = (line: number) => starts[line] ?? original.length;
  for (const h of hunks) {
    let expected = "";
    h.lines.forEach((l, i) => {
      if (l[0] !== " " && l[0] !== "-") return;
      expected += l.slice(1) + (h.lines[i + 1] === NO_NEWLINE ? "" : "\n");
    });
    if (h.oldLines === 0) continue;
    const first = h.oldStart - 1;
    if (original.slice(at(first), at(first + h.oldLines)) !== expected) return false;
  }
  return true;
}

/** The git headers of one block (diff --git, new/deleted/old/new mode), and its hunks. */
function gitBlock(
  path: string,
  old: WorkspaceEntry | undefined,
  neu: WorkspaceEntry | undefined,
  hunks: StructuredPatchHunk[] = [],
): string {
  const sp: StructuredPatch = {
    oldFileName: old ? `a/${path}` : "/dev/null",
    newFileName: neu ? `b/${path}` : "/dev/null",
    oldHeader: undefined,
    newHeader: undefined,
    hunks,
    isGit: true,
    isCreate: !old,
    isDelete: !neu,
  };
  if (!old) sp.newMode = neu?.mode;
  else if (!neu) sp.oldMode = old.mode;
  else if (old.mode !== neu.mode) {
    sp.oldMode = old.mode;
    sp.newMode = neu.mode;
  }
  return formatPatch(sp);
}

/** A file's part of the patch, or why it is left out. */
type Block = { text: string; binary: boolean; redacted: boolean } | { omit: string };

/** True when the redactor finds a secret value in raw bytes, read either way. */
function holdsSecret(data: Buffer, redact: (s: string) => string): boolean {
  const latin1 = data.toString("latin1");
  if (redact(latin1) !== latin1) return true;
  const utf8 = data.toString("utf8");
  return redact(utf8) !== utf8;
}

/** A block replacing the file whole with `bytes` (blob `id`): git checks both index ids. */
async function binaryBlock(
  path: string,
  old: WorkspaceEntry | undefined,
  neu: WorkspaceEntry | undefined,
  bytes: Buffer,
  id: string,
): Promise<string> {
  const index = `index ${old?.id ?? NULL_BLOB_ID}..${neu ? id : NULL_BLOB_ID}\n`;
  return gitBlock(path, old, neu) + index + (await formatBinaryLiteral(bytes));
}

async function textBlock(
  path: string,
  old: WorkspaceEntry | undefined,
  neu: WorkspaceEntry | undefined,
  [oldText, newText]: [string, string],
  redact: (s: string) => string,
): Promise<Block> {
  const rOld = redact(oldText);
  const rNew = redact(newText);
  const redacted = rOld !== oldText || rNew !== newText;
  if (old && neu && rOld === rNew && old.mode === neu.mode)
    return { omit: "only a secret value changed in it" };
  const sp = structuredPatch("a", "b", rOld, rNew, undefined, undefined, {
    context: 3,
    timeout: LINE_DIFF_TIMEOUT_MS,
  });
  if (sp && (rOld === oldText || hunksApplyTo(sp.hunks, oldText)))
    return { text: gitBlock(path, old, neu, sp.hunks), binary: false, redacted };
  // The hunks would not apply to the real file (a secret sat in their old side) or the line
  // diff took too long: the file is replaced whole, which git checks by blob id instead.
  const bytes = Buffer.from(neu ? rNew : "", "utf8");
  return { text: await binaryBlock(path, old, neu, bytes, blobId(bytes)), binary: true, redacted };
}

/** The block of one side-by-side change (no change of kind between file and symlink). */
async function sideBlock(
  path: string,
  old: WorkspaceEntry | undefined,
  neu: WorkspaceEntry | undefined,
  opts: PatchFormatOptions,
): Promise<Block> {
  if (old && neu && old.id === neu.id)
    return { text: gitBlock(path, old, neu), binary: false, redacted: false };
  const oldData = old && contentOf(path, old, opts.contents);
  const newData = neu && contentOf(path, neu, opts.contents);
  const oldText = oldData && asText(oldData);
  const newText = newData && asText(newData);
  if ((!oldData || oldText !== undefined) && (!newData || newText !== undefined))
    return textBlock(path, old, neu, [oldText ?? "", newText ?? ""], opts.redact);
  if (newText !== undefined) {
    // Text replacing a binary file: redacted like any text, written whole.
    const redacted = opts.redact(newText);
    const bytes = Buffer.from(redacted, "utf8");
    const text = await binaryBlock(path, old, neu, bytes, blobId(bytes));
    return { text, binary: true, redacted: redacted !== newText };
  }
  if (newData && holdsSecret(newData, opts.redact))
    return { omit: "a binary file holding a secret value" };
  const text = await binaryBlock(path, old, neu, newData ?? Buffer.alloc(0), neu?.id ?? "");
  return { text, binary: true, redacted: false };
}

/** A change's blocks: a file that became a symlink (or back) is a deletion, then a creation. */
async function blocksOf(c: Change, opts: PatchFormatOptions): Promise<Block> {
  if (!(c.old && c.neu && c.old.kind !== c.neu.kind)) return sideBlock(c.path, c.old, c.neu, opts);
  const gone = await sideBlock(c.path, c.old, undefined, opts);
  if ("omit" in gone) return gone;
  const made = await sideBlock(c.path, undefined, c.neu, opts);
  if ("omit" in made) return made;
  return {
    text: gone.text + made.text,
    binary: gone.binary || made.binary,
    redacted: gone.redacted || made.redacted,
  };
}

function tooLarge(size: number, path: string, max: number): AgentdError {
  return new AgentdError(
    "ETOOLARGE",
    `the run's changes (a patch of more than ${size} bytes, reached at ${JSON.stringify(path)}) exceed ${PATCH_LIMIT_FIELD} (${max} bytes)`,
    { field: PATCH_LIMIT_FIELD },
  );
}

/** The patch of `changes` (in their order). Fails with ETOOLARGE past `maxPatchBytes`. */
export async function formatChanges(
  changes: readonly Change[],
  opts: PatchFormatOptions,
): Promise<FormattedPatch> {
  const out: FormattedPatch = {
    patch: "",
    included: [],
    binary: [],
    redactedFiles: [],
    omitted: [],
  };
  const parts: string[] = [];
  let size = 0;
  for (const c of changes) {
    opts.signal?.throwIfAborted();
    const b = await blocksOf(c, opts);
    if ("omit" in b) {
      out.omitted.push({ path: c.path, reason: b.omit });
      continue;
    }
    // A backstop: base85 or a hunk's layout may still form something a rule matches.
    if (opts.redact(b.text) !== b.text) {
      out.omitted.push({ path: c.path, reason: "its patch would show a value the redactor hides" });
      continue;
    }
    size += Buffer.byteLength(b.text, "utf8");
    if (size > opts.maxPatchBytes) throw tooLarge(size, c.path, opts.maxPatchBytes);
    parts.push(b.text);
    out.included.push(c);
    if (b.binary) out.binary.push(c.path);
    if (b.redacted) out.redactedFiles.push(c.path);
  }
  out.patch = parts.join("");
  if (opts.redact(out.patch) === out.patch) return out;
  // Only a rule spanning two blocks gets here: nothing of the patch can be trusted then.
  const reason = "the patch as a whole would show a value the redactor hides";
  const omitted = [...out.omitted, ...out.included.map((c) => ({ path: c.path, reason }))];
  return { patch: "", included: [], binary: [], redactedFiles: [], omitted };
}
