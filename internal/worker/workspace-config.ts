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
import { readWorkspaceArchive } from "../sandbox/workspace-archive.ts";

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
  // The archive was validated and normalised at CreateRun; limits as for the upload.
  const files = await readWorkspaceArchive(tar, { lenient: true });
  const regular = new Map<string, Buffer>();
  for (const f of files) if (f.type === "file" && f.data !== undefined) regular.set(f.path, f.data);
  const text = (data: Buffer): string => data.subarray(0, MAX_CONFIG_FILE_BYTES).toString("utf8");

  const skillFiles: { path: string; content: string }[] = [];
  for (const root of SKILL_ROOTS) {
    const prefix = `${root}/`;
    const paths = [...regular.keys()]
      .filter((p) => p.startsWith(prefix) && /^[^/]+\/SKILL\.md$/.test(p.slice(prefix.length)))
      .sort();
    for (const path of paths) skillFiles.push({ path, content: text(regular.get(path) as Buffer) });
  }
  for (const path of MEMORY_FILES) {
    const data = regular.get(path);
    if (data !== undefined) return { skillFiles, memory: { path, content: text(data) } };
  }
  return { skillFiles };
}
