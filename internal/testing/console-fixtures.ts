/**
 * Fixtures of the web console's browser tests: `agentd dev` on the example repository
 * (its replay model, its policy whose patch waits for a person) with an auth file of an
 * approver and a reader, the console built if it is not, runs submitted as CI would
 * (`agentctl run --repo … --no-wait`), and signing in through the token form.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { type AgentdProcess, startAgentd, writeAuthFile } from "./agentd-process.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
export const EXAMPLE = join(ROOT, "examples/fix-failing-test");

export interface ConsoleDev {
  dev: AgentdProcess;
  dir: string;
  /** The auth file (rewrite it and SIGHUP `dev` to revoke a token). */
  authFile: string;
  approver: string;
  reader: string;
  /** A run of the example repository, submitted with the approver's token: its id. */
  submit(prompt: string): string;
  stop(): Promise<void>;
}

export async function startConsoleDev(name: string): Promise<ConsoleDev> {
  if (!existsSync(join(ROOT, "internal/console/dist/index.html")))
    execFileSync(process.execPath, [join(ROOT, "scripts/build-console.ts")], { stdio: "ignore" });
  const dir = mkdtempSync(join(tmpdir(), `agentd-${name}-`));
  const approver = `${name}-approver-token`;
  const reader = `${name}-reader-token`;
  const authFile = writeAuthFile(dir, [
    { token: approver, tenant: "acme", roles: ["submit", "read", "approve"] },
    { token: reader, tenant: "acme", roles: ["read"] },
  ]);
  const dev = await startAgentd("dev", [
    ...["--data-dir", join(dir, "data"), "--auth-file", authFile],
    ...["--policy", join(EXAMPLE, "agentd-policy.yaml")],
    ...["--replay", join(EXAMPLE, "transcript.json"), "--approval-hold-ms", "120000"],
  ]);
  return {
    dev,
    dir,
    authFile,
    approver,
    reader,
    submit(prompt) {
      const out = execFileSync(
        join(ROOT, "bin/agentctl"),
        ["run", "--repo", EXAMPLE, "--prompt", prompt, "--no-wait"],
        { encoding: "utf8", env: { ...process.env, AGENTD_ADDR: dev.url, AGENTD_TOKEN: approver } },
      );
      const id = /\b01[0-9A-HJKMNP-TV-Z]{24}\b/.exec(out)?.[0];
      if (id === undefined) throw new Error(`agentctl run printed no run id: ${out}`);
      return id;
    },
    async stop() {
      await dev.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Signs in through the token form and waits for the signed-in page. */
export async function signIn(page: Page, url: string, token: string): Promise<void> {
  await page.goto(`${url}/ui/`);
  await page.getByTestId("token-input").fill(token);
  await page.getByTestId("token-form").getByRole("button").click();
  await page.getByRole("navigation").waitFor();
}
