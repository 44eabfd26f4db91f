/**
 * Fixtures of the egress tests (issue #16): a policy for runs on the base image with
 * sandbox.network: allowlist and process.run without approval, and the resolver that
 * maps the tests' `*.test` names to 127.0.0.1 (upstreams the test started on loopback).
 */
import type { NetworkPolicy } from "../kernel/network-schema.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { sandboxImage } from "./docker.ts";
import { testImagePolicy } from "./worker-fixtures.ts";

/** The repository's policy on the base image, network allowlist, with `network` over it. */
export function allowlistPolicy(network: Partial<NetworkPolicy>): Policy {
  const base = testImagePolicy();
  return {
    ...base,
    sandbox: {
      ...base.sandbox,
      image: sandboxImage("base"),
      memory: 512 * 1024 ** 2,
      network: "allowlist",
    },
    capabilities: {
      ...base.capabilities,
      "process.run": { ...base.capabilities["process.run"], approval: "never" },
    },
    network: { ...base.network, private: ["127.0.0.1"], ...network },
  };
}

/** `*.test` names are the test's own upstreams on loopback; nothing else resolves. */
export const resolveTestNames = async (host: string): Promise<string[]> =>
  host.endsWith(".test") ? ["127.0.0.1"] : [];
