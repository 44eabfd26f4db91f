/** The run-wide secret set and whole-payload redaction. Pure: no sandbox, no log. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  type Event,
  EventSchema,
  PreviewSchema,
  ToolCallSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { redactMessage } from "./redact-payload.ts";
import { createRunSecrets, loadRunSecrets, namesUsedIn } from "./run-secrets.ts";
import { createEnvSecretProvider, type SecretProvider } from "./secrets.ts";

const SECRET = "hunter2-correct-horse";
const callEvent = (input: string): Event =>
  create(EventSchema, {
    type: "tool.call",
    payload: { case: "toolCall", value: create(ToolCallSchema, { callId: "c", inputJson: input }) },
  });

describe("run secrets", () => {
  it("knows every name a call of the run used, from the first provider that has it, and says which no provider has", async () => {
    const env = createEnvSecretProvider({ A: "value-of-a", OLD: "value-of-old", X: "v-x-env" });
    const second: SecretProvider = {
      name: "files",
      get: async (n) => (n === "X" ? "v-x-file" : undefined),
    };
    const s = await loadRunSecrets({
      events: [callEvent('{"command":"echo $ENV.OLD $ENV.X $ENV.GONE"}')],
      providers: [env, second],
    });
    // A (allowed, never used) is not hidden: masking it everywhere would garble text.
    assert.deepEqual([...s.values()].sort(), ["v-x-env", "value-of-old"]);
    assert.deepEqual(s.missing, ["GONE"]);
    assert.equal(s.redactor.text("got value-of-old and v-x-env"), "got [REDACTED] and [REDACTED]");
    assert.equal(s.any(), true);
  });

  it("skips a failing provider for a name, naming the name and never the value", async () => {
    const seen: string[] = [];
    const broken: SecretProvider = {
      name: "broken",
      get: async () => {
        throw new Error("disk on fire");
      },
    };
    const s = await loadRunSecrets({
      events: [callEvent('{"command":"echo $ENV.A"}')],
      providers: [broken, createEnvSecretProvider({ A: "value-of-a" })],
      onError: (name) => seen.push(name),
    });
    assert.deepEqual(seen, ["A"]);
    assert.deepEqual(s.values(), ["value-of-a"]);
    assert.deepEqual(s.missing, []);
  });

  it("grows as calls resolve values; the list is stable between additions", () => {
    const s = createRunSecrets();
    assert.equal(s.any(), false);
    const empty = s.values();
    s.add([]);
    assert.equal(s.values(), empty);
    s.add([SECRET, SECRET, ""]);
    assert.deepEqual(s.values(), [SECRET]);
    const one = s.values();
    s.add([SECRET]);
    assert.equal(s.values(), one, "same array: redactors do not rebuild their matcher");
  });

  it("finds placeholder names in tool.call inputs only", () => {
    const names = namesUsedIn([
      callEvent('{"command":"curl -H $ENV.TOKEN_A x; echo $ENV.b_2"}'),
      create(EventSchema, { type: "output.delta" }),
    ]);
    assert.deepEqual([...names].sort(), ["TOKEN_A", "b_2"]);
  });
});

describe("redactMessage", () => {
  const s = createRunSecrets([SECRET]);
  it("redacts every string of a nested payload and keeps everything else", () => {
    const result = create(ToolResultSchema, {
      callId: "c1",
      ok: true,
      outputJson: JSON.stringify({ stdout: `token=${SECRET}` }),
      exitCode: 3,
      durationMs: 12n,
      error: { code: "EIO", message: `failed with ${SECRET}` },
    });
    const out = redactMessage(result, s.redactor);
    assert.ok(
      !JSON.stringify(out, (_k, v) => (typeof v === "bigint" ? String(v) : v)).includes(SECRET),
    );
    assert.equal(out.callId, "c1");
    assert.equal(out.exitCode, 3);
    assert.equal(out.durationMs, 12n);
    assert.equal(out.$typeName, result.$typeName);
    assert.match(out.error?.message ?? "", /\[REDACTED\]/);
    assert.ok(result.outputJson.includes(SECRET), "the input is not mutated");
  });

  it("walks repeated fields and oneofs, and returns the same object when nothing changed", () => {
    const preview = create(PreviewSchema, { argv: ["echo", SECRET], files: ["a"] });
    const out = redactMessage(preview, s.redactor);
    assert.deepEqual(out.argv, ["echo", "[REDACTED]"]);
    const payload = { case: "toolCall" as const, value: create(ToolCallSchema, { callId: "x" }) };
    assert.equal(redactMessage(payload, s.redactor), payload, "untouched: same object");
    const base64 = Buffer.from(SECRET).toString("base64");
    const ev = { case: "toolCall" as const, value: create(ToolCallSchema, { inputJson: base64 }) };
    const r = redactMessage(ev, s.redactor);
    assert.equal(r.case, "toolCall");
    assert.equal(r.value.inputJson, "[REDACTED]");
  });
});
