/**
 * The corpus of issue #24 (examples/: one small project per ecosystem) as the tests and
 * bench/repos.ts drive it: which examples, their files as a workspace upload, and the
 * policy their runs get (the repository's default policy.yaml with the network the setup
 * needs). Tests and benchmarks only: never used by the binaries.
 */
import assert from "node:assert/strict";
import { lookup } from "node:dns/promises";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { classifyAddress } from "../egress/destination.ts";
import { NETWORK_PRESETS, type PresetName } from "../kernel/network-presets.ts";
import { readPolicyFile } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { WorkspaceFile } from "../sandbox/workspace-archive.ts";

const ROOT = join(import.meta.dirname, "..", "..");
/** The examples folder. */
export const EXAMPLES = join(ROOT, "examples");

/** The corpus: each example, its ecosystem (run.started) and its registry preset. */
export const CORPUS: readonly { name: string; ecosystem: string; preset: PresetName }[] = [
  { name: "python-billing", ecosystem: "python", preset: "pypi" },
  { name: "go-shortid", ecosystem: "go", preset: "go" },
  { name: "rust-thousands", ecosystem: "rust", preset: "cargo" },
  { name: "java-slugs", ecosystem: "java", preset: "maven" },
  { name: "node-durations", ecosystem: "node", preset: "npm" },
];

/** The example's files as a workspace upload (its transcript stays out: it is the model). */
export function exampleFiles(name: string): WorkspaceFile[] {
  const dir = join(EXAMPLES, name);
  const out: WorkspaceFile[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && entry.name !== "transcript.json")
        out.push({
          path: relative(dir, path),
          type: "file",
          mode: statSync(path).mode & 0o777,
          data: readFileSync(path),
        });
    }
  };
  walk(dir);
  return out;
}

/**
 * The addresses the preset's hosts resolve to that the egress proxy would refuse as not
 * public. On this build machine the registries resolve to 203.0.113.80 (a reserved range,
 * behind a TLS-intercepting mirror), so the policy must list them under network.private, as
 * a deployment behind such a mirror would; on a machine that reaches the registries
 * directly they resolve to public addresses and this adds nothing.
 */
export async function nonPublicAddresses(presets: readonly PresetName[]): Promise<string[]> {
  const out = new Set<string>();
  for (const preset of presets)
    for (const entry of NETWORK_PRESETS[preset]) {
      const host = entry.replace(/:\d+$/, "");
      const addrs = await lookup(host, { all: true }).catch(() => []);
      for (const a of addrs) if (classifyAddress(a.address) !== "public") out.add(a.address);
    }
  return [...out];
}

/** The repository's default policy.yaml with the network an example's setup needs. */
export async function corpusPolicy(preset: PresetName): Promise<Policy> {
  const loaded = readPolicyFile(join(ROOT, "policy.yaml"));
  assert.ok(loaded.ok, JSON.stringify(loaded.ok ? "" : loaded.errors));
  const p = loaded.policy;
  return {
    ...p,
    sandbox: { ...p.sandbox, network: "allowlist" },
    network: { ...p.network, presets: [preset], private: await nonPublicAddresses([preset]) },
  };
}
