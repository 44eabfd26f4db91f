/**
 * Rules from approvals in the console (issue #29): in Chromium against `agentd dev` (the
 * test sandbox image, a scripted model whose `echo hello world` the tenant's policy sends
 * to a person), the approver ticks "Also propose a rule" and approves; the run goes on and
 * ListPolicyChanges holds one pending command rule derived from the call ("echo hello" in
 * repo web), proposed by the approver.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Browser } from "playwright-core";
import { PolicyChangeState, ProposedRuleKind } from "../gen/agentd/v1/events_pb.js";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { type AgentdProcess, sha256Hex, startAgentd } from "../testing/agentd-process.ts";
import { launchBrowser } from "../testing/browser.ts";
import { signIn } from "../testing/console-fixtures.ts";
import { sandboxImage } from "../testing/docker.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import {
  type OpenAiStub,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "agentd-console-rule-"));
const APPROVER = "console-rule-approver";
let stub: OpenAiStub;
let dev: AgentdProcess;
let browser: Browser;

before(async () => {
  stub = await startOpenAiStub(({ body }) => {
    const n = (body.messages as { role: string }[]).filter((x) => x.role === "tool").length;
    if (n > 0) return { chunks: textReply(["Said hello."]) };
    return {
      chunks: toolCallsReply([
        {
          id: "c1",
          name: "process_run",
          arguments: JSON.stringify({ command: "echo hello world" }),
        },
      ]),
    };
  });
  const server = readFileSync(join(ROOT, "policy.yaml"), "utf8").replace(
    /# image: agentd-sandbox-base:latest/,
    `image: ${sandboxImage("test")}`,
  );
  writeFileSync(join(dir, "server.yaml"), server);
  writeFileSync(
    join(dir, "acme.yaml"),
    "extends: server.yaml\nrisk:\n  highRiskCommands: [echo hello]\n",
  );
  writeFileSync(
    join(dir, "auth.yaml"),
    `tokens:
  - { sha256: ${sha256Hex(APPROVER)}, tenant: acme, roles: [submit, read, approve], name: alice }
tenants:
  acme:
    policy: acme.yaml
`,
  );
  mkdirSync(join(dir, "repo"));
  writeFileSync(join(dir, "repo", "README"), "hello\n");
  if (!existsSync(join(ROOT, "internal/console/dist/index.html")))
    execFileSync(process.execPath, [join(ROOT, "scripts/build-console.ts")], { stdio: "ignore" });
  dev = await startAgentd(
    "dev",
    [
      ...["--data-dir", join(dir, "data"), "--auth-file", join(dir, "auth.yaml")],
      ...["--policy", join(dir, "server.yaml")],
    ],
    { env: { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL } },
  );
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await dev?.stop("SIGTERM").catch(() => undefined);
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("approving with 'propose a rule' makes one pending command rule derived from the call", {
  timeout: 300_000,
}, async () => {
  const out = execFileSync(
    join(ROOT, "bin/agentctl"),
    [
      "run",
      "--repo",
      join(dir, "repo"),
      "--label",
      "repo=web",
      "--prompt",
      "say hello",
      "--no-wait",
    ],
    { encoding: "utf8", env: { ...process.env, AGENTD_ADDR: dev.url, AGENTD_TOKEN: APPROVER } },
  );
  const runId = /\b01[0-9A-HJKMNP-TV-Z]{24}\b/.exec(out)?.[0] as string;
  const page = await browser.newPage();
  await signIn(page, dev.url, APPROVER);
  await page.goto(`${dev.url}/ui/#/approvals`);
  const tick = page.getByTestId("propose-rule").first();
  await tick.waitFor({ timeout: 180_000 });
  assert.match(
    (await page.locator(".propose-rule").first().textContent()) ?? "",
    /allow this command family in this repository/,
  );
  await tick.check();
  await page.getByTestId("approve").first().click();
  await page.close();

  // The approvals page reloads its list once the approval is resolved (the card, and its
  // "a command rule was proposed" line, may be gone by then): the server says what happened.
  const client = new GrpcRunClient(dev.addr, APPROVER);
  try {
    let changes: Awaited<ReturnType<typeof listed>> = [];
    const listed = async () =>
      (await client.unary(RunService.method.listPolicyChanges, {})).changes;
    for (let i = 0; i < 600 && changes.length === 0; i++) {
      changes = await listed();
      if (changes.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(changes.length, 1, "one change proposed by the console's approval");
    const c = changes[0];
    assert.equal(c?.state, PolicyChangeState.PENDING);
    assert.equal(c?.rule?.kind, ProposedRuleKind.COMMAND);
    assert.equal(c?.rule?.command, "echo hello");
    assert.equal(c?.rule?.repo, "web");
    assert.equal(c?.proposedBy, "alice");
    assert.equal(c?.runId, runId);
  } finally {
    client.close();
  }
});
