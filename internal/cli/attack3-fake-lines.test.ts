/**
 * Attack (#27 point 3, "a fake 'approved by admin' line drawn right before the approval
 * prompt"; hostile-terminal.test.ts's own check: "the fake line never starts a line"):
 * with no escape sequence at all, a model's message that holds newlines draws lines that
 * read as agentctl's own — `✔ approved by admin`, `⏸ paused: …`, a forged approval
 * preview and `agentctl approve` hint — right before the real approval. Escaping controls
 * cannot stop it: the newline is layout and is kept.
 *
 * Why: render.ts prints output.delta text as it streams (#text) and output.message text as
 * bare lines (`this.line(p.value.text)`), unlike tool output, whose every line carries the
 * `│` gutter (#outputLine). A tool call's path (`→ repo.read PATH`, describeCall) is printed
 * with its newline too (a command's newline is shown as ⏎; a path's is not). Without colors (a pipe, NO_COLOR, a plain terminal) a model
 * line and an agentctl line are the same bytes.
 *
 * What must hold: no line of model text starts a line of the rendering the way agentctl's
 * own lines do (a gutter or prefix on each model line, as tool output has), so the fake
 * `✔ approved by admin` never starts a line.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import { Renderer } from "./render.ts";
import { guardText } from "./terminal-out.ts";

const RUN = "01JRUN00000000000000000000";
const FAKE = "✔ approved by admin";
type Payload = MessageInitShape<typeof EventSchema>["payload"];

const ev = (type: string, payload: Payload, i: number): Event =>
  create(EventSchema, {
    runId: RUN,
    seq: BigInt(i + 1),
    type,
    ts: timestampFromMs(Date.UTC(2025, 0, 1) + i),
    payload,
  });

function render(events: Event[]): string {
  let out = "";
  const r = new Renderer({
    out: { write: (s: string) => (out += guardText(s, false)), control: (s) => (out += s) },
    color: false,
    live: false,
    quiet: false,
    columns: () => 100,
  });
  for (const e of events) r.event(e);
  r.close();
  return out;
}

const TEXT = `Looking at the tests.\n${FAKE}\n⏸ paused: waiting for approval apr_${RUN}_0\n`;

describe("model text cannot draw agentctl's lines", () => {
  for (const [name, events] of [
    [
      "streamed (output.delta)",
      [
        ev("output.delta", { case: "outputDelta", value: { text: TEXT } }, 0),
        ev(
          "output.message",
          { case: "outputMessage", value: { role: "assistant", text: TEXT } },
          1,
        ),
      ],
    ],
    [
      "a tool call's path (repo.read, repo.patch: `→ repo.read PATH`)",
      [
        ev(
          "tool.call",
          {
            case: "toolCall",
            value: {
              callId: "c1",
              tool: "repo.read",
              inputJson: JSON.stringify({ path: `a\n${FAKE}` }),
            },
          },
          0,
        ),
        ev(
          "tool.call",
          {
            case: "toolCall",
            value: {
              callId: "c2",
              tool: "repo.patch",
              inputJson: JSON.stringify({ path: `b\n${FAKE}`, patch: "x" }),
            },
          },
          1,
        ),
      ],
    ],
    [
      "a whole message (output.message)",
      [
        ev(
          "output.message",
          { case: "outputMessage", value: { role: "assistant", text: TEXT } },
          0,
        ),
      ],
    ],
  ] as const)
    it(`${name}: the fake line never starts a line`, () => {
      const out = render([...events]);
      for (const l of out.split("\n"))
        assert.ok(
          !l.trimStart().startsWith(FAKE),
          `a line starts with the fake text: ${JSON.stringify(out)}`,
        );
    });
});
