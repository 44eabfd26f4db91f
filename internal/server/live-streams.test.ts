/**
 * A token revoked while its streams are open (auth file edited, SIGHUP): every stream it
 * opened — gRPC StreamEvents and the SSE feed — is cut at once, and reopening it is
 * UNAUTHENTICATED; a stream of a token still in the file goes on. Real `agentd server` on
 * a private Redis.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import { writeAuthFile } from "../testing/agentd-process.ts";
import { AUTH, type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { grpc } from "../testing/grpc-run-client.ts";

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
  assert.notEqual(end.status.code, grpc.status.OK, "the reader's stream was cut");
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
