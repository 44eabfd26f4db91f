/**
 * The run driver's dependencies as the worker tests build them: the kernel on the given log
 * and policy, the AI SDK engine on the OpenAI stub (no retries), the repository's skills,
 * default prices and limits. Tests only: never used by the binaries.
 */
import type { ArtifactStore } from "../artifacts/port.ts";
import { createAiSdkEngine, createOpenAiModel } from "../engine/ai-sdk-engine.ts";
import { DEFAULT_PRICE_TABLE } from "../engine/pricing.ts";
import type { EventLog } from "../eventlog/port.ts";
import { createKernel } from "../kernel/kernel.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { SecretProvider } from "../kernel/secrets.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { DEFAULT_RUN_LIMITS, type DriverDeps } from "../worker/run-driver.ts";

export interface StubDriverOptions {
  log: EventLog;
  policy: Policy;
  sandbox: Sandbox;
  artifacts: ArtifactStore;
  /** The OpenAI stub's base URL. */
  baseURL: string;
  secretProviders?: SecretProvider[];
}

export function stubDriverDeps(o: StubDriverOptions, over: Partial<DriverDeps> = {}): DriverDeps {
  const providers = o.secretProviders ?? [];
  return {
    log: o.log,
    kernel: createKernel({
      log: o.log,
      policy: () => o.policy,
      secretProviders: providers,
      artifacts: o.artifacts,
    }),
    engine: createAiSdkEngine({
      model: createOpenAiModel({ baseURL: o.baseURL, apiKey: "k", model: "gpt-4o-mini" }),
      maxRetries: 0,
    }),
    sandbox: o.sandbox,
    artifacts: o.artifacts,
    policy: () => o.policy,
    secretProviders: providers,
    skillsDir: new URL("../../skills", import.meta.url).pathname,
    systemPrompt: "test",
    model: "gpt-4o-mini",
    prices: DEFAULT_PRICE_TABLE,
    limits: DEFAULT_RUN_LIMITS,
    workerId: "w",
    ...over,
  };
}
