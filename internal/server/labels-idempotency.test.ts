/**
 * Labels and idempotency keys through real servers: `agentd server` on a private Redis
 * (two servers racing one key), and `agentd dev` keeping its keys across a restart. The
 * clients are grpc-js; every refusal names its field.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";
import { tarOf } from "../testing/tar.ts";

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack?.stop();
});

describe("labels", { timeout: 60_000 }, () => {
  it("refuses labels Kubernetes would refuse, naming the label", async () => {
    await assertGrpcError(
      stack.client.createRun({ prompt: "p", labels: { commit: "https://x/y" } }),
      grpc.status.INVALID_ARGUMENT,
      /labels\["commit"\]: value must be/,
    );
    await assertGrpcError(
      stack.client.createRun({ prompt: "p", labels: { "-bad": "v" } }),
      grpc.status.INVALID_ARGUMENT,
      /labels\["-bad"\]: key name/,
    );
  });

  it("ListRuns selects by labels; a bad selector is INVALID_ARGUMENT naming the term", async () => {
    const pipeline = `p${ulid().toLowerCase()}`;
    const made: Record<string, string> = {};
    for (const [name, job] of [
      ["a", "build"],
      ["b", "test"],
      ["c", "test"],
    ] as const) {
      const { run } = await stack.client.createRun({
        prompt: name,
        labels: { pipeline, job, ...(name === "c" ? { flaky: "" } : {}) },
      });
      made[name] = run?.runId as string;
    }
    const ids = async (labelSelector: string, pageSize = 50) => {
      const out: string[] = [];
      let pageToken = "";
      for (;;) {
        const res = await stack.client.listRuns({ labelSelector, pageSize, pageToken });
        out.push(...res.runs.map((r) => r.runId));
        if (res.nextPageToken === "") return out.sort();
        pageToken = res.nextPageToken;
      }
    };
    const sel = (s: string) => `pipeline=${pipeline},${s}`;
    assert.deepEqual(await ids(sel("job=test")), [made.b, made.c].sort());
    assert.deepEqual(await ids(sel("job!=test")), [made.a]);
    assert.deepEqual(await ids(sel("flaky")), [made.c]);
    assert.deepEqual(await ids(sel("!flaky"), 1), [made.a, made.b].sort(), "paged one by one");
    assert.deepEqual(await ids(sel("job in (build,test)")), Object.values(made).sort());
    // Another tenant sees none of them.
    const other = new GrpcRunClient(stack.server.addr, TOKENS.globex);
    try {
      assert.deepEqual((await other.listRuns({ labelSelector: `pipeline=${pipeline}` })).runs, []);
    } finally {
      other.close();
    }
    await assertGrpcError(
      stack.client.listRuns({ labelSelector: "job in (a" }),
      grpc.status.INVALID_ARGUMENT,
      /label_selector: unbalanced/,
    );
    // A page token is bound to its selector.
    const first = await stack.client.listRuns({
      labelSelector: `pipeline=${pipeline}`,
      pageSize: 1,
    });
    await assertGrpcError(
      stack.client.listRuns({ labelSelector: sel("job=test"), pageToken: first.nextPageToken }),
      grpc.status.INVALID_ARGUMENT,
      /page_token/,
    );
  });
});

describe("idempotency keys", { timeout: 60_000 }, () => {
  it("the same key and request return the same run; another request ALREADY_EXISTS", async () => {
    const key = `ci-${ulid()}`;
    const workspaceTar = await tarOf([{ name: "a.txt", data: "a\n" }]);
    const req = { prompt: "fix it", labels: { job: "j1" }, workspaceTar, idempotencyKey: key };
    const { run: first } = await stack.client.createRun(req);
    const { run: again } = await stack.client.createRun(req);
    assert.equal(again?.runId, first?.runId);
    assert.equal(again?.sessionId, first?.sessionId);
    // The same archive packed again (another tar of the same files) is the same request.
    const { run: repacked } = await stack.client.createRun({
      ...req,
      workspaceTar: await tarOf([{ name: "a.txt", data: "a\n" }]),
    });
    assert.equal(repacked?.runId, first?.runId);
    for (const change of [
      { prompt: "fix it differently" },
      { labels: { job: "j2" } },
      { workspaceTar: await tarOf([{ name: "a.txt", data: "b\n" }]) },
      { priority: 1 },
    ])
      await assertGrpcError(
        stack.client.createRun({ ...req, ...change }),
        grpc.status.ALREADY_EXISTS,
        new RegExp(`idempotency_key: already used by run ${first?.runId}`),
      );
    // Keys are per tenant.
    const other = new GrpcRunClient(stack.server.addr, TOKENS.globex);
    try {
      const { run: theirs } = await other.createRun(req);
      assert.notEqual(theirs?.runId, first?.runId);
    } finally {
      other.close();
    }
    const listed = await stack.client.listRuns({ labelSelector: "job=j1" });
    assert.equal(listed.runs.filter((r) => r.prompt === "fix it").length, 1, "one run, not four");
  });

  it("a malformed key is INVALID_ARGUMENT naming idempotency_key", async () => {
    for (const key of ["a b", "x".repeat(256), "é", "k\n"])
      await assertGrpcError(
        stack.client.createRun({ prompt: "p", idempotencyKey: key }),
        grpc.status.INVALID_ARGUMENT,
        /idempotency_key: must be/,
      );
  });

  it("twenty concurrent CreateRuns with one key on two servers make one run", async () => {
    const second = await stack.startServer();
    const c2 = new GrpcRunClient(second.addr, TOKENS.acme);
    try {
      const key = `race-${ulid()}`;
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 === 0 ? stack.client : c2).createRun({ prompt: "race", idempotencyKey: key }),
        ),
      );
      const ids = new Set(results.map((r) => r.run?.runId));
      assert.equal(ids.size, 1, `one run: ${[...ids].join(", ")}`);
    } finally {
      c2.close();
    }
  });
});

describe("idempotency keys in agentd dev", { timeout: 60_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "agentd-dev-idem-"));
  const procs: AgentdProcess[] = [];
  after(async () => {
    await Promise.allSettled(procs.map((p) => p.stop("SIGKILL")));
    rmSync(dir, { recursive: true, force: true });
  });
  it("survive a restart of the process", async () => {
    const start = async () => {
      const p = await startAgentd("dev", ["--data-dir", dir]);
      procs.push(p);
      return p;
    };
    let dev = await start();
    let client = new GrpcRunClient(dev.addr);
    const req = { prompt: "once", idempotencyKey: "k-1" };
    const { run } = await client.createRun(req);
    client.close();
    await dev.stop("SIGKILL");
    dev = await start();
    client = new GrpcRunClient(dev.addr);
    try {
      const { run: again } = await client.createRun(req);
      assert.equal(again?.runId, run?.runId);
      await assertGrpcError(
        client.createRun({ ...req, prompt: "twice" }),
        grpc.status.ALREADY_EXISTS,
        /idempotency_key/,
      );
    } finally {
      client.close();
    }
  });
});
