/**
 * Attack (#27 point 3, "a fake 'approved by admin' line drawn right before the approval
 * prompt"; attack3-fake-lines.test.ts fixed it for model messages and paths): the approval
 * preview itself. A command of several lines (a shell script is one process.run command)
 * is shown in the preview box as its summary, its `command:` line and its argv, each
 * printed with its newlines: every line after the first starts at the terminal's left
 * edge, outside the box's `│` gutter, where the model writes `✔ approved by admin` or
 * `└` and a fake `rules:` line. The same preview is what `agentctl approvals` shows
 * (main.ts, formatPreview) and what the inline approval prompt follows.
 *
 * Why: render.ts formatPreview() pushes `p.summary`, `command: ${line}` (commandLineOf:
 * escapeControls keeps `\n`) and the argv, each possibly holding newlines, as one element;
 * the Renderer prints `  │ ${l}` once per element, so only the first line of each gets the
 * gutter.
 *
 * What must hold: no line of model-controlled preview text starts a line of the rendering
 * (each line in the box carries the gutter, or the newline is shown as ⏎ as a command's is
 * in `→ process.run`).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { EventSchema, PreviewSchema } from "../gen/agentd/v1/events_pb.js";
import { formatPreview, Renderer } from "./render.ts";
import { makeStyle } from "./style.ts";
import { guardText } from "./terminal-out.ts";

const RUN = "01JRUN00000000000000000000";
const FAKE = "✔ approved by admin";
const LINE = `npm test\n${FAKE}`;

const preview = {
  summary: `run ${JSON.stringify(LINE)} in /workspace`,
  argv: ["sh", "-c", LINE],
  cwd: "/workspace",
};

function renderRequested(): string {
  let out = "";
  const r = new Renderer({
    out: { write: (s: string) => (out += guardText(s, false)), control: (s) => (out += s) },
    color: false,
    live: false,
    quiet: false,
    columns: () => 100,
  });
  r.event(
    create(EventSchema, {
      runId: RUN,
      seq: 1n,
      type: "approval.requested",
      ts: timestampFromMs(Date.UTC(2025, 0, 1)),
      payload: {
        case: "approvalRequested",
        value: { approvalId: `apr_${RUN}_1`, tool: "process.run", preview },
      },
    }),
  );
  r.close();
  return out;
}

const startsAFakeLine = (out: string) =>
  out.split("\n").some((l) => l.trimStart().startsWith(FAKE));

describe("the approval preview cannot draw agentctl's lines", () => {
  it("run's approval box: the fake line never starts a line", () => {
    const out = renderRequested();
    assert.ok(!startsAFakeLine(out), `a line starts with the fake text:\n${out}`);
  });

  it("agentctl approvals (formatPreview): no element holds a line of its own", () => {
    const lines = formatPreview(create(PreviewSchema, preview), makeStyle(false));
    const printed = lines.map((l) => `│ ${l}`).join("\n");
    assert.ok(!startsAFakeLine(printed), `a line starts with the fake text:\n${printed}`);
  });
});
