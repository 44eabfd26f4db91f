/**
 * Runs every *.test.ts file with Node's test runner. Test files run in parallel
 * processes (two at a time on this 2-core baseline; TEST_CONCURRENCY overrides).
 * Usage: node scripts/run-tests.ts [substring filter...]
 */
import { spawnSync } from "node:child_process";
import { globSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const filters = process.argv.slice(2);
const files = globSync("{cmd,internal,scripts,clients/github-action}/**/*.test.ts", { cwd: root })
  .filter((f) => !f.includes("node_modules"))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error(`run-tests: no test files match ${filters.join(" ")}`);
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? "2";
const res = spawnSync(
  process.execPath,
  ["--test", `--test-concurrency=${concurrency}`, "--test-timeout=180000", ...files],
  { cwd: root, stdio: "inherit" },
);
process.exit(res.status ?? 1);
