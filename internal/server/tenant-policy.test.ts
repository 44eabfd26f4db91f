/**
 * Per-tenant policies against a real `agentd dev` (server, worker, Docker sandbox) and a
 * scripted model that proposes the same repo.patch call in every run: a tenant with a
 * policy file of its own and one without get different decisions for it; changing the
 * tenant's file changes the next decision; a broken change keeps the tenant's last good
 * policy (never the server's); a tenant the auth file stops naming a file for falls back to
 * the server's. Decisions are read from the runs' policy.decision events (their rule).
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { PolicyDecision } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type AgentdProcess, sha256Hex, startAgentd } from "../testing/agentd-process.ts";
import { sandboxImage } from "../testing/docker.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import {
  type OpenAiStub,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { tarOf } from "../testing/tar.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-tenantpolicy-"));
let stub: OpenAiStub;
let dev: AgentdProcess;
let client: GrpcRunClient;
const authFile = join(dir, "auth.yaml");
const ownPolicy = join(dir, "own.yaml");
const BASE = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8").replace(
  /# image: agentd-sandbox-base:latest/,
  `image: ${sandboxImage("test")}`,
);

/** The repository's policy with repo.patch's approval set to `mode`. */
function policyWith(mode: "never" | "always" | "risk"): string {
  const out = BASE.replace(
    /repo\.patch: \{ approval: risk \}/,
    `repo.patch: { approval: ${mode} }`,
  );
  assert.ok(out.includes(`repo.patch: { approval: ${mode} }`), "the policy's repo.patch line");
  return out;
}

function writeAuth(withOwnPolicy: boolean): void {
  writeFileSync(
    authFile,
    `tokens:
  - { sha256: ${sha256Hex("own-token")}, tenant: own, roles: [submit, read] }
  - { sha256: ${sha256Hex("plain-token")}, tenant: plain, roles: [submit, read] }
${withOwnPolicy ? `tenants:\n  own:\n    policy: own.yaml\n` : ""}`,
  );
}

before(async () => {
  stub = await startOpenAiStub(({ body }) => {
    if (!JSON.stringify(body.messages).includes('"role":"tool"'))
      return {
        chunks: toolCallsReply([
          {
            id: "c1",
            name: "repo_patch",
            arguments: JSON.stringify({
              path: "greet.txt",
              edits: [{ oldText: "helo", newText: "hello" }],
            }),
          },
        ]),
      };
    return { chunks: textReply(["done"]) };
  });
  const serverPolicy = join(dir, "server.yaml");
  writeFileSync(serverPolicy, policyWith("risk"));
  writeFileSync(ownPolicy, policyWith("always"));
  writeAuth(true);
  dev = await startAgentd(
    "dev",
    [
      "--data-dir",
      join(dir, "data"),
      "--policy",
      serverPolicy,
      "--auth-file",
      authFile,
      "--approval-hold-ms",
      "0",
    ],
    { env: { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL } },
  );
  client = new GrpcRunClient(dev.addr);
});

after(async () => {
  client?.close();
  await dev?.stop("SIGTERM").catch(() => undefined);
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The decision of a new run's repo.patch call, for `token`'s tenant; the run is then ended. */
async function decisionOf(token: string): Promise<PolicyDecision> {
  const { run } = await client.createRun(
    {
      prompt: "fix the greeting",
      workspaceTar: await tarOf([{ name: "greet.txt", data: "helo\n" }]),
    },
    token,
  );
  const runId = run?.runId as string;
  // Generous: a loaded machine starts a sandbox in tens of seconds.
  const deadline = Date.now() + 240_000;
  while (Date.now() < deadline) {
    const history = client.streamEvents({ runId, historyOnly: true }, token);
    await history.end(30_000);
    const found = history.events.find((e) => e.payload.case === "policyDecision");
    if (found !== undefined) {
      const { run: now } = await client.getRun(runId, token);
      if (
        now !== undefined &&
        ![RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED].includes(now.state)
      )
        await client.cancelRun(runId, "test done", token).catch(() => undefined);
      return found.payload.value as PolicyDecision;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`run ${runId}: no policy decision within 240 s\n${dev.output().slice(-4000)}`);
}

/** Waits until the server's output holds `n` lines matching `re` (a reload it logged). */
async function waitForLog(re: RegExp, n: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if ((dev.output().match(new RegExp(re, "g")) ?? []).length >= n) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no ${n}× ${re} in the server's log within 60 s\n${dev.output().slice(-3000)}`);
}

const RULE = (mode: string) => `capabilities.repo.patch.approval=${mode}`;

describe("per-tenant policies, over a real agentd dev", { timeout: 1_200_000 }, () => {
  it("the same call: the tenant with its own policy (always) waits for approval, the other (the server's: risk) does not", async () => {
    const [own, plain] = await Promise.all([decisionOf("own-token"), decisionOf("plain-token")]);
    assert.equal(own.rule, RULE("always"));
    assert.equal(plain.rule, RULE("risk"));
  });

  it("a change of the tenant's file applies to its next call", async () => {
    writeFileSync(ownPolicy, policyWith("never"));
    await waitForLog(/"msg":"tenant policy loaded"/, 1);
    assert.equal((await decisionOf("own-token")).rule, RULE("never"));
  });

  it("a broken change keeps the tenant's last good policy, not the server's, and says so", async () => {
    writeFileSync(ownPolicy, "version: 1\ncapabilities:\n  repo.patch: { approval: sometimes }\n");
    await waitForLog(/tenant own: policy reload failed; keeping its last good policy/, 1);
    assert.match(dev.output(), /tenant own policy: capabilities\.repo\.patch\.approval/);
    assert.equal((await decisionOf("own-token")).rule, RULE("never"));
  });

  it("a tenant the auth file no longer gives a policy uses the server's", async () => {
    writeAuth(false);
    await waitForLog(/"msg":"tenant policy dropped: the tenant uses the server's"/, 1);
    assert.equal((await decisionOf("own-token")).rule, RULE("risk"));
  });
});
