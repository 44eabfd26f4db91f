/**
 * A run's own image on the real engine: pulled by digest from a private registry (real
 * docker-registry with htpasswd auth on 127.0.0.1) with coalesced progress, failures named
 * (unauthorized, not found, unreachable); and run through agentd's agent injected
 * read-only (agent-bundle.ts) although the image has no shell, no tar and no /etc/passwd,
 * with no `docker exec` (the engine's events say so), its own ENTRYPOINT, USER and agent
 * label ignored; a takeover finds the injected agent again.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type Docker from "dockerode";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { sandboxImage, TEST_LIMITS } from "../testing/docker.ts";
import {
  importNoShellImage,
  pushImage,
  startRegistry,
  type TestRegistry,
} from "../testing/registry.ts";
import { BUNDLE_AGENT, BUNDLE_DIR } from "./agent-bundle.ts";
import { createDockerSandbox } from "./docker-sandbox.ts";
import { ensureImage, ImagePullError, type PullReport } from "./image-pull.ts";
import { parseImageReference } from "./image-reference.ts";
import type { ExecRequest, SandboxHandle } from "./port.ts";
import { packWorkspace } from "./workspace-archive.ts";

let docker: Docker;
let reg: TestRegistry;
let localId: string;
let digest: string;
let pulled: string | undefined;
const label = `test-${ulid().toLowerCase()}`;
const localTag = `agentd-test-noshell:${ulid().toLowerCase()}`;

const ref = (s: string) => {
  const r = parseImageReference(s);
  if ("error" in r) throw new Error(r.error);
  return r;
};

before(async () => {
  const { requireDocker } = await import("../testing/docker.ts");
  docker = await requireDocker();
  reg = await startRegistry();
  localId = await importNoShellImage(docker, localTag);
  digest = await pushImage(docker, reg, localId, "team/noshell", "1");
  // Only the registry has it now: the pull below moves its bytes.
  await docker.getImage(localId).remove({ force: true });
});
after(async () => {
  const sandbox = createDockerSandbox({ docker, managedLabel: label });
  await sandbox.reap(() => false);
  if (pulled !== undefined)
    await docker
      .getImage(pulled)
      .remove({ force: true })
      .catch(() => {});
  await reg?.stop();
});

describe("pulling a run's image", { timeout: 180_000 }, () => {
  it("with the wrong password: unauthorized, naming the image, no credential in it", async () => {
    const reports: PullReport[] = [];
    const err = await ensureImage(docker, ref(`${reg.host}/team/noshell@${digest}`), {
      auth: { username: reg.username, password: "wrong-password-123" },
      onReport: (r) => reports.push(r),
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof ImagePullError, String(err));
    assert.equal(err.reason, "unauthorized");
    assert.match(err.message, new RegExp(`cannot pull image ${reg.host}/team/noshell@sha256`));
    assert.doesNotMatch(err.message, /wrong-password-123/);
    assert.deepEqual(
      reports.map((r) => r.phase),
      ["started", "failed"],
    );
    assert.equal(reports[1]?.reason, "unauthorized");
  });

  it("a missing tag: not found; a registry nobody serves: unreachable", async () => {
    const auth = { username: reg.username, password: reg.password };
    const missing = await ensureImage(docker, ref(`${reg.host}/team/noshell:nope`), {
      auth,
    }).catch((e: unknown) => e);
    assert.ok(missing instanceof ImagePullError);
    assert.equal(missing.reason, "not_found", missing.message);
    const gone = await ensureImage(docker, ref("127.0.0.1:9/team/noshell:1")).catch(
      (e: unknown) => e,
    );
    assert.ok(gone instanceof ImagePullError);
    assert.equal(gone.reason, "unreachable", gone.message);
    assert.match(gone.message, /127\.0\.0\.1:9\/team\/noshell:1/);
  });

  it("cancelled: ECANCELLED, not a failed pull", async () => {
    const reports: PullReport[] = [];
    const stop = new AbortController();
    stop.abort();
    const err = await ensureImage(docker, ref(`${reg.host}/team/noshell@${digest}`), {
      auth: { username: reg.username, password: reg.password },
      onReport: (r) => reports.push(r),
      signal: stop.signal,
    }).catch((e: unknown) => e);
    assert.ok(isAgentdError(err, "ECANCELLED"), String(err));
    assert.ok(!(err instanceof ImagePullError));
    assert.ok(!reports.some((r) => r.phase === "failed"));
  });

  it("by digest with the registry's credentials: a few reports, the digest, then local", async () => {
    const reports: PullReport[] = [];
    const got = await ensureImage(docker, ref(`${reg.host}/team/noshell@${digest}`), {
      auth: { username: reg.username, password: reg.password },
      onReport: (r) => reports.push(r),
      reportEveryMs: 0,
    });
    pulled = got.id;
    assert.equal(got.source, "pulled");
    assert.equal(got.digest, digest);
    assert.equal(reports[0]?.phase, "started");
    const last = reports.at(-1);
    assert.equal(last?.phase, "done");
    assert.equal(last?.digest, digest);
    assert.ok((last?.bytesTotal ?? 0) > 1_000_000, "the layer's bytes were counted");
    assert.equal(last?.layersDone, last?.layersTotal);
    assert.ok(
      JSON.stringify(reports).indexOf(reg.password) < 0,
      "no credential in a progress report",
    );
    const again = await ensureImage(docker, ref(`${reg.host}/team/noshell@${digest}`));
    assert.deepEqual(again, { id: got.id, digest, source: "local" });
  });
});

describe("a sandbox of an image without a shell", { timeout: 180_000 }, () => {
  let box: SandboxHandle;
  const exec = (h: SandboxHandle, argv: string[], extra: Partial<ExecRequest> = {}) =>
    h.exec({ argv, timeoutMs: 10_000, maxOutputBytes: 64 * 1024, ...extra });

  before(async () => {
    assert.ok(pulled !== undefined, "the pull test ran first");
  });

  it("runs argv commands through the injected agent, with no docker exec", async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const sandbox = createDockerSandbox({
      docker,
      managedLabel: label,
      agentSource: () => sandboxImage("test"),
    });
    box = await sandbox.create({
      runId: ulid(),
      tenantId: "acme",
      image: pulled as string,
      userImage: true,
      limits: TEST_LIMITS,
      network: "none",
      workspaceTar: await packWorkspace([
        {
          path: "a.txt",
          type: "file",
          mode: 0o644,
          data: Buffer.from("hello from the workspace\n"),
        },
      ]),
    });
    const cat = await exec(box, ["cat", "a.txt"]);
    assert.equal(cat.exitCode, 0, cat.stderr);
    assert.equal(cat.stdout, "hello from the workspace\n");
    // uid 1000 has no /etc/passwd entry here; the files are its own anyway.
    const ls = await exec(box, ["ls", "-ln", "/workspace"]);
    assert.match(ls.stdout, / 1000 +1000 .*a\.txt/);
    const sh = await exec(box, ["sh", "-c", "true"]);
    assert.equal(sh.exitCode, 127);
    assert.match(sh.stderr, /sh: No such file or directory/);
    const tee = await exec(box, ["tee", "b.txt"], { stdin: Buffer.from("written\n") });
    assert.equal(tee.exitCode, 0, tee.stderr);
    await box.killAll();
    // The export is busybox's tar from the read-only bundle.
    const diff = await box.diff();
    assert.match(diff.patch, /\+\+\+ b\/b\.txt/);
    assert.match(diff.patch, /\+written/);

    const info = await docker.getContainer(box.id).inspect();
    assert.deepEqual(info.Config.Entrypoint, [BUNDLE_AGENT], "the image's ENTRYPOINT is not used");
    assert.equal(info.Config.User, "0:0");
    const mount = info.Mounts.find((m) => m.Destination === BUNDLE_DIR);
    assert.equal(mount?.RW, false, "the bundle is read-only");
    assert.equal(mount?.Type, "volume");
    assert.deepEqual(info.Config.Healthcheck?.Test, ["NONE"], "the image's HEALTHCHECK never runs");
    assert.ok(
      !info.Mounts.some((m) => m.Type === "volume" && m.Destination === "/data"),
      "no anonymous volume for the image's VOLUME",
    );
    const data = await exec(box, ["tee", "/data/x"], { stdin: Buffer.from("x") });
    assert.equal(data.exitCode, 0, `the VOLUME path is a tmpfs the run may use: ${data.stderr}`);
    const w = await exec(box, ["tee", "/.agentd/agent"], { stdin: Buffer.from("x") });
    assert.notEqual(w.exitCode, 0, "the sandbox cannot change the agent");
    const events = await engineEvents(since, box.id);
    assert.deepEqual(
      events.filter((e) => e.startsWith("exec_")),
      [],
      `no docker exec in the container: ${events.join(", ")}`,
    );
  });

  it("reports an OOM kill (agentd reads the cgroup with the bundle's busybox)", async () => {
    // busybox's tail buffers a line that never ends: /dev/zero fills the memory limit.
    const r = await exec(box, ["/.agentd/bin/tail", "/dev/zero"], { timeoutMs: 60_000 });
    assert.equal(r.exitCode, 137, r.stderr);
    assert.equal(r.oomKilled, true);
    const after = await exec(box, ["cat", "a.txt"]);
    assert.equal(after.exitCode, 0, "the agent and the container outlived the kill");
  });

  it("a worker taking the run over finds the injected agent (one exec to start it, then none)", async () => {
    box.detach?.();
    const since = Math.floor(Date.now() / 1000) - 1;
    const taker = createDockerSandbox({ docker, managedLabel: label });
    const found = await taker.find(box.runId);
    assert.ok(found !== undefined);
    await found.killAll();
    for (let i = 0; i < 3; i++) {
      const r = await exec(found, ["cat", "b.txt"]);
      assert.equal(r.stdout, "written\n");
    }
    const diff = await found.diff({
      baseTar: await packWorkspace([
        {
          path: "a.txt",
          type: "file",
          mode: 0o644,
          data: Buffer.from("hello from the workspace\n"),
        },
      ]),
    });
    assert.match(diff.patch, /b\.txt/);
    const execs = (await engineEvents(since, box.id)).filter((e) => e === "exec_create");
    assert.equal(execs.length, 1, "one exec starts the second agent; calls go through it");
    await found.destroy();
  });

  it("refills the agent volume when it was removed behind the sandbox's back", async () => {
    // A source image of this test's own (the test image with one more label): its volume is
    // this test's alone, whatever other tests run meanwhile.
    const tmp = await docker.createContainer({ Image: sandboxImage("test"), Cmd: ["true"] });
    const source = `agentd-test-agent-source:${ulid().toLowerCase()}`;
    const [repo, tag] = source.split(":") as [string, string];
    await tmp.commit({ repo, tag, changes: [`LABEL agentd.test=${label}`] });
    await tmp.remove({ force: true });
    after(async () => {
      await docker
        .getImage(source)
        .remove({ force: true })
        .catch(() => {});
    });
    const sandbox = createDockerSandbox({
      docker,
      managedLabel: label,
      agentSource: () => source,
    });
    const spec = async () => ({
      runId: ulid(),
      tenantId: "acme",
      image: pulled as string,
      userImage: true,
      limits: TEST_LIMITS,
      network: "none" as const,
      workspaceTar: await packWorkspace([
        { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("again\n") },
      ]),
    });
    const first = await sandbox.create(await spec());
    const volume = (await docker.getContainer(first.id).inspect()).Mounts.find(
      (m) => m.Destination === BUNDLE_DIR,
    )?.Name as string;
    await first.destroy();
    await sandbox.reap(() => false);
    await docker.getVolume(volume).remove();
    const second = await sandbox.create(await spec());
    const r = await exec(second, ["cat", "a.txt"]);
    assert.equal(r.stdout, "again\n", r.stderr);
    await second.destroy();
    await docker
      .getVolume(volume)
      .remove()
      .catch(() => {});
  });

  async function engineEvents(since: number, id: string): Promise<string[]> {
    const until = Math.ceil(Date.now() / 1000) + 1;
    const stream = (await docker.getEvents({
      since,
      until,
      filters: { container: [id] },
    })) as unknown as NodeJS.ReadableStream;
    let text = "";
    for await (const c of stream) text += (c as Buffer).toString("utf8");
    return text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => (JSON.parse(l) as { status?: string; Action?: string }).Action ?? "")
      .map((a) => a.split(":")[0] as string);
  }
});
