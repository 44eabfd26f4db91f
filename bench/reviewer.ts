/**
 * bench/reviewer: what the model reviewer's own code adds to a call under
 * `approval: reviewer`, the model's latency excluded: building the prompt (fenced
 * blocks, sha256 digest), the AI SDK's request path with a scripted model that answers at
 * once, parsing and gating the verdict. Reported beside the kernel's decision alone for
 * the same call in the same run (ratio of p50s). A real model's answer takes hundreds of
 * milliseconds to seconds; this is the part agentd controls. Run: node bench/reviewer.ts
 */
import { readFileSync } from "node:fs";
import type { EventLog } from "../internal/eventlog/port.ts";
import { createKernel } from "../internal/kernel/kernel.ts";
import { parsePolicy } from "../internal/kernel/policy-loader.ts";
import { reviewCall } from "../internal/kernel/reviewer/review-call.ts";
import { scriptedReviewer, verdictText } from "../internal/testing/reviewer-model.ts";

const parsed = parsePolicy(
  `${readFileSync(new URL("../policy.yaml", import.meta.url), "utf8")}
reviewer: { model: bench, rubric: "Builds and tests are fine; deletions need a person." }
`,
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy does not parse");
const policy = parsed.policy;
const kernel = createKernel({ log: {} as EventLog, policy: () => policy, secretProviders: [] });
const call = {
  callId: "c1",
  tool: "process.run",
  input: { command: "npm run build -- --watch=false" },
};
const { model } = scriptedReviewer(verdictText("allow", 0.95, "a build"));
const preview = {
  summary: `run ${JSON.stringify(call.input.command)} in .`,
  argv: ["npm", "run", "build", "--", "--watch=false"],
  cwd: ".",
  matchedRules: [],
};

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function measure(n: number, fn: () => unknown): Promise<{ p50: number; p99: number }> {
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await fn();
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  lat.sort((a, b) => a - b);
  return { p50: pct(lat, 50), p99: pct(lat, 99) };
}

const review = () =>
  reviewCall({
    model,
    config: policy.reviewer,
    goal: "fix the build",
    tool: call.tool,
    preview,
    personFacts: [],
  });
await measure(500, () => kernel.decideCall(call, {}));
await measure(500, review);
const decision = await measure(5000, () => kernel.decideCall(call, {}));
const reviewer = await measure(5000, review);
const f = (x: number) => `${x.toFixed(3)} ms`;
console.log(`decision alone        p50 ${f(decision.p50)}  p99 ${f(decision.p99)}`);
console.log(`reviewer step (no model latency) p50 ${f(reviewer.p50)}  p99 ${f(reviewer.p99)}`);
console.log(`ratio reviewer/decision p50: ${(reviewer.p50 / decision.p50).toFixed(1)}x`);
