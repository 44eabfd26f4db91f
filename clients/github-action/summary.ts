/**
 * The job summary of one run (appended to $GITHUB_STEP_SUMMARY): the outcome, a link to
 * the run's page in agentd's console, a table of the tool calls with the policy's
 * decisions, the approvals and the results, the final message or the error, the patch and
 * the hash chain's head.
 *
 * Must never: write text that came from the run or the server without markdown.ts's
 * escaping (a hostile command or message must show as text, never as Markdown or HTML),
 * or put escaped text in a code span, where character references are not decoded (it goes
 * in <code>, where they are).
 * Only the run id (checked to be a ULID), numbers and this file's own words are written
 * as they are.
 */
import { inline, linkTarget, preBlock } from "./markdown.ts";
import type { CallRow, RunReport } from "./report.ts";

/** Outcomes of the action (the `outcome` output). */
export type Outcome = "completed" | "failed" | "cancelled" | "waiting" | "error";

export interface SummaryInput {
  /** The run (a ULID), or "" when none was created. */
  runId: string;
  outcome: Outcome;
  consoleUrl: string;
  report: RunReport | undefined;
  reused: boolean;
  /** The patch file written, and its sha256. */
  patch?: { path: string; digest: string };
  /** The chain's head hash when `agentctl verify` passed; a message when it did not. */
  chain?: { ok: boolean; text: string };
  /** Why the action could not say more (a request failed). */
  problem?: string;
}

/** At most this many calls are listed (a summary may be 1 MiB; the console has the rest). */
export const MAX_ROWS = 200;

const HEADLINE: Record<Outcome, string> = {
  completed: "✅ completed",
  failed: "❌ failed",
  cancelled: "⛔ cancelled",
  waiting: "⏸ waiting for a person",
  error: "⚠️ unknown (the action could not follow the run)",
};

/** The console's page of a run: the console routes by the URL's hash (`#/runs/ID`). */
export function consoleRunUrl(base: string, runId: string): string {
  return `${base}/ui/#/runs/${encodeURIComponent(runId)}`;
}

function policyCell(c: CallRow): string {
  const parts = [c.decision === "" ? "—" : inline(c.decision, 40)];
  if (c.rule !== "") parts.push(`(${inline(c.rule, 60)})`);
  if (c.approval !== undefined) {
    const a = c.approval;
    parts.push(
      a.answer === ""
        ? "· approval pending"
        : `· ${a.answer}${a.by === "" ? "" : ` by ${inline(a.by, 40)}`}${a.reason === "" ? "" : `: ${inline(a.reason, 100)}`}`,
    );
  } else if (c.decision === "denied" && c.reason !== "") parts.push(`: ${inline(c.reason, 120)}`);
  return parts.join(" ");
}

function resultCell(c: CallRow): string {
  const r = c.result === "" ? "—" : inline(c.result, 120);
  return c.tests === undefined ? r : `${r} · ${inline(c.tests, 60)}`;
}

function callTable(calls: CallRow[]): string[] {
  if (calls.length === 0) return ["No tool calls."];
  const rows = calls
    .slice(0, MAX_ROWS)
    .map(
      (c, i) =>
        `| ${i + 1} | ${inline(c.tool, 40)} | ${c.gist === "" ? "" : inline(c.gist, 160)} | ${policyCell(c)} | ${resultCell(c)} |`,
    );
  const more =
    calls.length > MAX_ROWS
      ? [`… and ${calls.length - MAX_ROWS} more calls (see the console).`]
      : [];
  return [
    "| # | tool | call | policy | result |",
    "| -: | --- | --- | --- | --- |",
    ...rows,
    ...more,
  ];
}

function usageLine(r: RunReport): string {
  const cost = r.usage.costMicros > 0 ? `, $${(r.usage.costMicros / 1e6).toFixed(4)}` : "";
  return `${r.calls.length} tool call${r.calls.length === 1 ? "" : "s"}, ${r.usage.input} input and ${r.usage.output} output tokens${cost}, ${r.events} events.`;
}

function details(title: string, text: string): string[] {
  return ["", `<details><summary>${title}</summary>`, "", preBlock(text), "", "</details>"];
}

/** The Markdown of the summary (ends with a blank line, to be appended). */
export function renderSummary(o: SummaryInput): string {
  if (o.runId === "")
    return `### agentd run not created ⚠️\n\n**Problem:** ${inline(o.problem ?? "", 500)}\n\n`;
  const link = linkTarget(consoleRunUrl(o.consoleUrl, o.runId));
  const out = [
    `### agentd run \`${o.runId}\`: ${HEADLINE[o.outcome]}`,
    "",
    `${link === undefined ? "" : `[Open the run in agentd's console](${link})`}${o.reused ? " · an earlier attempt of this job created the run (idempotency key): this is its state" : ""}`,
  ];
  const r = o.report;
  if (r !== undefined) {
    out.push("", `**Task:** ${inline(r.prompt, 300)}`, "", usageLine(r), "", ...callTable(r.calls));
    if (r.pendingApproval !== undefined && o.outcome === "waiting") {
      const a = r.pendingApproval;
      out.push(
        "",
        `**Waits for a person:** approval <code>${inline(a.id, 60)}</code> of ${inline(a.tool, 40)}: ${inline(a.preview, 200)}. Decide it in the console, or with \`agentctl approve\` / \`agentctl deny\`.`,
      );
    }
    if (r.summary !== "") out.push(...details("The agent's final message", r.summary));
    if (r.error !== "") out.push(...details("Why it did not complete", r.error));
  }
  if (o.patch !== undefined)
    out.push(
      "",
      `**Patch:** ${inline(o.patch.path, 300)} (sha256 ${inline(o.patch.digest, 64)}), the \`patch-path\` output.`,
    );
  else if (o.outcome === "completed") out.push("", "**Patch:** none (the run changed no file).");
  if (o.chain !== undefined)
    out.push(
      "",
      o.chain.ok
        ? `Hash chain verified, head ${inline(o.chain.text, 64)}.`
        : `**Hash chain NOT verified:** ${inline(o.chain.text, 300)}`,
    );
  if (o.problem !== undefined) out.push("", `**Problem:** ${inline(o.problem, 500)}`);
  return `${out.join("\n")}\n\n`;
}
