/**
 * What the action does, through agentctl: create the run (idempotently), wait for it
 * (through approvals, or until the first one), read its events for the summary, download
 * its patch, verify its hash chain; and what the step then reports: outputs, the summary's
 * Markdown and the exit code.
 *
 * Must never: resolve an approval or cancel the run (the action only submits and reads),
 * or report an outcome agentctl did not give (a request that failed is outcome `error`).
 */
import { join } from "node:path";
import type { Agentctl, CtlResult } from "./agentctl.ts";
import type { ActionInputs } from "./inputs.ts";
import type { Log } from "./log.ts";
import { type RunReport, readReport } from "./report.ts";
import { consoleRunUrl, type Outcome, renderSummary, type SummaryInput } from "./summary.ts";

/** The step's outputs (action.yml maps each). */
export const OUTPUT_NAMES = ["run-id", "outcome", "patch-path", "approval-id", "run-url"] as const;
export type Outputs = Record<(typeof OUTPUT_NAMES)[number], string>;

export interface ActionResult {
  /** 0 completed (or waiting, when not waiting for approvals), 1 failed, 2 cancelled, 4 a request failed. */
  exitCode: number;
  outputs: Outputs;
  summary: string;
}

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const OUTCOMES: Record<number, Outcome> = {
  0: "completed",
  1: "failed",
  2: "cancelled",
  3: "waiting",
};

/** The last lines agentctl wrote on stderr: its error message. */
function why(r: CtlResult): string {
  const lines = r.stderr
    .trim()
    .split("\n")
    .filter((l) => l.trim() !== "");
  return lines.slice(-3).join(" ") || `agentctl exited ${r.code}`;
}

function createArgs(i: ActionInputs): string[] {
  // --flag=value throughout: a value starting with "-" is never read as a flag.
  const args = ["run", `--repo=${i.repo}`, `--prompt=${i.prompt}`, "--no-wait", "--json"];
  args.push(`--idempotency-key=${i.idempotencyKey}`);
  for (const l of i.labels) args.push(`--label=${l}`);
  for (const s of i.skills) args.push(`--skill=${s}`);
  if (i.maxDuration !== undefined) args.push(`--max-duration=${i.maxDuration}`);
  if (i.maxCostUsd !== undefined) args.push(`--max-cost-usd=${i.maxCostUsd}`);
  return args;
}

/** Creates the run; its id (checked to be a ULID) and whether a retry reused it. */
async function create(
  ctl: Agentctl,
  i: ActionInputs,
): Promise<{ runId: string; reused: boolean } | { problem: string; code: number }> {
  const r = await ctl(createArgs(i));
  if (r.code !== 0) return { problem: why(r), code: r.code };
  let runId = "";
  try {
    const run = JSON.parse(r.stdout) as { runId?: unknown };
    runId = typeof run.runId === "string" ? run.runId : "";
  } catch {
    // Checked below.
  }
  if (!ULID.test(runId))
    return { problem: `agentctl run printed no run id: ${r.stdout.slice(0, 200)}`, code: 4 };
  return { runId, reused: /reused run/.test(r.stderr) };
}

/** Waits as the inputs ask; the outcome, or a problem. */
async function wait(
  ctl: Agentctl,
  i: ActionInputs,
  runId: string,
  url: string,
  log: Log,
): Promise<{ outcome: Outcome; problem?: string; code: number }> {
  let r = await ctl(["wait", runId, "--for=approval"]);
  if (r.code === 3 && i.waitForApproval) {
    log.annotate(
      "notice",
      "agentd run waits for a person",
      `Run ${runId} waits for an approval; this step waits until someone decides it: ${url}`,
    );
    r = await ctl(["wait", runId, "--for=end"]);
  }
  const outcome = OUTCOMES[r.code];
  if (outcome === undefined || (outcome === "waiting" && i.waitForApproval))
    return { outcome: "error", problem: why(r), code: r.code === 0 ? 4 : r.code };
  return { outcome, code: r.code };
}

/** Downloads the patch of a completed run into the temp dir. */
async function downloadPatch(
  ctl: Agentctl,
  i: ActionInputs,
  runId: string,
  digest: string,
): Promise<{ path: string; digest: string } | { problem: string }> {
  const path = join(i.tempDir, `agentd-${runId}.patch`);
  const r = await ctl(["artifact", "get", runId, "--name=patch", `--out=${path}`]);
  return r.code === 0 ? { path, digest } : { problem: `the patch: ${why(r)}` };
}

async function verify(ctl: Agentctl, runId: string): Promise<{ ok: boolean; text: string }> {
  const r = await ctl(["verify", runId]);
  const head = /head ([0-9a-f]{64})/.exec(r.stdout)?.[1];
  return r.code === 0 && head !== undefined
    ? { ok: true, text: head }
    : { ok: false, text: why(r) };
}

const EXIT: Record<Outcome, number> = {
  completed: 0,
  waiting: 0,
  failed: 1,
  cancelled: 2,
  error: 4,
};

/** Runs the action with `ctl`; never throws for a failed request (outcome `error`). */
export async function runAction(i: ActionInputs, ctl: Agentctl, log: Log): Promise<ActionResult> {
  const created = await create(ctl, i);
  if ("problem" in created) {
    log.annotate("error", "agentd run not created", created.problem);
    return {
      exitCode: created.code,
      outputs: {
        "run-id": "",
        outcome: "error",
        "patch-path": "",
        "approval-id": "",
        "run-url": "",
      },
      summary: renderSummary({
        runId: "",
        outcome: "error",
        consoleUrl: i.consoleBase,
        report: undefined,
        reused: false,
        problem: created.problem,
      }),
    };
  }
  const { runId, reused } = created;
  const url = consoleRunUrl(i.consoleBase, runId);
  log.info(
    `run ${runId} ${reused ? "(created by an earlier attempt: same idempotency key)" : "created"}; in the console: ${url}`,
  );
  const waited = await wait(ctl, i, runId, url, log);
  const problems: string[] = waited.problem === undefined ? [] : [waited.problem];
  const ev = await ctl(["events", runId, "--json"]);
  let report: RunReport | undefined;
  if (ev.code === 0) report = readReport(ev.stdout);
  else problems.push(`the events: ${why(ev)}`);
  const s: SummaryInput = {
    runId,
    outcome: waited.outcome,
    consoleUrl: i.consoleBase,
    report,
    reused,
  };
  let exitCode = waited.outcome === "error" ? waited.code : EXIT[waited.outcome];
  if (waited.outcome === "completed" && report !== undefined && report.patchDigest !== "") {
    const patch = await downloadPatch(ctl, i, runId, report.patchDigest);
    if ("problem" in patch) {
      problems.push(patch.problem);
      exitCode = 4;
    } else s.patch = patch;
  }
  if (waited.outcome !== "waiting" && waited.outcome !== "error") {
    s.chain = await verify(ctl, runId);
    if (!s.chain.ok) exitCode = exitCode === 0 ? 1 : exitCode;
  }
  if ((waited.outcome === "failed" || waited.outcome === "cancelled") && report !== undefined)
    log.annotate(
      "error",
      `agentd run ${waited.outcome}`,
      `Run ${runId}: ${report.error || waited.outcome} (${url})`,
    );
  if (problems.length > 0) {
    s.problem = problems.join("; ");
    log.annotate("error", "agentd action", s.problem);
  }
  const approvalId = waited.outcome === "waiting" ? (report?.pendingApproval?.id ?? "") : "";
  if (approvalId !== "")
    log.annotate(
      "notice",
      "agentd run waits for a person",
      `Run ${runId} waits for approval ${approvalId}: ${url}`,
    );
  log.info(`outcome: ${waited.outcome}${s.patch === undefined ? "" : `; patch: ${s.patch.path}`}`);
  return {
    exitCode,
    outputs: {
      "run-id": runId,
      outcome: waited.outcome,
      "patch-path": s.patch?.path ?? "",
      "approval-id": approvalId,
      "run-url": url,
    },
    summary: renderSummary(s),
  };
}
