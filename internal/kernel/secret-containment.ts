/**
 * The kernel's three hooks for secret containment (secret-taint.ts holds the mechanism):
 * a call that could read a file the run holds a secret in waits for a person whatever the
 * policy and trust say (guardTaint), its preview names those files (previewTaint), and a
 * call that carries a secret has what it wrote recorded (containCall).
 *
 * Must never: relax a decision (it only turns a call without a person into one with), or
 * let a secret-carrying call's writes go unrecorded when its scan fails (roots are tainted).
 */
import type { EventPayload } from "../eventlog/event-codec.ts";
import { heldLookup, isPadding, type NameKey, sealWrites } from "./held-names.ts";
import type { DecidedCall, KernelRun, PreviewData, ProposedCall } from "./kernel.ts";
import {
  CONTAINER_STATE,
  containerState,
  describeTaint,
  EXEC_TOOLS,
  GONE,
  heldFiles,
  refreshTaint,
  scanWritable,
  secretWrittenEvent,
  type TaintedFile,
  taintOf,
  unknownRoots,
  WRITABLE_ROOTS,
  writtenBetween,
} from "./secret-taint.ts";
import { linksLeaveWorkspace } from "./workspace-links.ts";

/** The decision rule a containment ask is recorded under. */
export const CONTAINMENT_RULE = "secret.containment";

const REPO_TOOLS: ReadonlySet<string> = new Set(["repo.read", "repo.search", "repo.patch"]);

/**
 * The tainted files a call could read: all of them for an exec (and the container's kernel
 * state, CONTAINER_STATE, once held), the workspace's for repo.* — and, for repo.*, every
 * held file once the guard found a link out of the workspace (`d.heldReads`).
 */
function readable(run: KernelRun, tool: string, d?: DecidedCall): Map<string, TaintedFile> {
  if (d?.heldReads !== undefined) return d.heldReads;
  const out = new Map<string, TaintedFile>();
  if (run.taint === undefined || run.taint.size === 0) return out;
  const exec = EXEC_TOOLS.has(tool);
  // repo.* reach the workspace only; a symlink there can point at any tainted workspace file,
  // so every workspace taint counts, not just the path the call names.
  if (!exec && !REPO_TOOLS.has(tool)) return out;
  for (const [p, f] of run.taint)
    if (exec || p === "/workspace" || p.startsWith("/workspace/")) out.set(p, f);
  return out;
}

/** The run's held files (the container's kernel state left out). */
function heldFilesOf(run: KernelRun): Map<string, TaintedFile> {
  const out = new Map<string, TaintedFile>();
  for (const [p, f] of run.taint ?? []) if (p !== CONTAINER_STATE) out.set(p, f);
  return out;
}

/**
 * What a call could read now (after a refresh): readable(), and for a repo.* call while
 * only files outside the workspace are held, all of them when a link of the workspace
 * leads out of it (workspace-links.ts): through it the call reaches or probes them.
 */
async function readableNow(run: KernelRun, tool: string): Promise<Map<string, TaintedFile>> {
  const files = readable(run, tool);
  if (files.size > 0 || !REPO_TOOLS.has(tool)) return files;
  const outside = heldFilesOf(run);
  if (outside.size === 0) return files;
  return (await linksLeaveWorkspace(run.sandbox, run.signal)) ? outside : files;
}

/** The run's name key (held-names.ts), fetched once per drive. */
export type NameKeyOf = (run: KernelRun) => Promise<NameKey>;

/** A call that could read a tainted file needs a person (a fresh scan may end the taint first). */
export async function guardTaint(
  run: KernelRun,
  call: ProposedCall,
  d: DecidedCall,
  keyOf: NameKeyOf,
): Promise<DecidedCall> {
  if (d.decision.path === "deny" || run.taint === undefined || run.taint.size === 0) return d;
  const reach = REPO_TOOLS.has(call.tool) ? heldFilesOf(run) : readable(run, call.tool);
  if (reach.size === 0) return d;
  const key = await keyOf(run);
  await refreshTaint(run.taint as Map<string, TaintedFile>, run.sandbox, key, run.signal);
  const files = await readableNow(run, call.tool);
  if (files.size === 0) return d;
  // Always the containment rule, even where the policy asked anyway: the policy's own rule
  // and reason can carry what a probe found in the container before any person decided
  // (whether a held name exists, replace-probe.ts), and they go to the log.
  return {
    ...d,
    heldReads: files,
    decision: {
      path: "preview+approval",
      rule: CONTAINMENT_RULE,
      reason: describeTaint(files),
      trustAdjustments: d.decision.trustAdjustments,
    },
  };
}

/** The preview of a call that could read tainted files names them (and shows none of a patch's old content). */
export function previewTaint(
  run: KernelRun,
  call: ProposedCall,
  d: DecidedCall,
  pv: PreviewData,
): PreviewData {
  const files = readable(run, call.tool, d);
  if (files.size === 0) return pv;
  const out: PreviewData = {
    ...pv,
    summary: `${pv.summary} — ${describeTaint(files)}`,
    secretFiles: heldFiles(files).slice(0, 1000),
  };
  const path = (d.input as { path?: unknown }).path;
  if (call.tool === "repo.patch" && pv.diff !== undefined && typeof path === "string") {
    const abs = path.startsWith("/") ? path : `/workspace/${path}`;
    // guardTaint fetched the key; without it, the diff is not shown either.
    const key = run.nameKey;
    if (key === undefined || taintOf(files, abs.replace(/\/+$/, ""), key) !== undefined)
      out.diff = "[agentd: the diff is not shown: this file holds a secret]";
  }
  return out;
}

/**
 * The preview of a repo.patch while the run holds a secret in the workspace, built without
 * reading the workspace: no dry run, so no diff, no base sha256, no early error. A dry run
 * reads the file before any person decides, and each of those would carry what a held file
 * holds to the log or the model (a diff of `./f` where the held name is `f`; which edit did
 * not apply, a substring oracle; the sha256 of a one-character file; "no such file" for a
 * held name; where a link leads). After the approval the patch is planned on the file as
 * it is then. Undefined: the dry run may run.
 */
export function heldPatchPreview(
  run: KernelRun,
  call: ProposedCall,
  d: DecidedCall,
): PreviewData | undefined {
  if (call.tool !== "repo.patch" || readable(run, call.tool, d).size === 0) return undefined;
  const { path, edits } = d.input as { path?: unknown; edits?: unknown };
  const n = Array.isArray(edits) ? edits.length : 0;
  const named = typeof path === "string" ? ` ${JSON.stringify(path).slice(0, 300)}` : "";
  return {
    summary: `patch${named} with ${n} edit(s), not read before a person decides: the run holds a secret in the workspace, so no diff is shown`,
    matchedRules: d.assessment.matched,
    diff: "[agentd: the diff is not shown: the run holds a secret in the workspace]",
  };
}

/**
 * Brackets a call that carries a secret (`usedSecret`: the kernel resolved a placeholder
 * into it; or an exec while the run holds a taint): a first `secret.written` tainting every
 * root (a worker cut off mid-call leaves that), a scan before; the returned finisher kills
 * what the call left running, scans again and records what it wrote. An exec's records
 * also hold the container's kernel state (CONTAINER_STATE) for the rest of the run.
 * Undefined: the call carries no secret and pays nothing.
 */
export async function containCall(
  run: KernelRun,
  call: ProposedCall,
  usedSecret: boolean,
  append: (payload: EventPayload) => Promise<unknown>,
  keyOf: NameKeyOf,
): Promise<(() => Promise<void>) | undefined> {
  const taintedBefore = run.taint !== undefined && run.taint.size > 0;
  const carries = usedSecret
    ? call.tool !== "repo.read" && call.tool !== "repo.search"
    : taintedBefore && EXEC_TOOLS.has(call.tool);
  if (!carries) return undefined;
  // An exec that carried a secret holds the container itself (kernel state no scan sees).
  const state = EXEC_TOOLS.has(call.tool) ? [containerState(call.callId)] : [];
  // Fetched before the call runs: the record after it must not wait on (or fail for) it.
  const key = await keyOf(run);
  // The last moment the workspace holds nothing the secret decided (the final patch's).
  await run.beforeSecret?.();
  await append(secretWrittenEvent(call.callId, [...unknownRoots(call.callId), ...state]));
  const before = await scanWritable(run.sandbox, run.signal);
  return async () => {
    // A process the call left behind could write after the scan: nothing of it stays.
    // The scan then wipes what no scan can hash (IPC objects, directory times).
    await run.sandbox.killAll();
    const after = await scanWritable(run.sandbox, undefined, true);
    // Removing a file that already holds a secret ends its taint (the scan finds it gone):
    // only removals of other paths are the call's writes.
    const held = run.taint ?? new Map<string, TaintedFile>();
    const lookup = heldLookup(held, key);
    const writes = writtenBetween(before, after, call.callId).filter(
      (f) => f.digest !== GONE || lookup(f.path) === undefined,
    );
    // Every path and digest is keyed, every root given the same number of records, before
    // they reach the log (held-names.ts): the shape of what the call wrote is the program's.
    const files = sealWrites(writes, key, WRITABLE_ROOTS, call.callId);
    files.push(...state);
    await append(secretWrittenEvent(call.callId, files));
    run.taint ??= new Map();
    // Padding matches nothing: the log carries it, the run's taint need not (a taker's
    // first scan drops it).
    for (const f of files) if (!isPadding(f)) run.taint.set(f.path, f);
  };
}
