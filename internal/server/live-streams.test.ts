/**
 * A token revoked, moved to another tenant or left with fewer roles while its streams are
 * open (auth file edited, SIGHUP): its gRPC streams end with UNAUTHENTICATED (revoked) or
 * PERMISSION_DENIED (moved, fewer roles) and get no event after; the SSE feed is cut, and
 * reopening is refused; a stream of a token still in the file goes on. Real `agentd
 * server` on a private Redis.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { writeAuthFile } from "../testing/agentd-process.ts";
import { AUTH, type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, grpc } from "../testing/grpc-run-client.ts";
import { tarOf } from "../testing/tar.ts";

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack?.stop();
});

/** An SSE response kept open; resolves when the server ends or cuts it. */
function sse(token: string): { ended: Promise<string>; abort(): void } {
  const ac = new AbortController();
  const ended = (async () => {
    try {
      const res = await fetch(`${stack.server.url}/v1/events`, {
        headers: { authorization: `Bearer ${token}` },
        signal: ac.signal,
      });
      if (res.status !== 200) return `status ${res.status}`;
      for await (const _ of res.body as ReadableStream<Uint8Array>) {
        // reading until the end
      }
      return "ended";
    } catch (err) {
      return ac.signal.aborted ? "aborted" : `cut: ${(err as Error).message}`;
    }
  })();
  return { ended, abort: () => ac.abort() };
}

/** Rewrites the auth file, SIGHUPs the server and waits until `probe` says it took effect. */
async function reloadAuth(tokens: typeof AUTH, probe: () => Promise<boolean>): Promise<void> {
  writeAuthFile(stack.dir, tokens);
  process.kill(stack.server.pid, "SIGHUP");
  const deadline = Date.now() + 60_000;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error("the auth reload did not take effect in 60 s");
    await new Promise((r) => setTimeout(r, 100));
  }
}

const canRead = (runId: string, token: string) => () =>
  stack.client.getRun(runId, token).then(
    () => true,
    () => false,
  );

/** WatchEvents over the Connect protocol (HTTP/1.1): the run ids it saw and how it ended. */
function connectWatch(token: string): { runIds: string[]; ended: Promise<string> } {
  const rpc = createClient(
    RunService,
    createConnectTransport({ baseUrl: stack.server.url, httpVersion: "1.1" }),
  );
  const runIds: string[] = [];
  const ended = (async () => {
    try {
      const feed = rpc.watchEvents(
        { fromOldest: true },
        { headers: { authorization: `Bearer ${token}` } },
      );
      for await (const m of feed) runIds.push(m.event?.runId ?? "");
      return "ended";
    } catch (err) {
      return Code[ConnectError.from(err).code] ?? "unknown";
    }
  })();
  return { runIds, ended };
}

it("a token moved to another tenant: its streams end PERMISSION_DENIED, no event after", async () => {
  const watch = connectWatch(TOKENS.acmeReader);
  const run = (await stack.client.createRun({ prompt: "moved" })).run as Run;
  const reader = stack.client.streamEvents({ runId: run.runId }, TOKENS.acmeReader);
  const owner = stack.client.streamEvents({ runId: run.runId });
  await reader.waitForCount(1);
  await owner.waitForCount(1);
  // The tenant feed over Connect is live: it has the run before the reload.
  for (let waited = 0; !watch.runIds.includes(run.runId); waited += 50) {
    if (waited > 60_000) throw new Error("WatchEvents did not show the run in 60 s");
    await new Promise((r) => setTimeout(r, 50));
  }
  const moved = AUTH.map((t) => (t.token === TOKENS.acmeReader ? { ...t, tenant: "globex" } : t));
  await reloadAuth(moved, async () => !(await canRead(run.runId, TOKENS.acmeReader)()));
  const end = await reader.done;
  assert.equal(end.status.code, grpc.status.PERMISSION_DENIED, end.status.details);
  assert.match(end.status.details, /moved to another tenant/);
  const seen = reader.events.length;
  // The old tenant's run goes on: none of its later events reach the moved token.
  await stack.client.cancelRun(run.runId, "end of test");
  await owner.done;
  assert.ok(owner.events.some((e) => e.payload.case === "runCancelled"));
  assert.equal(reader.events.length, seen);
  assert.ok(!reader.events.some((e) => e.payload.case === "runCancelled"));
  // The tenant feed over Connect ended with the status too.
  assert.equal(await watch.ended, "PermissionDenied");
  const fed = watch.runIds.length;
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(watch.runIds.length, fed, "nothing after its end");
  await reloadAuth(AUTH, canRead(run.runId, TOKENS.acmeReader));
});

it("a token left with fewer roles: its stream ends PERMISSION_DENIED; an unchanged one goes on", async () => {
  const run = (await stack.client.createRun({ prompt: "reduced" }, TOKENS.globex)).run as Run;
  const acmeRun = (await stack.client.createRun({ prompt: "unchanged" })).run as Run;
  const globex = stack.client.streamEvents({ runId: run.runId }, TOKENS.globex);
  const owner = stack.client.streamEvents({ runId: acmeRun.runId });
  await globex.waitForCount(1);
  await owner.waitForCount(1);
  const reduced = AUTH.map((t) =>
    t.token === TOKENS.globex ? { ...t, roles: ["read"] as typeof t.roles } : t,
  );
  const cannotCancel = () =>
    stack.client.cancelRun("01HZZZZZZZZZZZZZZZZZZZZZZZ", "probe", TOKENS.globex).then(
      () => false,
      (e: { code?: number }) => e.code === grpc.status.PERMISSION_DENIED,
    );
  await reloadAuth(reduced, cannotCancel);
  const end = await globex.done;
  assert.equal(end.status.code, grpc.status.PERMISSION_DENIED, end.status.details);
  assert.match(end.status.details, /lost the '(submit|approve|admin)' role/);
  // Another tenant's stream (acme, unchanged) is still open.
  const settled = await Promise.race([
    owner.done.then(() => "ended"),
    new Promise((r) => setTimeout(() => r("open"), 1000)),
  ]);
  assert.equal(settled, "open");
  await stack.client.cancelRun(acmeRun.runId, "end of test");
  await owner.done;
  await reloadAuth(AUTH, async () => !(await cannotCancel()));
  await stack.client.cancelRun(run.runId, "end of test", TOKENS.globex).catch(() => undefined);
});

it("a revoked token's open streams are cut on reload; another token's go on", async () => {
  const run = (await stack.client.createRun({ prompt: "watched" })).run as Run;
  const reader = stack.client.streamEvents({ runId: run.runId }, TOKENS.acmeReader);
  const owner = stack.client.streamEvents({ runId: run.runId });
  await reader.waitForCount(1);
  await owner.waitForCount(1);
  const readerSse = sse(TOKENS.acmeReader);
  const ownerSse = sse(TOKENS.acme);
  await new Promise((r) => setTimeout(r, 500));

  writeAuthFile(
    stack.dir,
    AUTH.filter((t) => t.token !== TOKENS.acmeReader),
  );
  process.kill(stack.server.pid, "SIGHUP");
  // The run is still going: the reader's streams end only because the reload cut them.
  const end = await reader.done;
  assert.equal(end.status.code, grpc.status.UNAUTHENTICATED, end.status.details);
  assert.match(await readerSse.ended, /cut|ended/);

  // The owner's streams are still open and still deliver.
  const settled = await Promise.race([
    ownerSse.ended,
    new Promise((r) => setTimeout(() => r("open"), 1000)),
  ]);
  assert.equal(settled, "open");
  await stack.client.cancelRun(run.runId, "end of test");
  await owner.done;
  assert.ok(owner.events.some((e) => e.payload.case === "runCancelled"));
  ownerSse.abort();
  // Reopened, the revoked token is refused.
  const again = await stack.client.streamEvents({ runId: run.runId }, TOKENS.acmeReader).done;
  assert.equal(again.status.code, grpc.status.UNAUTHENTICATED);
});

/** The server's open WatchEvents streams (its agentd_event_streams_open{kind="watch"}). */
async function watchesOpen(): Promise<number> {
  const text = await (await fetch(`${stack.server.url}/metrics`)).text();
  const m = /^agentd_event_streams_open\{kind="watch"\} (\d+)/m.exec(text);
  return Number(m?.[1] ?? 0);
}

/** A grpc-js WatchEvents stream: how it ended (its status) and how many messages it got. */
function grpcWatch(token: string): { messages: () => number; ended: Promise<grpc.StatusObject> } {
  let n = 0;
  const call = stack.client.serverStream(
    RunService.method.watchEvents,
    { fromOldest: false },
    token,
  );
  call.on("data", () => n++);
  const ended = new Promise<grpc.StatusObject>((resolve) => {
    call.on("error", () => undefined);
    call.on("status", resolve);
  });
  return { messages: () => n, ended };
}

it("a stream that has sent nothing yet ends with its status on reload (gRPC and Connect)", async () => {
  const probe = await stack.client.createRun({ prompt: "probe" });
  const runId = probe.run?.runId ?? "";
  await reloadAuth(AUTH, canRead(runId, TOKENS.acmeReader)); // the reader is back
  // The feeds earlier tests closed are gone from the count first.
  for (let waited = 0; (await watchesOpen()) > 0; waited += 100) {
    if (waited > 60_000) throw new Error("earlier tests' feeds were still open after 60 s");
    await new Promise((r) => setTimeout(r, 100));
  }
  // No run of acme's starts meanwhile: neither feed has a message before the reload.
  const quietGrpc = grpcWatch(TOKENS.acmeReader);
  const quietConnect = connectWatch(TOKENS.acmeReader);
  for (let waited = 0; (await watchesOpen()) < 2; waited += 100) {
    if (waited > 60_000) throw new Error("the two WatchEvents streams did not open in 60 s");
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(quietGrpc.messages(), 0, "no message before the reload");
  const moved = AUTH.map((t) => (t.token === TOKENS.acmeReader ? { ...t, tenant: "globex" } : t));
  await reloadAuth(moved, async () => !(await canRead(runId, TOKENS.acmeReader)()));
  const end = await quietGrpc.ended;
  assert.equal(end.code, grpc.status.PERMISSION_DENIED, end.details);
  assert.match(end.details, /moved to another tenant/);
  assert.equal(await quietConnect.ended, "PermissionDenied");
  await stack.client.cancelRun(runId, "end of test");
  await reloadAuth(AUTH, canRead(runId, TOKENS.acmeReader));
});

it("an upload of a token removed or left without 'submit' ends with its status on reload", async () => {
  const tar = await tarOf([{ name: "a.txt", data: "x".repeat(256 * 1024) }]);
  const half = tar.subarray(0, 128 * 1024);
  // globex loses 'submit'; initech's token is removed: each upload is half way.
  const reduced = stack.client.openUpload({ auth: TOKENS.globex });
  const removed = stack.client.openUpload({ auth: TOKENS.initech });
  await reduced.write(half);
  await removed.write(half);
  await new Promise((r) => setTimeout(r, 500)); // the halves reach the server
  const changed = AUTH.flatMap((t) =>
    t.token === TOKENS.initech
      ? []
      : t.token === TOKENS.globex
        ? [{ ...t, roles: ["read"] as typeof t.roles }]
        : [t],
  );
  const cannotUpload = () =>
    stack.client.uploadWorkspace([half], { auth: TOKENS.globex }).then(
      () => false,
      (e: { code?: number }) => e.code === grpc.status.PERMISSION_DENIED,
    );
  await reloadAuth(changed, cannotUpload);
  // The uploads are still open from their clients' side: only the reload ends them.
  await assertGrpcError(reduced.result, grpc.status.PERMISSION_DENIED, /lost the 'submit' role/);
  await assertGrpcError(removed.result, grpc.status.UNAUTHENTICATED, /revoked/);
  reduced.cancel();
  removed.cancel();
  await reloadAuth(AUTH, async () => !(await cannotUpload()));
});

/**
 * A gRPC WatchEvents call whose request message is held back: the server has its headers
 * (and checked its token) but has read no message, so its handler has not started.
 * `send()` sends the message; `ended` is the grpc-status (or how the stream broke).
 */
function heldWatch(token: string): { send(): void; ended: Promise<string> } {
  const session = http2.connect(stack.server.url);
  session.on("error", () => undefined);
  const req = session.request({
    ":method": "POST",
    ":path": "/agentd.v1.RunService/WatchEvents",
    "content-type": "application/grpc",
    te: "trailers",
    authorization: `Bearer ${token}`,
  });
  const ended = new Promise<string>((resolve) => {
    let status = "no grpc-status";
    req.on("response", (h) => {
      if (h["grpc-status"] !== undefined) status = `${h["grpc-status"]} ${h["grpc-message"]}`;
    });
    req.on("trailers", (h) => {
      status = `${h["grpc-status"]} ${decodeURIComponent(String(h["grpc-message"]))}`;
    });
    req.on("data", () => undefined);
    req.on("error", (e) => resolve(`broken: ${e.message}`));
    req.on("close", () => {
      session.close();
      resolve(req.rstCode === http2.constants.NGHTTP2_NO_ERROR ? status : `reset ${req.rstCode}`);
    });
  });
  // An empty WatchEventsRequest: a 5-byte gRPC frame of length 0.
  return { send: () => req.end(Buffer.alloc(5)), ended };
}

it("a stream whose handler has not started yet ends with its status on reload", async () => {
  const run = (await stack.client.createRun({ prompt: "held" })).run as Run;
  const held = heldWatch(TOKENS.acmeReader);
  await new Promise((r) => setTimeout(r, 1000)); // its headers reach the server
  writeAuthFile(
    stack.dir,
    AUTH.filter((t) => t.token !== TOKENS.acmeReader),
  );
  process.kill(stack.server.pid, "SIGHUP");
  for (let waited = 0; await canRead(run.runId, TOKENS.acmeReader)(); waited += 100) {
    if (waited > 60_000) throw new Error("the auth reload did not take effect in 60 s");
    await new Promise((r) => setTimeout(r, 100));
  }
  held.send();
  assert.match(await held.ended, new RegExp(`^${grpc.status.UNAUTHENTICATED} .*revoked`));
  await stack.client.cancelRun(run.runId, "end of test");
  await reloadAuth(AUTH, canRead(run.runId, TOKENS.acmeReader));
});
