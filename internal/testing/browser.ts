/**
 * A real headless browser for tests: Debian's `chromium` package driven by playwright-core
 * over CDP (no browser download: playwright-core ships none). The executable is
 * $AGENTD_CHROMIUM when set, else what scripts/ensure-chromium.sh prints (as root it
 * installs the package when missing). A missing or broken browser throws, so the caller's
 * test fails with what to install — it never skips.
 * Screenshots go to test-artifacts/screenshots/<name>/ under the repo root (gitignored) for a
 * reviewer to look at.
 */
import { execFileSync } from "node:child_process";
import { accessSync, constants, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, chromium } from "playwright-core";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

let resolved: string | undefined;

/** The chromium executable: $AGENTD_CHROMIUM, else scripts/ensure-chromium.sh's answer. */
export function chromiumPath(): string {
  if (resolved) return resolved;
  const fromEnv = process.env.AGENTD_CHROMIUM;
  if (fromEnv) {
    try {
      accessSync(fromEnv, constants.X_OK);
    } catch {
      throw new Error(
        `AGENTD_CHROMIUM=${fromEnv} is not an executable file: point it at a chromium binary or unset it (scripts/ensure-chromium.sh finds or installs Debian's chromium)`,
      );
    }
    resolved = fromEnv;
    return resolved;
  }
  try {
    resolved = execFileSync(join(root, "scripts", "ensure-chromium.sh"), {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }).trim();
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? "").trim();
    throw new Error(
      `chromium is not available for the browser tests: ${stderr || (err as Error).message} (as root, scripts/ensure-chromium.sh or make test installs it: apt-get install -y chromium; or set AGENTD_CHROMIUM)`,
    );
  }
  if (!resolved) throw new Error("scripts/ensure-chromium.sh printed no chromium path");
  return resolved;
}

/** Launches headless chromium; close it with browser.close(). Throws (never skips) when it cannot. */
export async function launchBrowser(): Promise<Browser> {
  const executablePath = chromiumPath();
  // Chromium refuses to start as root with its sandbox on ("Running as root without
  // --no-sandbox is not supported"), and CI and `make test` run as root in a container, so
  // as root the sandbox is off: the pages are the tests' own, served from loopback. As any
  // other user the sandbox stays on (playwright-core would otherwise add --no-sandbox itself,
  // since its chromiumSandbox option defaults to false).
  const asRoot = process.getuid?.() === 0;
  // /dev/shm is 64 MB in a default Docker container: too small for chromium's shared
  // memory, which crashes tabs; write those files to /tmp instead. (playwright-core passes
  // this switch too; it is here so it does not depend on that default.)
  const args = ["--disable-dev-shm-usage", ...(asRoot ? ["--no-sandbox"] : [])];
  try {
    return await chromium.launch({
      executablePath,
      headless: true,
      chromiumSandbox: !asRoot,
      args,
      timeout: 60_000,
    });
  } catch (err) {
    throw new Error(
      `chromium at ${executablePath} did not start under playwright-core: ${(err as Error).message}`,
    );
  }
}

/** test-artifacts/screenshots/<name> under the repo root, created (gitignored). */
export function screenshotDir(name: string): string {
  if (!/^[\w.-]+$/.test(name) || name === "." || name === "..") {
    throw new Error(`screenshotDir: "${name}" is not a plain directory name`);
  }
  const dir = join(root, "test-artifacts", "screenshots", name);
  mkdirSync(dir, { recursive: true });
  return dir;
}
