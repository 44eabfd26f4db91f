/**
 * agentctl delete and purge-tenant, the real bin/agentctl against a real `agentd dev` (the
 * embedded event log, its memory queue and the filesystem artifact store; no model, so runs
 * stay queued until cancelled): exit codes, the messages, -o json, a live run refused, the
 * run gone from the data directory (events, meta, workspace blob, upload receipt) but for its
 * tombstone, and the embedded log keeping the deletion across a restart.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
  type AgentdProcess,
  startAgentd,
  writeAuthFile,
} from "../../internal/testing/agentd-process.ts";
import { filesUnder } from "../../internal/testing/deletion-fixtures.ts";

const AGENTCTL = fileURLToPath(new URL("../../bin/agentctl", import.meta.url));
const ADMIN = "acme-admin-token";
const SUBMIT = "acme-submit-token";
const OTHER = "globex-submit-token";

let dir: string;
let dev: AgentdProcess;
let flags: string[];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentctl-delete-"));
  const auth = writeAuthFile(dir, [
    { token: ADMIN, tenant: "acme", roles: ["admin"] },
    { token: SUBMIT, tenant: "acme", roles: ["submit", "read"] },
    { token: OTHER, tenant: "globex", roles: ["submit", "read"] },
  ]);
  flags = ["--data-dir", join(dir, "data"), "--auth-file", auth];
  dev = await startAgentd("dev", flags);
  writeFileSync(join(dir, "a.txt"), "hello\n");
});

after(async () => {
  await dev?.stop("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function ctl(args: string[], token = SUBMIT): Promise<Result> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith("AGENTD_") && k !== "FORCE_COLOR") env[k] = v;
  env.AGENTD_ADDR = dev.url;
  env.AGENTD_TOKEN = token;
  env.GIT_CONFIG_GLOBAL = "/dev/null";
  const child = spawn(AGENTCTL, args, { env, cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

async function queuedRun(token = SUBMIT): Promise<string> {
  const res = await ctl(
    ["run", "--no-wait", "--prompt", "delete me", "--repo", dir, "-o", "name"],
    token,
  );
  assert.equal(res.code, 0, res.stderr);
  const m = /run\/([0-9A-Z]{26})/.exec(res.stdout);
  assert.ok(m, res.stdout);
  return m[1] as string;
}

it("delete: a live run is refused (exit 4, cancel it first); an ended one goes, with nothing left on disk", async () => {
  const runId = await queuedRun();
  const live = await ctl(["delete", runId, "--reason", "cleanup"]);
  assert.equal(live.code, 4, live.stdout + live.stderr);
  assert.match(live.stderr, /queued.*cancel it first/);
  const noReason = await ctl(["delete", runId]);
  assert.equal(noReason.code, 64, noReason.stderr);
  assert.match(noReason.stderr, /--reason/);
  assert.equal((await ctl(["cancel", runId, "--reason", "stop"])).code, 0);
  const got = await ctl(["get", runId, "-o", "json"]);
  const workspace = JSON.parse(got.stdout).workspaceDigest as string;
  assert.match(workspace, /^[0-9a-f]{64}$/);
  assert.ok(filesUnder(join(dir, "data")).some((f) => f.includes(runId)));

  const other = await ctl(["delete", runId, "--reason", "not yours"], OTHER);
  assert.equal(other.code, 4);
  assert.match(other.stderr, /not found/i);

  const res = await ctl(["delete", runId, "--reason", "ticket 7"]);
  assert.equal(res.code, 0, res.stderr);
  assert.match(
    res.stdout,
    new RegExp(`run ${runId}: deleted \\(tenant acme; 1 artifact removed\\)`),
  );
  const again = await ctl(["delete", runId, "--reason", "ticket 7", "-o", "json"]);
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual(JSON.parse(again.stdout), { runId, tenantId: "acme" });
  const gone = await ctl(["get", runId]);
  assert.equal(gone.code, 4);
  assert.match(gone.stderr, /not found/i);
  // On disk: the tombstone only (the feed line is the run.deleted notice and pointers).
  const left = filesUnder(join(dir, "data")).filter((f) => f.includes(runId));
  assert.deepEqual(left, [join("runs", `${runId}.deleted.json`)]);
  assert.ok(
    !filesUnder(join(dir, "data")).some((f) => f.endsWith(workspace)),
    "the workspace blob",
  );

  // The embedded log keeps the deletion across a restart.
  await dev.stop("SIGTERM");
  dev = await startAgentd("dev", flags);
  assert.equal((await ctl(["get", runId])).code, 4);
});

it("purge-tenant: admin only; refused while runs are live; then every ended run goes", async () => {
  const ids = [await queuedRun(), await queuedRun(), await queuedRun()];
  const notAdmin = await ctl(["purge-tenant", "acme", "--reason", "offboarding"]);
  assert.equal(notAdmin.code, 4);
  assert.match(notAdmin.stderr, /admin/);
  const live = await ctl(["purge-tenant", "acme", "--reason", "offboarding"], ADMIN);
  assert.equal(live.code, 4);
  assert.match(live.stderr, /3 live runs.*cancel them first/);
  for (const id of ids) assert.equal((await ctl(["cancel", id])).code, 0);
  const res = await ctl(["purge-tenant", "acme", "--reason", "offboarding", "-o", "json"], ADMIN);
  assert.equal(res.code, 0, res.stderr);
  const out = JSON.parse(res.stdout);
  assert.equal(out.done, true);
  assert.equal(out.runsDeleted, "3");
  const list = await ctl(["runs", "-o", "json"]);
  assert.deepEqual(JSON.parse(list.stdout).items, []);
  const runsDir = readdirSync(join(dir, "data", "runs"));
  for (const id of ids)
    assert.deepEqual(
      runsDir.filter((f) => f.includes(id)),
      [`${id}.deleted.json`],
    );
});

it("agentd dev SIGKILLed half way through a deletion: the run is gone at once, its files after the restart", async () => {
  const runId = await queuedRun();
  assert.equal((await ctl(["cancel", runId])).code, 0);
  await dev.stop("SIGTERM");
  dev = await startAgentd("dev", flags, { env: { AGENTD_TEST_CRASH_AT: "deleteRun.afterMark" } });
  const res = await ctl(["delete", runId, "--reason", "crash"]);
  assert.equal(res.code, 4, res.stdout + res.stderr);
  assert.equal((await dev.exited).signal, "SIGKILL");
  const runsDir = join(dir, "data", "runs");
  const before = readdirSync(runsDir)
    .filter((f) => f.includes(runId))
    .sort();
  assert.ok(before.includes(`${runId}.ndjson`), "the pieces are still there");
  assert.ok(before.includes(`${runId}.deleted.json`), "the tombstone is written");
  // The next start finishes it (and the run is NOT_FOUND meanwhile).
  dev = await startAgentd("dev", flags);
  assert.equal((await ctl(["get", runId])).code, 4);
  const deadline = Date.now() + 60_000;
  let left = before;
  while (Date.now() < deadline) {
    left = readdirSync(runsDir).filter((f) => f.includes(runId));
    if (left.length === 1) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(left, [`${runId}.deleted.json`], "the restart finished the deletion");
});
