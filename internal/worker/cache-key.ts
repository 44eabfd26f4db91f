/**
 * The key of a run's dependency cache (issue #24): sha256 over everything that decides what
 * its setup fetches and runs, as uploaded — the tenant, the sandbox image, the ecosystem,
 * the setup's command line, the lockfile's path, and the digest of every root-level setup
 * input (package.json and its lockfile, .npmrc, go.mod and go.sum, …; setup-detect.ts).
 * The repository's identity is that content, not a name: two uploads that declare the same
 * dependencies the same way share a cache within their tenant, and a change to any input
 * is a new key. Never across tenants (the store keeps tenants apart as well).
 *
 * Must never: leave out the tenant, or an input that changes what the setup runs.
 */
import { createHash } from "node:crypto";
import type { SetupSpec } from "../tools/command-spec.ts";

export interface CacheKeyInput {
  tenant: string;
  image: string;
  setup: SetupSpec;
  /** sha256 of each setup input, by path (workspace-config.ts setupInputs). */
  inputs: ReadonlyMap<string, string>;
}

export interface CacheKey {
  key: string;
  lockfileDigest: string;
}

/** The key, or undefined when the setup names no lockfile (nothing keys its downloads). */
export function cacheKey(i: CacheKeyInput): CacheKey | undefined {
  if (i.setup.lockfile === "") return undefined;
  const lockfileDigest = i.inputs.get(i.setup.lockfile);
  if (lockfileDigest === undefined) return undefined;
  const inputs = [...i.inputs.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const doc = JSON.stringify([
    "agentd-depcache-v1",
    i.tenant,
    i.image,
    i.setup.ecosystem,
    i.setup.command,
    i.setup.lockfile,
    inputs,
  ]);
  return { key: createHash("sha256").update(doc).digest("hex"), lockfileDigest };
}
