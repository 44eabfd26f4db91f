/**
 * CreateRun's `image` against a real `agentd server` with a policy that allows a few
 * images: an allowed reference is queued normalised (run.queued); one the policy does not
 * allow, a hostile one, or a tag under a digests-only policy (the strict profile's
 * sandbox.imageDigests) is INVALID_ARGUMENT naming `image`, and no run is made.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

const D = `sha256:${"b".repeat(64)}`;
let stack: Stack;
let strictClient: GrpcRunClient;

function policyFile(dir: string, name: string, sandbox: string): string {
  const path = join(dir, name);
  writeFileSync(path, `version: 1\nsandbox:\n${sandbox}`);
  return path;
}

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "agentd-image-policy-"));
  const open = policyFile(
    dir,
    "open.yaml",
    "  images: [127.0.0.1:5000/team/*, docker.io/library/python:3.12*]\n",
  );
  stack = await startStack({ env: { AGENTD_POLICY: open } });
  const strict = policyFile(
    dir,
    "strict.yaml",
    "  images: [127.0.0.1:5000/team/*]\n  imageDigests: true\n",
  );
  const server = await stack.startServer({ env: { AGENTD_POLICY: strict } });
  strictClient = new GrpcRunClient(server.addr, TOKENS.acme);
});
after(async () => {
  strictClient?.close();
  await stack?.stop();
});

describe("CreateRun image", { timeout: 60_000 }, () => {
  it("queues an allowed reference, normalised", async () => {
    const { run } = await stack.client.createRun({ prompt: "p", image: "python:3.12-slim" });
    const events = await stack.log.read(run?.runId as string, 0, 10);
    const q = events[0]?.event.payload;
    assert.equal(q?.case, "runQueued");
    assert.equal(q?.value.image, "docker.io/library/python:3.12-slim");
  });

  it("refuses what the policy does not allow, and hostile references, naming the field", async () => {
    const cases: [string, RegExp][] = [
      [
        "docker.io/library/node:24",
        /image: .*refused: it matches none of the policy's sandbox\.images/,
      ],
      ["127.0.0.1:5000/team/sub/app", /image: .*refused/],
      ["127.0.0.1:5000/Team/app", /image: .*lowercase/],
      ["127.0.0.1:5000/team/../app", /image: /],
      ["127.0.0.1:5000/team/app tag", /image: .*spaces/],
      [`127.0.0.1:5000/team/${"a".repeat(1000)}`, /image: .*longer than 512/],
      ["Python", /image: .*neither an image reference .* nor the name of one of agentd's images/],
      ["py thon", /image: .*neither/],
      ["\u0000", /image: .*neither/],
    ];
    for (const [image, re] of cases)
      await assertGrpcError(
        stack.client.createRun({ prompt: "p", image }),
        grpc.status.INVALID_ARGUMENT,
        re,
      );
  });

  it("passes the bare name of one of agentd's images on to the worker as it is", async () => {
    const { run } = await stack.client.createRun({ prompt: "p", image: "python" });
    const events = await stack.log.read(run?.runId as string, 0, 10);
    const q = events[0]?.event.payload;
    assert.equal(q?.case === "runQueued" && q.value.image, "python");
  });

  it("takes only digests under sandbox.imageDigests (the strict profile)", async () => {
    await assertGrpcError(
      strictClient.createRun({ prompt: "p", image: "127.0.0.1:5000/team/app:1" }),
      grpc.status.INVALID_ARGUMENT,
      /image: .*pinned by digest/,
    );
    const { run } = await strictClient.createRun({
      prompt: "p",
      image: `127.0.0.1:5000/team/app@${D}`,
    });
    assert.equal(run?.state !== undefined, true);
    const events = await stack.log.read(run?.runId as string, 0, 10);
    assert.equal(
      events[0]?.event.payload.case === "runQueued" && events[0].event.payload.value.image,
      `127.0.0.1:5000/team/app@${D}`,
    );
  });
});
