/**
 * The workspace's own agent configuration: skills (`.agent/skills/<name>/SKILL.md`, then
 * `.skills/<name>/SKILL.md`), the memory file (`AGENTS.md`, else `.agent/memory.md`), and
 * the test and lint commands it implies (tools/detect-commands.ts), and what decides the
 * run's image: `.agent/config.yaml` `image:` and the detected ecosystem
 * (tools/detect-ecosystem.ts, run-image.ts).
 *
 * Read by the worker from the archive uploaded at CreateRun, never from the live sandbox:
 * every drive of a run (first start, resume after an approval, takeover after a crash)
 * sees the same configuration, no container exec is spent on it, and a model that writes
 * an AGENTS.md or a SKILL.md during the run cannot give itself new instructions for the
 * next drive. Regular files only (a symlink could point anywhere), each cut at 64 KiB.
 */
import { createHash } from "node:crypto";
import { once } from "node:events";
import * as tarStream from "tar-stream";
import type { WorkspaceSource } from "../sandbox/port.ts";
import { normaliseEntryPath } from "../sandbox/workspace-archive.ts";
import type { RunCommands } from "../tools/command-spec.ts";
import {
  configImage,
  DETECTION_FILES,
  detectCommands,
  type Ecosystem,
  WORKSPACE_CONFIG_FILE,
} from "../tools/detect-commands.ts";
import { type DetectedEcosystem, detectEcosystem } from "../tools/detect-ecosystem.ts";
import { SETUP_FILES } from "../tools/setup-detect.ts";
import { imageOfConfig } from "./requested-image.ts";

export interface WorkspaceConfig {
  skillFiles: { path: string; content: string }[];
  memory?: { path: string; content: string };
  /** test.run's and lint.run's commands as the workspace implies them. */
  commands: RunCommands;
  /** `.agent/config.yaml` `image:` as written (a reference, or an ecosystem image's name). */
  image?: string;
  /** That `image:` as an ecosystem (nothing for a reference or no field; a problem names the field). */
  ecosystemImage: { ecosystem?: Ecosystem } | { problem: string };
  /** The ecosystem the workspace's files imply. */
  detected: DetectedEcosystem;
  /**
   * sha256 (hex) of each root-level setup input (setup-detect.ts SETUP_FILES) over its whole
   * content, by path: what keys the run's dependency cache (worker/setup/cache-key.ts).
   */
  setupInputs: ReadonlyMap<string, string>;
}

/** Python test files remembered for detection (their names only), at most. */
const MAX_PYTHON_TESTS = 1000;
const PYTHON_TEST = /(^|\/)(test_[^/]*|[^/]*_test)\.py$/;

/** Bytes of one configuration file that reach the model at most. */
export const MAX_CONFIG_FILE_BYTES = 64 * 1024;

const SKILL_ROOTS = [".agent/skills", ".skills"] as const;
const MEMORY_FILES = ["AGENTS.md", ".agent/memory.md"] as const;

/**
 * The configuration in a workspace archive (empty for no archive): in memory, or streamed
 * from the store (the run's upload, run-artifacts.ts).
 */
export async function workspaceConfigFromArchive(
  tar: Uint8Array | WorkspaceSource | undefined,
): Promise<WorkspaceConfig> {
  const size = tar === undefined ? 0 : tar instanceof Uint8Array ? tar.byteLength : tar.size;
  if (tar === undefined || size === 0)
    return {
      skillFiles: [],
      commands: {},
      ecosystemImage: {},
      detected: { ecosystem: "base", reason: "an empty workspace" },
      setupInputs: new Map(),
    };
  // Streamed: only the few configuration files are kept, whatever the archive's size (the
  // stored form of an upload is the normalised, uncompressed tar, up to 512 MiB of files).
  const { regular, pythonTests, packages, digests: setupInputs } = await configFiles(tar);
  const facts = { files: regular, pythonTests, packages };
  const commands = detectCommands(facts);
  const configData = regular.get(WORKSPACE_CONFIG_FILE);
  const image = imageOfConfig(configData);
  const ecosystemImage = configImage(configData);
  const detected = detectEcosystem(facts);
  const common = { commands, ecosystemImage, detected, setupInputs };
  const withImage = <T extends object>(c: T): T => (image === undefined ? c : { ...c, image });
  const text = (data: Buffer): string => data.subarray(0, MAX_CONFIG_FILE_BYTES).toString("utf8");

  const skillFiles: { path: string; content: string }[] = [];
  for (const root of SKILL_ROOTS) {
    const prefix = `${root}/`;
    const paths = [...regular.keys()].filter((p) => p.startsWith(prefix)).sort();
    for (const path of paths) skillFiles.push({ path, content: text(regular.get(path) as Buffer) });
  }
  for (const path of MEMORY_FILES) {
    const data = regular.get(path);
    if (data !== undefined)
      return withImage({ skillFiles, memory: { path, content: text(data) }, ...common });
  }
  return withImage({ skillFiles, ...common });
}

/** A path this module reads: a skill file one level under a skill root, or a memory file. */
function isConfigPath(path: string): boolean {
  if ((MEMORY_FILES as readonly string[]).includes(path)) return true;
  if (DETECTION_FILES.includes(path)) return true;
  return SKILL_ROOTS.some(
    (root) => path.startsWith(`${root}/`) && /^[^/]+\/SKILL\.md$/.test(path.slice(root.length + 1)),
  );
}

interface Collected {
  /** The regular files isConfigPath names, each cut at the cap. */
  regular: Map<string, Buffer>;
  pythonTests: string[];
  /** Folders with an __init__.py. */
  packages: Set<string>;
  /** sha256 of each setup input over its whole content. */
  digests: Map<string, string>;
}

/** What the archive holds for the configuration and command detection. */
function configFiles(data: Uint8Array | WorkspaceSource): Promise<Collected> {
  const found = new Map<string, Buffer>();
  const pythonTests: string[] = [];
  const packages = new Set<string>();
  const digests = new Map<string, string>();
  const extract = tarStream.extract();
  const done = new Promise<Collected>((resolve, reject) => {
    extract.on("entry", (header, stream, next) => {
      let path: string | undefined;
      try {
        path = normaliseEntryPath(header.name);
      } catch {
        path = undefined; // validated at CreateRun; nothing to read here
      }
      const keep = header.type === "file" && path !== undefined && isConfigPath(path);
      if (header.type === "file" && path !== undefined) notePython(path, pythonTests, packages);
      const chunks: Buffer[] = [];
      let bytes = 0;
      const hash =
        header.type === "file" && path !== undefined && SETUP_FILES.includes(path)
          ? createHash("sha256")
          : undefined;
      stream.on("data", (chunk: unknown) => {
        const c = chunk as Buffer;
        hash?.update(c);
        if (keep && bytes < MAX_CONFIG_FILE_BYTES) {
          chunks.push(c);
          bytes += c.length;
        }
      });
      stream.on("end", () => {
        if (keep) found.set(path as string, Buffer.concat(chunks));
        if (hash !== undefined) digests.set(path as string, hash.digest("hex"));
        next();
      });
      stream.on("error", () => undefined);
    });
    extract.on("finish", () => resolve({ regular: found, pythonTests, packages, digests }));
    extract.on("error", reject);
  });
  if (data instanceof Uint8Array) {
    extract.end(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    return done;
  }
  // Fed with back-pressure: a chunk or two of the archive in memory at a time.
  return Promise.all([feedExtract(data.open(), extract), done]).then(([, c]) => c);
}

/** Writes `source` into `extract` as it drains; a failed read destroys it with the error. */
async function feedExtract(
  source: AsyncIterable<Uint8Array>,
  extract: tarStream.Extract,
): Promise<void> {
  try {
    for await (const chunk of source) {
      if (extract.destroyed) return;
      if (!extract.write(chunk)) await once(extract, "drain");
    }
    extract.end(null);
  } catch (err) {
    extract.destroy(err as Error);
  }
}

/** Where installed packages live, not the project's own tests. */
const VENDORED = /(^|\/)(node_modules|\.?venv|site-packages|\.tox|\.git)\//;

function notePython(path: string, tests: string[], packages: Set<string>): void {
  if (VENDORED.test(path)) return;
  if (path.endsWith("/__init__.py")) packages.add(path.slice(0, -"/__init__.py".length));
  else if (PYTHON_TEST.test(path) && tests.length < MAX_PYTHON_TESTS) tests.push(path);
}
