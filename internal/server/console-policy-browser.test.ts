/**
 * The console shows which policy decided each call (issue #29, provenance): in Chromium
 * against `agentd dev` (embedded log, Docker sandbox, the example's replay model), a run's
 * tool calls carry "policy: server agentd-policy.yaml sha256:<12 hex>", the digest being
 * the example policy's canonical digest computed here from the file, and the full digest
 * in the element's title.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, it } from "node:test";
import type { Browser } from "playwright-core";
import { policyDigest } from "../kernel/policy-digest.ts";
import { loadPolicyFile } from "../kernel/policy-loader.ts";
import { launchBrowser } from "../testing/browser.ts";
import { type ConsoleDev, EXAMPLE, signIn, startConsoleDev } from "../testing/console-fixtures.ts";

let c: ConsoleDev;
let browser: Browser;
before(async () => {
  c = await startConsoleDev("console-policy");
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await c?.stop();
});

it("each decided call names the deciding policy's source, file and digest", {
  timeout: 300_000,
}, async () => {
  const digest = policyDigest(loadPolicyFile(join(EXAMPLE, "agentd-policy.yaml")));
  const page = await browser.newPage();
  await signIn(page, c.dev.url, c.approver);
  const runId = c.submit("fix the failing test (which policy decided)");
  await page.goto(`${c.dev.url}/ui/#/runs/${runId}`);
  const label = page.getByTestId("decision-policy").first();
  await label.waitFor({ timeout: 180_000 }); // the run's first decided call
  assert.equal(
    ((await label.textContent()) ?? "").trim(),
    `policy: server agentd-policy.yaml sha256:${digest.slice(0, 12)}`,
  );
  assert.equal(await label.getAttribute("title"), `sha256 ${digest}`);
  // Every tool call shown has one (a call and its decision are committed together; the
  // page may fold them a render apart, so wait for them to agree).
  await page.waitForFunction(
    `(() => {
      const tools = document.querySelectorAll(".ev-tool").length;
      return tools > 0 &&
        document.querySelectorAll(".ev-tool [data-testid=decision-policy]").length === tools;
    })()`,
    undefined,
    { timeout: 60_000 },
  );
  await page.close();
});
