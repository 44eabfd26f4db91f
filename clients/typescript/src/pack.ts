/**
 * Packs a directory into the workspace archive CreateRun takes (gzip-compressed tar).
 *
 * Which files: in a git work tree, what `git ls-files --cached --others --exclude-standard`
 * lists (tracked files, plus untracked ones that no .gitignore, .git/info/exclude or global
 * excludes file ignores); elsewhere, a walk that honours every .gitignore in the tree.
 * Never packed: `.git/` (anywhere), sockets, fifos and devices. Symlinks are packed as
 * links, never followed: a link that points outside the tree (absolute, climbing out with
 * `..`, or resolving out through another link) is left out and reported, and so is any file
 * whose directory resolves outside the tree. The archive is deterministic (sorted, fixed
 * owner and mtime), so an unchanged tree uploads the same bytes (the same digest).
 *
 * Size: reading stops at `maxContentBytes` of file content, and the compressed archive
 * must fit `maxBytes`; either error names the largest entries so the user knows what to
 * add to .gitignore.
 */
import { spawnSync } from "node:child_process";
import { lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import { isAbsolute, join, posix, relative, sep } from "node:path";
import { gzipSync } from "node:zlib";
import * as tar from "tar-stream";
import { IgnoreStack } from "./gitignore.ts";

export interface PackOptions {
  /** The directory to pack. */
  root: string;
  /** Largest compressed archive, bytes. */
  maxBytes: number;
  /** Most file content read, bytes (default 256 MiB). */
  maxContentBytes?: number;
  /** Ask git for the file list when the root is in a work tree (default true). */
  useGit?: boolean;
}

export interface Skipped {
  path: string;
  reason: string;
}

export interface PackResult {
  /** The gzip-compressed tar. */
  archive: Buffer;
  files: number;
  symlinks: number;
  /** Sum of the packed files' sizes. */
  contentBytes: number;
  /** How the file list was made. */
  source: "git" | "walk";
  skipped: Skipped[];
  /** The packed paths, sorted (files and symlinks). */
  paths: string[];
}

/** A packing failure the user can act on (the message says how). */
export class PackError extends Error {
  override name = "PackError";
}

interface Entry {
  path: string;
  type: "file" | "symlink";
  mode: number;
  data?: Buffer;
  linkname?: string;
  size: number;
}

const DEFAULT_MAX_CONTENT = 256 * 1024 * 1024;

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB"];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ${units[u]}`;
}

/** Environment for git without variables that would point it at another repository. */
function gitEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR"])
    delete env[k];
  return env;
}

function git(root: string, args: string[]): { ok: boolean; stdout: string } {
  const r = spawnSync("git", ["-C", root, ...args], {
    env: gitEnv(),
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return { ok: r.status === 0 && r.error === undefined, stdout: r.stdout ?? "" };
}

/** True when `dir` is inside a git work tree (and git is installed and trusts it). */
export function inGitWorkTree(dir: string): boolean {
  const r = git(dir, ["rev-parse", "--is-inside-work-tree"]);
  return r.ok && r.stdout.trim() === "true";
}

/** `git config remote.origin.url` of the work tree containing `dir`, if any. */
export function gitRemoteUrl(dir: string): string | undefined {
  const r = git(dir, ["config", "--get", "remote.origin.url"]);
  const url = r.stdout.trim();
  return r.ok && url !== "" ? url : undefined;
}

/** Paths git would commit under `dir` (relative to it); directories end with "/". */
function gitList(dir: string): string[] | undefined {
  const r = git(dir, ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]);
  if (!r.ok) return undefined;
  return [...new Set(r.stdout.split("\0").filter((p) => p !== ""))];
}

class Packer {
  readonly root: string;
  readonly maxContent: number;
  readonly useGit: boolean;
  readonly entries = new Map<string, Entry>();
  readonly skipped: Skipped[] = [];
  readonly #dirReal = new Map<string, boolean>();
  content = 0;
  source: "git" | "walk" = "walk";

  constructor(root: string, maxContent: number, useGit: boolean) {
    this.root = root;
    this.maxContent = maxContent;
    this.useGit = useGit;
  }

  inside(real: string): boolean {
    return real === this.root || real.startsWith(this.root + sep);
  }

  /** Whether the directory `rel` (relative to the root) really lies inside the tree. */
  dirInside(rel: string): boolean {
    if (rel === "" || rel === ".") return true;
    const known = this.#dirReal.get(rel);
    if (known !== undefined) return known;
    let ok: boolean;
    try {
      ok = this.inside(realpathSync(join(this.root, rel)));
    } catch {
      ok = false;
    }
    this.#dirReal.set(rel, ok);
    return ok;
  }

  /** Packs the subtree `rel` ("" for the root). */
  addTree(rel: string): void {
    const abs = join(this.root, rel);
    if (this.useGit && inGitWorkTree(abs)) {
      const list = gitList(abs);
      if (list !== undefined) {
        if (rel === "") this.source = "git";
        for (const p of list.sort()) {
          const full = rel === "" ? p : `${rel}/${p}`;
          if (p.endsWith("/")) {
            // A nested repository (untracked) or a submodule: its own rules apply inside.
            this.addTree(full.replace(/\/+$/, ""));
          } else {
            this.addPath(full, undefined);
          }
        }
        return;
      }
    }
    this.walk(rel, new IgnoreStack());
  }

  walk(rel: string, parent: IgnoreStack): void {
    const abs = join(this.root, rel);
    let text: string | undefined;
    try {
      text = readFileSync(join(abs, ".gitignore"), "utf8");
    } catch {
      text = undefined;
    }
    const rules = parent.child(rel, text);
    let names: string[];
    try {
      names = readdirSync(abs).sort();
    } catch (err) {
      this.skipped.push({ path: `${rel}/`, reason: (err as Error).message });
      return;
    }
    for (const name of names) {
      if (name === ".git") continue;
      const p = rel === "" ? name : `${rel}/${name}`;
      let st: ReturnType<typeof lstatSync>;
      try {
        st = lstatSync(join(this.root, p));
      } catch {
        continue;
      }
      const isDir = st.isDirectory();
      if (rules.ignores(p, isDir)) continue;
      if (isDir) {
        // A nested git work tree keeps its own rules (as git treats it).
        if (this.useGit && hasGitDir(join(this.root, p))) this.addTree(p);
        else this.walk(p, rules);
      } else {
        this.addPath(p, st);
      }
    }
  }

  addPath(rel: string, known: ReturnType<typeof lstatSync> | undefined): void {
    if (rel.split("/").includes(".git")) return;
    const dir = posix.dirname(rel);
    if (!this.dirInside(dir === "." ? "" : dir)) {
      this.skipped.push({ path: rel, reason: "its directory leads outside the tree (symlink)" });
      return;
    }
    const abs = join(this.root, rel);
    let st = known;
    if (st === undefined) {
      try {
        st = lstatSync(abs);
      } catch {
        return; // tracked but deleted in the work tree: not part of what the user has
      }
    }
    if (st.isDirectory()) {
      this.addTree(rel);
      return;
    }
    if (st.isSymbolicLink()) {
      this.addSymlink(rel, abs);
      return;
    }
    if (!st.isFile()) {
      this.skipped.push({ path: rel, reason: "not a regular file, directory or symlink" });
      return;
    }
    const size = Number(st.size);
    if (this.content + size > this.maxContent) {
      this.entries.set(rel, { path: rel, type: "file", mode: 0o644, size });
      throw new PackError(
        `${this.root}: more than ${formatBytes(this.maxContent)} of files to upload. ${largest(this.entries)}`,
      );
    }
    let data: Buffer;
    try {
      data = readFileSync(abs);
    } catch (err) {
      this.skipped.push({
        path: rel,
        reason: `cannot read it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      });
      return;
    }
    this.content += data.byteLength;
    this.entries.set(rel, {
      path: rel,
      type: "file",
      mode: (Number(st.mode) & 0o111) !== 0 ? 0o755 : 0o644,
      data,
      size: data.byteLength,
    });
  }

  addSymlink(rel: string, abs: string): void {
    let target = readlinkSync(abs);
    if (isAbsolute(target)) {
      // An absolute link into the tree is rewritten relative; anything else stays out.
      let real: string;
      try {
        real = realpathSync(target);
      } catch {
        real = target;
      }
      if (!this.inside(real)) {
        this.skipped.push({ path: rel, reason: `symlink to ${target}, outside the tree` });
        return;
      }
      target =
        relative(join(this.root, posix.dirname(rel)), real)
          .split(sep)
          .join("/") || ".";
    }
    const lexical = posix.normalize(posix.join(posix.dirname(rel), target));
    if (lexical === ".." || lexical.startsWith("../")) {
      this.skipped.push({ path: rel, reason: `symlink to ${target}, outside the tree` });
      return;
    }
    try {
      if (!this.inside(realpathSync(abs))) {
        this.skipped.push({ path: rel, reason: `symlink to ${target} resolves outside the tree` });
        return;
      }
    } catch {
      // A dangling link inside the tree is carried as it is.
    }
    this.entries.set(rel, { path: rel, type: "symlink", mode: 0o777, linkname: target, size: 0 });
  }
}

function hasGitDir(dir: string): boolean {
  try {
    lstatSync(join(dir, ".git"));
    return true;
  } catch {
    return false;
  }
}

/** "Largest: a (3 MiB), b/ (2 MiB) …" by top-level entry and by file. */
function largest(entries: Map<string, Entry>): string {
  const byTop = new Map<string, number>();
  for (const e of entries.values()) {
    const i = e.path.indexOf("/");
    const top = i < 0 ? e.path : `${e.path.slice(0, i)}/`;
    byTop.set(top, (byTop.get(top) ?? 0) + e.size);
  }
  const tops = [...byTop.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 5)
    .map(([p, n]) => `${p} (${formatBytes(n)})`);
  return `Largest: ${tops.join(", ")}. Add what the agent does not need to .gitignore, or pass --repo a smaller directory.`;
}

/** Packs `opts.root` (see the module comment). Throws PackError with what to do. */
export async function packWorkspace(opts: PackOptions): Promise<PackResult> {
  let root: string;
  try {
    root = realpathSync(opts.root);
  } catch (err) {
    throw new PackError(`cannot read the directory ${opts.root}: ${(err as Error).message}`);
  }
  if (!lstatSync(root).isDirectory()) throw new PackError(`${opts.root} is not a directory`);
  const p = new Packer(root, opts.maxContentBytes ?? DEFAULT_MAX_CONTENT, opts.useGit ?? true);
  p.addTree("");
  const entries = [...p.entries.values()].sort((a, b) =>
    a.path < b.path ? -1 : a.path > b.path ? 1 : 0,
  );

  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on("data", (c: unknown) => chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    pack.on("end", resolve);
    pack.on("error", reject);
  });
  const base = { uid: 0, gid: 0, mtime: new Date(0) };
  // A root entry first: an empty tree still makes a valid (non-empty) archive, so the
  // server never mistakes it for "no workspace given".
  pack.entry({ ...base, name: "./", type: "directory", mode: 0o755 });
  for (const e of entries) {
    if (e.type === "symlink") {
      pack.entry({ ...base, name: e.path, type: "symlink", linkname: e.linkname, mode: 0o777 });
    } else {
      pack.entry({ ...base, name: e.path, type: "file", mode: e.mode }, e.data ?? Buffer.alloc(0));
    }
  }
  pack.finalize();
  await ended;
  const archive = gzipSync(Buffer.concat(chunks));
  if (archive.byteLength > opts.maxBytes) {
    throw new PackError(
      `${opts.root}: the workspace archive is ${formatBytes(archive.byteLength)} compressed ` +
        `(${entries.length} files, ${formatBytes(p.content)}); at most ${formatBytes(opts.maxBytes)} ` +
        `can be uploaded (the server's --max-request-bytes; --max-workspace-bytes raises this side). ${largest(p.entries)}`,
    );
  }
  return {
    archive,
    files: entries.filter((e) => e.type === "file").length,
    symlinks: entries.filter((e) => e.type === "symlink").length,
    contentBytes: p.content,
    source: p.source,
    skipped: p.skipped,
    paths: entries.map((e) => e.path),
  };
}
