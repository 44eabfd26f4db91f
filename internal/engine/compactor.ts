/**
 * The context compactor: when the assembled context is over its token budget, summarises
 * the oldest part of the history so the next assembly fits.
 *
 * It keeps the newest history units verbatim (up to `keepRatio` of the room left after
 * the system text, the task and the summary) and summarises everything before them. The
 * default summary is extractive and deterministic (no model call, so it is testable): the
 * task, the tool calls made and their outcomes, files changed and read, the last errors,
 * the model's last words. It is recomputed from the whole log up to the cut, so a second
 * checkpoint includes what the first one covered. `summarize` is the seam for a
 * model-made summary later (it receives a plain-text transcript of what is covered).
 *
 * The whole summary is stored as a content-addressed artifact; the returned
 * `checkpoint.created` payload carries its digest, throughSeq and the summary capped at
 * 16 KiB (less for small budgets). The cut is only ever between history units, so a tool
 * call and its result are never separated.
 *
 * Never: append to the event log (the worker appends the payload with its fence), call a
 * model unless `summarize` is given, or cut between a call and its result.
 */
import { create } from "@bufbuild/protobuf";
import type { ArtifactInfo, ArtifactStore } from "../artifacts/port.ts";
import {
  type CheckpointCreated,
  CheckpointCreatedSchema,
  type Event,
} from "../gen/agentd/v1/events_pb.js";
import { failureLine, testCountsText } from "../tools/test-results/format-summary.ts";
import {
  type AssembleInput,
  assembleContext,
  buildSystem,
  type ContextMessage,
  checkpointMessage,
  estimateMessageTokens,
  estimateTokens,
  projectHistory,
} from "./context.ts";
import { capUtf8, tailUtf8 } from "./skills.ts";

/** Largest summary carried by a checkpoint.created event. */
export const MAX_CHECKPOINT_SUMMARY_BYTES = 16 * 1024;

export interface CompactInput extends AssembleInput {
  artifacts: ArtifactStore;
  /** A model-made summary of the transcript; the extractive summary when absent. */
  summarize?: (transcript: string) => Promise<string>;
  /** Share of the free room kept as verbatim recent history (default 0.5): headroom. */
  keepRatio?: number;
}

export interface Compaction {
  /** Ready to append as a NewEvent payload. */
  payload: { case: "checkpointCreated"; value: CheckpointCreated };
  /** The stored summary artifact (the whole summary). */
  artifact: ArtifactInfo;
  throughSeq: number;
}

/**
 * Returns the checkpoint to append, or undefined when the context is within its budget
 * or there is no history after the last checkpoint to summarise (then only the system
 * text, the task and the summary are left: the worker must fail the run, e.g. with a
 * context-overflow reason, rather than loop). Errors of `summarize` propagate.
 */
export async function compactContext(input: CompactInput): Promise<Compaction | undefined> {
  if (!assembleContext(input).overBudget) return undefined;
  const h = projectHistory(input.events, input);
  if (h.units.length === 0) return undefined; // only the fixed part is left: nothing to cut
  const systemTokens = estimateTokens(buildSystem(input));
  const taskTokens = h.task === "" ? 0 : estimateMessageTokens({ role: "user", text: h.task });

  // The summary gets at most a quarter of the budget (and 16 KiB).
  const capBytes = Math.min(
    MAX_CHECKPOINT_SUMMARY_BYTES,
    Math.max(1024, Math.floor(input.budgetTokens)),
  );
  const summaryTokens = estimateMessageTokens(checkpointMessage(h.lastSeq, "x".repeat(capBytes)));
  const room = input.budgetTokens - systemTokens - taskTokens - summaryTokens;
  const keepBudget = Math.max(0, room * (input.keepRatio ?? 0.5));

  // Keep the newest units that fit; summarise the rest (at least the oldest one).
  let kept = 0;
  let used = 0;
  for (let i = h.units.length - 1; i >= 1; i--) {
    const u = h.units[i] as (typeof h.units)[number];
    const t = u.messages.reduce((k, m) => k + estimateMessageTokens(m), 0);
    if (used + t > keepBudget) break;
    used += t;
    kept++;
  }
  const firstKept = h.units[h.units.length - kept];
  const throughSeq = firstKept === undefined ? h.lastSeq : firstKept.firstSeq - 1;
  const covered = input.events.filter((e) => Number(e.seq) <= throughSeq);

  let full: string;
  let capped: string;
  if (input.summarize === undefined) {
    const facts = extractFacts(covered);
    full = renderSummary(facts, Number.POSITIVE_INFINITY);
    capped = renderSummary(facts, capBytes);
  } else {
    const newUnits = h.units.slice(0, h.units.length - kept);
    full = await input.summarize(
      transcript(
        h.task,
        h.checkpoint?.summary,
        newUnits.flatMap((u) => u.messages),
      ),
    );
    capped = capUtf8(full, capBytes);
  }
  const artifact = await input.artifacts.put(new TextEncoder().encode(full));
  return {
    payload: {
      case: "checkpointCreated",
      value: create(CheckpointCreatedSchema, {
        summaryDigest: artifact.digest,
        throughSeq: BigInt(throughSeq),
        summary: capped,
      }),
    },
    artifact,
    throughSeq,
  };
}

/** One tool call as the summary tells it. */
interface CallFact {
  seq: number;
  tool: string;
  target: string;
  outcome: string;
  failed: boolean;
  detail: string;
}

interface Facts {
  task: string;
  skills: string[];
  throughSeq: number;
  calls: CallFact[];
  changed: string[];
  read: string[];
  lastText: string;
}

/** What the extractive summary is made of, from the covered events. */
export function extractFacts(events: readonly Event[]): Facts {
  const f: Facts = {
    task: "",
    skills: [],
    throughSeq: 0,
    calls: [],
    changed: [],
    read: [],
    lastText: "",
  };
  const open = new Map<string, { fact: CallFact; input: Record<string, unknown> }>();
  let streamed = "";
  for (const ev of events) {
    f.throughSeq = Math.max(f.throughSeq, Number(ev.seq));
    const p = ev.payload;
    if (p.case === "runQueued") {
      f.task = p.value.prompt;
      f.skills = [...p.value.skills];
    } else if (p.case === "outputDelta") {
      streamed += p.value.text;
      if (streamed.trim() !== "") f.lastText = streamed;
    } else if (p.case === "outputMessage" && p.value.role !== "system") {
      if (p.value.text.trim() !== "") f.lastText = p.value.text;
      streamed = "";
    } else if (p.case === "toolCall") {
      streamed = "";
      let input: Record<string, unknown> = {};
      try {
        input = JSON.parse(p.value.inputJson) ?? {};
      } catch {}
      const fact: CallFact = {
        seq: Number(ev.seq),
        tool: p.value.tool,
        target: targetOf(p.value.tool, input),
        outcome: "no result yet",
        failed: false,
        detail: "",
      };
      f.calls.push(fact);
      open.set(p.value.callId, { fact, input });
    } else if (p.case === "toolResult") {
      const c = open.get(p.value.callId);
      if (c === undefined) continue;
      let out: Record<string, unknown> = {};
      try {
        out = JSON.parse(p.value.outputJson || "{}") ?? {};
      } catch {}
      const result = (
        typeof out.result === "object" && out.result !== null ? out.result : out
      ) as Record<string, unknown>;
      if (!p.value.ok) {
        c.fact.failed = true;
        c.fact.outcome = `${p.value.error?.code ?? "error"}: ${capUtf8(p.value.error?.message ?? "", 300)}`;
      } else if (typeof result.exitCode === "number") {
        const tests = p.value.tests;
        c.fact.failed =
          result.exitCode !== 0 || (tests !== undefined && tests.failed + tests.errors > 0);
        c.fact.outcome = result.exitCode === 0 ? "ok (exit 0)" : `exit ${result.exitCode}`;
        // Parsed test results say more in fewer words than the output's tail.
        if (tests !== undefined) c.fact.outcome += `, tests: ${testCountsText(tests)}`;
        if (c.fact.failed)
          c.fact.detail =
            tests !== undefined && tests.failures.length > 0
              ? tests.failures
                  .slice(0, 5)
                  .map((x) => failureLine(x, 240))
                  .join("\n")
              : tailText(`${result.stdout ?? ""}\n${result.stderr ?? ""}`, 600);
      } else {
        c.fact.outcome = "ok";
        const path = typeof c.input.path === "string" ? c.input.path : "";
        if (
          c.fact.tool === "repo.patch" &&
          path &&
          result.changed !== false &&
          !f.changed.includes(path)
        )
          f.changed.push(path);
        if (c.fact.tool === "repo.read" && path && !f.read.includes(path)) f.read.push(path);
      }
    } else if (p.case === "sandboxLost") {
      // The summary must not claim an effect the container took with it.
      for (const id of p.value.lostCallIds) {
        const c = open.get(id);
        if (c === undefined) continue;
        c.fact.failed = true;
        c.fact.outcome = `${c.fact.outcome}, then LOST with its sandbox (sandbox.lost at event ${ev.seq}): its effects are gone`;
      }
    }
  }
  return f;
}

/** The short description of a call's target for the summary. */
function targetOf(tool: string, input: Record<string, unknown>): string {
  const s = (v: unknown) => (typeof v === "string" ? v : "");
  switch (tool) {
    case "repo.read":
    case "repo.patch":
      return s(input.path);
    case "repo.search":
      return JSON.stringify(s(input.query));
    case "process.run":
      return `\`${capUtf8(Array.isArray(input.argv) ? input.argv.map(String).join(" ") : s(input.command), 200)}\``;
    case "test.run":
      return input.name === undefined ? "(all tests)" : JSON.stringify(s(input.name));
    case "lint.run":
      return "";
    default:
      return capUtf8(JSON.stringify(input), 200);
  }
}

/**
 * The extractive summary, at most `capBytes`: the header (task, counts, files, errors,
 * last words) first, then as many steps as fit, newest kept, oldest dropped first.
 */
export function renderSummary(f: Facts, capBytes: number): string {
  const counts = new Map<string, number>();
  for (const c of f.calls) counts.set(c.tool, (counts.get(c.tool) ?? 0) + 1);
  const failed = f.calls.filter((c) => c.failed);
  const lines = [
    `Task: ${capUtf8(f.task, 2000)}`,
    ...(f.skills.length > 0 ? [`Skills named: ${f.skills.join(", ")}`] : []),
    `Tool calls through event ${f.throughSeq}: ${f.calls.length} (${failed.length} failed)${
      counts.size > 0 ? `: ${[...counts].map(([t, n]) => `${t} ${n}`).join(", ")}` : ""
    }`,
    `Files changed: ${f.changed.length > 0 ? f.changed.join(", ") : "none"}`,
    ...(f.read.length > 0 ? [`Files read: ${capUtf8(f.read.join(", "), 1500)}`] : []),
  ];
  if (failed.length > 0) {
    lines.push("Last errors:");
    for (const c of failed.slice(-3))
      lines.push(`- ${step(c)}${c.detail ? `\n  ${c.detail.replace(/\n/g, "\n  ")}` : ""}`);
  }
  if (f.lastText.trim() !== "")
    lines.push(`Last assistant message: ${capUtf8(f.lastText.trim(), 1000)}`);
  const header = lines.join("\n");
  if (Buffer.byteLength(header) >= capBytes) return capUtf8(header, capBytes);

  let room = capBytes - Buffer.byteLength(header) - 64;
  const steps: string[] = [];
  for (let i = f.calls.length - 1; i >= 0; i--) {
    const line = `- ${step(f.calls[i] as CallFact)}`;
    const size = Buffer.byteLength(line) + 1;
    if (size > room) break;
    room -= size;
    steps.unshift(line);
  }
  const omitted = f.calls.length - steps.length;
  if (steps.length === 0 && omitted === 0) return header;
  return [
    header,
    "Steps (oldest first):",
    ...(omitted > 0 ? [`- (${omitted} earlier steps omitted)`] : []),
    ...steps,
  ].join("\n");
}

function step(c: CallFact): string {
  return `[${c.seq}] ${c.tool}${c.target ? ` ${c.target}` : ""} -> ${c.outcome}`;
}

function tailText(s: string, maxBytes: number): string {
  const t = s.trim();
  const tail = tailUtf8(t, maxBytes);
  return tail.length < t.length ? `…${tail}` : tail;
}

/** Plain text of what is summarised, for a model-made summary. */
function transcript(
  task: string,
  previous: string | undefined,
  messages: ContextMessage[],
): string {
  const out = [`TASK: ${task}`];
  if (previous !== undefined) out.push(`EARLIER SUMMARY:\n${previous}`);
  for (const m of messages) {
    if (m.role === "user") out.push(`USER: ${m.text}`);
    else if (m.role === "assistant") {
      if (m.text !== "") out.push(`ASSISTANT: ${m.text}`);
      for (const c of m.toolCalls ?? []) out.push(`CALL ${c.tool} ${JSON.stringify(c.input)}`);
    } else
      out.push(
        `RESULT ${m.tool} ${m.error === undefined ? "ok" : `failed ${m.error.code}: ${m.error.message}`} ${
          m.output === undefined ? "" : JSON.stringify(m.output)
        }`,
      );
  }
  return out.join("\n");
}
