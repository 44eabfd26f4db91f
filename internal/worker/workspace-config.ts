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
import * as tarStream from "tar-stream";
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

export interface WorkspaceConfig {
  skillFiles: { path: string; content: string }[];
  memory?: { path: string; content: string };
  /** test.run's and lint.run's commands as the workspace implies them. */
  commands: RunCommands;
  /** `.agent/config.yaml`'s `image:` (an ecosystem, nothing, or a problem naming the field). */
  image: { ecosystem?: Ecosystem } | { problem: string };
  /** The ecosystem the workspace's files imply. */
  detected: DetectedEcosystem;
}

/** Python test files remembered for detection (their names only), at most. */
const MAX_PYTHON_TESTS = 1000;
const PYTHON_TEST = /(^|\/)(test_[^/]*|[^/]*_test)\.py$/;

/** Bytes of one configuration file that reach the model at most. */
export const MAX_CONFIG_FILE_BYTES = 64 * 1024;

const SKILL_ROOTS = [".agent/skills", ".skills"] as const;
const MEMORY_FILES = ["AGENTS.md", ".agent/memory.md"] as const;

/** The configuration in a workspace archive (empty for no archive). */
export async function workspaceConfigFromArchive(
  tar: Uint8Array | undefined,
): Promise<WorkspaceConfig> {
  if (tar === undefined || tar.byteLength === 0)
    return {
      skillFiles: [],
      commands: {},
      image: {},
      detected: { ecosystem: "base", reason: "an empty workspace" },
    };
  // Streamed: only the few configuration files are kept, whatever the archive's size (the
  // stored form of an upload is the normalised, uncompressed tar, up to 512 MiB of files).
  const { regular, pythonTests, packages } = await configFiles(tar);
  const facts = { files: regular, pythonTests, packages };
  const commands = detectCommands(facts);
  const image = configImage(regular.get(WORKSPACE_CONFIG_FILE));
  const detected = detectEcosystem(facts);
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
      return { skillFiles, memory: { path, content: text(data) }, commands, image, detected };
  }
  return { skillFiles, commands, image, detected };
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
}

/** What the archive holds for the configuration and command detection. */
function configFiles(data: Uint8Array): Promise<Collected> {
  const found = new Map<string, Buffer>();
  const pythonTests: string[] = [];
  const packages = new Set<string>();
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
      stream.on("data", (chunk: unknown) => {
        const c = chunk as Buffer;
        if (keep && bytes < MAX_CONFIG_FILE_BYTES) {
          chunks.push(c);
          bytes += c.length;
        }
      });
      stream.on("end", () => {
        if (keep) found.set(path as string, Buffer.concat(chunks));
        next();
      });
      stream.on("error", () => undefined);
    });
    extract.on("finish", () => resolve({ regular: found, pythonTests, packages }));
    extract.on("error", reject);
  });
  extract.end(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  return done;
}

/** Where installed packages live, not the project's own tests. */
const VENDORED = /(^|\/)(node_modules|\.?venv|site-packages|\.tox|\.git)\//;

function notePython(path: string, tests: string[], packages: Set<string>): void {
  if (VENDORED.test(path)) return;
  if (path.endsWith("/__init__.py")) packages.add(path.slice(0, -"/__init__.py".length));
  else if (PYTHON_TEST.test(path) && tests.length < MAX_PYTHON_TESTS) tests.push(path);
}
