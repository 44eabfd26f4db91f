/**
 * ATTACK (review of issue #27 deliverable 1 after 8427a1b / f0328b1): sealWrites gives every
 * root exactly 16 records so the `secret.written` record does not tell which roots a
 * secret-carrying call wrote under. But the padding is kept out of the run's in-memory
 * taint (secret-containment.ts containCall: `if (!isPadding(f)) run.taint.set(...)`), and
 * the NEXT call's decision is built from that taint: guardTaint puts
 * describeTaint(files) (secret-taint.ts: "the run holds a secret in /dev/shm/…, …") in the
 * decision's reason, and previewTaint puts heldFiles(files) (`/dev/shm/… (names held)`, once
 * per root that has a real record) in the preview's secret_files and summary. Both go to the
 * log (policy.decision / approval.requested) before any person decides. So which roots the
 * program wrote under — one bit per root, the program's choice, i.e. bits of the value —
 * reaches the log anyway, one call later.
 * Shown with two bits of the value's first byte: bit 7 picks whether /dev/shm gets a file,
 * bit 6 whether /tmp does; the next (unapproved) exec's logged decision and approval must
 * not differ between a program and the same program with the bits flipped.
 * What must hold: nothing the log records after a secret-carrying call (decisions, previews,
 * approvals) depends on which roots it wrote under (e.g. name every root, or none, always).
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import { EventSchema } from "../gen/agentd/v1/events_pb.js";
import { containmentRun } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";

const suite = containmentSuite();

/** The approved program: two bits of the first byte (flipped when `flip`) pick the roots it writes. */
const program = (flip: boolean): string =>
  [
    'c=$(printf %s "$ENV.DEMO_TOKEN" | od -An -N1 -tu1);',
    `a=$(( ((c >> 7) & 1) ^ ${flip ? 1 : 0} )); b=$(( ((c >> 6) & 1) ^ ${flip ? 1 : 0} ));`,
    "if [ $a -eq 1 ]; then echo x > /dev/shm/s; fi;",
    "if [ $b -eq 1 ]; then echo x > /tmp/t; fi; true",
  ].join(" ");

/** What the log says of the next exec (no person involved yet): every event after the secret call's records. */
async function nextCallLog(flip: boolean): Promise<string> {
  const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
  const w = await f.approved("process.run", { command: program(flip) });
  assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
  const seen = (await suite.stack.log.read(f.run.runId, 0)).length;
  const next = await f.unapproved("process.run", { command: "true" });
  assert.equal(next.kind, "paused", `an exec after a secret call asks: ${JSON.stringify(next)}`);
  const after = (await suite.stack.log.read(f.run.runId, 0)).slice(seen);
  const text = after
    .map((e) => {
      const j = toJson(EventSchema, e.event) as Record<string, unknown>;
      delete j.seq;
      delete j.eventId;
      delete j.ts;
      delete j.prevHash;
      delete j.hash;
      delete j.runId;
      delete j.sessionId;
      return JSON.stringify(j);
    })
    .join("\n");
  // Ids that differ per run by construction (call, approval ids) are not the program's.
  return text
    .replace(/"(approvalId|callId|id)":"[^"]*"/g, '"$1":"…"')
    .replace(/call [au]\d+/g, "call …")
    .replace(/"expiresAt":"[^"]*"/g, '"expiresAt":"…"');
}

describe("attack: the next call's decision names the roots the secret program wrote under", () => {
  it("two bits of the value flip the logged decision / approval preview of the next exec", async () => {
    const a = await nextCallLog(false);
    const b = await nextCallLog(true);
    assert.equal(
      a,
      b,
      `the log after the secret call differs with two bits of the value:\n${a}\n---\n${b}`,
    );
  });
});
