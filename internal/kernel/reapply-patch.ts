/**
 * Applies a recorded repo.patch call again, onto a workspace restored after its container
 * was lost: the call's recorded input is planned against the file as it is now, and written
 * only when the plan reproduces what the call's tool.result recorded (created, deleted,
 * hunks, lines added and removed, and the diff itself once redacted like the recorded one).
 * Deterministic: the same input on the same file gives the same write.
 * A container that fails under it (lost, the engine gone) or a cancel is thrown, never
 * reported as a patch that no longer applies.
 * Must never: write a patch whose plan differs from the recorded one (the workspace then
 * differs from what the log says the call did), or write an input the log does not hold as
 * it ran (one holding a `$ENV.` placeholder or a redaction marker: its real text is not in
 * the log).
 */

import { isAgentdError } from "../errors.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { pickCommands } from "../tools/command-spec.ts";
import { type PatchSummary, planPatch, repoPatch } from "../tools/repo-patch.ts";
import type { ToolContext } from "../tools/tool.ts";
import type { Policy } from "./policy-schema.ts";
import { createRedactor, REDACTED } from "./redaction.ts";
import { PLACEHOLDER_PATTERN } from "./secrets.ts";

export interface ReapplyRequest {
  sandbox: SandboxHandle;
  policy: Policy;
  /** The call's tool.call input_json, as recorded. */
  inputJson: string;
  /** The call's output document as recorded (output_json, or its full artifact). */
  recorded: unknown;
  /** The run's secret values (the recorded diff had them redacted). */
  secrets: () => readonly string[];
  signal?: AbortSignal;
}

/** Applied again (`ok`), or why it could not be (nothing was written then). */
export type Reapplied = { ok: true } | { ok: false; why: string };

const PLACEHOLDER = new RegExp(PLACEHOLDER_PATTERN.source);

export async function reapplyPatch(r: ReapplyRequest): Promise<Reapplied> {
  if (r.inputJson.includes(REDACTED) || PLACEHOLDER.test(r.inputJson))
    return { ok: false, why: "its input held a secret, which the log does not keep" };
  let raw: unknown;
  try {
    raw = JSON.parse(r.inputJson);
  } catch {
    return { ok: false, why: "its recorded input is not JSON" };
  }
  const parsed = repoPatch.input.safeParse(raw);
  if (!parsed.success) return { ok: false, why: "its recorded input is not a valid repo.patch" };
  const recorded = recordedSummary(r.recorded);
  if (recorded === undefined) return { ok: false, why: "its recorded result holds no summary" };
  const ctx = contextFor(r);
  let plan: Awaited<ReturnType<typeof planPatch>>;
  try {
    plan = await planPatch(ctx, parsed.data);
  } catch (err) {
    await rethrowIfSandboxFailed(r, err);
    return { ok: false, why: `it no longer applies (${(err as Error).message.slice(0, 300)})` };
  }
  const redactor = createRedactor({
    secrets: r.secrets,
    keys: [],
    patterns: r.policy.redaction.patterns,
  });
  const differs = difference(redactor.text, plan.summary, recorded);
  if (differs !== undefined) return { ok: false, why: `it would now write a different ${differs}` };
  try {
    await repoPatch.execute({ ...ctx, prepared: plan }, parsed.data);
  } catch (err) {
    await rethrowIfSandboxFailed(r, err);
    return { ok: false, why: `writing it failed (${(err as Error).message.slice(0, 300)})` };
  }
  return { ok: true };
}

/**
 * A failure of the container (lost, the engine unreachable) or a cancel says nothing about
 * the patch: it is thrown, so the recovery stops without recording the patch lost.
 */
async function rethrowIfSandboxFailed(r: ReapplyRequest, err: unknown): Promise<void> {
  if (r.signal?.aborted) throw err;
  if (isAgentdError(err, "EUNAVAILABLE") || isAgentdError(err, "ECANCELLED")) throw err;
  if ((await r.sandbox.lost?.().catch(() => true)) === true) throw err;
}

/** The summary a repo.patch result recorded (behind the approval preview, when there was one). */
function recordedSummary(doc: unknown): Partial<PatchSummary> | undefined {
  if (doc === null || typeof doc !== "object") return undefined;
  const d = doc as { result?: unknown; diff?: unknown };
  const s = d.result !== undefined && typeof d.result === "object" ? d.result : doc;
  return s !== null && typeof s === "object" ? (s as Partial<PatchSummary>) : undefined;
}

/** The first field in which the new plan differs from the recorded summary. */
function difference(
  redact: (s: string) => string,
  now: PatchSummary,
  was: Partial<PatchSummary>,
): string | undefined {
  for (const k of ["changed", "created", "deleted", "hunks", "linesAdded", "linesRemoved"] as const)
    if (was[k] !== undefined && was[k] !== now[k]) return k;
  if (typeof was.diff === "string" && was.diff !== redact(now.diff)) return "diff";
  return undefined;
}

function contextFor(r: ReapplyRequest): ToolContext {
  return {
    sandbox: r.sandbox,
    limits: {
      maxFileReadBytes: r.policy.limits.maxFileRead,
      maxOutputBytes: r.policy.limits.maxStdout,
      maxSearchMatches: 200,
      maxDiffBytes: r.policy.limits.maxDiffSize,
      defaultTimeoutMs: 60_000,
      maxTimeoutMs: 60_000,
    },
    denyPatterns: r.policy.workspace.denyPatterns,
    commands: pickCommands(r.policy.tools, undefined),
    ...(r.signal === undefined ? {} : { signal: r.signal }),
  };
}
