/**
 * Fair uploads against a real `agentd server` (private Redis, grpc-js clients): two
 * UploadWorkspace streams of one tenant that go quiet half way hold no unpack slot (the
 * server has two), so another tenant's upload and inline CreateRun go through meanwhile;
 * a tenant's streams past --max-uploads-per-tenant are refused with RESOURCE_EXHAUSTED, and
 * so is its inline CreateRun archive (it takes a turn like a stream); a stream that sends
 * nothing for --upload-idle-ms, or trickles under --upload-min-bytes-per-s, is cut with
 * DEADLINE_EXCEEDED naming the flag and stores nothing; a cancelled stream gives its turn
 * back. (Round-robin between tenants: api/workspace-upload.test.ts.)
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import type { AgentdProcess } from "../testing/agentd-process.ts";
import { type Stack, sleep, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";
import { tarOf } from "../testing/tar.ts";

const MiB = 1024 * 1024;
/** How long a call that should go through may take on a loaded machine before it counts as stuck. */
const STUCK_MS = 90_000;

let stack: Stack;
before(async () => {
  stack = await startStack({
    env: { AGENTD_MAX_CONCURRENT_UNPACKS: "2", AGENTD_MAX_UPLOADS_PER_TENANT: "2" },
  });
});
after(async () => {
  await stack?.stop();
});

/** A tar (or tar.gz) of two files of random text (each archive its own digest), in two halves. */
async function halves(gzip = false): Promise<[Buffer, Buffer]> {
  const plain = await tarOf([
    { name: "a.bin", data: randomBytes(MiB).toString("base64") },
    { name: "b.bin", data: randomBytes(MiB).toString("base64") },
  ]);
  const tar = gzip ? gzipSync(plain) : plain;
  const mid = Math.floor(tar.length / 2);
  return [tar.subarray(0, mid), tar.subarray(mid)];
}

/** `p`, or a failure saying what did not answer within STUCK_MS. */
function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} got no answer in ${STUCK_MS} ms: it waits for a slot`)),
      STUCK_MS,
    );
  });
  return Promise.race([p, stuck]).finally(() => clearTimeout(timer));
}

/** The stored blobs (none before the first upload made the directory). */
const blobs = (): string[] =>
  !existsSync(join(stack.dir, "artifacts", "sha256"))
    ? []
    : readdirSync(join(stack.dir, "artifacts", "sha256"), { recursive: true, withFileTypes: true })
        .filter((d) => d.isFile())
        .map((d) => d.name)
        .sort();

const settled = (p: Promise<unknown>): Promise<boolean> =>
  Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    sleep(0).then(() => false),
  ]);

/** One stream per archive of `client`'s tenant, each with its first half sent and still open. */
async function holdTurns(client: GrpcRunClient, archives: [Buffer, Buffer][]) {
  const open = archives.map(() => client.openUpload());
  await Promise.all(open.map((u, i) => u.write(archives[i]?.[0] ?? Buffer.alloc(0))));
  await sleep(500); // the halves reach the server
  const ended = await Promise.all(open.map((u) => settled(u.result)));
  assert.deepEqual(
    ended,
    archives.map(() => false),
    "every stream is open on the server",
  );
  return open;
}

describe("fair uploads", { timeout: 300_000 }, () => {
  it("two idle streams of one tenant hold no slot: another tenant's upload and inline CreateRun go through", async () => {
    const acme = stack.client;
    const globex = new GrpcRunClient(stack.server.addr, TOKENS.globex);
    try {
      const archives = [await halves(), await halves(true)];
      // Tenant acme opens as many streams as the server has unpack slots, sends half an
      // archive on each (a tar, a tar.gz: gunzip takes input only as it drains), and goes
      // quiet.
      const slow = archives.map(() => acme.openUpload());
      await Promise.all(slow.map((u, i) => u.write(archives[i]?.[0] ?? Buffer.alloc(0))));
      await sleep(500); // the halves reach the server and are unpacked

      const [first, second] = await halves();
      const upload = globex.openUpload();
      await upload.write(first);
      await upload.write(second);
      upload.end();
      const uploaded = await within(upload.result, "globex's UploadWorkspace");
      assert.match(uploaded.digest, /^[0-9a-f]{64}$/);
      const inline = await tarOf([{ name: "README.md", data: "# hi\n" }]);
      const { run } = await within(
        globex.createRun({ prompt: "inline", workspaceTar: inline }),
        "globex's CreateRun with an inline workspace",
      );
      assert.match(run?.workspaceDigest ?? "", /^[0-9a-f]{64}$/);
      const byDigest = await within(
        globex.createRun({ prompt: "by digest", workspaceDigest: uploaded.digest }),
        "globex's CreateRun by digest",
      );
      assert.equal(byDigest.run?.workspaceDigest, uploaded.digest);

      // The quiet streams were waiting, not failed: they finish when their client does.
      for (const [i, u] of slow.entries()) {
        await u.write(archives[i]?.[1] ?? Buffer.alloc(0));
        u.end();
      }
      const done = await within(Promise.all(slow.map((u) => u.result)), "acme's slow uploads");
      assert.equal(new Set(done.map((d) => d.digest)).size, 2);
      for (const d of done) assert.ok(Number(d.sizeBytes) > 2 * MiB, String(d.sizeBytes));
    } finally {
      globex.close();
    }
  });

  it("a tenant's stream past --max-uploads-per-tenant is refused, naming it; others are not", async () => {
    const acme = stack.client;
    const globex = new GrpcRunClient(stack.server.addr, TOKENS.globex);
    try {
      const archives = [await halves(), await halves()];
      const open = archives.map(() => acme.openUpload());
      await Promise.all(open.map((u, i) => u.write(archives[i]?.[0] ?? Buffer.alloc(0))));
      await sleep(500); // both streams are open on the server
      const [a, b] = await halves();
      const third = acme.openUpload();
      await third.write(a).catch(() => undefined);
      await assertGrpcError(
        third.result,
        grpc.status.RESOURCE_EXHAUSTED,
        /workspace uploads open .*at most 2.*--max-uploads-per-tenant/,
      );
      // Another tenant is not counted against acme's turns.
      const other = globex.openUpload();
      await other.write(a);
      await other.write(b);
      other.end();
      assert.match((await within(other.result, "globex's upload")).digest, /^[0-9a-f]{64}$/);
      // A finished stream gives its turn back.
      const [first, rest] = open;
      assert.ok(first !== undefined && rest !== undefined);
      await first.write(archives[0]?.[1] ?? Buffer.alloc(0));
      first.end();
      await within(first.result, "acme's first upload");
      const again = acme.openUpload();
      await again.write(a);
      await again.write(b);
      again.end();
      assert.match((await within(again.result, "acme's next upload")).digest, /^[0-9a-f]{64}$/);
      rest.cancel();
      await assert.rejects(rest.result);
    } finally {
      globex.close();
    }
  });

  it("an inline CreateRun archive takes one of the tenant's upload turns like a stream", async () => {
    // A tenant of its own (initech): no turn of an earlier test's stream is still held.
    const acme = new GrpcRunClient(stack.server.addr, TOKENS.initech);
    const globex = new GrpcRunClient(stack.server.addr, TOKENS.globex);
    try {
      const archives = [await halves(), await halves()];
      const open = await holdTurns(acme, archives);
      const inline = await tarOf([{ name: "README.md", data: "# inline\n" }]);
      await assertGrpcError(
        acme.createRun({ prompt: "inline past the turns", workspaceTar: inline }),
        grpc.status.RESOURCE_EXHAUSTED,
        /workspace uploads open .*at most 2.*--max-uploads-per-tenant/,
      );
      // Another tenant's inline archive is not counted against acme's turns.
      const other = await within(
        globex.createRun({ prompt: "inline", workspaceTar: inline }),
        "globex's CreateRun with an inline workspace",
      );
      assert.match(other.run?.workspaceDigest ?? "", /^[0-9a-f]{64}$/);
      // A finished stream gives its turn back, and acme's inline archive goes through.
      const [first, rest] = open;
      assert.ok(first !== undefined && rest !== undefined);
      await first.write(archives[0]?.[1] ?? Buffer.alloc(0));
      first.end();
      await within(first.result, "acme's first upload");
      const { run } = await within(
        acme.createRun({ prompt: "inline in turn", workspaceTar: inline }),
        "acme's CreateRun with an inline workspace",
      );
      assert.equal(run?.workspaceDigest, other.run?.workspaceDigest);
      rest.cancel();
      await assert.rejects(rest.result);
      await acme.cancelRun(run?.runId ?? "", "end of test");
      await globex.cancelRun(other.run?.runId ?? "", "end of test");
    } finally {
      acme.close();
      globex.close();
    }
  });
});

describe("--upload-idle-ms", { timeout: 300_000 }, () => {
  let server: AgentdProcess;
  let client: GrpcRunClient;
  before(async () => {
    server = await stack.startServer({
      env: {
        AGENTD_UPLOAD_IDLE_MS: "2000",
        AGENTD_MAX_UPLOADS_PER_TENANT: "1",
        AGENTD_UPLOAD_MIN_BYTES_PER_S: "65536",
      },
    });
    client = new GrpcRunClient(server.addr, TOKENS.initech);
  });
  after(async () => {
    client?.close();
    await server?.stop("SIGKILL");
  });

  it("cuts a stream that sends nothing for that long, stores nothing, and gives the turn back", async () => {
    const before = blobs();
    const [first, second] = await halves();
    const idle = client.openUpload();
    await idle.write(first);
    // No more bytes: the server cuts the stream once it waited 2 s for them.
    await within(
      assertGrpcError(
        idle.result,
        grpc.status.DEADLINE_EXCEEDED,
        /upload idle: no bytes for 2000 ms.*--upload-idle-ms/,
      ),
      "the idle upload's cut",
    );
    assert.deepEqual(blobs(), before, "nothing stored for the cut upload");
    assert.deepEqual(readdirSync(join(stack.dir, "artifacts", "tmp")), [], "no temp file left");
    // A stream that never sent a byte is cut too.
    const silent = client.openUpload();
    await within(
      assertGrpcError(silent.result, grpc.status.DEADLINE_EXCEEDED, /--upload-idle-ms/),
      "the silent upload's cut",
    );
    // The tenant's one turn (--max-uploads-per-tenant 1) came back with each cut.
    const next = client.openUpload();
    await next.write(first);
    await next.write(second);
    next.end();
    assert.match((await within(next.result, "the next upload")).digest, /^[0-9a-f]{64}$/);
  });

  it("cuts a stream that trickles bytes under --upload-min-bytes-per-s, naming it, and gives the turn back", async () => {
    const before = blobs();
    const [first, second] = await halves();
    const slow = client.openUpload();
    // A byte every 100 ms keeps the idle cut away for ever; 20 bytes in a 2 s window are
    // far under 65536 bytes/s.
    let settledYet = false;
    slow.result.then(
      () => {
        settledYet = true;
      },
      () => {
        settledYet = true;
      },
    );
    const trickle = (async () => {
      for (let i = 0; !settledYet && i < 3000; i++) {
        await slow.write(first.subarray(i, i + 1)).catch(() => undefined);
        await sleep(100);
      }
    })();
    await within(
      assertGrpcError(
        slow.result,
        grpc.status.DEADLINE_EXCEEDED,
        /upload too slow: \d+ bytes in 2000 ms .*--upload-min-bytes-per-s \(65536 bytes\/s\)/,
      ),
      "the trickling upload's cut",
    );
    await trickle;
    assert.deepEqual(blobs(), before, "nothing stored for the cut upload");
    // A client at a real rate goes through, in the tenant's one turn the cut gave back.
    const next = client.openUpload();
    await next.write(first);
    await next.write(second);
    next.end();
    assert.match((await within(next.result, "the next upload")).digest, /^[0-9a-f]{64}$/);
  });
});

describe("a cancelled upload", { timeout: 300_000 }, () => {
  let server: AgentdProcess;
  let client: GrpcRunClient;
  before(async () => {
    // The idle cut is an hour away: only the cancel can give the turn back.
    server = await stack.startServer({
      env: { AGENTD_UPLOAD_IDLE_MS: "3600000", AGENTD_MAX_UPLOADS_PER_TENANT: "1" },
    });
    client = new GrpcRunClient(server.addr, TOKENS.initech);
  });
  after(async () => {
    client?.close();
    await server?.stop("SIGKILL");
  });

  it("gives its tenant's turn back when the client cancels half way, and stores nothing", async () => {
    const before = blobs();
    const [first, second] = await halves();
    const gone = client.openUpload();
    await gone.write(first);
    await sleep(500); // the half reaches the server
    gone.cancel();
    await assert.rejects(gone.result);
    // The tenant's one turn comes back: a new stream is taken, not refused.
    for (let waited = 0; ; waited += 500) {
      const next = client.openUpload();
      await next.write(first).catch(() => undefined);
      await sleep(500);
      if (!(await settled(next.result))) {
        await next.write(second);
        next.end();
        assert.match((await within(next.result, "the next upload")).digest, /^[0-9a-f]{64}$/);
        break;
      }
      await assertGrpcError(next.result, grpc.status.RESOURCE_EXHAUSTED);
      if (waited > STUCK_MS) throw new Error("the cancelled upload kept its tenant's turn");
    }
    assert.equal(blobs().length, before.length + 2, "the next upload and its receipt only");
  });
});
