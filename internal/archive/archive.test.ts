/**
 * The run archive on the embedded log and the fs artifact store: an ended run with an
 * artifact, a pause snapshot and its uploaded workspace is archived atomically and
 * verifies; archiving it again writes nothing; a live run is refused; and every kind of
 * hostile archive is refused naming the file and the problem, without reading outside it.
 */
import assert from "node:assert/strict";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import {
  ArtifactEmittedSchema,
  OutputDeltaSchema,
  RunCompletedSchema,
  RunPausedSchema,
  RunQueuedSchema,
  RunResumedSchema,
  RunStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { ArchiveFallbackLog } from "./archive-fallback-log.ts";
import { ArchiveShelf } from "./archive-shelf.ts";
import { openArchive } from "./open-archive.ts";
import { archiveBeforeDelete, archiveRun } from "./write-archive.ts";

const root = mkdtempSync(join(tmpdir(), "agentd-archive-"));
let log: FileEventLog;
let artifacts: FsArtifactStore;
const archiveDir = join(root, "archive");

before(async () => {
  log = await openFileEventLog({ dir: join(root, "log") });
  artifacts = new FsArtifactStore(join(root, "artifacts"));
});
after(async () => {
  await log.close();
  rmSync(root, { recursive: true, force: true });
});

const p = {
  queued: (digest: string): EventPayload => ({
    case: "runQueued",
    value: create(RunQueuedSchema, { tenantId: "acme", prompt: "fix it", workspaceDigest: digest }),
  }),
  started: (): EventPayload => ({
    case: "runStarted",
    value: create(RunStartedSchema, { workerId: "w", epoch: 1n, image: "test" }),
  }),
  delta: (text: string): EventPayload => ({
    case: "outputDelta",
    value: create(OutputDeltaSchema, { text }),
  }),
  artifact: (name: string, digest: string): EventPayload => ({
    case: "artifactEmitted",
    value: create(ArtifactEmittedSchema, { name, digest, mediaType: "text/x-diff" }),
  }),
  paused: (digest: string): EventPayload => ({
    case: "runPaused",
    value: create(RunPausedSchema, { snapshotDigest: digest }),
  }),
  resumed: (): EventPayload => ({ case: "runResumed", value: create(RunResumedSchema, {}) }),
  completed: (): EventPayload => ({
    case: "runCompleted",
    value: create(RunCompletedSchema, { summary: "done" }),
  }),
};

/** An ended run of acme with a workspace, a patch (named to escape) and a snapshot. */
async function endedRun(): Promise<{ runId: string; blobs: string[] }> {
  const runId = ulid();
  const ws = await artifacts.put(Buffer.from(`workspace of ${runId}`));
  const patch = await artifacts.put(Buffer.from(`--- a\n+++ b\n${runId}\n`));
  const snap = await artifacts.put(Buffer.from(`snapshot ${runId}`));
  const absent = "f".repeat(64); // named but never stored (like an image digest)
  const payloads = [
    p.queued(ws.digest),
    p.started(),
    p.delta("hello"),
    p.paused(snap.digest),
    p.resumed(),
    p.artifact("../../etc/passwd", patch.digest),
    p.artifact("image", absent),
    p.completed(),
  ];
  for (const [i, payload] of payloads.entries())
    await log.append({ runId, sessionId: "s1", payload, ...(i === 0 ? { tenantId: "acme" } : {}) });
  return { runId, blobs: [ws.digest, snap.digest, patch.digest] };
}

describe("archiving a run", { timeout: 120_000 }, () => {
  it("writes events as stored, the head, every blob by digest and a manifest; the archive verifies", async () => {
    const { runId, blobs } = await endedRun();
    const res = await archiveRun({ log, artifacts, dir: archiveDir }, "acme", runId);
    assert.equal(res.written, true);
    assert.equal(res.path, join(archiveDir, "acme", runId));
    const stored = (await log.read(runId, 0)).map((e) => `${e.json}\n`).join("");
    assert.equal(readFileSync(join(res.path, "events.jsonl"), "utf8"), stored, "byte for byte");
    assert.deepEqual(readdirSync(join(res.path, "blobs")).sort(), [...blobs].sort());
    const a = await openArchive(res.path);
    const head = await log.head(runId);
    assert.equal(a.head.seq, head?.seq);
    assert.equal(a.head.hash, head?.hash);
    assert.equal(a.head.ended, "run.completed");
    assert.deepEqual(a.manifest.absent, ["f".repeat(64)]);
    for (const f of a.manifest.files)
      assert.equal(statSync(join(res.path, f.path)).size, f.size, f.path);
    // Nothing was left beside it (no temporary directory).
    assert.deepEqual(
      readdirSync(join(archiveDir, "acme")).filter((n) => n.startsWith(".")),
      [],
    );
  });

  it("archiving it again verifies the archive and writes nothing; a damaged one is refused", async () => {
    const { runId } = await endedRun();
    const deps = { log, artifacts, dir: archiveDir };
    const first = await archiveRun(deps, "acme", runId);
    const manifest = readFileSync(join(first.path, "manifest.json"), "utf8");
    const again = await archiveRun(deps, "acme", runId);
    assert.equal(again.written, false);
    assert.equal(
      readFileSync(join(first.path, "manifest.json"), "utf8"),
      manifest,
      "not rewritten",
    );
    writeFileSync(join(first.path, "head.json"), "{}\n");
    await assert.rejects(
      archiveRun(deps, "acme", runId),
      /head\.json: holds 3 bytes but the manifest says/,
    );
  });

  it("refuses a live run, another tenant's run and ids that are not ids, writing nothing", async () => {
    const runId = ulid();
    await log.append({ runId, sessionId: "s", payload: p.queued(""), tenantId: "acme" });
    const deps = { log, artifacts, dir: archiveDir };
    await assert.rejects(archiveRun(deps, "acme", runId), /has not ended/);
    await assert.rejects(archiveRun(deps, "globex", runId), /not in the event log/);
    await assert.rejects(archiveRun(deps, "../x", runId), /is not a tenant id/);
    await assert.rejects(archiveRun(deps, "acme", "../../etc"), /is not a run id/);
    assert.equal(existsSync(join(archiveDir, "acme", runId)), false);
  });

  it("a tenant directory that is a symlink or a file is refused: the hook fails, nothing is written", async () => {
    const { runId } = await endedRun();
    const dir = join(root, "archive-hostile-dirs");
    const elsewhere = join(root, "elsewhere");
    mkdirSync(dir, { recursive: true });
    mkdirSync(elsewhere, { recursive: true });
    symlinkSync(elsewhere, join(dir, "acme"));
    const hook = archiveBeforeDelete({ log, artifacts, dir });
    await assert.rejects(hook("acme", runId), /is not a directory \(a symlink\?\)/);
    assert.deepEqual(readdirSync(elsewhere), [], "nothing written through the symlink");
    rmSync(join(dir, "acme"));
    writeFileSync(join(dir, "acme"), "a file");
    await assert.rejects(hook("acme", runId));
  });

  it("an archived run is served read-only: head, events and blobs from the archive, appends refused", async () => {
    const { runId, blobs } = await endedRun();
    await archiveRun({ log, artifacts, dir: archiveDir }, "acme", runId);
    const served = new ArchiveFallbackLog(new ArchiveShelf({ dir: archiveDir }));
    const head = await served.head(runId);
    assert.equal(head?.tenantId, "acme");
    assert.equal(head?.ended, "run.completed");
    const events = await served.read(runId, 0);
    assert.deepEqual(
      events.map((e) => e.json),
      (await log.read(runId, 0)).map((e) => e.json),
    );
    const a = await served.archivedRun(runId);
    assert.equal(a?.blobSize(blobs[0] as string), Buffer.byteLength(`workspace of ${runId}`));
    await assert.rejects(
      served.append({ runId, sessionId: "s1", payload: p.delta("more") }),
      /is archived and served read-only/,
    );
  });
});

/** A fresh copy of a good archive to damage. */
async function copyOfArchive(): Promise<{ dir: string; runId: string; blobs: string[] }> {
  const { runId, blobs } = await endedRun();
  const res = await archiveRun({ log, artifacts, dir: archiveDir }, "acme", runId);
  const dir = join(mkdtempSync(join(root, "hostile-")), runId);
  cpSync(res.path, dir, { recursive: true });
  return { dir, runId, blobs };
}

type M = { files: { path: string; size: number; sha256: string }[]; absent: string[] };
function editManifest(dir: string, edit: (m: M) => void): void {
  const m = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as M;
  edit(m);
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(m));
}

describe("hostile archives are refused naming the file and what is wrong", {
  timeout: 120_000,
}, () => {
  it("a changed event (manifest updated to match): the chain names the seq", async () => {
    const { dir } = await copyOfArchive();
    const path = join(dir, "events.jsonl");
    const changed = readFileSync(path, "utf8").replace('"text":"hello"', '"text":"HELLO"');
    writeFileSync(path, changed);
    const { createHash } = await import("node:crypto");
    editManifest(dir, (m) => {
      const f = m.files.find((x) => x.path === "events.jsonl") as M["files"][0];
      f.size = Buffer.byteLength(changed);
      f.sha256 = createHash("sha256").update(changed).digest("hex");
    });
    await assert.rejects(
      openArchive(dir),
      /events\.jsonl: hash chain broken at seq 3: hash does not match/,
    );
  });

  it("a truncated events file, and a manifest that lies about a size", async () => {
    const { dir, blobs } = await copyOfArchive();
    const path = join(dir, "events.jsonl");
    const full = readFileSync(path);
    writeFileSync(path, full.subarray(0, full.length - 10));
    await assert.rejects(
      openArchive(dir),
      new RegExp(
        `events\\.jsonl: holds ${full.length - 10} bytes but the manifest says ${full.length}`,
      ),
    );
    writeFileSync(path, full);
    editManifest(dir, (m) => {
      const f = m.files.find((x) => x.path === `blobs/${blobs[0]}`) as M["files"][0];
      f.size = 10 ** 9;
    });
    await assert.rejects(
      openArchive(dir),
      new RegExp(`blobs/${blobs[0]}: holds \\d+ bytes but the manifest says 1000000000$`),
    );
    editManifest(dir, (m) => {
      (m.files.find((x) => x.path === `blobs/${blobs[0]}`) as M["files"][0]).size = 10 ** 12;
    });
    await assert.rejects(openArchive(dir), /manifest\.json: files\[\d+\]\.size: Too big/);
  });

  it("a missing artifact: gone from disk, or gone from the manifest too", async () => {
    const { dir, blobs } = await copyOfArchive();
    const blob = blobs[2] as string;
    rmSync(join(dir, "blobs", blob));
    await assert.rejects(
      openArchive(dir),
      new RegExp(`blobs/${blob}: is missing \\(the manifest lists it\\)`),
    );
    editManifest(dir, (m) => {
      m.files = m.files.filter((f) => f.path !== `blobs/${blob}`);
    });
    await assert.rejects(
      openArchive(dir),
      new RegExp(`blobs/${blob}: is missing: the events name it`),
    );
  });

  it("manifest paths with .., absolute, or another form; nothing outside is read", async () => {
    const { dir } = await copyOfArchive();
    // A file outside the archive that a path escaping it would name.
    writeFileSync(join(dir, "..", "outside"), "secret");
    for (const bad of [
      "../outside",
      "/etc/passwd",
      "blobs/../../outside",
      "blobs/x",
      "./events.jsonl",
    ]) {
      editManifest(dir, (m) => {
        m.files.push({ path: bad, size: 6, sha256: "a".repeat(64) });
      });
      await assert.rejects(
        openArchive(dir),
        (err: Error) =>
          err.message.includes(`manifest.json: files[`) &&
          err.message.includes(`${JSON.stringify(bad)} is not a file an archive holds`),
        bad,
      );
      editManifest(dir, (m) => {
        m.files.pop();
      });
    }
    await openArchive(dir); // restored: it verifies again
  });

  it("a blob that is a symlink (even to identical content outside) is refused", async () => {
    const { dir, blobs } = await copyOfArchive();
    const blob = blobs[1] as string;
    const outside = join(dir, "..", "same-content");
    cpSync(join(dir, "blobs", blob), outside);
    rmSync(join(dir, "blobs", blob));
    symlinkSync(outside, join(dir, "blobs", blob));
    await assert.rejects(openArchive(dir), new RegExp(`blobs/${blob}: is a symbolic link`));
  });

  it("a huge manifest, a manifest with too many files, an unlisted file, a lying head", async () => {
    const { dir } = await copyOfArchive();
    const good = readFileSync(join(dir, "manifest.json"));
    writeFileSync(join(dir, "manifest.json"), Buffer.alloc(5 * 1024 * 1024, 0x20));
    await assert.rejects(
      openArchive(dir),
      /manifest\.json: 5242880 bytes is over the limit of 4194304/,
    );
    writeFileSync(join(dir, "manifest.json"), good);
    editManifest(dir, (m) => {
      m.absent = Array.from({ length: 20_001 }, () => "0".repeat(64));
    });
    await assert.rejects(openArchive(dir), /manifest\.json: absent: .*20000/);
    writeFileSync(join(dir, "manifest.json"), good);
    writeFileSync(join(dir, "notes.txt"), "hi");
    await assert.rejects(openArchive(dir), /notes\.txt: is not listed in the manifest/);
    rmSync(join(dir, "notes.txt"));
    const head = JSON.parse(readFileSync(join(dir, "head.json"), "utf8")) as { seq: number };
    const lied = `${JSON.stringify({ ...head, seq: head.seq - 1 })}\n`;
    writeFileSync(join(dir, "head.json"), lied);
    const { createHash } = await import("node:crypto");
    editManifest(dir, (m) => {
      const f = m.files.find((x) => x.path === "head.json") as M["files"][0];
      f.size = Buffer.byteLength(lied);
      f.sha256 = createHash("sha256").update(lied).digest("hex");
    });
    await assert.rejects(
      openArchive(dir),
      new RegExp(
        `head\\.json: says seq ${head.seq - 1} hash [0-9a-f]{64} but events\\.jsonl ends at seq ${head.seq}`,
      ),
    );
  });
});
