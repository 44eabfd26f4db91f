/**
 * The result envelope and its parts (head-tail cuts, event fitting) against the real event
 * codec and a real artifact store on disk: every result fits the log's limit once sealed,
 * whatever the output is made of.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { MAX_EVENT_BYTES } from "../eventlog/append-batcher.ts";
import { canonicalJson } from "../eventlog/canonical-json.ts";
import { sealEvent } from "../eventlog/event-codec.ts";
import { GENESIS_HASH } from "../eventlog/hash-chain.ts";
import { ToolCallSchema } from "../gen/agentd/v1/events_pb.js";
import { recordCallInput } from "./call-input-record.ts";
import { EVENT_BUDGET, fitDocument, sealedBytes } from "./event-fit.ts";
import { clipText, cutTree, headTail, plainNote } from "./head-tail.ts";
import { envelopeResult, MAX_RESULT_JSON, testSummaryOf } from "./result-envelope.ts";

const place = { runId: "01JRUNRUNRUNRUNRUNRUNRUNRU", sessionId: "01JSESSIONSESSIONSESSIONSE" };
const rep = (s: string, bytes: number) => s.repeat(Math.ceil(bytes / s.length));

let dir: string;
let store: FsArtifactStore;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentd-envelope-"));
  store = new FsArtifactStore(join(dir, "artifacts"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The stored event's size, sealed by the codec the way the log seals it. */
function storedBytes(payload: Parameters<typeof sealedBytes>[1]): number {
  return Buffer.byteLength(sealEvent({ ...place, payload }, 123_456, GENESIS_HASH, 1).json);
}

async function readArtifact(digest: string): Promise<string> {
  const parts: Uint8Array[] = [];
  for await (const c of store.read(digest)) parts.push(c);
  return Buffer.concat(parts).toString("utf8");
}

describe("head-tail cuts", () => {
  it("keeps head and tail, counts the bytes left out, never splits a surrogate pair", () => {
    const text = rep("😀é", 10_000);
    for (const keep of [1, 2, 3, 7, 100, 101, 4095]) {
      const cut = headTail(text, keep, (n) => `<${n}>`);
      assert.equal(cut.isWellFormed(), true, `keep ${keep}`);
      const m = /<(\d+)>/.exec(cut);
      assert.ok(m);
      const [head, tail] = cut.split(m[0]) as [string, string];
      assert.ok(text.startsWith(head) && text.endsWith(tail));
      assert.equal(
        Buffer.byteLength(head) + Buffer.byteLength(tail) + Number(m[1]),
        Buffer.byteLength(text),
      );
    }
    assert.equal(headTail("short", 5, plainNote), "short");
    assert.match(
      clipText("x".repeat(10_000), 100),
      /^x{50} \[agentd: 9900 bytes left out\] x{50}$/,
    );
  });

  it("cutTree cuts long strings and arrays, keeps keys (an own __proto__ stays a key)", () => {
    const doc = JSON.parse(
      `{"__proto__":{"polluted":"${"p".repeat(500)}"},"items":${JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))}}`,
    ) as Record<string, unknown>;
    const cut = cutTree(doc, 128, plainNote) as Record<string, unknown>;
    assert.ok(Object.hasOwn(cut, "__proto__"));
    assert.equal(({} as { polluted?: string }).polluted, undefined);
    const items = cut.items as unknown[];
    assert.equal(items.length, 3);
    assert.deepEqual([items[0], items[2]], [0, 999]);
    assert.match(String(items[1]), /998 items left out/);
  });
});

describe("envelopeResult", () => {
  const kinds: [string, string][] = [
    ["ascii", "a"],
    ["NUL bytes", "\u0000"],
    ["quotes", '"'],
    ["backslashes", "\\"],
    ["U+FFFD (invalid UTF-8, decoded)", "\ufffd"],
    ["4-byte emoji", "😀"],
    ["control characters", "\u0001\u001f\n\t"],
  ];
  for (const [name, unit] of kinds) {
    it(`a 1 MiB stdout of ${name} fits one event with head, tail and the full output stored`, async () => {
      const stdout = `HEAD-${rep(unit, 1024 * 1024)}-TAIL`;
      const document = { exitCode: 0, stdout, stderr: "", truncated: false };
      const env = await envelopeResult({
        place,
        callId: "c1",
        ok: true,
        exitCode: 0,
        durationMs: 5n,
        document,
        artifacts: store,
      });
      const bytes = storedBytes({ case: "toolResult", value: env.result });
      assert.ok(bytes <= MAX_EVENT_BYTES, `${bytes} bytes`);
      assert.ok(env.result.outputJson.length <= MAX_RESULT_JSON);
      assert.equal(env.result.truncated, true);
      const view = JSON.parse(env.result.outputJson) as { stdout: string };
      assert.deepEqual(env.view, view, "the model's view is what the event holds");
      assert.ok(view.stdout.startsWith("HEAD-") && view.stdout.endsWith("-TAIL"));
      assert.match(
        view.stdout,
        /\[agentd: \d+ bytes left out here; the full output is artifact sha256:[0-9a-f]{64}\]/,
      );
      assert.equal(view.stdout.isWellFormed(), true);
      const full = await readArtifact(env.result.outputDigest);
      assert.equal(full, canonicalJson(document));
      assert.equal(createHash("sha256").update(full).digest("hex"), env.result.outputDigest);
      assert.equal(env.artifact?.digest, env.result.outputDigest);
    });
  }

  it("a small output is kept whole: not truncated, no digest, nothing stored", async () => {
    const document = { stdout: "ok\n", stderr: "", exitCode: 0 };
    const env = await envelopeResult({
      place,
      callId: "c",
      ok: true,
      exitCode: 0,
      durationMs: 1n,
      document,
      artifacts: store,
    });
    assert.equal(env.result.outputJson, canonicalJson(document));
    assert.equal(env.result.truncated, false);
    assert.equal(env.result.outputDigest, "");
    assert.equal(env.artifact, undefined);
  });

  it("the tool's own cut is reported as truncated even when the output fits", async () => {
    const env = await envelopeResult({
      place,
      callId: "c",
      ok: true,
      exitCode: 0,
      durationMs: 1n,
      document: { stdout: "x\n[agentd: output truncated]", truncated: true },
      toolTruncated: true,
    });
    assert.equal(env.result.truncated, true);
    assert.equal(env.result.outputDigest, "");
  });

  it("without a store (or with a failing one) keeps head and tail and says the full output was not kept", async () => {
    const blocked = join(dir, "blocked");
    await writeFile(blocked, "a file where the store wants a directory");
    for (const [artifacts, why] of [
      [undefined, /the full output was not kept\]/],
      [new FsArtifactStore(blocked), /the full output was not kept \(artifact store: EIO\)/],
    ] as const) {
      const env = await envelopeResult({
        place,
        callId: "c",
        ok: true,
        exitCode: 0,
        durationMs: 1n,
        document: { stdout: rep('"\\', 2_000_000), stderr: rep("\u0000", 2_000_000) },
        ...(artifacts === undefined ? {} : { artifacts }),
      });
      assert.ok(storedBytes({ case: "toolResult", value: env.result }) <= MAX_EVENT_BYTES);
      assert.equal(env.result.outputDigest, "");
      assert.equal(env.artifact, undefined);
      const view = env.view as { stdout: string; stderr: string };
      assert.match(view.stdout, why);
      assert.match(view.stderr, why, "both streams keep head and tail");
    }
  });

  it("a document no string cut can shrink (100,000 keys) falls back to a cut of its JSON text", async () => {
    const document = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`key-${i}`, i]));
    const env = await envelopeResult({
      place,
      callId: "c",
      ok: true,
      exitCode: 0,
      durationMs: 1n,
      document,
    });
    assert.ok(storedBytes({ case: "toolResult", value: env.result }) <= MAX_EVENT_BYTES);
    const view = env.view as { truncated: boolean; head: string };
    assert.equal(view.truncated, true);
    assert.ok(view.head.startsWith('{"key-0":0,'));
  });

  it("a huge error message is clipped", async () => {
    const env = await envelopeResult({
      place,
      callId: "c",
      ok: false,
      exitCode: 0,
      durationMs: 1n,
      error: { code: "EIO", message: rep("\u0000", 5_000_000) },
      document: undefined,
    });
    assert.ok(storedBytes({ case: "toolResult", value: env.result }) <= MAX_EVENT_BYTES);
    assert.match(env.result.error?.message ?? "", /bytes left out/);
  });
});

describe("fitting and recording inputs", () => {
  it("sealedBytes is an upper bound of what the log stores", () => {
    const payload = {
      case: "toolCall" as const,
      value: recordCallInputPayload({ path: "a".repeat(1000) }),
    };
    assert.ok(sealedBytes(place, payload) >= storedBytes(payload));
  });

  it("an input too large for one event is recorded head+tail and refused naming the field", () => {
    for (const input of [
      { path: rep("\u0000", 1_000_000) },
      { command: rep('"', 600_000) },
      JSON.parse(`{"__proto__":${JSON.stringify(rep("x", 2_000_000))}}`),
      Array.from({ length: 300_000 }, () => 1),
      rep("😀", 1_000_000),
    ]) {
      const r = recordCallInput(place, "c", "repo.read", input, (t) => t);
      assert.equal(r.refusal?.rule, "input.size");
      assert.match(r.refusal?.reason ?? "", /^repo\.read: input: \d+ bytes of JSON, too large/);
      assert.ok(
        storedBytes({ case: "toolCall", value: recordCallInputPayload(r.inputJson, true) }) <=
          EVENT_BUDGET,
      );
    }
  });

  it("an input nested too deep to encode is recorded as a note and refused", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = { a: deep };
    const r = recordCallInput(place, "c", "repo.read", deep, (t) => t);
    assert.equal(r.refusal?.rule, "input.schema");
    assert.match(r.inputJson, /could not be encoded: RangeError/);
  });

  it("an ordinary input is recorded as it is", () => {
    const r = recordCallInput(place, "c", "repo.read", { path: "src/a.ts" }, (t) => t);
    assert.deepEqual(r, { inputJson: '{"path":"src/a.ts"}' });
  });

  it("fitDocument answers null when not even the fallback fits", () => {
    const f = fitDocument("x".repeat(1000), {
      place,
      maxJson: 10,
      note: plainNote,
      build: () => ({
        case: "toolCall",
        value: recordCallInputPayload(rep("\u0000", 600_000), true),
      }),
    });
    assert.deepEqual(f, { shaped: null, json: "null", cut: true });
  });
});

/** A ToolCall for `input` (or for input_json `input` as it is, when `raw`). */
function recordCallInputPayload(input: unknown, raw = false) {
  const inputJson = raw ? String(input) : canonicalJson(input);
  return create(ToolCallSchema, { callId: "c", tool: "repo.read", inputJson });
}

describe("testSummaryOf", () => {
  it("copies test.run's tests into the proto, defensively", () => {
    const t = testSummaryOf({
      tests: {
        passed: 3,
        failed: 1,
        skipped: -4,
        errors: Number.NaN,
        format: "go-json",
        failures: [
          { name: "TestA", file: "a_test.go", line: 7, message: "boom" },
          null,
          { line: "x" },
        ],
        moreFailures: 2,
      },
    });
    assert.deepEqual(
      [t?.passed, t?.failed, t?.skipped, t?.errors, t?.format, t?.moreFailures],
      [3, 1, 0, 0, "go-json", 2],
    );
    assert.deepEqual(
      t?.failures.map((f) => [f.name, f.file, f.line, f.message]),
      [
        ["TestA", "a_test.go", 7, "boom"],
        ["", "", 0, ""],
        ["", "", 0, ""],
      ],
    );
    const many = testSummaryOf({
      tests: { failures: Array.from({ length: 80 }, () => ({ name: "x" })), moreFailures: 1 },
    });
    assert.deepEqual([many?.failures.length, many?.moreFailures], [50, 31]);
    for (const none of [undefined, null, "x", {}, { tests: "no" }, { tests: null }])
      assert.equal(testSummaryOf(none), undefined);
  });

  it("a result with tests still fits the event", async () => {
    const tests = testSummaryOf({
      tests: {
        failures: Array.from({ length: 50 }, () => ({
          name: "n".repeat(1024),
          message: "m".repeat(2048),
        })),
      },
    });
    const env = await envelopeResult({
      place,
      callId: "c",
      ok: true,
      exitCode: 1,
      durationMs: 1n,
      tests,
      document: { stdout: rep("x", 2 * MAX_EVENT_BYTES), tests: "…" },
      artifacts: store,
    });
    assert.equal(env.result.tests?.failures.length, 50);
    assert.ok(storedBytes({ case: "toolResult", value: env.result }) <= MAX_EVENT_BYTES);
  });
});
