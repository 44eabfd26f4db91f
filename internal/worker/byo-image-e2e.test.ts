/**
 * Runs in an image of their own, end to end with real parts: a private registry
 * (docker-registry, htpasswd) holding an image with no shell at all, the worker's policy
 * allowing it (sandbox.images) with credentials from the env secret provider
 * (sandbox.registryAuth), the embedded event log, the kernel, the AI SDK against a scripted
 * model. The image is pulled (image.pull events), its digest recorded in run.started, and
 * the model reads, patches and runs argv commands in it through the injected agent, with
 * no `docker exec`. A wrong password, a reference the policy does not allow and a tag under
 * a digests-only policy each fail the run with an error naming the image; no event holds
 * the registry's password.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type Docker from "dockerode";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "../kernel/policy-schema.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import {
  importNoShellImage,
  pushImage,
  startRegistry,
  type TestRegistry,
} from "../testing/registry.ts";
import {
  approveInLog,
  callReply,
  queueRun,
  sayReply,
  testImagePolicy,
} from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let reg: TestRegistry;
let docker: Docker;
let sandbox: Awaited<ReturnType<typeof testSandbox>>;
let digest: string;
let artifacts: FsArtifactStore;
const pulledIds: string[] = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-byo-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  sandbox = await testSandbox();
  docker = sandbox.docker;
  reg = await startRegistry();
  const id = await importNoShellImage(docker, `agentd-test-noshell:${Date.now()}`);
  digest = await pushImage(docker, reg, id, "team/noshell", "1");
  // Only the registry has it: the run pulls it.
  await docker.getImage(id).remove({ force: true });
});
after(async () => {
  await sandbox?.cleanup();
  for (const id of pulledIds)
    await docker
      .getImage(id)
      .remove({ force: true })
      .catch(() => {});
  await reg?.stop();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

function policyWith(sandboxOver: Partial<Policy["sandbox"]>): Policy {
  const p = testImagePolicy();
  return {
    ...p,
    sandbox: {
      ...p.sandbox,
      images: [`${reg.host}/team/*`],
      registryAuth: [{ registry: reg.host, username: reg.username, password: "$ENV.REG_PW" }],
      ...sandboxOver,
    },
  };
}

async function drive(
  policy: Policy,
  opts: {
    image?: string;
    files?: { path: string; data: string }[];
    password?: string;
    /** The worker's secrets: default REG_PW = `password` (else the registry's). */
    secrets?: Record<string, string>;
  },
): Promise<{ outcome: string; events: Event[]; text: string }> {
  const ws = await artifacts.put(
    await packWorkspace(
      (opts.files ?? [{ path: "a.txt", data: "one\n" }]).map((f) => ({
        path: f.path,
        type: "file" as const,
        mode: 0o644,
        data: Buffer.from(f.data),
      })),
    ),
  );
  const run = await queueRun(log, {
    prompt: "work in my image",
    workspaceDigest: ws.digest,
    workspaceSizeBytes: ws.size,
    ...(opts.image === undefined ? {} : { image: opts.image }),
  });
  const deps = stubDriverDeps({
    log,
    policy,
    sandbox: sandbox.sandbox,
    artifacts,
    baseURL: stub.baseURL,
    secretProviders: [
      createEnvSecretProvider(opts.secrets ?? { REG_PW: opts.password ?? reg.password }),
    ],
  });
  const outcome = await driveRun(
    deps,
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  const logged = await log.read(run.runId, 0);
  return {
    outcome,
    events: logged.map((e) => e.event),
    text: logged
      .map((e) =>
        JSON.stringify(e.event.payload.value ?? {}, (_, v) =>
          typeof v === "bigint" ? String(v) : v,
        ),
      )
      .join("\n"),
  };
}

const payloads = <K extends NonNullable<Event["payload"]["case"]>>(events: Event[], kase: K) =>
  events.flatMap((e) =>
    e.payload.case === kase
      ? [e.payload.value as Extract<Event["payload"], { case: K }>["value"]]
      : [],
  );

describe("a run in an image of its own", { timeout: 300_000 }, () => {
  it("pulls it by digest with the registry's credentials and works in it without a shell", async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const image = `${reg.host}/team/noshell@${digest}`;
    script = [
      callReply("r1", "repo.read", { path: "a.txt" }),
      callReply("p1", "repo.patch", { path: "a.txt", edits: [{ oldText: "one", newText: "two" }] }),
      callReply("x1", "process.run", { argv: ["cat", "a.txt"] }),
      callReply("x2", "process.run", { command: "cat a.txt" }),
      sayReply("done"),
    ];
    const { outcome, events, text } = await drive(policyWith({}), { image });
    assert.equal(outcome, "completed", text.slice(-2000));

    const pulls = payloads(events, "imagePull");
    assert.equal(pulls[0]?.phase, "started");
    assert.equal(pulls.at(-1)?.phase, "done");
    assert.equal(pulls.at(-1)?.digest, digest);
    assert.ok(pulls.length <= 10, `coalesced: ${pulls.length} image.pull events`);
    assert.ok(pulls.every((p) => p.image === image));

    const started = payloads(events, "runStarted")[0];
    assert.equal(started?.image, image);
    assert.equal(started?.imageDigest, digest);
    assert.equal(started?.imageSource, "pulled");
    const info = await docker
      .getContainer(started?.containerId as string)
      .inspect()
      .catch(() => undefined);
    if (info !== undefined) pulledIds.push(info.Image);
    else pulledIds.push((await docker.getImage(image).inspect()).Id);

    const results = new Map(payloads(events, "toolResult").map((r) => [r.callId, r]));
    assert.equal(results.get("r1")?.ok, true, results.get("r1")?.error?.message);
    assert.match(results.get("r1")?.outputJson ?? "", /one/);
    assert.equal(results.get("p1")?.ok, true, results.get("p1")?.error?.message);
    assert.equal(results.get("x1")?.exitCode, 0);
    assert.match(results.get("x1")?.outputJson ?? "", /two/);
    assert.equal(results.get("x2")?.exitCode, 127);
    assert.match(
      results.get("x2")?.outputJson ?? "",
      /image has no shell \(sh\): give process\.run an argv list/,
    );

    assert.ok(!text.includes(reg.password), "the registry password is in no event");
    const execs = await engineExecs(since, started?.containerId as string);
    assert.equal(execs, 0, "every call went through the injected agent, none through docker exec");
  });

  it("with the wrong password: run.failed names the image and says unauthorized", async () => {
    const image = `${reg.host}/team/noshell:1`;
    const { outcome, events, text } = await drive(policyWith({}), {
      image,
      password: "not-the-password-42",
    });
    assert.equal(outcome, "failed");
    const failed = payloads(events, "runFailed")[0];
    assert.equal(failed?.error?.code, "EIMAGE_PULL");
    assert.match(
      failed?.error?.message ?? "",
      new RegExp(`cannot pull image ${image.replace(/[.]/g, "\\.")}: unauthorized`),
    );
    const pulls = payloads(events, "imagePull");
    assert.deepEqual(
      pulls.map((p) => [p.phase, p.reason]),
      [
        ["started", ""],
        ["failed", "unauthorized"],
      ],
    );
    assert.equal(payloads(events, "runStarted").length, 0);
    assert.ok(!text.includes("not-the-password-42"));
  });

  it("a registry password no secret provider has: ESECRET_NOT_FOUND naming the policy field", async () => {
    const { outcome, events } = await drive(policyWith({}), {
      image: `${reg.host}/team/noshell@${digest}`,
      secrets: {},
    });
    assert.equal(outcome, "failed");
    const failed = payloads(events, "runFailed")[0];
    assert.equal(failed?.error?.code, "ESECRET_NOT_FOUND");
    assert.match(
      failed?.error?.message ?? "",
      /sandbox\.registryAuth for 127\.0\.0\.1:\d+ names \$ENV\.REG_PW/,
    );
    assert.equal(payloads(events, "imagePull").length, 0);
  });

  it("an image the policy does not allow, or a tag under sandbox.imageDigests: refused, naming it", async () => {
    const other = await drive(policyWith({}), { image: "docker.io/library/python:3.12" });
    assert.equal(other.outcome, "failed");
    const f1 = payloads(other.events, "runFailed")[0];
    assert.equal(f1?.error?.code, "EIMAGE_REFUSED");
    assert.match(
      f1?.error?.message ?? "",
      /CreateRun image: image docker\.io\/library\/python:3\.12 is refused: it matches none of the policy's sandbox\.images \(127\.0\.0\.1:\d+\/team\/\*\)/,
    );
    assert.equal(payloads(other.events, "imagePull").length, 0, "nothing was pulled");

    const strict = await drive(policyWith({ imageDigests: true }), {
      image: `${reg.host}/team/noshell:1`,
    });
    const f2 = payloads(strict.events, "runFailed")[0];
    assert.equal(f2?.error?.code, "EIMAGE_REFUSED");
    assert.match(f2?.error?.message ?? "", /pinned by digest/);

    const none = await drive(policyWith({ images: [] }), {
      image: `${reg.host}/team/noshell@${digest}`,
    });
    assert.match(
      payloads(none.events, "runFailed")[0]?.error?.message ?? "",
      /sandbox\.images is empty/,
    );
  });

  it("names the image in .agent/config.yaml; a hostile one there is refused naming the file", async () => {
    script = [callReply("x1", "process.run", { argv: ["cat", "a.txt"] }), sayReply("done")];
    const image = `${reg.host}/team/noshell@${digest}`;
    const ok = await drive(policyWith({}), {
      files: [
        { path: "a.txt", data: "from config\n" },
        { path: ".agent/config.yaml", data: `image: ${image}\n` },
      ],
    });
    assert.equal(ok.outcome, "completed", ok.text.slice(-2000));
    const started = payloads(ok.events, "runStarted")[0];
    assert.equal(started?.image, image);
    assert.equal(started?.imageSource, "local", "pulled by the first run already");
    assert.match(payloads(ok.events, "toolResult")[0]?.outputJson ?? "", /from config/);

    const bad = await drive(policyWith({}), {
      files: [{ path: ".agent/config.yaml", data: `image: "${reg.host}/Team/../x y"\n` }],
    });
    assert.equal(bad.outcome, "failed");
    assert.match(
      payloads(bad.events, "runFailed")[0]?.error?.message ?? "",
      /^\.agent\/config\.yaml image: .* is not an image reference/,
    );
  });

  it("a later drive runs the digest run.started recorded, though the tag moved meanwhile", async () => {
    const tagged = `${reg.host}/team/moving:2`;
    const first = await importNoShellImage(docker, "agentd-test-moving:a", "content-A");
    const digestA = await pushImage(docker, reg, first, "team/moving", "2");
    await docker.getImage(first).remove({ force: true });
    const p = policyWith({});
    const policy: Policy = {
      ...p,
      capabilities: { ...p.capabilities, "process.run": { approval: "always" } },
    };
    script = [callReply("x1", "process.run", { argv: ["cat", "/unique-id"] })];
    const ws = await artifacts.put(
      await packWorkspace([{ path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a") }]),
    );
    const run = await queueRun(log, {
      prompt: "pause then go on",
      workspaceDigest: ws.digest,
      workspaceSizeBytes: ws.size,
      image: tagged,
    });
    const deps = stubDriverDeps({
      log,
      policy,
      sandbox: sandbox.sandbox,
      artifacts,
      baseURL: stub.baseURL,
      secretProviders: [createEnvSecretProvider({ REG_PW: reg.password })],
    });
    const paused = await driveRun(
      deps,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    assert.equal(paused, "paused");
    const started = payloads(
      (await log.read(run.runId, 0)).map((e) => e.event),
      "runStarted",
    )[0];
    assert.equal(started?.imageDigest, digestA);

    // The tag now names other content, and the engine has neither.
    const second = await importNoShellImage(docker, "agentd-test-moving:b", "content-B");
    const digestB = await pushImage(docker, reg, second, "team/moving", "2");
    assert.notEqual(digestB, digestA);
    await docker.getImage(second).remove({ force: true });
    await docker
      .getImage(tagged)
      .remove({ force: true })
      .catch(() => {});
    await docker
      .getImage(`${reg.host}/team/moving@${digestA}`)
      .remove({ force: true })
      .catch(() => {});

    const asked = payloads(
      (await log.read(run.runId, 0)).map((e) => e.event),
      "approvalRequested",
    )[0];
    await approveInLog(log, run, asked?.approvalId as string);
    script = [sayReply("done")];
    const outcome = await driveRun(
      deps,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    const events = (await log.read(run.runId, 0)).map((e) => e.event);
    assert.equal(outcome, "completed");
    const result = payloads(events, "toolResult").find((r) => r.callId === "x1");
    assert.match(result?.outputJson ?? "", /content-A/, "the resumed run ran the first digest");
    assert.doesNotMatch(result?.outputJson ?? "", /content-B/);
    pulledIds.push((await docker.getImage(`${reg.host}/team/moving@${digestA}`).inspect()).Id);
  });

  async function engineExecs(since: number, id: string): Promise<number> {
    const stream = (await docker.getEvents({
      since,
      until: Math.ceil(Date.now() / 1000) + 1,
      filters: { container: [id] },
    })) as unknown as NodeJS.ReadableStream;
    let text = "";
    for await (const c of stream) text += (c as Buffer).toString("utf8");
    const actions = text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => (JSON.parse(l) as { Action?: string }).Action ?? "");
    assert.ok(
      actions.includes("start"),
      `the engine's events of the container: ${actions.join(", ")}`,
    );
    return actions.filter((a) => a.startsWith("exec_")).length;
  }
});
