/**
 * reapplyPatch against real containers: a repo.patch recorded in one container is applied
 * again in a fresh one made from the same upload only when it reproduces its recorded
 * result; otherwise nothing is written and the reason says why.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import Docker from "dockerode";
import type { Sandbox, SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testBoxSpec, testSandbox } from "../testing/docker.ts";
import { testImagePolicy } from "../testing/worker-fixtures.ts";
import { pickCommands } from "../tools/command-spec.ts";
import { repoPatch } from "../tools/repo-patch.ts";
import type { ToolContext } from "../tools/tool.ts";
import type { Policy } from "./policy-schema.ts";
import { reapplyPatch } from "./reapply-patch.ts";

let sandbox: Sandbox;
let cleanup: () => Promise<void>;
let policy: Policy;
const boxes: SandboxHandle[] = [];

before(async () => {
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanup = t.cleanup;
  policy = testImagePolicy();
});
after(async () => {
  for (const b of boxes) await b.destroy().catch(() => undefined);
  await cleanup?.();
});

async function box(files: Record<string, string>): Promise<SandboxHandle> {
  const tar = await packWorkspace(
    Object.entries(files).map(([path, data]) => ({
      path,
      type: "file" as const,
      mode: 0o644,
      data: Buffer.from(data),
    })),
  );
  const b = await sandbox.create({ ...testBoxSpec(), workspaceTar: tar });
  boxes.push(b);
  return b;
}

const ctx = (b: SandboxHandle): ToolContext => ({
  sandbox: b,
  limits: {
    maxFileReadBytes: 1 << 20,
    maxOutputBytes: 1 << 20,
    maxSearchMatches: 10,
    maxDiffBytes: 1 << 20,
    defaultTimeoutMs: 30_000,
    maxTimeoutMs: 30_000,
  },
  denyPatterns: [],
  commands: pickCommands({}, undefined),
});

async function read(b: SandboxHandle, path: string): Promise<string> {
  const r = await b.exec({ argv: ["cat", path], timeoutMs: 30_000, maxOutputBytes: 1 << 20 });
  return r.exitCode === 0 ? r.stdout : `(exit ${r.exitCode})`;
}

const input = { path: "a.txt", edits: [{ oldText: "two", newText: "TWO" }] };
const upload = { "a.txt": "one\ntwo\nthree\n" };

describe("reapplyPatch", () => {
  it("a patch that reproduces its recorded diff is written again, exactly (also behind an approval preview)", async () => {
    const recorded = await repoPatch.execute(ctx(await box(upload)), input);
    for (const doc of [recorded, { preview: { summary: "x" }, result: recorded }]) {
      const fresh = await box(upload);
      const r = await reapplyPatch({
        sandbox: fresh,
        policy,
        inputJson: JSON.stringify(input),
        recorded: doc,
        secrets: () => [],
      });
      assert.deepEqual(r, { ok: true });
      assert.equal(await read(fresh, "a.txt"), "one\nTWO\nthree\n");
    }
  });

  it("a file that is not what the call saw (a lost command changed it) is refused and left untouched", async () => {
    const recorded = await repoPatch.execute(ctx(await box(upload)), input);
    const fresh = await box({ "a.txt": "zero\none\ntwo\nthree\n" });
    const r = await reapplyPatch({
      sandbox: fresh,
      policy,
      inputJson: JSON.stringify(input),
      recorded,
      secrets: () => [],
    });
    assert.equal(r.ok, false);
    assert.match(r.ok ? "" : r.why, /different diff/);
    assert.equal(await read(fresh, "a.txt"), "zero\none\ntwo\nthree\n");
  });

  it("a file that is gone (created by a lost command) is refused", async () => {
    const recorded = await repoPatch.execute(ctx(await box(upload)), input);
    const fresh = await box({ "b.txt": "x" });
    const r = await reapplyPatch({
      sandbox: fresh,
      policy,
      inputJson: JSON.stringify(input),
      recorded,
      secrets: () => [],
    });
    assert.equal(r.ok, false);
    assert.match(r.ok ? "" : r.why, /no longer applies/);
  });

  it("hostile records: a secret placeholder or redaction marker, a broken input, no recorded summary — refused, nothing written", async () => {
    const fresh = await box(upload);
    const recorded = { changed: true, hunks: 1 };
    const cases: [string, unknown, RegExp][] = [
      [
        JSON.stringify({ path: "a.txt", edits: [{ oldText: "two", newText: "$ENV.TOKEN" }] }),
        recorded,
        /secret/,
      ],
      [
        JSON.stringify({ path: "a.txt", edits: [{ oldText: "two", newText: "[REDACTED]" }] }),
        recorded,
        /secret/,
      ],
      ["{not json", recorded, /not JSON/],
      [JSON.stringify({ path: "a.txt" }), recorded, /not a valid repo\.patch/],
      [
        JSON.stringify({ path: "../etc/passwd", edits: [{ oldText: "a", newText: "b" }] }),
        recorded,
        /no longer applies/,
      ],
      [JSON.stringify(input), undefined, /no summary/],
      [JSON.stringify(input), "a string", /no summary/],
    ];
    for (const [inputJson, doc, why] of cases) {
      const r = await reapplyPatch({
        sandbox: fresh,
        policy,
        inputJson,
        recorded: doc,
        secrets: () => [],
      });
      assert.equal(r.ok, false, inputJson);
      assert.match(r.ok ? "" : r.why, why, inputJson);
    }
    assert.equal(await read(fresh, "a.txt"), upload["a.txt"]);
  });

  it("a recovery container lost under the re-apply: thrown, never reported as a patch that no longer applies", async () => {
    const recorded = await repoPatch.execute(ctx(await box(upload)), input);
    const fresh = await box(upload);
    await new Docker().getContainer(fresh.id).kill();
    await assert.rejects(
      reapplyPatch({
        sandbox: fresh,
        policy,
        inputJson: JSON.stringify(input),
        recorded,
        secrets: () => [],
      }),
      /lost|not running|no such container|is not running/i,
    );
  });
});
