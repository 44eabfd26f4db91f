/**
 * Test helpers for the workspace patch: workspaces written as tar streams (tar-stream's
 * pack, hostile entries included), and the real `git apply` of a patch onto the base in a
 * fresh repository, with the resulting tree read back for comparison.
 *
 * For tests only: never imported by production code.
 */
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import * as tar from "tar-stream";
import type { WorkspaceFile } from "./workspace-archive.ts";
import type { WorkspaceDiffResult } from "./workspace-diff.ts";

/** One entry of a test workspace. */
export interface Item {
  path: string;
  type?: "file" | "symlink" | "directory" | "link" | "fifo";
  data?: string | Buffer;
  /** Permission bits; default 0o644 (0o755 for directories). */
  mode?: number;
  /** Symlink target, or a hard link's first path. */
  linkname?: string;
}

/** A file as git leaves it in a work tree. */
export interface TreeEntry {
  kind: "file" | "symlink";
  exec: boolean;
  data: Buffer;
}

/** The tar of `items`, streamed from tar-stream's pack as it produces it. */
export async function* tarStream(items: readonly Item[]): AsyncGenerator<Uint8Array> {
  const pack = tar.pack();
  for (const it of items) {
    const type = it.type ?? "file";
    const mode = it.mode ?? (type === "directory" ? 0o755 : 0o644);
    const header = { name: it.path, type, mode, linkname: it.linkname };
    if (type === "file") pack.entry(header, it.data ?? "");
    else pack.entry(header);
  }
  pack.finalize();
  yield* pack as AsyncIterable<Uint8Array>;
}

/** A whole tar of `items`, in memory. */
export async function tarBytes(items: readonly Item[]): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const c of tarStream(items)) parts.push(c);
  return Buffer.concat(parts);
}

/** `items` as workspace files (the base of a diff). */
export function filesOf(items: readonly Item[]): WorkspaceFile[] {
  return items
    .filter((it) => it.type === undefined || it.type === "file" || it.type === "symlink")
    .map((it) =>
      it.type === "symlink"
        ? { path: it.path, type: "symlink", mode: 0o777, linkname: it.linkname }
        : { path: it.path, type: "file", mode: it.mode ?? 0o644, data: Buffer.from(it.data ?? "") },
    );
}

/** The files and symlinks of `items` as git would check them out (hard links resolved). */
export function treeOf(items: readonly (Item | WorkspaceFile)[]): Map<string, TreeEntry> {
  const tree = new Map<string, TreeEntry>();
  for (const it of items) {
    const mode = it.mode ?? 0o644;
    if (it.type === "symlink")
      tree.set(it.path, { kind: "symlink", exec: false, data: Buffer.from(it.linkname ?? "") });
    else if (it.type === "link") {
      const first = tree.get(it.linkname ?? "");
      if (first) tree.set(it.path, { ...first, exec: (mode & 0o100) !== 0 });
    } else if (it.type === undefined || it.type === "file")
      tree.set(it.path, {
        kind: "file",
        exec: (mode & 0o100) !== 0,
        data: Buffer.from(("data" in it ? it.data : undefined) ?? ""),
      });
  }
  return tree;
}

/**
 * The tree the patch must give: the current workspace, except that an omitted path keeps its
 * base version, a new path the patch does not add (ignored) is absent, and a redacted file
 * holds its redacted text.
 */
export function expectedTree(
  base: Map<string, TreeEntry>,
  current: Map<string, TreeEntry>,
  r: WorkspaceDiffResult,
  redact: (s: string) => string = (s) => s,
): Map<string, TreeEntry> {
  const omitted = new Set(r.omitted.map((o) => o.path));
  const added = new Set(r.added);
  const redacted = new Set(r.redactedFiles);
  const out = new Map<string, TreeEntry>();
  for (const p of new Set([...base.keys(), ...current.keys()])) {
    let e = omitted.has(p)
      ? base.get(p)
      : !base.has(p) && !added.has(p)
        ? undefined
        : current.get(p);
    if (e && redacted.has(p)) e = { ...e, data: Buffer.from(redact(e.data.toString("utf8"))) };
    if (e) out.set(p, e);
  }
  return out;
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@example.com",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@example.com",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** Writes `base` into `dir` (files, symlinks, modes). */
export function writeTree(dir: string, base: Map<string, TreeEntry>): void {
  for (const [p, e] of base) {
    const abs = join(dir, p);
    mkdirSync(dirname(abs), { recursive: true });
    if (e.kind === "symlink") symlinkSync(e.data.toString(), abs);
    else {
      writeFileSync(abs, e.data);
      chmodSync(abs, e.exec ? 0o755 : 0o644);
    }
  }
}

/** The files and symlinks under `dir`, `.git` left out. */
export function readTree(dir: string, rel = "", out = new Map<string, TreeEntry>()) {
  for (const name of readdirSync(join(dir, rel))) {
    const p = rel === "" ? name : `${rel}/${name}`;
    if (p === ".git") continue;
    const st = lstatSync(join(dir, p));
    if (st.isDirectory()) readTree(dir, p, out);
    else if (st.isSymbolicLink())
      out.set(p, { kind: "symlink", exec: false, data: Buffer.from(readlinkSync(join(dir, p))) });
    else
      out.set(p, {
        kind: "file",
        exec: (st.mode & 0o100) !== 0,
        data: readFileSync(join(dir, p)),
      });
  }
  return out;
}

/**
 * Commits `base` in a fresh repository, checks and applies `patch` with the real git, and
 * answers the tree it leaves (throws with git's stderr when git refuses the patch).
 */
export function gitApply(base: Map<string, TreeEntry>, patch: string): Map<string, TreeEntry> {
  const dir = mkdtempSync(join(tmpdir(), "agentd-patch-"));
  try {
    git(dir, "init", "-q");
    writeTree(dir, base);
    git(dir, "add", "-A", "-f");
    git(dir, "commit", "-q", "--allow-empty", "-m", "base");
    writeFileSync(join(dir, ".git", "p.diff"), patch);
    try {
      git(dir, "apply", "--check", ".git/p.diff");
      git(dir, "apply", ".git/p.diff");
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`git apply refused the patch: ${e.stderr ?? e.message}\n${patch}`);
    }
    return readTree(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
