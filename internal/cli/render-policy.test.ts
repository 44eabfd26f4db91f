/**
 * agentctl shows which policy decided a call: `agentctl watch` (the Renderer) appends
 * "[policy: SOURCE FILE sha256:SHORT]" to a decision it shows, `agentctl events` adds
 * "policy=…" to the one-line form, and policy.changed reads as old → new digest. Text from
 * the event (the file name) is escaped; a decision recorded before provenance shows as
 * before.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Decision, type Event, EventSchema, PolicySource } from "../gen/agentd/v1/events_pb.js";
import { eventLine, Renderer } from "./render.ts";
import { makeStyle } from "./style.ts";
import { guardText } from "./terminal-out.ts";

const RUN = "01JRUN00000000000000000000";
const DIGEST = "3f2a9c0d1b7e".padEnd(64, "0");
const NEW = "9e8d7c6b5a41".padEnd(64, "1");
type Payload = MessageInitShape<typeof EventSchema>["payload"];
const ev = (seq: number, type: string, payload: Payload): Event =>
  create(EventSchema, {
    runId: RUN,
    seq: BigInt(seq),
    type,
    ts: timestampFromMs(Date.UTC(2025, 0, 1, 12, 0, seq)),
    payload,
  });
const decision = (seq: number, d: Decision, extra: Record<string, unknown>) =>
  ev(seq, "policy.decision", {
    case: "policyDecision",
    value: {
      callId: `c${seq}`,
      decision: d,
      rule: "risk.denyCommands:curl",
      reason: "curl is denied",
      ...extra,
    },
  });

function render(events: Event[]): string {
  let out = "";
  const r = new Renderer({
    out: { write: (s: string) => (out += guardText(s, false)), control: (s) => (out += s) },
    color: false,
    columns: () => 120,
  });
  for (const e of events) r.event(e);
  r.close();
  return out;
}

describe("the deciding policy in agentctl", () => {
  it("watch: a denial and an approval name the policy's source, file and short digest", () => {
    const out = render([
      decision(1, Decision.DENY, {
        policyDigest: DIGEST,
        policySource: PolicySource.TENANT,
        policyFile: "acme.yaml",
      }),
      decision(2, Decision.PREVIEW_APPROVAL, {
        policyDigest: DIGEST,
        policySource: PolicySource.SERVER,
        policyFile: "policy.yaml",
      }),
      decision(3, Decision.DENY, {}), // recorded before provenance existed
    ]);
    assert.deepEqual(out.trimEnd().split("\n"), [
      "  ⛔ denied by policy (risk.denyCommands:curl): curl is denied [policy: tenant acme.yaml sha256:3f2a9c0d1b7e]",
      "  policy: needs approval (risk.denyCommands:curl): curl is denied [policy: server policy.yaml sha256:3f2a9c0d1b7e]",
      "  ⛔ denied by policy (risk.denyCommands:curl): curl is denied",
    ]);
  });

  it("events: policy= on the decision's line; policy.changed as old → new", () => {
    const st = makeStyle(false);
    const line = eventLine(
      decision(4, Decision.AUTO, {
        policyDigest: DIGEST,
        policySource: PolicySource.SERVER,
        policyFile: "policy.yaml",
      }),
      st,
    );
    assert.match(
      line,
      /c4 auto \(risk\.denyCommands:curl\) policy=server policy\.yaml sha256:3f2a9c0d1b7e$/,
    );
    const changed = eventLine(
      ev(0, "policy.changed", {
        case: "policyChanged",
        value: {
          tenantId: "acme",
          oldDigest: DIGEST,
          newDigest: NEW,
          source: PolicySource.SERVER,
          policyFile: "policy.yaml",
          reporter: "worker h1/42",
        },
      }),
      st,
    );
    assert.match(
      changed,
      /policy\.changed +tenant acme: 3f2a9c0d1b7e → 9e8d7c6b5a41 \(server policy\.yaml sha256:9e8d7c6b5a41\) by worker h1\/42$/,
    );
  });

  it("escapes a hostile file name in both forms", () => {
    const hostile = decision(5, Decision.DENY, {
      policyDigest: DIGEST,
      policySource: PolicySource.TENANT,
      policyFile: "p\x1b]0;owned\x07\u202e.yaml",
    });
    for (const out of [render([hostile]), eventLine(hostile, makeStyle(false))]) {
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it checks
      assert.doesNotMatch(out, /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/, JSON.stringify(out));
      assert.match(out, /p\\x1b\]0;owned\\x07\\u202e\.yaml/);
    }
  });
});
