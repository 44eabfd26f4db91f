/**
 * The run archive end to end, with real processes: a real run (agentd server with
 * --archive-dir and a worker on a private redis-server and Docker, the OpenAI stub as the
 * model) pauses for an approval (a snapshot), writes a file and completes; DeleteRun
 * archives it before deleting it. The server then serves it read-only from the archive
 * (GetRun, StreamEvents, GetArtifact) and refuses CancelRun, ResolveApproval and DeleteRun
 * by name; `agentctl verify --archive` and `replay --archive` work offline; a tampered
 * copy fails verify naming the file.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ApprovalDecision } from "../gen/agentd/v1/events_pb.js";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { createRunWatch, type RunWatch } from "../testing/run-watch.ts";
import { ownedDigests } from "./layout.ts";

const AGENTCTL = join(import.meta.dirname, "..", "..", "bin", "agentctl");

const call = (n: number, command: string): StubReply => ({
  chunks: toolCallsReply([
    { id: `call_${n}`, name: "process_run", arguments: JSON.stringify({ command }) },
  ]),
});

/** rm (asks for approval: the run pauses, with a snapshot), then a write, then done. */
function model({ body }: StubRequest): StubReply {
  const messages = (body?.messages ?? []) as { role: string }[];
  const n = messages.filter((m) => m.role === "tool").length;
  if (n === 0) return call(1, "rm -f a.txt && echo removed > gone.txt");
  if (n === 1) return call(2, "echo archived > out.txt");
  return { chunks: textReply(["done"]) };
}

let c: Cluster;
let w: RunWatch;
let archiveDir: string;
const scratch = mkdtempSync(join(tmpdir(), "agentd-archive-e2e-"));

before(async () => {
  archiveDir = join(scratch, "archive");
  c = await startCluster({
    workers: 1,
    workerFlags: ["--approval-hold-ms", "0"],
    serverFlags: ["--archive-dir", archiveDir],
    script: model,
  });
  w = createRunWatch(c);
});
after(async () => {
  await c?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

function agentctl(args: string[]) {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith("AGENTD_")) env[k] = v;
  // No server and no token: --archive must not need them.
  env.AGENTD_ADDR = "http://127.0.0.1:9";
  const r = spawnSync(AGENTCTL, args, { env, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("a real run archived before its deletion, served read-only and verified offline", {
  timeout: 600_000,
}, () => {
  let runId = "";
  let stored: string[] = [];
  let approvalId = "";
  let path = "";

  it("the run pauses for its approval, completes, and DeleteRun archives it first", async () => {
    const s = await w.submit("archive");
    runId = s.runId;
    const requested = await w.waitEvent(s, "approvalRequested");
    approvalId = requested.approvalId;
    await w.waitEvent(s, "runPaused");
    await c.client.unary(RunService.method.resolveApproval, {
      approvalId,
      decision: ApprovalDecision.APPROVE,
      reason: "ok",
    });
    const run = await w.waitTerminal(runId, 300_000);
    assert.equal(run.state, RunState.COMPLETED, c.diagnostics());
    stored = (await c.log.read(runId, 0)).map((e) => e.json);
    // The worker lets go of the run's lease just after its end: until then it is not deletable.
    const res = await w.until("the run to be deletable", () =>
      c.client.unary(RunService.method.deleteRun, { runId, reason: "archive test" }),
    );
    assert.equal(res.deletedNow, true);
    assert.equal(await c.log.head(runId), undefined, "the live log no longer holds the run");
    path = join(archiveDir, "default", runId);
    assert.deepEqual(
      readdirSync(join(archiveDir, "default")),
      [runId],
      "one archive, no temporary left",
    );
    assert.equal(
      readFileSync(join(path, "events.jsonl"), "utf8"),
      stored.map((j) => `${j}\n`).join(""),
    );
  });

  it("the archive holds the pause snapshot, the patch and every blob the run names, by digest", async () => {
    const events = stored.map(
      (j) => JSON.parse(j) as Record<string, { name?: string; digest?: string }>,
    );
    const emitted = events.flatMap((e) =>
      e.artifactEmitted === undefined ? [] : [e.artifactEmitted],
    );
    const names = emitted.map((a) => a.name).sort();
    assert.deepEqual(
      names,
      ["patch", "workspace-snapshot"],
      "the approval's pause snapshot and the patch",
    );
    const manifest = JSON.parse(readFileSync(join(path, "manifest.json"), "utf8")) as {
      absent: string[];
    };
    const held = new Set(readdirSync(join(path, "blobs")));
    for (const a of emitted) {
      const d = a.digest as string;
      assert.ok(held.has(d), `blobs/${d} (${a.name}) archived`);
      const bytes = readFileSync(join(path, "blobs", d));
      assert.equal(createHash("sha256").update(bytes).digest("hex"), d);
    }
    for (const d of ownedDigests(
      stored.map((json) => ({ json, type: String(JSON.parse(json).type) })),
    ))
      assert.ok(held.has(d) || manifest.absent.includes(d), `${d}: held or listed absent`);
  });

  it("the server answers GetRun, StreamEvents and GetArtifact from the archive", async () => {
    const { run } = await c.client.getRun(runId);
    assert.equal(run?.state, RunState.COMPLETED);
    assert.equal(Number(run?.lastSeq), stored.length);
    const stream = c.client.streamEvents({ runId });
    const end = await stream.end();
    assert.equal(end.status.code, 0, JSON.stringify(end.status));
    assert.deepEqual(
      stream.seqs(),
      stored.map((_, i) => i + 1),
    );
    assert.equal(
      stream.events.at(-1)?.hash,
      (JSON.parse(stored.at(-1) as string) as { hash: string }).hash,
    );
    const client = createClient(RunService, createGrpcTransport({ baseUrl: c.server.url }));
    const digest = readdirSync(join(path, "blobs"))[0] as string;
    const chunks: Uint8Array[] = [];
    for await (const res of client.getArtifact({ runId, digest }))
      if (res.part.case === "chunk") chunks.push(res.part.value);
    assert.equal(createHash("sha256").update(Buffer.concat(chunks)).digest("hex"), digest);
  });

  it("writes to the archived run are refused by name", async () => {
    const client = createClient(RunService, createGrpcTransport({ baseUrl: c.server.url }));
    const refused = async (what: string, p: Promise<unknown>) => {
      const err = await p.then(
        () => assert.fail(`${what} was accepted`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ConnectError, String(err));
      assert.equal(err.code, Code.FailedPrecondition, `${what}: ${err.message}`);
      assert.match(err.message, new RegExp(`run ${runId} is archived .*: ${what} is refused`));
    };
    await refused("CancelRun", client.cancelRun({ runId, reason: "x" }));
    await refused(
      "ResolveApproval",
      client.resolveApproval({ approvalId, decision: ApprovalDecision.DENY }),
    );
    await refused("DeleteRun", client.deleteRun({ runId, reason: "again" }));
  });

  it("agentctl verify and replay --archive work offline; a tampered copy fails naming the file", () => {
    const ok = agentctl(["verify", "--archive", path]);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    const head = JSON.parse(stored.at(-1) as string) as { hash: string };
    assert.match(
      ok.stdout,
      new RegExp(`run ${runId}: hash chain OK \\(${stored.length} events, head ${head.hash}\\)`),
    );
    const seen = agentctl([
      "verify",
      runId,
      "--archive",
      path,
      "--head",
      `${stored.length}:${head.hash}`,
    ]);
    assert.equal(seen.code, 0, seen.stdout + seen.stderr);
    const replay = agentctl(["replay", "--archive", path]);
    assert.equal(replay.code, 0, replay.stdout + replay.stderr);
    assert.match(replay.stdout, /done/);
    const wrong = agentctl(["verify", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--archive", path]);
    assert.equal(wrong.code, 64, wrong.stderr);

    const copy = join(scratch, "tampered", runId);
    cpSync(path, copy, { recursive: true });
    const file = join(copy, "events.jsonl");
    const text = readFileSync(file, "utf8");
    const changed = text.replace('"text":"done"', '"text":"DONE"');
    assert.notEqual(changed, text, "the run's answer is in the log");
    writeFileSync(file, changed);
    const bad = agentctl(["verify", "--archive", copy]);
    assert.equal(bad.code, 1, bad.stdout + bad.stderr);
    assert.match(
      bad.stdout,
      /BROKEN: archive .*: events\.jsonl: sha256 is [0-9a-f]{64} but the manifest says/,
    );
    // The manifest rewritten to match: the hash chain names the event.
    const m = JSON.parse(readFileSync(join(copy, "manifest.json"), "utf8")) as {
      files: { path: string; sha256: string }[];
    };
    (m.files.find((f) => f.path === "events.jsonl") as { sha256: string }).sha256 = createHash(
      "sha256",
    )
      .update(changed)
      .digest("hex");
    writeFileSync(join(copy, "manifest.json"), JSON.stringify(m));
    const chain = agentctl(["verify", "--archive", copy]);
    assert.equal(chain.code, 1);
    assert.match(
      chain.stdout,
      /events\.jsonl: hash chain broken at seq \d+: hash does not match the event's content/,
    );
  });
});
