/**
 * `make demo` as a newcomer runs it (no terminal, no OPENAI_API_KEY): scripts/demo.sh
 * starts `agentd dev` with the bundled replay model, submits the example with agentctl,
 * approves the patch, and the run completes with the fix as its patch. The replay model
 * stops at the first turn that differs from its transcript, so this also guards the
 * conversation agentd builds from the log (a split turn once broke it).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";

const ROOT = join(import.meta.dirname, "..");
const tmp = mkdtempSync(join(tmpdir(), "agentd-demo-test-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

it("scripts/demo.sh completes the example run with the fix as its patch", {
  timeout: 240_000,
}, () => {
  const env: Record<string, string> = { TMPDIR: tmp, AGENTD_DEMO_APPROVE: "auto" };
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith("AGENTD_") && !k.startsWith("OPENAI_")) env[k] ??= v;
  const r = spawnSync("bash", [join(ROOT, "scripts", "demo.sh")], {
    cwd: ROOT,
    env,
    encoding: "utf8",
    timeout: 200_000,
    input: "",
  });
  const out = `${r.stdout}\n${r.stderr}`;
  assert.equal(r.status, 0, out.slice(-4000));
  assert.match(
    out,
    /Done: run \w+ completed; the patch is examples\/fix-failing-test\/agentd\.patch/,
  );
  assert.doesNotMatch(out, /Replay stopped/);
  // The live follow and the replay each tell every model message once (#25: the text was
  // streamed, then printed again after usage.updated), and no bare "(event.type)" line.
  const live = r.stdout.split("==> agentctl run --repo")[1]?.split("==> agentctl artifact get")[0];
  const replay = r.stdout.split("==> agentctl replay")[1];
  assert.ok(live !== undefined && replay !== undefined, "the demo's sections");
  const transcript = JSON.parse(
    readFileSync(join(ROOT, "examples", "fix-failing-test", "transcript.json"), "utf8"),
  ) as { steps: { text?: string }[] };
  for (const [name, section] of [
    ["live", live],
    ["replay", replay],
  ] as const) {
    for (const step of transcript.steps) {
      const first = step.text?.split("\n")[0];
      if (first === undefined || first === "") continue;
      assert.equal(section.split(first).length - 1, 1, `${name}: once: ${first}\n${section}`);
    }
    assert.doesNotMatch(section, /^\s*\([a-z_]+\.[a-z_.]+\)\s*$/m, `${name}: a bare event type`);
  }
  const patch = join(ROOT, "examples", "fix-failing-test", "agentd.patch");
  assert.ok(existsSync(patch));
  assert.match(readFileSync(patch, "utf8"), /max - 1/, "the fix the example needs");
});
