/**
 * ApplyPolicyChange and RejectPolicyChange, below the RPC edge. Applying writes the
 * change's file text into the tenant's policy file atomically (a temporary file beside it,
 * fsynced, renamed over it) under the file's lock, only when the file's bytes are still
 * those the diff was made against; the store's compare-and-set makes exactly one of two
 * racing admins win; the policies are reloaded and `policy.change_applied` is recorded.
 *
 * Must never: write a file that changed since the change was proposed, write a policy that
 * does not load, write the server's file for a tenant's rule, or settle a change twice.
 */
import { readFileSync } from "node:fs";
import { open, rename, unlink, writeFile } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { AgentdError } from "../errors.ts";
import { policyDigest } from "../kernel/policy-digest.ts";
import { parsePolicy, resolveRelative } from "../kernel/policy-loader.ts";
import type { PolicyChangesDeps } from "./deps.ts";
import { withFileLock } from "./file-lock.ts";
import { appliedNotice } from "./messages.ts";
import { sha256Hex, stillOneEntry } from "./policy-edit.ts";
import type { Settlement, StoredPolicyChange } from "./port.ts";

async function pending(deps: PolicyChangesDeps, id: string): Promise<StoredPolicyChange> {
  const c = await deps.store.get(id);
  if (c === undefined) throw new AgentdError("ENOTFOUND", `policy change ${id} not found`);
  if (c.state !== "pending")
    throw new AgentdError(
      "ECONFLICT",
      `policy change ${id} was already ${c.state} by ${c.settledBy ?? "someone"}`,
    );
  return c;
}

/** Refuses a change whose tenant has no file of its own, or whose file moved. */
function checkTarget(deps: PolicyChangesDeps, c: StoredPolicyChange): void {
  const chosen = deps.chosen(c.tenantId);
  if (c.needsTenantFile || chosen.source !== "tenant")
    throw new AgentdError(
      "ECONFLICT",
      `tenant ${c.tenantId} has no policy file of its own (its runs obey the server's ${basename(chosen.path)}): name one in the auth file (tenants.${c.tenantId}.policy, e.g. a copy of the server's policy), then reject ${c.id} and propose the rule again`,
    );
  if (chosen.path !== c.path)
    throw new AgentdError(
      "ECONFLICT",
      `tenant ${c.tenantId}'s policy file is now ${basename(chosen.path)}, not ${basename(c.path)} as when ${c.id} was proposed: reject it and propose the rule again`,
    );
}

/** Writes `text` over `path` atomically: a temporary file beside it, fsynced, renamed. */
async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = `${dirname(path)}/.${basename(path)}.${process.pid}.${Date.now()}.tmp`;
  try {
    await writeFile(tmp, text, { flag: "wx", mode: 0o644 });
    const fh = await open(tmp, "r");
    try {
      await fh.datasync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    // Not EIO: the person applying must learn why (a read-only mount is a setup, not a fault).
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    throw new AgentdError(
      "ECONFLICT",
      `cannot write ${basename(path)} (${code}): apply the change's diff by hand, or give the server write access to the file`,
      { cause: err },
    );
  }
  const dir = await open(dirname(path), "r");
  try {
    await dir.sync();
  } catch {
    // some file systems refuse to fsync a directory; the rename is done
  } finally {
    await dir.close();
  }
}

export async function applyChange(
  deps: PolicyChangesDeps,
  id: string,
  by: string,
): Promise<StoredPolicyChange> {
  const first = await pending(deps, id);
  checkTarget(deps, first);
  const applied = await withFileLock(first.path, async () => {
    const c = await pending(deps, id); // another admin may have won while we waited
    const bytes = readFileSync(c.path);
    const now = sha256Hex(bytes);
    if (now !== c.baseSha256)
      throw new AgentdError(
        "ECONFLICT",
        `the policy file ${basename(c.path)} changed since ${id} was proposed (sha256 ${c.baseSha256.slice(0, 12)} → ${now.slice(0, 12)}): the diff no longer applies; reject it (agentctl policy reject ${id}) and propose the rule again (agentctl approve ${c.approvalId} --rule ${c.rule.kind})`,
      );
    const before = parsePolicy(bytes.toString("utf8"), c.path, resolveRelative);
    const after = parsePolicy(c.newText, c.path, resolveRelative);
    if (!after.ok)
      throw new AgentdError(
        "ECONFLICT",
        `${id} no longer loads (${after.errors[0]?.field}: ${after.errors[0]?.message}): reject it and propose the rule again`,
      );
    // What the file extends may have changed since: the change must still add exactly its
    // entry to the policy in force now, never bring back what a base has since dropped.
    if (!before.ok || !stillOneEntry(c.path, c.newText, before.policy, c.rule, c.id))
      throw new AgentdError(
        "ECONFLICT",
        `${id} would change more than its rule: the policy ${basename(c.path)} is built on has changed since it was proposed (what it extends); reject it (agentctl policy reject ${id}) and propose the rule again (agentctl approve ${c.approvalId} --rule ${c.rule.kind})`,
      );
    const s: Settlement = {
      state: "applied",
      by,
      at: (deps.now ?? Date.now)(),
      ...(before.ok ? { oldDigest: policyDigest(before.policy) } : {}),
      newDigest: policyDigest(after.policy),
    };
    const won = await deps.store.settle(id, s);
    if (won === undefined) await pending(deps, id); // names who settled it
    if (won === undefined) throw new AgentdError("ECONFLICT", `policy change ${id} is not pending`);
    try {
      await writeAtomically(c.path, c.newText);
    } catch (err) {
      await deps.store.reopen(id, s).catch(() => undefined);
      throw err;
    }
    return won;
  });
  deps.reload();
  await deps.publish(applied.tenantId, applied.runId, appliedNotice(applied));
  return applied;
}

export async function rejectChange(
  deps: PolicyChangesDeps,
  id: string,
  by: string,
  reason: string,
): Promise<StoredPolicyChange> {
  await pending(deps, id);
  const s: Settlement = {
    state: "rejected",
    by,
    at: (deps.now ?? Date.now)(),
    ...(reason === "" ? {} : { reason }),
  };
  const won = await deps.store.settle(id, s);
  if (won === undefined) {
    await pending(deps, id);
    throw new AgentdError("ECONFLICT", `policy change ${id} is not pending`);
  }
  await deps.publish(won.tenantId, won.runId, appliedNotice(won));
  return won;
}
