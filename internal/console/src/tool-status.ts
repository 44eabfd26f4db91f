/**
 * The status a tool call's result shows on the run page: "ok", "failed · exit 1", or for
 * test.run "2 failed, 14 passed, 1 skipped · exit 1"; bad (red) whenever the call failed,
 * its command exited non-zero or a test failed. Pure (tested without a browser).
 *
 * Must never: show a non-zero exit or a failing test as ok.
 */
import type { ToolResult } from "../../gen/agentd/v1/events_pb.js";
import { testCountsText } from "../../tools/test-results/format-summary.ts";

export interface ToolStatus {
  /** The CSS class: "ok" (green) or "bad" (red). */
  cls: "ok" | "bad";
  text: string;
}

export function toolStatus(r: ToolResult): ToolStatus {
  const exit = r.exitCode !== 0 ? ` · exit ${r.exitCode}` : "";
  if (!r.ok)
    return { cls: "bad", text: `failed${r.error?.code ? `: ${r.error.code}` : ""}${exit}` };
  const t = r.tests;
  if (t !== undefined) {
    const bad = t.failed > 0 || t.errors > 0 || r.exitCode !== 0;
    return { cls: bad ? "bad" : "ok", text: `${testCountsText(t)}${exit}` };
  }
  return r.exitCode !== 0 ? { cls: "bad", text: `failed${exit}` } : { cls: "ok", text: "ok" };
}
