/**
 * The client SDK as a user gets it: `npm pack` of clients/typescript, installed into an
 * empty project (dependencies from the npm cache the repository's install filled, else
 * the registry), and a plain .mjs script of that project driving a run against a real
 * `agentd dev` with a scripted model: a directory packed and uploaded, events followed to
 * the end, the approval it asks for approved, the patch fetched and checked.
 */
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { type AgentdProcess, startAgentd } from "../internal/testing/agentd-process.ts";
import { sandboxImage } from "../internal/testing/docker.ts";
import {
  type OpenAiStub,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../internal/testing/openai-stub.ts";

const ROOT = join(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "agentd-sdk-"));
let stub: OpenAiStub;
let dev: AgentdProcess;

before(async () => {
  stub = await startOpenAiStub(({ body }) => {
    const n = (body.messages as { role: string }[]).filter((x) => x.role === "tool").length;
    if (n === 0)
      return {
        chunks: toolCallsReply([
          {
            id: "c1",
            name: "repo_patch",
            arguments: JSON.stringify({
              path: "config.yaml",
              edits: [{ oldText: "a: 1", newText: "a: 2" }],
            }),
          },
        ]),
      };
    return { chunks: textReply(["Changed a to 2."]) };
  });
  const policy = readFileSync(join(ROOT, "policy.yaml"), "utf8").replace(
    /# image: agentd-sandbox-base:latest/,
    `image: ${sandboxImage("test")}`,
  );
  writeFileSync(join(dir, "policy.yaml"), policy);
  dev = await startAgentd(
    "dev",
    ["--data-dir", join(dir, "data"), "--policy", join(dir, "policy.yaml")],
    {
      env: { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL },
    },
  );
});
after(async () => {
  await dev?.stop();
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

const APP = `import { AgentdClient, RunState } from "@agentd/client";
const agentd = new AgentdClient({ address: process.argv[2] });
const run = await agentd.createRun({ prompt: "set a to 2", dir: process.argv[3], labels: { via: "sdk" } });
const types = [];
for await (const ev of agentd.events(run.runId)) {
  types.push(ev.type);
  if (ev.payload.case === "approvalRequested") await agentd.approve(ev.payload.value.approvalId, "fine");
}
const done = await agentd.getRun(run.runId);
const patch = Buffer.from(await agentd.artifact(run.runId, "patch")).toString("utf8");
console.log(JSON.stringify({ state: RunState[done.state], labels: done.labels, types, patch }));
`;

describe("the client SDK package", { timeout: 240_000 }, () => {
  it("packs, installs into an empty project and drives a run through an approval", async () => {
    const npm = "npm"; // the machine's, as make setup uses it
    const env = {
      ...process.env,
      npm_config_update_notifier: "false",
      npm_config_fund: "false",
      npm_config_audit: "false",
    };
    execFileSync(npm, ["pack", "--pack-destination", dir, "--loglevel=error"], {
      cwd: join(ROOT, "clients", "typescript"),
      env,
      stdio: ["ignore", "pipe", "inherit"],
    });
    const tgz = readdirSync(dir).find((f) => f.endsWith(".tgz"));
    assert.ok(tgz, "npm pack made a tarball");
    const app = join(dir, "app");
    mkdirSync(app);
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({ name: "app", private: true, type: "module" }),
    );
    execFileSync(npm, ["install", "--prefer-offline", "--loglevel=error", join(dir, tgz)], {
      cwd: app,
      env,
      stdio: ["ignore", "pipe", "inherit"],
    });
    writeFileSync(join(app, "main.mjs"), APP);
    const ws = join(dir, "ws");
    mkdirSync(ws);
    writeFileSync(join(ws, "config.yaml"), "a: 1\n");
    writeFileSync(join(ws, ".gitignore"), "secret.txt\n");
    writeFileSync(join(ws, "secret.txt"), "not packed\n");
    // Not execFileSync: the scripted model answers from this process's event loop.
    const { stdout: out } = await promisify(execFile)(process.execPath, ["main.mjs", dev.url, ws], {
      cwd: app,
      encoding: "utf8",
      env,
      timeout: 120_000,
    });
    const r = JSON.parse(out.trim().split("\n").pop() as string);
    assert.equal(r.state, "COMPLETED", out);
    assert.deepEqual(r.labels, { via: "sdk" });
    assert.ok(
      r.types.includes("approval.requested") && r.types.includes("approval.resolved"),
      r.types.join(" "),
    );
    assert.equal(r.types.at(-1), "run.completed");
    assert.match(r.patch, /^\+a: 2$/m);
    assert.ok(!r.patch.includes("secret.txt"));
  });
});
