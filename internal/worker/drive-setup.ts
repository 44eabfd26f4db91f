/**
 * The setup step of a run (issue #24): once per run, before the model's first step, the
 * run's setup line (policy tools.setup, else `.agent/config.yaml` commands.setup, else the
 * lockfile's; tools/setup-detect.ts) runs as a `setup.run` call through the kernel — the
 * policy decides it like any call (the default policy lets it run without a person), and it
 * is recorded as tool.call / tool.output / tool.result, its connections as network.request.
 *
 * Caches: before the setup, a cache saved by an earlier run of the tenant under the same key
 * (cache-key.ts) is unpacked into /cache and recorded (`cache.restored`: key, archive digest,
 * the run that saved it); after a successful setup that restored nothing, /cache is saved
 * (`cache.saved`). Only the setup's state is ever saved, before the model runs: nothing the
 * model does reaches another run's cache. An exact hit (setup-exact-hit.ts: the archive's key
 * is this run's, and the detected line's whole outcome is in it) does not run the line: the
 * setup.run call is decided and recorded as ever, and answers `cached: true` with the
 * archive's digest and the run that saved it.
 *
 * A failed setup does not end the run: the model is told (an agentd notice besides the
 * result) and may fix what it can. A run that resumes in a new container (after a pause, or
 * a takeover of a container that was gone) gets its dependencies back: the archive its log
 * names is restored (`cache.restored`, reason "resume", when the store still has it), then
 * its setup runs again as a new recorded call (from that cache: fast, mostly offline), so
 * /cache and /workspace (node_modules, which a snapshot may or may not hold) are complete.
 * Not saved again: only a first setup's state is.
 *
 * Nothing is saved while the run holds a secret anywhere (cache-save-guard.ts): whatever
 * tree the archive takes, a held path never reaches the tenant's shared cache.
 *
 * Must never: save /cache after the model's first step, restore an archive without
 * recording its digest, let one tenant's archive into another tenant's run, or save while
 * the run holds a secret.
 */

import { create } from "@bufbuild/protobuf";
import {
  CacheRestoredSchema,
  CacheSavedSchema,
  type Event,
  OutputMessageSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { KernelRun } from "../kernel/kernel.ts";
import { CACHE_DIR } from "../sandbox/cache-env.ts";
import { pickCommands, type SetupSpec } from "../tools/command-spec.ts";
import { SETUP_TOOL } from "../tools/setup-run.ts";
import { type CacheKey, type CacheKeyInput, cacheKey } from "./cache-key.ts";
import { cacheSaveRefusal } from "./cache-save-guard.ts";
import { type ArchiveFacts, archiveCache, NODE_MODULES, restoreCache } from "./cache-transfer.ts";
import { usedCallIds } from "./call-id-reuse.ts";
import { type Drive, WALL_BUDGET_REASON } from "./drive.ts";
import { askForHosts, handleAttributed } from "./drive-egress.ts";
import { wallLeftMs, wallSpent } from "./drive-usage.ts";
import type { Next } from "./run-driver.ts";
import { exactHit } from "./setup-exact-hit.ts";

/**
 * Runs the setup when the run needs it; a Next when the drive must go elsewhere (hold), or
 * must end: the setup, as any call, runs with the run's remaining wall time armed on its
 * signal (the cache restore and save around it too) — when it runs out the setup's
 * processes are killed, its result is ELIMIT_TIME, and the run ends ELIMIT_TIME.
 */
export async function setupStep(
  d: Drive,
  inputs: ReadonlyMap<string, string>,
): Promise<Next | undefined> {
  if (wallLeftMs(d) <= 0) return wallSpent(d);
  const disarm = d.armWallBudget(wallLeftMs(d));
  let next: Next | undefined;
  try {
    next = await setupWork(d, inputs);
  } catch (err) {
    // A cache transfer the wall budget stopped throws: the run ends as the budget says.
    if (d.callSignal.reason === WALL_BUDGET_REASON) return wallSpent(d);
    throw err;
  } finally {
    disarm();
  }
  if (wallLeftMs(d) <= 0 || d.callSignal.reason === WALL_BUDGET_REASON) return wallSpent(d);
  return next;
}

async function setupWork(d: Drive, inputs: ReadonlyMap<string, string>): Promise<Next | undefined> {
  const k = d.kernelRun as KernelRun;
  const policy = d.deps.policy();
  const spec = pickCommands(policy.tools, k.commands).setup;
  const cacheOn = d.deps.depCache !== undefined && policy.sandbox.cacheSize > 0;
  const calls = setupCalls(d.events);
  if (calls > 0) {
    // A new container of a run whose setup succeeded: /cache is empty, and /workspace is the
    // last snapshot's or the upload's (node_modules only if a snapshot was taken after the
    // setup). The archive the run's own setup left comes back, then the setup runs again
    // from it (recorded, not saved): both places hold the dependencies again.
    if (!d.freshBox || !lastSetupSucceeded(d.events) || spec === undefined) return undefined;
    const own = cacheOn ? await restoreOwn(d) : undefined;
    await tell(
      d,
      `This run continues in a new container: its setup runs again${own ? ", from the cache its first setup left," : ""} so that its dependencies are installed.`,
    );
    return await runSetup(d, spec, calls, undefined, own?.installedTree === true);
  }
  if (spec === undefined) return undefined;
  const keyInput: CacheKeyInput | undefined = cacheOn
    ? { tenant: d.run0.tenantId, image: await cacheImage(d), setup: spec, inputs }
    : undefined;
  const key = keyInput === undefined ? undefined : cacheKey(keyInput);
  const restored = key === undefined ? undefined : await restoreShared(d, spec, key);
  // Saved only from an empty /cache: after a restore (recorded), or one tar stopped part-way
  // (its members are in /cache, unrecorded), the archive would carry another run's content
  // as this run's own.
  const saveAs = key !== undefined && restored === undefined ? key : undefined;
  const tree = typeof restored === "object" && restored.installedTree;
  const cached =
    typeof restored === "object" &&
    keyInput !== undefined &&
    exactHit({ restoredKey: restored.key, run: keyInput, installedTree: tree })
      ? { digest: restored.digest, savedByRun: restored.savedBy }
      : undefined;
  return await runSetup(d, spec, calls, saveAs, tree, cached);
}

/**
 * The setup as a kernel call; a successful one saves /cache under `saveAs`. Over an
 * installed tree the cache brought back, the spec's warm line runs instead (npm ci would
 * delete and reinstall it); over an exact hit (`cached`) the line the kernel decides is the
 * same, but setup.run answers from the cache without running it. The call's result names
 * the line and why.
 */
async function runSetup(
  d: Drive,
  spec: SetupSpec,
  calls: number,
  saveAs: CacheKey | undefined,
  treeRestored: boolean,
  cached?: { digest: string; savedByRun: string },
): Promise<Next | undefined> {
  const k = d.kernelRun as KernelRun;
  const detected = k.commands;
  const warm = treeRestored && spec.warm !== undefined;
  if ((warm || cached !== undefined) && detected?.setup === spec)
    k.commands = {
      ...detected,
      setup: {
        ...spec,
        ...(warm ? { command: spec.warm } : {}),
        source:
          cached !== undefined
            ? `${spec.source} (exact cache hit: its outcome restored from ${cached.digest.slice(0, 12)}, saved by run ${cached.savedByRun}; not run)`
            : `${spec.source} (${spec.command}'s node_modules restored from the cache)`,
        ...(cached !== undefined ? { cached } : {}),
      },
    };
  let held = false;
  try {
    const next = await runSetupCall(d, spec, calls, saveAs);
    // Held for a person: the call runs after the answer (drive-calls.ts settleOpenCalls), and
    // it must run the line the person was shown, so the warm line stays for this drive.
    held = next !== undefined && "to" in next && next.to === "hold";
    return next;
  } finally {
    if (!held) k.commands = detected;
  }
}

async function runSetupCall(
  d: Drive,
  spec: SetupSpec,
  calls: number,
  saveAs: CacheKey | undefined,
): Promise<Next | undefined> {
  const call = { callId: setupCallId(d.events, calls), tool: SETUP_TOOL, input: {} };
  const out = await handleAttributed(d, call);
  if (out.kind === "paused") return { to: "hold" };
  const asked = await askForHosts(d, call);
  const ok = out.ok && exitOf(out.output) === 0;
  if (!ok) await tell(d, failureNotice(spec, out));
  else if (saveAs !== undefined) await save(d, spec, saveAs);
  await d.refresh();
  return asked;
}

/**
 * The id of the run's next setup call: `setup_N`, N one more than its setup calls so far,
 * or the next N no call of the log holds (a model's call is never recorded under `setup_`
 * — call-id-reuse.ts — but a log from before that rule may hold one).
 */
export function setupCallId(events: readonly Event[], calls = setupCalls(events)): string {
  const used = usedCallIds(events);
  let n = calls + 1;
  while (used.has(`setup_${n}`)) n++;
  return `setup_${n}`;
}

export function setupCalls(events: readonly Event[]): number {
  return events.filter((e) => e.payload.case === "toolCall" && e.payload.value.tool === SETUP_TOOL)
    .length;
}

function exitOf(output: unknown): number | undefined {
  const code = (output as { exitCode?: unknown } | undefined)?.exitCode;
  return typeof code === "number" ? code : undefined;
}

/** Whether the run's last setup call ended with exit 0. */
function lastSetupSucceeded(events: readonly Event[]): boolean {
  let id = "";
  let ok = false;
  for (const e of events) {
    const p = e.payload;
    if (p.case === "toolCall" && p.value.tool === SETUP_TOOL) {
      id = p.value.callId;
      ok = false;
    } else if (p.case === "toolResult" && p.value.callId === id) {
      ok = p.value.ok && /"exitCode":0[,}]/.test(p.value.outputJson);
    }
  }
  return ok;
}

/** A restored archive: what it holds, and the store entry it came from. */
interface Restored extends ArchiveFacts {
  key: string;
  digest: string;
  savedBy: string;
}

/** A cache archive a run's log names. */
interface OwnArchive {
  key: string;
  digest: string;
  savedBy: string;
  ecosystem: string;
  lockfile: string;
  lockfileDigest: string;
}

/** The archive the run's log last names (saved or restored), or undefined. */
function ownArchive(events: readonly Event[]): OwnArchive | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i] as Event;
    const p = e.payload;
    if (p.case === "cacheSaved") return { ...p.value, savedBy: e.runId };
    if (p.case === "cacheRestored") return { ...p.value, savedBy: p.value.savedByRun };
  }
  return undefined;
}

/** A new container of a run whose setup already ran: its own archive back, if still kept. */
async function restoreOwn(d: Drive): Promise<ArchiveFacts | undefined> {
  const own = ownArchive(d.events);
  const store = d.deps.depCache;
  if (own === undefined || store === undefined || d.box === undefined) return undefined;
  const data = await store.read(d.run0.tenantId, own.digest);
  if (data === undefined) return undefined;
  let facts: ArchiveFacts;
  try {
    facts = await restoreCache(d.box, data, d.callSignal);
  } catch (err) {
    if (d.callSignal.aborted) throw err;
    d.deps.logger?.warn({ runId: d.runId, err }, "dependency cache not restored");
    return undefined;
  }
  await d.writer.append({
    case: "cacheRestored",
    value: create(CacheRestoredSchema, {
      key: own.key,
      digest: own.digest,
      sizeBytes: BigInt(data.byteLength),
      savedByRun: own.savedBy,
      ecosystem: own.ecosystem,
      lockfile: own.lockfile,
      lockfileDigest: own.lockfileDigest,
      reason: "resume",
    }),
  });
  await d.refresh();
  return facts;
}

/**
 * A cache an earlier run of the tenant saved under the key: unpacked and recorded.
 * "partial" when the archive was handed to tar and the restore failed: part of it may be in
 * /cache, unrecorded.
 */
async function restoreShared(
  d: Drive,
  spec: SetupSpec,
  key: CacheKey,
): Promise<Restored | "partial" | undefined> {
  const store = d.deps.depCache;
  if (store === undefined || d.box === undefined) return undefined;
  let unpacking = false;
  try {
    const entry = await store.lookup(d.run0.tenantId, key.key);
    if (entry === undefined) return undefined;
    const data = await store.read(d.run0.tenantId, entry.digest);
    if (data === undefined) return undefined;
    unpacking = true;
    const facts = await restoreCache(d.box, data, d.callSignal);
    await d.writer.append({
      case: "cacheRestored",
      value: create(CacheRestoredSchema, {
        key: key.key,
        digest: entry.digest,
        sizeBytes: BigInt(data.byteLength),
        savedByRun: entry.savedBy,
        ecosystem: spec.ecosystem,
        lockfile: spec.lockfile,
        lockfileDigest: key.lockfileDigest,
        reason: "setup",
      }),
    });
    return { ...facts, key: entry.key, digest: entry.digest, savedBy: entry.savedBy };
  } catch (err) {
    if (d.callSignal.aborted) throw err;
    // A cache that cannot be had is a slower setup, not a failed run.
    d.deps.logger?.warn({ runId: d.runId, err }, "dependency cache not restored");
    return unpacking ? "partial" : undefined;
  }
}

/** /cache as the setup left it, saved under the key and recorded. */
async function save(d: Drive, spec: SetupSpec, key: CacheKey): Promise<void> {
  const store = d.deps.depCache;
  if (store === undefined || d.box === undefined) return;
  try {
    // npm's installed tree is the setup's output too: a later npm ci need not redo it.
    const trees = spec.ecosystem === "npm" ? [NODE_MODULES] : [];
    // Nothing of a run that holds a secret (kernel/secret-taint.ts), in any tree the
    // archive takes or anywhere else, is shared with other runs.
    const refusal = cacheSaveRefusal(d.kernelRun?.taint, [CACHE_DIR, ...trees.map((t) => `/${t}`)]);
    if (refusal !== undefined) {
      d.deps.logger?.warn({ runId: d.runId, why: refusal }, "dependency cache not saved");
      return;
    }
    const data = await archiveCache(d.box, store.maxBytes, trees, d.callSignal);
    const saved = await store.save(d.run0.tenantId, key.key, data, d.runId);
    await d.writer.append({
      case: "cacheSaved",
      value: create(CacheSavedSchema, {
        key: key.key,
        digest: saved.digest,
        sizeBytes: BigInt(saved.size),
        ecosystem: spec.ecosystem,
        lockfile: spec.lockfile,
        lockfileDigest: key.lockfileDigest,
        evicted: saved.evicted,
      }),
    });
  } catch (err) {
    if (d.callSignal.aborted) throw err;
    d.deps.logger?.warn({ runId: d.runId, err }, "dependency cache not saved");
  }
}

function failureNotice(
  spec: SetupSpec,
  out: { kind: "result"; ok: boolean; output?: unknown; error?: { code: string; message: string } },
): string {
  const why = out.ok
    ? `exited ${exitOf(out.output) ?? "?"}`
    : `was not run or failed: ${out.error?.code ?? "error"}: ${out.error?.message ?? ""}`;
  return `The setup step (${spec.command}, from ${spec.source}) ${why}. Dependencies may be missing; its output is in the setup.run result above. The run goes on.`;
}

async function tell(d: Drive, text: string): Promise<void> {
  await d.writer.append({
    case: "outputMessage",
    value: create(OutputMessageSchema, { role: "system", text: text.slice(0, 4096) }),
  });
}

/**
 * The image the run's sandbox runs: the digest `run.started` recorded for a run's own
 * image, else agentd's image by name and the engine's id of it now (a tag such as
 * agentd-sandbox-node:latest moves to each new build: a node_modules or build cache made in
 * one build is never restored into another).
 */
async function cacheImage(d: Drive): Promise<string> {
  const started = d.events.find((e) => e.payload.case === "runStarted")?.payload;
  if (started?.case !== "runStarted") return "";
  const { image, imageDigest } = started.value;
  if (imageDigest !== "") return imageDigest;
  const id = await d.deps.sandbox.imageId?.(image).catch(() => undefined);
  return id === undefined ? image : `${image}@${id}`;
}
