/**
 * The workspace's own agent configuration: skills (`.agent/skills/<name>/SKILL.md`, then
 * `.skills/<name>/SKILL.md`) and the memory file (`AGENTS.md`, else `.agent/memory.md`).
 *
 * Read by the worker from the archive uploaded at CreateRun, never from the live sandbox:
 * every drive of a run (first start, resume after an approval, takeover after a crash)
 * sees the same configuration, no container exec is spent on it, and a model that writes
 * an AGENTS.md or a SKILL.md during the run cannot give itself new instructions for the
 * next drive. Regular files only (a symlink could point anywhere), each cut at 64 KiB.
 */
import * as tarStream from "tar-stream";
import { normaliseEntryPath } from "../sandbox/workspace-archive.ts";

export interface WorkspaceConfig {
  skillFiles: { path: string; content: string }[];
  memory?: { path: string; content: string };
}

/** Bytes of one configuration file that reach the model at most. */
export const MAX_CONFIG_FILE_BYTES = 64 * 1024;

const SKILL_ROOTS = [".agent/skills", ".skills"] as const;
const MEMORY_FILES = ["AGENTS.md", ".agent/memory.md"] as const;

/** The configuration in a workspace archive (empty for no archive). */
export async function workspaceConfigFromArchive(
  tar: Uint8Array | undefined,
): Promise<WorkspaceConfig> {
  if (tar === undefined || tar.byteLength === 0) return { skillFiles: [] };
  // Streamed: only the few configuration files are kept, whatever the archive's size (the
  // stored form of an upload is the normalised, uncompressed tar, up to 512 MiB of files).
  const regular = await configFiles(tar);
  const text = (data: Buffer): string => data.subarray(0, MAX_CONFIG_FILE_BYTES).toString("utf8");

  const skillFiles: { path: string; content: string }[] = [];
  for (const root of SKILL_ROOTS) {
    const prefix = `${root}/`;
    const paths = [...regular.keys()].filter((p) => p.startsWith(prefix)).sort();
    for (const path of paths) skillFiles.push({ path, content: text(regular.get(path) as Buffer) });
  }
  for (const path of MEMORY_FILES) {
    const data = regular.get(path);
    if (data !== undefined) return { skillFiles, memory: { path, content: text(data) } };
  }
  return { skillFiles };
}

/** A path this module reads: a skill file one level under a skill root, or a memory file. */
function isConfigPath(path: string): boolean {
  if ((MEMORY_FILES as readonly string[]).includes(path)) return true;
  return SKILL_ROOTS.some(
    (root) => path.startsWith(`${root}/`) && /^[^/]+\/SKILL\.md$/.test(path.slice(root.length + 1)),
  );
}

/** The regular files of the archive that isConfigPath names, each cut at the cap. */
function configFiles(data: Uint8Array): Promise<Map<string, Buffer>> {
  const found = new Map<string, Buffer>();
  const extract = tarStream.extract();
  const done = new Promise<Map<string, Buffer>>((resolve, reject) => {
    extract.on("entry", (header, stream, next) => {
      let path: string | undefined;
      try {
        path = normaliseEntryPath(header.name);
      } catch {
        path = undefined; // validated at CreateRun; nothing to read here
      }
      const keep = header.type === "file" && path !== undefined && isConfigPath(path);
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
    extract.on("finish", () => resolve(found));
    extract.on("error", reject);
  });
  extract.end(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  return done;
}
