/**
 * The archives the server may serve: finds a run's archive under `--archive-dir`
 * (`DIR/<tenant>/<run_id>/`), opens and verifies it whole (openArchive) on first use, and
 * keeps the last few opened in memory. Read-only: nothing here writes.
 * Must never: serve an archive that did not verify, or one whose directory names (tenant,
 * run) disagree with its manifest; never look outside DIR.
 */
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { TENANT_RE } from "../auth/tokens.ts";
import { ArchiveError } from "./archive-files.ts";
import { RUN_ID_RE } from "./layout.ts";
import { type OpenedArchive, openArchive } from "./open-archive.ts";

export interface ArchiveShelfOptions {
  /** The archive directory (`--archive-dir`). */
  dir: string;
  /** Opened archives kept in memory (their events are). Default 16. */
  keep?: number;
}

export class ArchiveShelf {
  readonly dir: string;
  readonly #keep: number;
  /** runId → the opened archive; insertion order is use order (oldest first). */
  readonly #open = new Map<string, OpenedArchive>();

  constructor(opts: ArchiveShelfOptions) {
    this.dir = opts.dir;
    this.#keep = opts.keep ?? 16;
  }

  /** The directory holding `runId`'s archive, if any tenant has one. */
  async #locate(runId: string): Promise<{ path: string; tenantId: string } | undefined> {
    if (!RUN_ID_RE.test(runId)) return undefined;
    const tenants = await readdir(this.dir).catch(() => [] as string[]);
    for (const tenantId of tenants) {
      if (!TENANT_RE.test(tenantId)) continue;
      const path = join(this.dir, tenantId, runId);
      const st = await lstat(path).catch(() => undefined);
      if (st !== undefined) return { path, tenantId };
    }
    return undefined;
  }

  /**
   * The run's verified archive, or undefined when none holds it. Throws an ArchiveError when
   * one exists but does not verify.
   */
  async find(runId: string): Promise<OpenedArchive | undefined> {
    const cached = this.#open.get(runId);
    if (cached !== undefined) {
      this.#open.delete(runId);
      this.#open.set(runId, cached);
      return cached;
    }
    const where = await this.#locate(runId);
    if (where === undefined) return undefined;
    const a = await openArchive(where.path);
    if (a.manifest.runId !== runId || a.manifest.tenantId !== where.tenantId)
      throw new ArchiveError(
        where.path,
        "manifest.json",
        `names run ${a.manifest.runId} of tenant ${a.manifest.tenantId}, not the directory's`,
      );
    this.#open.set(runId, a);
    if (this.#open.size > this.#keep) this.#open.delete(this.#open.keys().next().value as string);
    return a;
  }
}
