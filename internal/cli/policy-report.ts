/**
 * `agentctl policy report`: what a candidate (shadow) policy would have done differently,
 * from the policy.shadow events of a tenant's runs (docs/policy.md, "Shadow mode"). The
 * summary counts each enforced→candidate transition and, within it, each pair of rules,
 * with up to N examples each (run, seq, tool, summary), per candidate policy digest (a
 * candidate changed in the window is reported apart), and says how many runs --max-runs
 * left unread; the text form escapes every
 * character a terminal would act on (terminal-safe.ts), the JSON form is data.
 *
 * Must never: print server text unescaped, or count an event twice (a run's events are
 * keyed by run id and seq).
 */

import { parseDuration } from "../config/duration.ts";
import { Decision, type PolicyShadow } from "../gen/agentd/v1/events_pb.js";
import type { Style } from "./style.ts";
import { escapeControls } from "./terminal-safe.ts";

/** One policy.shadow event with where it is in the log. */
export interface ShadowItem {
  runId: string;
  seq: bigint;
  /** The event's time, ms since the epoch. */
  tsMs: number;
  shadow: PolicyShadow;
}

export interface ReportExample {
  runId: string;
  seq: string;
  tool: string;
  summary: string;
}

export interface RuleCount {
  enforcedRule: string;
  candidateRule: string;
  count: number;
  examples: ReportExample[];
}

export interface TransitionCount {
  /** The candidate policy's digest ("" when the event names none). */
  candidateDigest: string;
  /** "deny → auto": enforced decision → candidate decision. */
  enforced: string;
  candidate: string;
  /** What the candidate would have done differently: "allow", "ask", "deny", "same path". */
  effect: string;
  count: number;
  rules: RuleCount[];
}

/** One candidate policy seen in the window (it may change while a rollout is tried). */
export interface CandidateSeen {
  digest: string;
  /** Its file's base name as the events give it. */
  file: string;
  count: number;
}

export interface PolicyReport {
  sinceMs: number;
  total: number;
  runs: number;
  /** Every candidate the differences came from, most differences first. */
  candidates: CandidateSeen[];
  transitions: TransitionCount[];
  /**
   * Runs that changed since --since but were not read (past --max-runs): their differences
   * are not counted. 0 when every such run was read.
   */
  runsNotRead: number;
}

const NAMES: Record<number, string> = {
  [Decision.AUTO]: "auto",
  [Decision.PREVIEW_AUTO]: "preview_auto",
  [Decision.PREVIEW_APPROVAL]: "ask",
  [Decision.DENY]: "deny",
};
const nameOf = (d: Decision | undefined): string => NAMES[d ?? 0] ?? "unspecified";

/** What the candidate would have done with the call, in the report's words. */
function effectOf(enforced: Decision | undefined, candidate: Decision | undefined): string {
  if (enforced === candidate) return "same path, other rule";
  if (candidate === Decision.DENY) return "would deny";
  if (candidate === Decision.PREVIEW_APPROVAL) return "would ask";
  if (candidate === Decision.AUTO || candidate === Decision.PREVIEW_AUTO) return "would allow";
  return "other";
}

/**
 * `--since`: a duration back from `now` ("90m", "2h", "7d") or a timestamp (RFC 3339,
 * "2026-11-28T10:00:00Z"); a message naming the flag when it is neither or in the future.
 */
export function parseSince(text: string, now: number): number | string {
  const t = text.trim();
  if (/^\d{4}-\d{2}-\d{2}/.test(t)) {
    const ms = Date.parse(t);
    if (!Number.isFinite(ms)) return `--since: ${JSON.stringify(text)} is not a timestamp`;
    if (ms > now) return "--since: the timestamp is in the future";
    return ms;
  }
  const d = parseDuration(t);
  if (typeof d === "string")
    return `--since: give a duration (90m, 2h, 7d) or a timestamp (2026-11-28T10:00:00Z): ${d}`;
  return now - d;
}

/**
 * Counts per candidate, transition and rule, with up to `examples` examples each (in log
 * order). A candidate that changed in the window (another digest) is counted apart: one
 * candidate's differences are never merged into another's. `runsNotRead`: see PolicyReport.
 */
export function summariseShadows(
  items: readonly ShadowItem[],
  opts: { sinceMs: number; examples: number; runsNotRead?: number },
): PolicyReport {
  const seen = new Set<string>();
  const byTransition = new Map<string, TransitionCount>();
  const candidates = new Map<string, CandidateSeen>();
  const runs = new Set<string>();
  let total = 0;
  for (const it of items) {
    const key = `${it.runId}\u0000${it.seq}`;
    if (it.tsMs < opts.sinceMs || seen.has(key)) continue;
    seen.add(key);
    total++;
    runs.add(it.runId);
    const s = it.shadow;
    const digest = s.candidate?.policyDigest ?? "";
    const c = candidates.get(digest) ?? { digest, file: s.candidate?.policyFile ?? "", count: 0 };
    c.count++;
    candidates.set(digest, c);
    const enforced = nameOf(s.enforced?.decision);
    const candidate = nameOf(s.candidate?.decision);
    const tKey = `${digest}\u0000${enforced}\u0000${candidate}`;
    let t = byTransition.get(tKey);
    if (t === undefined) {
      t = {
        candidateDigest: digest,
        enforced,
        candidate,
        effect: effectOf(s.enforced?.decision, s.candidate?.decision),
        count: 0,
        rules: [],
      };
      byTransition.set(tKey, t);
    }
    t.count++;
    const er = s.enforced?.rule ?? "";
    const cr = s.candidate?.rule ?? "";
    let r = t.rules.find((x) => x.enforcedRule === er && x.candidateRule === cr);
    if (r === undefined) {
      r = { enforcedRule: er, candidateRule: cr, count: 0, examples: [] };
      t.rules.push(r);
    }
    r.count++;
    if (r.examples.length < opts.examples)
      r.examples.push({ runId: it.runId, seq: String(it.seq), tool: s.tool, summary: s.summary });
  }
  const transitions = [...byTransition.values()].sort((a, b) => b.count - a.count);
  for (const t of transitions) t.rules.sort((a, b) => b.count - a.count);
  return {
    sinceMs: opts.sinceMs,
    total,
    runs: runs.size,
    candidates: [...candidates.values()].sort((a, b) => b.count - a.count),
    transitions,
    runsNotRead: opts.runsNotRead ?? 0,
  };
}

/** A digest as the report shows it: its first 12 hex digits. */
const short = (digest: string): string => (digest === "" ? "(no digest)" : digest.slice(0, 12));

/** One line of server text, escaped and cut to `max` characters. */
function safe(s: string, max: number): string {
  const one = escapeControls(s.replace(/\r?\n/g, "\\n"));
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

/** The report as text for a person; every server string escaped. */
export function renderReport(r: PolicyReport, st: Style): string {
  const since = new Date(r.sinceMs).toISOString().replace(/\.\d+Z$/, "Z");
  const notRead =
    r.runsNotRead > 0
      ? `${st.bold(`${r.runsNotRead} older run(s) changed since ${since} were not read (--max-runs): their differences are not counted`)}\n`
      : "";
  if (r.total === 0)
    return `${notRead}no policy.shadow events since ${since}: the candidate decided every call as the enforced policy did (or no candidate is set)\n`;
  const out = [
    st.bold(
      `${r.total} call(s) or connection(s) in ${r.runs} run(s) since ${since} where the candidate policy decides differently`,
    ),
  ];
  if (notRead !== "") out.push(notRead.trimEnd());
  const several = r.candidates.length > 1;
  if (several) {
    out.push(`the candidate changed in this window: ${r.candidates.length} candidate policies`);
    for (const c of r.candidates)
      out.push(`  ${short(c.digest)} ${safe(c.file, 80)}: ${c.count} difference(s)`);
  }
  for (const t of r.transitions) {
    out.push("");
    const which = several ? `  [candidate ${short(t.candidateDigest)}]` : "";
    out.push(`${st.bold(`${t.enforced} → ${t.candidate}`)}  ${t.count}  (${t.effect})${which}`);
    for (const rule of t.rules) {
      out.push(
        `  ${rule.count}× enforced ${safe(rule.enforcedRule, 200)} → candidate ${safe(rule.candidateRule, 200)}`,
      );
      for (const e of rule.examples)
        out.push(
          st.dim(`    ${safe(e.runId, 40)} #${e.seq} ${safe(e.tool, 60)}: ${safe(e.summary, 160)}`),
        );
    }
  }
  return `${out.join("\n")}\n`;
}
