/**
 * Dependency failures forced on a real `agentd server` (a Redis that answers script errors
 * and wrong-type errors, an artifact directory that cannot be written) reach clients —
 * gRPC, Connect, Server-Sent Events — without script hashes, script line numbers, stack
 * frames or host paths, and with an incident id that the server log holds with the whole
 * error. Internal errors stay INTERNAL with only the incident id.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import * as tar from "tar-stream";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

let stack: Stack;

before(async () => {
  stack = await startStack();
});

after(async () => {
  await stack?.stop();
});

/** What a client must never see. */
const INTERNALS: readonly RegExp[] = [
  /f_[0-9a-f]{40}/,
  /\b[0-9a-f]{40}\b/,
  /user_script/,
  /\sat \S+/,
  /(^|[\s'(])\/(tmp|work|home|var|data|root)\//,
];

function assertClientSafe(message: string): string {
  for (const re of INTERNALS)
    assert.doesNotMatch(message, re, `${re} in ${JSON.stringify(message)}`);
  const m = /\(incident ([0-9A-Z]{26})\)$/.exec(message);
  assert.ok(m, `no incident id in ${JSON.stringify(message)}`);
  return m[1] as string;
}

/**
 * The server's log line for `incident`, which must carry the whole error. The log is
 * written asynchronously: the answer can reach the client before the line reaches us.
 */
async function loggedIncident(server: AgentdProcess, incident: string): Promise<string> {
  for (let i = 0; i < 40; i++) {
    const line = server
      .output()
      .split("\n")
      .find((l) => l.includes(incident));
    if (line !== undefined) return line;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`incident ${incident} is not in the server log`);
}

async function tarGz(name: string, data: string): Promise<Buffer> {
  const pack = tar.pack();
  const out: Buffer[] = [];
  pack.on("data", (c: unknown) => out.push(c as Buffer));
  const ended = new Promise<void>((r) => pack.on("end", () => r()));
  pack.entry({ name }, data);
  pack.finalize();
  await ended;
  return gzipSync(Buffer.concat(out));
}

describe("a Redis that answers errors", { timeout: 60_000 }, () => {
  it("a script error (GetRun's queue position): no hash, no script line, an incident id", async () => {
    const { run } = await stack.client.createRun({ prompt: "queued" });
    const runId = run?.runId ?? "";
    const redis = stack.redis.client();
    try {
      // The queue record turns into a string: the position script fails on HMGET.
      await redis.del(`agentd:queue:run:${runId}`);
      await redis.set(`agentd:queue:run:${runId}`, "not a hash");
    } finally {
      redis.disconnect();
    }
    const err = await assertGrpcError(stack.client.getRun(runId), grpc.status.UNAVAILABLE);
    const incident = assertClientSafe(decodeURIComponent(err.details));
    // The operator still gets everything, under the id the client was given.
    assert.match(await loggedIncident(stack.server, incident), /user_script:\d+/);

    // The same over Connect (JSON, HTTP/1.1).
    const res = await fetch(`${stack.server.url}/agentd.v1.RunService/GetRun`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKENS.acme}` },
      body: JSON.stringify({ runId }),
    });
    assert.equal(res.status, 503);
    const body = (await res.json()) as { code: string; message: string };
    assert.equal(body.code, "unavailable");
    assertClientSafe(body.message);
  });

  it("a wrong-type error under Server-Sent Events: JSON without internals, an incident id", async () => {
    const { run } = await stack.client.createRun({ prompt: "sse" });
    const runId = run?.runId ?? "";
    const redis = stack.redis.client();
    try {
      await redis.del(`agentd:run:${runId}:meta`);
      await redis.set(`agentd:run:${runId}:meta`, "not a hash");
    } finally {
      redis.disconnect();
    }
    const res = await fetch(`${stack.server.url}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${TOKENS.acme}` },
    });
    assert.equal(res.status, 503);
    const body = (await res.json()) as { code: string; message: string };
    assert.equal(body.code, "unavailable");
    const incident = assertClientSafe(body.message);
    assert.match(await loggedIncident(stack.server, incident), /WRONGTYPE/);
  });
});

describe("an artifact store that cannot be written", { timeout: 60_000 }, () => {
  let server: AgentdProcess;
  let broken: string;

  before(async () => {
    broken = join(stack.dir, "broken-artifacts");
    mkdirSync(broken);
    // A file where the store's temp directory goes: every write fails with a path error.
    writeFileSync(join(broken, "tmp"), "not a directory");
    const flags = [...stack.flags];
    flags[flags.indexOf("--artifact-dir") + 1] = broken;
    server = await startAgentd("server", flags);
  });

  after(async () => {
    await server?.stop("SIGKILL");
  });

  it("CreateRun with a workspace: INTERNAL with only an incident id, the path in the log", async () => {
    const client = new GrpcRunClient(server.addr, TOKENS.acme);
    try {
      const err = await assertGrpcError(
        client.createRun({ prompt: "p", workspaceTar: await tarGz("a.txt", "a") }),
        grpc.status.INTERNAL,
      );
      const message = decodeURIComponent(err.details);
      assert.match(message, /^internal error \(incident [0-9A-Z]{26}\)$/);
      const incident = assertClientSafe(message);
      const logged = await loggedIncident(server, incident);
      assert.ok(logged.includes(broken), "the log names the path the client did not see");
      // The store is only needed for workspaces: other runs are still created.
      const { run } = await client.createRun({ prompt: "no workspace" });
      assert.match(run?.runId ?? "", /^[0-9A-Z]{26}$/);
    } finally {
      client.close();
    }
  });
});
