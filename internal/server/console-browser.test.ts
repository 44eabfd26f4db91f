/**
 * The web console (issue #18) in a real browser: Debian's chromium through playwright-core
 * against `agentd dev` (embedded log, Docker sandbox, the example's replay model, whose
 * patch waits for a person). A wrong token is refused; a run submitted through the API
 * shows up waiting; its diff is visible; the approve click resumes it and the page shows
 * it completed without a reload, its failed test run red with the failing test in a
 * table; a deny; a read-only token sees no approve button.
 * Screenshots of each page at 1280 px and at phone width go to
 * test-artifacts/screenshots/console (looked at by people, not by the test).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { launchBrowser, screenshotDir } from "../testing/browser.ts";
import { type ConsoleDev, signIn, startConsoleDev } from "../testing/console-fixtures.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

let c: ConsoleDev;
let browser: Browser;
let client: GrpcRunClient;
const shots = screenshotDir("console");

before(async () => {
  c = await startConsoleDev("console");
  client = new GrpcRunClient(c.dev.addr, c.approver);
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await c?.stop();
});

async function shoot(page: Page, name: string): Promise<void> {
  for (const [w, h, tag] of [
    [1280, 800, "desktop"],
    [390, 844, "phone"],
  ] as const) {
    await page.setViewportSize({ width: w, height: h });
    await page.screenshot({ path: join(shots, `${name}-${tag}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** Every control has a name a screen reader can say (a label, its text, or aria-label). */
async function assertLabelled(page: Page): Promise<void> {
  const unlabelled = await page.evaluate(`[...document.querySelectorAll("input, select, textarea")]
    .filter((e) => !(e.labels?.length || e.getAttribute("aria-label") || e.getAttribute("aria-labelledby")))
    .map((e) => e.outerHTML.slice(0, 80))`);
  assert.deepEqual(unlabelled, []);
  for (const b of await page.getByRole("button").all()) {
    const name = ((await b.getAttribute("aria-label")) ?? (await b.textContent()) ?? "").trim();
    assert.notEqual(name, "", "a button without a name");
  }
}

/** Decides every approval of the run from its page, one after another, until it ends. */
async function decideUntilEnd(page: Page, decide: "approve" | "deny"): Promise<string> {
  const state = page.getByTestId("run-state");
  for (let i = 0; i < 10; i++) {
    const button = page.getByTestId(decide);
    const ended = state.filter({ hasText: /COMPLETED|FAILED|CANCELLED/i });
    await Promise.race([
      button.first().waitFor({ timeout: 60_000 }),
      ended.waitFor({ timeout: 60_000 }),
    ]);
    if (await ended.count()) return (await state.textContent()) ?? "";
    await page.getByTestId("reason").first().fill(`${decide} from the console test`);
    await button.first().click();
    await button.first().waitFor({ state: "detached", timeout: 30_000 });
  }
  return (await state.textContent()) ?? "";
}

describe("the web console", { timeout: 300_000 }, () => {
  it("refuses a wrong token and keeps it out of the URL", async () => {
    const page = await browser.newPage();
    await page.goto(`${c.dev.url}/ui/`);
    await shoot(page, "sign-in");
    // By keyboard only: type, Enter.
    await page.getByTestId("token-input").focus();
    await page.keyboard.type("not-a-token");
    await page.keyboard.press("Enter");
    await page.getByRole("alert").waitFor();
    assert.match((await page.getByRole("alert").textContent()) ?? "", /token/i);
    assert.ok(!page.url().includes("not-a-token"));
    await page.close();
  });

  it("shows a run waiting with its diff; the approve click resumes it to completion without a reload", async () => {
    const page = await browser.newPage();
    await signIn(page, c.dev.url, c.approver);
    const runId = c.submit("fix the failing test");
    const row = page.getByTestId(`run-row-${runId}`);
    await row.waitFor({ timeout: 120_000 }); // live: no reload
    await shoot(page, "runs");
    await page.goto(`${c.dev.url}/ui/#/approvals`);
    await page.getByTestId("approval-diff").first().waitFor({ timeout: 90_000 });
    await shoot(page, "approvals");
    await assertLabelled(page);
    await page.goto(`${c.dev.url}/ui/#/runs/${runId}`);
    const diff = page.getByTestId("approval-diff").first();
    await diff.waitFor({ timeout: 120_000 });
    assert.match((await diff.textContent()) ?? "", /^[+-]/m);
    await shoot(page, "run-waiting");
    const navigations: string[] = [];
    page.on("framenavigated", (f) => navigations.push(f.url()));
    const end = await decideUntilEnd(page, "approve");
    assert.match(end, /COMPLETED/i);
    assert.equal(navigations.length, 0, `the page reloaded: ${navigations.join(", ")}`);
    // The first test run failed: red with its counts and exit, its failing test in a table.
    const failing = page.getByRole("table", { name: "Failing tests" }).first();
    await failing.waitFor({ timeout: 120_000 });
    assert.match((await failing.textContent()) ?? "", /text\.test\.js:\d+/);
    const red = page
      .locator(".tool-head .bad")
      .filter({ hasText: /failed/ })
      .first();
    assert.match((await red.textContent()) ?? "", /^\d+ failed, \d+ passed · exit 1/);
    await shoot(page, "run-completed");
    await page.close();
  });

  it("a deny from the console reaches the model; the run goes on without the patch", async () => {
    const page = await browser.newPage();
    await signIn(page, c.dev.url, c.approver);
    const runId = c.submit("fix the failing test (to be denied)");
    await page.goto(`${c.dev.url}/ui/#/runs/${runId}`);
    const end = await decideUntilEnd(page, "deny");
    assert.match(end, /COMPLETED|FAILED/i);
    const s = client.streamEvents({ runId });
    await s.end();
    const denied = s.events.filter(
      (e) => e.payload.case === "approvalResolved" && e.payload.value.decision === 2,
    );
    assert.ok(denied.length >= 1, "the console's deny is in the log");
    await page.close();
  });

  it("a read-only token sees pending approvals but no approve or deny button", async () => {
    const page = await browser.newPage();
    const runId = c.submit("fix the failing test (read only view)");
    await signIn(page, c.dev.url, c.reader);
    await page.goto(`${c.dev.url}/ui/#/runs/${runId}`);
    await page
      .getByTestId("approval-diff")
      .first()
      .waitFor({ timeout: 90_000 })
      .catch(async (err: Error) => {
        const runs = execFileSync(join(ROOT, "bin/agentctl"), ["runs"], {
          encoding: "utf8",
          env: { ...process.env, AGENTD_ADDR: c.dev.url, AGENTD_TOKEN: c.approver },
        });
        const events = execFileSync(join(ROOT, "bin/agentctl"), ["events", runId], {
          encoding: "utf8",
          env: { ...process.env, AGENTD_ADDR: c.dev.url, AGENTD_TOKEN: c.approver },
        });
        const shown = await page
          .locator("body")
          .textContent()
          .then((t) => t ?? "")
          .catch((e: unknown) => `(no page text: ${String(e)})`);
        throw new Error(
          `${err.message}\nruns:\n${runs}\nevents:\n${events.slice(-3000)}\npage:\n${shown.slice(0, 3000)}`,
        );
      });
    assert.equal(await page.getByTestId("approve").count(), 0);
    assert.equal(await page.getByTestId("deny").count(), 0);
    await shoot(page, "run-read-only");
    await client.cancelRun(runId, "done looking");
    await page.close();
  });
});
