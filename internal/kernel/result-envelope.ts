/**
 * The result envelope: a tool's (redacted) output made into one tool.result event that
 * always fits the log's event limit. Output too large for the event keeps the head and
 * the tail of every long string (stdout, stderr, file content, diff) around a marker
 * saying how many bytes were left out and where the full output is; the full output, as
 * the JSON document output_json would have held, goes to the artifact store and its sha256
 * into `output_digest`.
 *
 * Never: return a result whose sealed event was not measured to fit; put unredacted
 * output anywhere (the caller redacts first); fail because the artifact store did (the
 * call already ran: the marker says the full output was not kept, and why).
 */
import { create } from "@bufbuild/protobuf";
import type { ArtifactInfo, ArtifactStore } from "../artifacts/port.ts";
import { isAgentdError } from "../errors.ts";
import { canonicalJson } from "../eventlog/canonical-json.ts";
import {
  type TestSummary,
  TestSummarySchema,
  type ToolResult,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { EVENT_BUDGET, type EventPlace, fitDocument, sealedBytes } from "./event-fit.ts";
import { type CutNote, clipText } from "./head-tail.ts";

/**
 * Most characters of output JSON a tool.result holds: what a reader of the event (the
 * model's context, the CLI) gets at most, whatever the event limit would allow.
 */
export const MAX_RESULT_JSON = 256 * 1024;
/** Longest error message kept in a result (a tool's message may quote its stderr). */
const MAX_ERROR_MESSAGE = 16 * 1024;

export interface ResultFields {
  callId: string;
  ok: boolean;
  exitCode: number;
  durationMs: bigint;
  error?: { code: string; message: string };
  /** test.run's parsed results (ToolResult.tests), from the redacted output. */
  tests?: TestSummary;
}

export interface EnvelopeOptions extends ResultFields {
  place: EventPlace;
  /** The full, redacted output document; undefined when the tool returned nothing. */
  document: unknown;
  /** The tool said it cut its own output (a process stopped at the output cap). */
  toolTruncated?: boolean;
  /** Where the full output goes when it does not fit; without one only head+tail is kept. */
  artifacts?: ArtifactStore;
}

export interface ResultEnvelope {
  /** The event payload, measured to fit. */
  result: ToolResult;
  /** The output as the event holds it (the head+tail form when cut): the model's view. */
  view: unknown;
  /** The stored full output, when it was cut and the store took it. */
  artifact?: ArtifactInfo;
}

/** Builds the tool.result for a call's output; see the module comment. */
export async function envelopeResult(o: EnvelopeOptions): Promise<ResultEnvelope> {
  const error =
    o.error === undefined
      ? undefined
      : { code: clipText(o.error.code, 64), message: clipText(o.error.message, MAX_ERROR_MESSAGE) };
  const base = {
    callId: o.callId,
    ok: o.ok,
    exitCode: o.exitCode,
    durationMs: o.durationMs,
    ...(error === undefined ? {} : { error }),
    ...(o.tests === undefined ? {} : { tests: o.tests }),
  };
  if (o.document === undefined) {
    return {
      result: create(ToolResultSchema, { ...base, truncated: o.toolTruncated === true }),
      view: undefined,
    };
  }
  const full = canonicalJson(o.document);
  const build = (json: string, digest: string, truncated: boolean) =>
    create(ToolResultSchema, { ...base, outputJson: json, truncated, outputDigest: digest });
  if (
    full.length <= MAX_RESULT_JSON &&
    sealedBytes(o.place, { case: "toolResult", value: build(full, "", true) }) <= EVENT_BUDGET
  ) {
    return { result: build(full, "", o.toolTruncated === true), view: o.document };
  }
  const stored = await storeFull(o.artifacts, full);
  const digest = stored.artifact?.digest ?? "";
  const fitted = fitDocument(o.document, {
    place: o.place,
    maxJson: MAX_RESULT_JSON,
    note: cutNote(stored.where),
    build: (_shaped, json) => ({ case: "toolResult", value: build(json, digest, true) }),
  });
  return {
    result: build(fitted.json, digest, true),
    view: fitted.shaped,
    ...(stored.artifact === undefined ? {} : { artifact: stored.artifact }),
  };
}

/** Stores the full output; says where it is (or why it is not kept) for the marker. */
async function storeFull(
  store: ArtifactStore | undefined,
  full: string,
): Promise<{ artifact?: ArtifactInfo; where: string }> {
  if (store === undefined) return { where: "the full output was not kept" };
  try {
    const artifact = await store.put(Buffer.from(full, "utf8"));
    return { artifact, where: `the full output is artifact sha256:${artifact.digest}` };
  } catch (err) {
    const why = isAgentdError(err) ? err.code : "an error";
    return { where: `the full output was not kept (artifact store: ${why})` };
  }
}

function cutNote(where: string): CutNote {
  return (n, unit) =>
    unit === "bytes"
      ? `\n[agentd: ${n} bytes left out here; ${where}]\n`
      : `[agentd: ${n} items left out here; ${where}]`;
}

/**
 * The proto TestSummary of a test.run output's `tests` (test-results/summary.ts), read
 * defensively: anything not of the expected shape is left out, never thrown on.
 */
export function testSummaryOf(document: unknown): TestSummary | undefined {
  if (document === null || typeof document !== "object") return undefined;
  const t = (document as { tests?: unknown }).tests;
  if (t === null || typeof t !== "object") return undefined;
  const v = t as Record<string, unknown>;
  const n = (x: unknown) =>
    typeof x === "number" && Number.isFinite(x) && x >= 0
      ? Math.min(Math.floor(x), 0xffff_ffff)
      : 0;
  const s = (x: unknown, max: number) => (typeof x === "string" ? clipText(x, max) : "");
  const failures = Array.isArray(v.failures) ? v.failures.slice(0, 50) : [];
  return create(TestSummarySchema, {
    passed: n(v.passed),
    failed: n(v.failed),
    skipped: n(v.skipped),
    errors: n(v.errors),
    format: s(v.format, 32),
    moreFailures:
      n(v.moreFailures) + (Array.isArray(v.failures) ? v.failures.length - failures.length : 0),
    failures: failures.map((f: unknown) => {
      const x = (f !== null && typeof f === "object" ? f : {}) as Record<string, unknown>;
      return {
        name: s(x.name, 1024),
        file: s(x.file, 1024),
        line: n(x.line),
        message: s(x.message, 2048),
      };
    }),
  });
}
