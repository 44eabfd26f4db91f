/**
 * The API over archives, in process (createRouterTransport, the real handlers, the embedded
 * log): an archived run the live log still holds is served from the live log and writes
 * are not refused as archived; once the live log lacks it, the archive answers for its
 * tenant only — another tenant gets NOT_FOUND for reads and writes alike — and a damaged
 * archive is never served.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createClient,
  createRouterTransport,
  type Interceptor,
} from "@connectrpc/connect";
import { ulid } from "ulid";
import { kPrincipal } from "../api/context.ts";
import { archivedReadOnlyInterceptor } from "../api/interceptors/archived-read-only.ts";
import { errorInterceptor } from "../api/interceptors/errors.ts";
import { registerRunService } from "../api/routes.ts";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { ROLES } from "../auth/tokens.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { RunCompletedSchema, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { RunProjectionCache } from "../projections/run-cache.ts";
import { ArchiveFallbackLog } from "./archive-fallback-log.ts";
import { ArchiveShelf } from "./archive-shelf.ts";
import { archiveRun } from "./write-archive.ts";

const root = mkdtempSync(join(tmpdir(), "agentd-archive-api-"));
const archiveDir = join(root, "archive");
let live: FileEventLog;
let artifacts: FsArtifactStore;

before(async () => {
  live = await openFileEventLog({ dir: join(root, "log") });
  artifacts = new FsArtifactStore(join(root, "artifacts"));
});
after(async () => {
  await live.close();
  rmSync(root, { recursive: true, force: true });
});

/** A client of the API as `tenant`, over `log` (the live log or a view without some runs). */
function api(tenant: string, inner: FileEventLog | ArchiveFallbackLog) {
  const served = new ArchiveFallbackLog(new ArchiveShelf({ dir: archiveDir }), inner);
  const deps = {
    log: served,
    runs: new RunProjectionCache({ log: served }),
    artifacts,
    archive: served,
  };
  const as: Interceptor = (next) => (req) => {
    req.contextValues.set(kPrincipal, { name: tenant, tenantId: tenant, roles: new Set(ROLES) });
    return next(req);
  };
  const transport = createRouterTransport((r) => registerRunService(r, deps), {
    router: {
      interceptors: [errorInterceptor(() => undefined), as, archivedReadOnlyInterceptor(served)],
    },
  });
  return createClient(RunService, transport);
}

async function endedRun(): Promise<string> {
  const runId = ulid();
  await live.append({
    runId,
    sessionId: "s",
    tenantId: "acme",
    payload: {
      case: "runQueued",
      value: create(RunQueuedSchema, { tenantId: "acme", prompt: "p" }),
    },
  });
  await live.append({
    runId,
    sessionId: "s",
    payload: { case: "runCompleted", value: create(RunCompletedSchema, { summary: "ok" }) },
  });
  await archiveRun({ log: live, artifacts, dir: archiveDir }, "acme", runId);
  return runId;
}

/** The archives alone: a log that holds no run (as after the deletion). */
const emptyLog = () => new ArchiveFallbackLog({ find: async () => undefined });

async function code(p: Promise<unknown>): Promise<{ code: Code; message: string }> {
  try {
    await p;
    return { code: Code.Unknown + 100, message: "accepted" };
  } catch (err) {
    assert.ok(err instanceof ConnectError, String(err));
    return { code: err.code, message: err.message };
  }
}

describe("the API over archives", { timeout: 60_000 }, () => {
  it("a run the live log still holds is the live log's: no archived refusal", async () => {
    const runId = await endedRun();
    const acme = api("acme", live);
    assert.equal((await acme.getRun({ runId })).run?.state, RunState.COMPLETED);
    const res = await acme.cancelRun({ runId, reason: "x" });
    assert.equal(res.run?.state, RunState.COMPLETED, "already ended, not refused as archived");
  });

  it("from the archive: its tenant reads and is refused writes by name; another tenant gets NOT_FOUND", async () => {
    const runId = await endedRun();
    const acme = api("acme", emptyLog());
    const globex = api("globex", emptyLog());
    assert.equal((await acme.getRun({ runId })).run?.state, RunState.COMPLETED);
    const refused = await code(acme.cancelRun({ runId, reason: "x" }));
    assert.equal(refused.code, Code.FailedPrecondition);
    assert.match(
      refused.message,
      /is archived and served read-only from its archive: CancelRun is refused/,
    );
    // One call at a time: a second rejected promise must not wait unobserved.
    for (const call of [
      () => globex.getRun({ runId }),
      () => globex.cancelRun({ runId, reason: "x" }),
    ]) {
      const r = await code(call());
      assert.equal(r.code, Code.NotFound, r.message);
      assert.doesNotMatch(r.message, /archived/);
    }
  });

  it("a damaged archive is never served", async () => {
    const runId = await endedRun();
    writeFileSync(join(archiveDir, "acme", runId, "head.json"), "{}\n");
    const r = await code(api("acme", emptyLog()).getRun({ runId }));
    assert.notEqual(r.code, Code.Unknown + 100, "not served");
    assert.notEqual(r.code, Code.NotFound);
  });
});
