/**
 * Shadow mode end to end: a real `agentd dev` (server, worker, Docker sandbox) with an auth
 * file naming two tenants and a scripted model that runs `echo` and reads a file in every
 * run. Tenant `own` names a candidate of its own that asks a person for both tools; the
 * server's candidate (--shadow-policy, for `plain`) decides as the enforced policy does.
 * Every own run completes as the enforced policy says (nobody is asked), each of its calls
 * has a policy.shadow after its policy.decision, plain's runs have none, and `agentctl
 * policy report` counts exactly what the logs hold (per transition and rule, all runs and
 * one run), and agentd_policy_shadow_differences_total{tenant="own"} counts the same.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { Decision, type Event } from "../gen/agentd/v1/events_pb.js";
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

const AGENTCTL = fileURLToPath(new URL("../../bin/agentctl", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "agentd-shadow-e2e-"));
let stub: OpenAiStub;
let dev: AgentdProcess;
let client: GrpcRunClient;
const BASE = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8").replace(
  /# image: agentd-sandbox-base:latest/,
  `image: ${sandboxImage("test")}`,
);
/** BASE with both tools asking a person for every call. */
const ASKING = (() => {
  const out = BASE.replace(
    /repo\.read: \{ approval: never \}/,
    "repo.read: { approval: always }",
  ).replace(/process\.run: \{ approval: risk,/, "process.run: { approval: always,");
  assert.ok(out.includes("repo.read: { approval: always }"), "policy.yaml's repo.read line");
  assert.ok(out.includes("process.run: { approval: always,"), "policy.yaml's process.run line");
  return out;
})();

before(async () => {
  stub = await startOpenAiStub(({ body }) => {
    if (!JSON.stringify(body.messages).includes('"role":"tool"'))
      return {
        chunks: toolCallsReply([
          { id: "c1", name: "process_run", arguments: JSON.stringify({ command: "echo shadow" }) },
          { id: "c2", name: "repo_read", arguments: JSON.stringify({ path: "greet.txt" }) },
        ]),
      };
    return { chunks: textReply(["done"]) };
  });
  writeFileSync(join(dir, "server.yaml"), BASE);
  writeFileSync(join(dir, "server-candidate.yaml"), BASE);
  writeFileSync(join(dir, "own-candidate.yaml"), ASKING);
  writeFileSync(
    join(dir, "auth.yaml"),
    `tokens:
  - { sha256: ${sha256Hex("own-token")}, tenant: own, roles: [submit, read] }
  - { sha256: ${sha256Hex("plain-token")}, tenant: plain, roles: [submit, read] }
  - { sha256: ${sha256Hex("admin-token")}, tenant: ops, roles: [admin] }
tenants:
  own:
    shadowPolicy: own-candidate.yaml
`,
  );
  dev = await startAgentd(
    "dev",
    [
      ...["--data-dir", join(dir, "data"), "--auth-file", join(dir, "auth.yaml")],
      ...["--policy", join(dir, "server.yaml")],
      ...["--shadow-policy", join(dir, "server-candidate.yaml")],
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

/** A new run for `token`'s tenant, waited for until it ends (generously: a loaded machine); its events. */
async function finishedRun(token: string): Promise<{ runId: string; events: Event[] }> {
  const { run } = await client.createRun(
    { prompt: "look around", workspaceTar: await tarOf([{ name: "greet.txt", data: "hi\n" }]) },
    token,
  );
  const runId = run?.runId as string;
  const deadline = Date.now() + 240_000;
  while (Date.now() < deadline) {
    const { run: now } = await client.getRun(runId, token);
    if (now !== undefined && [RunState.COMPLETED, RunState.FAILED].includes(now.state)) {
      assert.equal(now.state, RunState.COMPLETED, `run ${runId} ${dev.output().slice(-3000)}`);
      const history = client.streamEvents({ runId, historyOnly: true }, token);
      await history.end(30_000);
      return { runId, events: history.events };
    }
    assert.notEqual(now?.state, RunState.PAUSED, "the candidate never makes a run wait");
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`run ${runId} did not end within 240 s\n${dev.output().slice(-4000)}`);
}

function agentctl(
  token: string,
  args: string[],
): Promise<{ code: number; out: string; err: string }> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("AGENTD_")) env[k] = v;
  env.AGENTD_ADDR = dev.addr;
  env.AGENTD_TOKEN = token;
  return new Promise((resolve) =>
    execFile(AGENTCTL, args, { env, timeout: 120_000 }, (err, out, errOut) =>
      resolve({
        code: err === null ? 0 : Number((err as { code?: number }).code ?? 1),
        out,
        err: errOut,
      }),
    ),
  );
}

/** Waits (generously: a loaded machine) until the server logged a line matching `re`. */
async function waitForLog(re: RegExp): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (re.test(dev.output())) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no ${re} in the server's log within 60 s\n${dev.output().slice(-3000)}`);
}

const shadowsOf = (events: Event[]) =>
  events.flatMap((e) =>
    e.payload.case === "policyShadow" ? [{ seq: e.seq, v: e.payload.value }] : [],
  );

describe("shadow mode over agentd dev", { timeout: 1_200_000 }, () => {
  it("records every difference, changes nothing, and agentctl policy report counts what the log holds", async () => {
    const own = [await finishedRun("own-token"), await finishedRun("own-token")];
    const plain = await finishedRun("plain-token");
    assert.equal(shadowsOf(plain.events).length, 0, "the server's candidate decides as enforced");
    const expected = new Map<string, number>();
    for (const r of own) {
      const s = shadowsOf(r.events);
      assert.equal(s.length, 2, `run ${r.runId}: both calls differ`);
      for (const { seq, v } of s) {
        const decision = r.events.find(
          (e) => e.payload.case === "policyDecision" && e.payload.value.callId === v.callId,
        );
        assert.equal(decision?.seq, seq - 1n, "right after the call's policy.decision");
        assert.equal(v.candidate?.decision, Decision.PREVIEW_APPROVAL);
        assert.equal(v.candidate?.policyFile, "own-candidate.yaml");
        assert.equal(v.enforced?.policyFile, "server.yaml");
        const k = `${v.enforced?.rule}→${v.candidate?.rule}`;
        expected.set(k, (expected.get(k) ?? 0) + 1);
      }
      assert.ok(r.events.some((e) => e.payload.case === "toolResult" && e.payload.value.ok));
      assert.ok(!r.events.some((e) => e.payload.case === "approvalRequested"), "nobody asked");
    }

    // The metric counts the same differences, under the tenant's label (admin-only series).
    const text = await (
      await fetch(`${dev.url}/metrics/tenants`, {
        headers: { authorization: "Bearer admin-token" },
      })
    ).text();
    const counted = [
      ...text.matchAll(/^agentd_policy_shadow_differences_total\{([^}]*)\} (\d+)/gm),
    ].filter((m) => m[1]?.includes('tenant="own"'));
    assert.equal(
      counted.reduce((n, m) => n + Number(m[2]), 0),
      4,
      text
        .split("\n")
        .filter((l) => l.includes("shadow"))
        .join("\n"),
    );
    assert.ok(
      !/^agentd_policy_shadow_differences_total\{[^}]*tenant="plain"/m.test(text),
      "no difference for plain, no series",
    );

    const all = await agentctl("own-token", ["policy", "report", "--since", "1h", "--json"]);
    assert.equal(all.code, 0, all.err);
    const report = JSON.parse(all.out) as {
      total: number;
      runs: number;
      transitions: {
        rules: {
          enforcedRule: string;
          candidateRule: string;
          count: number;
          examples: { runId: string }[];
        }[];
      }[];
    };
    assert.equal(report.total, 4);
    assert.equal(report.runs, 2);
    const got = new Map<string, number>();
    for (const t of report.transitions)
      for (const r of t.rules) got.set(`${r.enforcedRule}→${r.candidateRule}`, r.count);
    assert.deepEqual([...got].sort(), [...expected].sort());

    const one = await agentctl("own-token", [
      "policy",
      "report",
      "--since",
      "1h",
      "--run",
      own[0]?.runId as string,
    ]);
    assert.equal(one.code, 0, one.err);
    assert.match(one.out, /^2 call\(s\) or connection\(s\) in 1 run\(s\)/);
    assert.match(one.out, /→ ask/);

    const none = await agentctl("plain-token", ["policy", "report", "--since", "1h"]);
    assert.equal(none.code, 0, none.err);
    assert.match(none.out, /^no policy\.shadow events since/);

    // Another tenant's run is not found: the request failed (exit 4), as for other commands.
    const foreign = await agentctl("plain-token", [
      ...["policy", "report", "--since", "1h", "--run", own[0]?.runId as string],
    ]);
    assert.equal(foreign.code, 4, foreign.err);

    const bad = await agentctl("own-token", ["policy", "report", "--since", "soon"]);
    assert.equal(bad.code, 64, "a bad flag is a usage error");
    assert.match(bad.err, /--since/);
  });

  it("the candidate reloads like the enforced policy: a broken file keeps the last good one, a new one applies to the next call", async () => {
    const candidate = join(dir, "own-candidate.yaml");
    writeFileSync(candidate, "version: 1\ncapabilities:\n  repo.read: { approval: sometimes }\n");
    await waitForLog(/tenant own: shadowPolicy reload failed; keeping its last good shadowPolicy/);
    const kept = await finishedRun("own-token");
    assert.equal(shadowsOf(kept.events).length, 2, "the last good candidate still asks for both");
    writeFileSync(candidate, BASE);
    await waitForLog(/"msg":"tenant shadowPolicy loaded"/);
    const same = await finishedRun("own-token");
    assert.equal(shadowsOf(same.events).length, 0, "the new candidate decides as enforced");
  });
});
