/**
 * The running process's policy: loaded once at start (a broken file refuses the start),
 * re-read on `reload()` (SIGHUP). A broken reload changes nothing: the last good policy
 * stays in force, and each issue is logged and returned.
 */
import type { Logger } from "../telemetry/logger.ts";
import { loadPolicyFile, type PolicyIssue, readPolicyFile } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";

export type ReloadResult = { ok: true } | { ok: false; issues: PolicyIssue[] };

export interface PolicyStore {
  /** The policy file. */
  readonly path: string;
  /** The policy in force: read it per decision, never keep it (a reload replaces it). */
  current(): Policy;
  /** Re-reads the file; on failure the current policy stays. */
  reload(): ReloadResult;
}

export interface PolicyStoreOptions {
  logger: Pick<Logger, "info" | "error">;
}

/** Loads `path` (throws EVALIDATION listing every issue) and returns the store. */
export function createPolicyStore(path: string, opts: PolicyStoreOptions): PolicyStore {
  let policy = loadPolicyFile(path);
  return {
    path,
    current: () => policy,
    reload() {
      const r = readPolicyFile(path);
      if (!r.ok) {
        for (const i of r.errors) {
          opts.logger.error(
            { policy: path, line: i.line, column: i.column, field: i.field },
            `policy reload: ${i.field}: ${i.message}`,
          );
        }
        opts.logger.error(
          { policy: path, issues: r.errors.length },
          "policy reload failed: keeping the last good policy",
        );
        return { ok: false, issues: r.errors };
      }
      policy = r.policy;
      opts.logger.info({ policy: path }, "policy reloaded");
      return { ok: true };
    },
  };
}
