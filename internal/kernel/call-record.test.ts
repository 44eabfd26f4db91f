/**
 * What a call's record keeps: `$ENV.NAME` placeholders survive whatever key rules the
 * policy has (a resumed call is rebuilt from the record, and the approver must see where a
 * secret goes), while a literal secret value in the input is hidden. The embedded log; no
 * sandbox is touched on the way to an approval (its methods throw).
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import { createRunSecrets } from "./run-secrets.ts";
import { createRunWriter } from "./run-writer.ts";

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy = {
  ...parsed.policy,
  secrets: { allow: ["NPM_TOKEN"], providers: [{ type: "env" as const }] },
};
const untouchable = new Proxy(
  {},
  {
    get: () => () => {
      throw new Error("the sandbox must not be used");
    },
  },
) as SandboxHandle;

let dir: string;
let log: FileEventLog;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-record-"));
  log = await openFileEventLog({ dir });
});
after(async () => {
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("keeps the input as written after keys (TOKEN=, Authorization:, --author=), placeholders included, and hides secret values", async () => {
  const q = await queueRun(log, { prompt: "p" });
  const fence = await log.bumpEpoch(q.runId);
  const secrets = createRunSecrets(["literal-secret-4242"]);
  const run = {
    ...q,
    fence,
    sandbox: untouchable,
    writer: createRunWriter({ log, ...q, fence, secrets, head: 1 }),
  };
  const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
  const commands = [
    "npm publish --//registry.npmjs.org/:_authToken=$ENV.NPM_TOKEN",
    "NPM_TOKEN=$ENV.NPM_TOKEN npm whoami",
    'curl -H "Authorization: Bearer $ENV.NPM_TOKEN" https://x',
    'git commit --author="A <a@b>" -m x && echo $ENV.NPM_TOKEN literal-secret-4242',
  ];
  for (const [i, command] of commands.entries()) {
    const out = await kernel.handle(run, {
      callId: `c${i}`,
      tool: "process.run",
      input: { command },
    });
    assert.equal(out.kind, "paused", command);
  }
  const events = (await log.read(q.runId, 0)).map((e) => e.event.payload);
  const records = events.flatMap((p) =>
    p.case === "toolCall" ? [JSON.parse(p.value.inputJson).command] : [],
  );
  assert.deepEqual(
    records,
    commands.map((c) => c.replace("literal-secret-4242", "[REDACTED]")),
  );
  const previews = events.flatMap((p) =>
    p.case === "approvalRequested" ? [p.value.preview?.summary ?? ""] : [],
  );
  for (const [i, s] of previews.entries())
    assert.match(s, /\$ENV\.NPM_TOKEN/, `preview ${i} shows where the secret goes`);
});
