/**
 * repo.patch: change one file by a unified diff or by exact-text edits. Atomic: the new
 * content is computed in full first (every hunk or edit must apply, else nothing is written
 * and the error names the hunk or edit), then written through a temporary file and a
 * rename inside the sandbox, after the jail re-checks the real path.
 */
import { randomBytes } from "node:crypto";
import { applyPatch, formatPatch, parsePatch, type StructuredPatch, structuredPatch } from "diff";
import { z } from "zod";
import { AgentdError, invalid } from "../errors.ts";
import { checkDenied, checkPath, RESOLVE_SH } from "./jail.ts";
import { resolvedAnswer, runScript } from "./sandbox-script.ts";
import { defineTool, type ToolContext } from "./tool.ts";

const MAX_FILE = 8 * 1024 * 1024;

/**
 * Prints the resolved path, then "N" (no such file) or "F", the sha256 of the file and a
 * newline, then its content.
 */
const LOAD_SH = `${RESOLVE_SH}
if [ -f "$p" ]; then h=$(sha256sum <"$p") || exit 5; printf 'F%s\\n' "\${h%% *}"; head -c "$2" "$p"
elif [ -e "$p" ]; then exit 4; else printf 'N'; fi`;

/**
 * Exits 8 unless the file at $p is still what was read: $3 is its sha256, or "N" for a
 * file that did not exist. The write is then a compare-and-swap: a file changed since it
 * was read (or previewed) is never overwritten with a patch of its old content.
 */
const UNCHANGED_SH = `if [ "$3" = N ]; then [ -e "$p" ] && exit 8
else [ -f "$p" ] || exit 8; h=$(sha256sum <"$p") || exit 8; [ "\${h%% *}" = "$3" ] || exit 8; fi`;

/** Writes stdin to the resolved path $2 (checked again), via a temp file and rename; keeps the mode. */
const WRITE_SH = `${RESOLVE_SH} >/dev/null
[ "$p" = "$2" ] || exit 7
${UNCHANGED_SH}
d="\${p%/*}"; mkdir -p -- "$d" || exit 6
t="$d/.agentd-patch-$4"
cat >"$t" || { rm -f -- "$t"; exit 6; }
if [ -f "$p" ]; then chmod "$(stat -c %a -- "$p")" "$t" 2>/dev/null; fi
mv -f -- "$t" "$p" || { rm -f -- "$t"; exit 6; }`;

const DELETE_SH = `${RESOLVE_SH} >/dev/null
[ "$p" = "$2" ] || exit 7
${UNCHANGED_SH}
rm -f -- "$p"`;

const Edit = z
  .object({
    oldText: z
      .string()
      .describe("Exact text to replace; must occur exactly once. Empty only to create a new file."),
    newText: z.string().describe("Replacement text"),
  })
  .strict();

export const repoPatch = defineTool({
  name: "repo.patch",
  category: "write",
  description:
    "Change one file of the workspace, either with a unified diff (unifiedDiff) or with exact-text edits (edits: each oldText must occur exactly once). All hunks/edits apply or nothing changes. A diff with '--- /dev/null' creates the file; one with '+++ /dev/null' deletes it.",
  input: z
    .object({
      path: z.string().min(1).describe("File path relative to the workspace root"),
      unifiedDiff: z.string().min(1).optional().describe("A unified diff of this one file"),
      edits: z
        .array(Edit)
        .min(1)
        .max(100)
        .optional()
        .describe("Exact-text replacements, applied in order"),
    })
    .strict()
    .refine((v) => (v.unifiedDiff === undefined) !== (v.edits === undefined), {
      message: "give exactly one of unifiedDiff or edits",
      path: ["unifiedDiff"],
    }),
  async execute(ctx, input) {
    // The approval preview's dry run (same call, same input) already read the file: write
    // from its plan; the compare-and-swap refuses if the file changed since.
    const reuse =
      ctx.prepared instanceof PatchPlan &&
      ctx.prepared.rel === checkPath("path", input.path, ctx.denyPatterns);
    const planned = reuse ? (ctx.prepared as PatchPlan) : await planPatch(ctx, input);
    const { rel, current, plan, summary } = planned;
    checkDenied("path", input.path, current.rel, ctx.denyPatterns);
    if (ctx.approvedBase !== undefined && (current.sha256 ?? "absent") !== ctx.approvedBase) {
      throw new AgentdError(
        "ECONFLICT",
        `path ${JSON.stringify(input.path)}: the file changed after the approval preview was made; nothing was written; read it again and propose the patch again`,
        { field: "path" },
      );
    }
    if (!summary.changed) return summary;
    const expected = current.sha256 ?? "N";
    const r =
      plan.kind === "delete"
        ? await runScript(ctx, DELETE_SH, [rel, current.abs, expected])
        : // The temporary file's name is random, never the shell's PID: an error naming it
          // would tell the model the container's PID counter (secret-containment.ts).
          await runScript(
            ctx,
            WRITE_SH,
            [rel, current.abs, expected, randomBytes(8).toString("hex")],
            {
              stdin: Buffer.from(plan.content, "utf8"),
            },
          );
    if (r.exitCode !== 0) throw writeFailed(input.path, r.exitCode, r.stderr);
    return summary;
  },
});

/** What a patch would do: files, hunks, lines added and removed, the resulting diff. */
export interface PatchSummary {
  path: string;
  changed: boolean;
  created: boolean;
  deleted: boolean;
  hunks: number;
  linesAdded: number;
  linesRemoved: number;
  diff: string;
}

/**
 * The dry run of repo.patch: reads the file in the sandbox (jailed), applies the diff or
 * edits in memory and summarises the change, writing nothing. Errors exactly as the call
 * itself would (the failing hunk named). The kernel's preview of a patch is this.
 */
export async function planPatch(
  ctx: ToolContext,
  input: {
    path: string;
    unifiedDiff?: string | undefined;
    edits?: { oldText: string; newText: string }[] | undefined;
  },
): Promise<PatchPlan> {
  const rel = checkPath("path", input.path, ctx.denyPatterns);
  if (
    input.unifiedDiff !== undefined &&
    Buffer.byteLength(input.unifiedDiff) > ctx.limits.maxDiffBytes
  ) {
    throw new AgentdError(
      "ETOOLARGE",
      `unifiedDiff: larger than ${ctx.limits.maxDiffBytes} bytes`,
      {
        field: "unifiedDiff",
      },
    );
  }
  const current = await load(ctx, input.path, rel);
  const plan =
    input.unifiedDiff !== undefined
      ? planFromDiff(input.path, rel, input.unifiedDiff, current.content)
      : planFromEdits(input.path, input.edits ?? [], current.content);
  if (plan.kind === "delete" && current.content === undefined) {
    throw new AgentdError(
      "ENOTFOUND",
      `path ${JSON.stringify(input.path)}: no such file to delete`,
    );
  }
  const after = plan.kind === "delete" ? "" : plan.content;
  if (plan.kind === "write" && plan.content === current.content) {
    const summary = {
      path: current.rel,
      changed: false,
      created: false,
      deleted: false,
      hunks: 0,
      linesAdded: 0,
      linesRemoved: 0,
      diff: "",
    };
    return new PatchPlan(rel, current, plan, summary);
  }
  const sp = structuredPatch(
    `a/${current.rel}`,
    `b/${current.rel}`,
    current.content ?? "",
    after,
    undefined,
    undefined,
    {
      context: 3,
    },
  );
  sp.isGit = true;
  if (current.content === undefined) {
    sp.isCreate = true;
    sp.oldFileName = "/dev/null";
  }
  if (plan.kind === "delete") {
    sp.isDelete = true;
    sp.newFileName = "/dev/null";
  }
  const summary: PatchSummary = {
    path: current.rel,
    changed: true,
    created: current.content === undefined,
    deleted: plan.kind === "delete",
    hunks: sp.hunks.length,
    ...countLines(sp),
    diff: formatPatch(sp).slice(0, ctx.limits.maxDiffBytes),
  };
  return new PatchPlan(rel, current, plan, summary);
}

/** A planned patch: what repo.patch will write, and the file state it was planned from. */
export class PatchPlan {
  readonly rel: string;
  readonly current: Loaded;
  readonly plan: Plan;
  readonly summary: PatchSummary;
  constructor(rel: string, current: Loaded, plan: Plan, summary: PatchSummary) {
    this.rel = rel;
    this.current = current;
    this.plan = plan;
    this.summary = summary;
  }
}

interface Loaded {
  abs: string;
  rel: string;
  /** undefined: the file does not exist yet. */
  content: string | undefined;
  /** sha256 (hex) of the file as read; undefined when it does not exist. */
  sha256?: string;
}

async function load(ctx: ToolContext, shown: string, rel: string): Promise<Loaded> {
  const r = await runScript(ctx, LOAD_SH, [rel, String(MAX_FILE + 1)], {
    maxOutputBytes: MAX_FILE + 8192,
  });
  if (r.exitCode === 2)
    throw new AgentdError(
      "ENOTFOUND",
      `path ${JSON.stringify(shown)}: a link on the way does not resolve`,
    );
  const { abs, rel: real, rest } = resolvedAnswer(ctx, "path", shown, r.stdout);
  if (r.exitCode === 4)
    throw new AgentdError("EPERMISSION", `path ${JSON.stringify(shown)}: not a regular file`, {
      field: "path",
    });
  if (r.exitCode !== 0)
    throw new AgentdError(
      "EIO",
      `repo.patch could not read ${shown}: ${r.stderr.trim() || `exit ${r.exitCode}`}`,
    );
  if (rest.startsWith("N")) return { abs, rel: real, content: undefined };
  const m = /^F([0-9a-f]{64})\n/.exec(rest);
  if (m === null)
    throw new AgentdError(
      "EIO",
      `repo.patch could not read ${shown}: no checksum from the sandbox`,
    );
  const sha256 = m[1] as string;
  const content = rest.slice(m[0].length);
  if (Buffer.byteLength(content) > MAX_FILE)
    throw new AgentdError(
      "ETOOLARGE",
      `path ${JSON.stringify(shown)}: file over ${MAX_FILE} bytes`,
    );
  if (content.includes("\0"))
    throw new AgentdError(
      "EVALIDATION",
      `path ${JSON.stringify(shown)}: binary file; repo.patch edits text files only`,
      { field: "path" },
    );
  return { abs, rel: real, content, sha256 };
}

type Plan = { kind: "write"; content: string } | { kind: "delete" };

function planFromDiff(shown: string, rel: string, diff: string, content: string | undefined): Plan {
  if (/^GIT binary patch$/m.test(diff) || /^Binary files .* differ$/m.test(diff)) {
    throw invalid("unifiedDiff", "binary patches are not supported; repo.patch changes text files");
  }
  // A git diff of a symlink (mode 120000) would be written as a regular file holding the
  // target: refused, so a model never believes it made a link (into .git or anywhere).
  if (/^(?:new file mode|new mode|old mode|deleted file mode) 120000\s*$/m.test(diff)) {
    throw invalid("unifiedDiff", "symlinks are not supported; repo.patch writes regular files");
  }
  let patches: StructuredPatch[];
  try {
    patches = parsePatch(diff);
  } catch (err) {
    throw invalid("unifiedDiff", `not a unified diff: ${(err as Error).message}`);
  }
  const withHunks = patches.filter((p) => p.hunks.length > 0 || p.isDelete || p.isCreate);
  if (withHunks.length !== 1) {
    throw invalid(
      "unifiedDiff",
      `must change exactly one file (this one: ${shown}); it changes ${withHunks.length}`,
    );
  }
  const p = withHunks[0] as StructuredPatch;
  for (const name of [p.oldFileName, p.newFileName]) {
    if (name === undefined || name === "/dev/null" || name === "") continue;
    const n = name.replace(/^[ab]\//, "").replace(/^\.\//, "");
    if (n !== rel)
      throw invalid(
        "unifiedDiff",
        `names ${JSON.stringify(name)}, not the path ${JSON.stringify(shown)}`,
      );
  }
  const deletes = p.isDelete === true || p.newFileName === "/dev/null";
  const creates = p.isCreate === true || p.oldFileName === "/dev/null";
  if (creates && content !== undefined)
    throw new AgentdError(
      "ECONFLICT",
      `path ${JSON.stringify(shown)}: the diff creates it, but it exists`,
    );
  if (!creates && content === undefined)
    throw new AgentdError("ENOTFOUND", `path ${JSON.stringify(shown)}: no such file to patch`);
  const source = content ?? "";
  const result = applyPatch(source, p);
  if (result === false) {
    // Name the first hunk that does not apply (applying hunks 1..i until one fails).
    let failed = p.hunks.length;
    for (let i = 1; i <= p.hunks.length; i++) {
      if (applyPatch(source, { ...p, hunks: p.hunks.slice(0, i) }) === false) {
        failed = i;
        break;
      }
    }
    const h = p.hunks[failed - 1];
    const at = h ? ` (@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@)` : "";
    throw new AgentdError(
      "ECONFLICT",
      `hunk ${failed} of ${p.hunks.length}${at} does not apply to ${shown}: its context or removed lines are not in the file; nothing was changed`,
    );
  }
  return deletes ? { kind: "delete" } : { kind: "write", content: result };
}

function planFromEdits(
  shown: string,
  edits: readonly { oldText: string; newText: string }[],
  content: string | undefined,
): Plan {
  if (content === undefined) {
    if (edits.length === 1 && edits[0]?.oldText === "")
      return { kind: "write", content: edits[0].newText };
    throw new AgentdError(
      "ENOTFOUND",
      `path ${JSON.stringify(shown)}: no such file (to create it, give one edit with an empty oldText)`,
    );
  }
  let text = content;
  edits.forEach((e, i) => {
    if (e.oldText === "")
      throw invalid(`edits[${i}].oldText`, "must not be empty for an existing file");
    const first = text.indexOf(e.oldText);
    if (first < 0)
      throw new AgentdError(
        "ECONFLICT",
        `edit ${i + 1} of ${edits.length}: oldText not found in ${shown}; nothing was changed`,
      );
    if (text.indexOf(e.oldText, first + 1) >= 0) {
      throw new AgentdError(
        "ECONFLICT",
        `edit ${i + 1} of ${edits.length}: oldText occurs more than once in ${shown}; add context to make it unique; nothing was changed`,
      );
    }
    text = text.slice(0, first) + e.newText + text.slice(first + e.oldText.length);
  });
  return { kind: "write", content: text };
}

function countLines(sp: StructuredPatch): { linesAdded: number; linesRemoved: number } {
  let linesAdded = 0;
  let linesRemoved = 0;
  for (const h of sp.hunks) {
    for (const l of h.lines) {
      if (l.startsWith("+")) linesAdded++;
      else if (l.startsWith("-")) linesRemoved++;
    }
  }
  return { linesAdded, linesRemoved };
}

function writeFailed(shown: string, code: number, stderr: string): AgentdError {
  if (code === 8) {
    return new AgentdError(
      "ECONFLICT",
      `path ${JSON.stringify(shown)}: the file changed after it was read for this patch; nothing was written; read it again and redo the patch`,
      { field: "path" },
    );
  }
  if (code === 3 || code === 7) {
    return new AgentdError(
      "EPERMISSION",
      `path ${JSON.stringify(shown)}: its real path changed or left the workspace while writing; nothing was written`,
      { field: "path" },
    );
  }
  return new AgentdError(
    "EIO",
    `repo.patch could not write ${shown}: ${stderr.trim() || `exit ${code}`}`,
  );
}
