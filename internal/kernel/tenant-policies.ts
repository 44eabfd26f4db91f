/**
 * Which policy a tenant's runs obey: the tenant's own file (`tenants.<id>.policy` in the
 * auth file), else the server's (--policy). Tenant files go through the server policy's own
 * loader and validation. At start a broken or unreadable tenant file refuses the start,
 * naming the tenant, the file and the line; later (the auth file reloaded, the tenant's
 * file changed, SIGHUP) a broken file keeps that tenant's last good policy and logs why.
 * Read per decision like the server's policy: a reload applies to the next call of every
 * run, on whichever worker drives it (a takeover or resume resolves the same way).
 *
 * Must never: give a tenant that names a file of its own the server's policy silently (a
 * tenant whose file never loaded at a reload gets the server's, logged as an error at
 * each attempt), or keep a tenant's policy after the auth file stopped naming it.
 */
import { AgentdError } from "../errors.ts";
import type { Logger } from "../telemetry/logger.ts";
import { formatPolicyIssues, readPolicyFile } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
import type { PolicyStore } from "./policy-store.ts";

/** Whose policy decided: the tenant's own file, or the server's. */
export type PolicySource = "tenant" | "server";

export interface ChosenPolicy {
  policy: Policy;
  source: PolicySource;
  /** The file the policy came from. */
  path: string;
}

export interface TenantPolicies {
  /** The policy in force for `tenantId`: read it per decision, never keep it. */
  forTenant(tenantId: string): ChosenPolicy;
  /** Applies the auth file's tenants again (after it reloaded): new, moved and removed files. */
  sync(): void;
  /** Re-reads every tenant's file (SIGHUP); a broken one keeps its last good policy. */
  reload(): void;
  close(): void;
}

export interface TenantPoliciesOptions {
  /** The server's policy: tenants without a file of their own get it. */
  server: PolicyStore;
  /** Tenant id → absolute path of its policy file, as the auth file says now. */
  files: () => ReadonlyMap<string, string>;
  logger: Pick<Logger, "info" | "error">;
  /**
   * Calls `onChange` when the file changes (the server's `watchFile`); default none: only
   * `reload()` and `sync()` re-read.
   */
  watch?: (path: string, onChange: () => void) => { close(): void } | undefined;
  /** The auth file's key that names these files (errors name `tenants.<id>.<key>`); default "policy". */
  key?: string;
}

interface Entry {
  /** The file the auth file names now. */
  path: string;
  /** The last good policy (and the file it came from); none: never loaded. */
  good?: { policy: Policy; path: string };
  watcher?: { close(): void } | undefined;
}

/** Loads every tenant's file (throws EVALIDATION naming the tenant, file and line). */
export function createTenantPolicies(opts: TenantPoliciesOptions): TenantPolicies {
  /** The auth file's key, in messages ("policy", "shadowPolicy"). */
  const key = opts.key ?? "policy";
  const entries = new Map<string, Entry>();
  const watchEntry = (id: string, e: Entry): void => {
    e.watcher?.close();
    e.watcher = opts.watch?.(e.path, () => void load(id, e));
  };
  /** Reads `e.path`; on success it becomes the tenant's policy. */
  const load = (id: string, e: Entry): boolean => {
    if (entries.get(id) !== e) return false; // dropped or replaced meanwhile
    const r = readPolicyFile(e.path);
    if (r.ok) {
      e.good = { policy: r.policy, path: e.path };
      opts.logger.info({ tenant: id, policy: e.path }, `tenant ${key} loaded`);
      return true;
    }
    for (const i of r.errors)
      opts.logger.error(
        { tenant: id, policy: i.file, line: i.line, column: i.column, field: i.field },
        `tenant ${id} ${key}: ${i.field}: ${i.message}`,
      );
    opts.logger.error(
      { tenant: id, policy: e.path, issues: r.errors.length, keeps: e.good?.path ?? "server" },
      e.good === undefined
        ? `tenant ${id}: its ${key} ${e.path} did not load; its runs use the server's ${key} until it does`
        : `tenant ${id}: ${key} reload failed; keeping its last good ${key} (${e.good.path})`,
    );
    return false;
  };

  // At start: every file loads, or the start is refused.
  for (const [id, path] of opts.files()) {
    const r = readPolicyFile(path);
    if (!r.ok) {
      const n = r.errors.length;
      throw new AgentdError(
        "EVALIDATION",
        `tenant ${id}: invalid ${key} ${path} (${n} ${n === 1 ? "issue" : "issues"}):\n${formatPolicyIssues(r.errors)}`,
        { field: `tenants.${id}.${key}` },
      );
    }
    const e: Entry = { path, good: { policy: r.policy, path } };
    entries.set(id, e);
    watchEntry(id, e);
  }

  return {
    forTenant(tenantId) {
      const good = entries.get(tenantId)?.good;
      if (good !== undefined) return { policy: good.policy, source: "tenant", path: good.path };
      return { policy: opts.server.current(), source: "server", path: opts.server.path };
    },
    sync() {
      const files = opts.files();
      for (const [id, e] of entries) {
        if (files.has(id)) continue;
        e.watcher?.close();
        entries.delete(id);
        opts.logger.info({ tenant: id }, `tenant ${key} dropped: the tenant uses the server's`);
      }
      for (const [id, path] of files) {
        const was = entries.get(id);
        if (was?.path === path) {
          load(id, was); // the auth file reloaded: its tenants' files are read again too
          continue;
        }
        const e: Entry = { path, ...(was?.good === undefined ? {} : { good: was.good }) };
        was?.watcher?.close();
        entries.set(id, e);
        load(id, e);
        watchEntry(id, e);
      }
    },
    reload() {
      for (const [id, e] of entries) load(id, e);
    },
    close() {
      for (const e of entries.values()) e.watcher?.close();
      entries.clear();
    },
  };
}
