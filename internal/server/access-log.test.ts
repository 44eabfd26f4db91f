/**
 * The access log (--access-log FILE) of a real `agentd server`: a line for a unary call, a
 * refused call (UNAUTHENTICATED, no token name), a stream the client left (CANCELED, and no
 * error line in the server's own log), a hostile run id (escaped and cut); the debug log
 * carries none of these lines.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { type Stack, sleep, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, grpc } from "../testing/grpc-run-client.ts";
import { tarOf } from "../testing/tar.ts";
import { createAccessLog, MAX_ID } from "./access-log.ts";

let stack: Stack;
let accessFile: string;

before(async () => {
  accessFile = join(mkdtempSync(join(tmpdir(), "agentd-access-")), "logs", "access.log");
  stack = await startStack({ env: { AGENTD_ACCESS_LOG: accessFile } });
});

after(async () => {
  await stack?.stop();
});

type Line = Record<string, unknown>;

/** The server's own log lines at error level or above. */
function errorLines(): string[] {
  return stack.server
    .output()
    .split("\n")
    .filter((x) => /"level":(50|60)/.test(x));
}

function lines(): Line[] {
  let text = "";
  try {
    text = readFileSync(accessFile, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Line);
}

/** Waits (generously: the writer is asynchronous) for a line matching `pred`. */
async function lineWhere(pred: (l: Line) => boolean, what: string): Promise<Line> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const hit = lines().find(pred);
    if (hit !== undefined) return hit;
    if (Date.now() > deadline)
      throw new Error(`no access line for ${what} in 30 s:\n${JSON.stringify(lines(), null, 1)}`);
    await sleep(100);
  }
}

describe("the access log", { timeout: 180_000 }, () => {
  it("a unary call: who, tenant, rpc, run id, OK, duration, peer", async () => {
    const { run } = await stack.client.createRun({ prompt: "logged" });
    assert.ok(run);
    await stack.client.getRun(run.runId);
    const l = await lineWhere(
      (x) => x.rpc === "agentd.v1.RunService/GetRun" && x.run_id === run.runId,
      "GetRun",
    );
    assert.equal(l.result, "OK");
    assert.equal(l.tenant, "acme");
    assert.equal(typeof l.who, "string");
    assert.equal(l.log, "access");
    assert.equal(typeof l.duration_ms, "number");
    assert.equal(l.peer, "127.0.0.1");
    assert.equal(typeof l.time, "string");
    assert.doesNotMatch(JSON.stringify(l), /acme-[a-z0-9]+-all/, "the token itself is logged");
  });

  it("a refused call: UNAUTHENTICATED, no token name", async () => {
    await assertGrpcError(stack.client.listRuns({}, null), grpc.status.UNAUTHENTICATED, /./);
    const l = await lineWhere(
      (x) => x.rpc === "agentd.v1.RunService/ListRuns" && x.result === "UNAUTHENTICATED",
      "the refused ListRuns",
    );
    assert.equal(l.who, null);
    assert.equal(l.tenant, null);
  });

  it("a hostile run id: escaped and cut to MAX_ID characters", async () => {
    const hostile = `\u0000\n\u001b[31m${"r".repeat(10 * 1024)}`;
    await assertGrpcError(stack.client.getRun(hostile), grpc.status.INVALID_ARGUMENT, /run_id/);
    const l = await lineWhere(
      (x) => typeof x.run_id === "string" && x.run_id.startsWith("\u0000\n\u001b"),
      "the hostile GetRun",
    );
    assert.equal(l.result, "INVALID_ARGUMENT");
    assert.equal((l.run_id as string).length, MAX_ID + 1);
    const raw = readFileSync(accessFile, "utf8");
    assert.ok(!raw.includes("\u001b"), "a raw control character reached the file");
  });

  it("a stream the client left: CANCELED, and no error line in the server's log", async () => {
    const { run } = await stack.client.createRun({ prompt: "watched" });
    assert.ok(run);
    const stream = stack.client.streamEvents({ runId: run.runId });
    await stream.waitForCount(1);
    stream.cancel();
    const l = await lineWhere(
      (x) => x.rpc === "agentd.v1.RunService/StreamEvents" && x.run_id === run.runId,
      "the left StreamEvents",
    );
    assert.equal(l.result, "CANCELED");
    assert.deepEqual(errorLines(), [], "the server logged an error for a stream its client left");
  });

  it("WatchEvents over Connect (HTTP/1.1) the client aborts: CANCELED, no error line", async () => {
    const ac = new AbortController();
    const rpc = createClient(
      RunService,
      createConnectTransport({ baseUrl: stack.server.url, httpVersion: "1.1" }),
    );
    const feed = rpc.watchEvents(
      { fromOldest: true },
      { headers: { authorization: `Bearer ${TOKENS.globex}` }, signal: ac.signal },
    );
    const got = (async () => {
      try {
        for await (const _ of feed) ac.abort();
      } catch {
        // the abort ends the loop with an error on the client side: expected
      }
    })();
    await stack.client.createRun({ prompt: "fed" }, TOKENS.globex);
    await got;
    const l = await lineWhere(
      (x) => x.rpc === "agentd.v1.RunService/WatchEvents" && x.tenant === "globex",
      "the aborted WatchEvents",
    );
    assert.equal(l.result, "CANCELED");
    assert.deepEqual(errorLines(), [], "the server logged an error for a feed its client left");
  });

  it("UploadWorkspace: bytes_in counts the archive bytes", async () => {
    const archive = await tarOf([{ name: "a.txt", data: "hello" }]);
    await stack.client.uploadWorkspace([archive.subarray(0, 100), archive.subarray(100)]);
    const l = await lineWhere(
      (x) => x.rpc === "agentd.v1.RunService/UploadWorkspace",
      "the upload",
    );
    assert.equal(l.result, "OK");
    assert.equal(l.bytes_in, archive.byteLength);
  });

  it("SIGHUP reopens the file: lines go to the new file after a rotation", async () => {
    renameSync(accessFile, `${accessFile}.1`);
    process.kill(stack.server.pid, "SIGHUP");
    const deadline = Date.now() + 60_000;
    while (!existsSync(accessFile)) {
      if (Date.now() > deadline) throw new Error("no new access log file 60 s after SIGHUP");
      await stack.client.listRuns({});
      await sleep(200);
    }
    await lineWhere((x) => x.rpc === "agentd.v1.RunService/ListRuns", "ListRuns after SIGHUP");
  });

  it("a path that cannot be appended to is refused at start, naming the flag", () => {
    assert.throws(() => createAccessLog("/dev/null/x/access.log"), /--access-log: .*ENOTDIR/);
    assert.equal(createAccessLog("off"), undefined);
  });

  it("the debug log carries none of the access lines", () => {
    assert.ok(lines().length >= 1);
    assert.doesNotMatch(stack.server.output(), /"log":"access"/);
  });
});
