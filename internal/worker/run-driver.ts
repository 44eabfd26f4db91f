/**
 * Drives one run while this worker holds it: sandbox up, settle calls left open (approval
 * resolved, or interrupted by a crash), then model steps until the run completes, fails,
 * pauses for an approval or is cancelled. Every effect goes through the kernel; every
 * append carries the lease epoch (a worker that lost the run is fenced, never heard).
 * Engine state is never persisted: each step's context is rebuilt from the log.
 */
import { create } from "@bufbuild/protobuf";
import type { ArtifactStore } from "../artifacts/port.ts";
import { compactContext } from "../engine/compactor.ts";
import { assembleContext, type PendingCall } from "../engine/context.ts";
import { createOutputCoalescer } from "../engine/output-coalescer.ts";
import type { AgentEngine, EngineToolCall, EngineUsage } from "../engine/port.ts";
import { costMicros, type PriceTable } from "../engine/pricing.ts";
import { loadSkills, selectSkills } from "../engine/skills.ts";
import { isAgentdError } from "../errors.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import type { EventLog } from "../eventlog/port.ts";
import {
  ArtifactEmittedSchema,
  type Event,
  OutputDeltaSchema,
  OutputMessageSchema,
  RunCancelledSchema,
  RunCompletedSchema,
  RunFailedSchema,
  RunResumedSchema,
  RunStartedSchema,
  ToolCallSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { Kernel, KernelRun } from "../kernel/kernel.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { isTerminal, projectRun } from "../projections/run-projection.ts";
import { collect } from "../sandbox/collect.ts";
import type { Sandbox, SandboxHandle, SandboxShape } from "../sandbox/port.ts";
import { normaliseWorkspaceArchive, SANDBOX_EXPORT_LIMITS } from "../sandbox/workspace-archive.ts";
import { TOOLS } from "../tools/registry.ts";
import { toolJsonSchema } from "../tools/tool.ts";
import { type WorkspaceConfig, workspaceConfigFromArchive } from "./workspace-config.ts";

export interface RunLimits {
  /** Model steps at most. */
  maxSteps: number;
  /** Input + output tokens at most. */
  maxTokens: number;
  /** Wall-clock time of this drive at most, ms. */
  maxWallMs: number;
  /** Budget of one step's context, estimated tokens. */
  contextBudgetTokens: number;
  /** The same failing call this many times in a row ends the run. */
  maxRepeatedFailures: number;
}

export const DEFAULT_RUN_LIMITS: RunLimits = {
  maxSteps: 50,
  maxTokens: 2_000_000,
  maxWallMs: 60 * 60_000,
  contextBudgetTokens: 100_000,
  maxRepeatedFailures: 3,
};

export interface DriverDeps {
  log: EventLog;
  kernel: Kernel;
  engine: AgentEngine;
  sandbox: Sandbox;
  artifacts: ArtifactStore;
  policy: () => Policy;
  /** Directory of the server's skills. */
  skillsDir: string;
  systemPrompt: string;
  /** Model id, for pricing. */
  model: string;
  prices: PriceTable;
  limits: RunLimits;
  workerId: string;
  /**
   * How long a run that waits for an approval keeps its worker and its container before it
   * pauses for real (workspace snapshot, container removed, worker freed). An approval
   * resolved within the hold resumes in the same container at once. Default 0: pause at
   * once (`agentd worker` and `agentd dev` hold 60 s, --approval-hold-ms).
   */
  approvalHoldMs?: number;
  now?: () => number;
}

/** "released": the worker is stopping; the run is left at a step boundary for another worker. */
export type DriveOutcome = "completed" | "failed" | "cancelled" | "paused" | "released";

const SNAPSHOT = "workspace-snapshot";
const PATCH = "patch";

/**
 * Drives `runId` as the owner of lease `epoch` until it ends or pauses. `stop` (the worker
 * shutting down) is honoured at the next step boundary: the run is released, not cancelled,
 * and its container stays for whoever takes the run over.
 */
export async function driveRun(
  deps: DriverDeps,
  runId: string,
  epoch: number,
  stop: AbortSignal,
): Promise<DriveOutcome> {
  const now = deps.now ?? Date.now;
  const started = now();
  const events = async (): Promise<Event[]> => (await deps.log.read(runId, 0)).map((e) => e.event);
  let all = await events();
  const run0 = projectRun(runId, all);
  if (isTerminal(run0.state)) return endedOutcome(run0.state);
  const sessionId = run0.sessionId;
  const append = (payload: EventPayload) =>
    deps.log.append({ runId, sessionId, fence: epoch, payload });

  // Cancellation: a run.cancel_requested in the log aborts whatever runs now, including a
  // tool's process group.
  const cancel = new AbortController();
  const watcher = watchCancel(deps.log, runId, all.length, cancel);
  let box: SandboxHandle | undefined;
  try {
    if (all.some((e) => e.payload.case === "runCancelRequested")) return await finishCancelled();
    // The container (a takeover finds the previous owner's) and the workspace's agent
    // configuration (from the uploaded archive, see workspace-config.ts) at once.
    let workspace: WorkspaceConfig;
    {
      const base = await baseArchive(deps, all);
      const found = await deps.sandbox.find(runId);
      const [made, config] = await Promise.allSettled([
        found ?? createSandbox(deps, runId, run0.tenantId, all, base),
        workspaceConfigFromArchive(base),
      ]);
      if (made.status === "rejected") throw made.reason;
      box = made.value; // even if the config read failed: the next drive finds it
      if (config.status === "rejected") throw config.reason;
      workspace = config.value;
    }
    const wasStarted = all.some((e) => e.payload.case === "runStarted");
    // Taken over while it waits for a person (its owner died holding it): it stays paused
    // until the approval is resolved (run.resumed is appended then, at a step boundary).
    let pausedHere = run0.state === RunState.PAUSED && run0.pendingApprovalId !== "";
    if (!pausedHere)
      await append(
        wasStarted
          ? {
              case: "runResumed",
              value: create(RunResumedSchema, {
                workerId: deps.workerId,
                epoch: BigInt(epoch),
                approvalId: lastResolvedApproval(all),
              }),
            }
          : {
              case: "runStarted",
              value: create(RunStartedSchema, {
                workerId: deps.workerId,
                epoch: BigInt(epoch),
                containerId: box.id,
                image: deps.policy().sandbox.image,
              }),
            },
      );
    const usage: EngineUsage = {
      inputTokens: Number(run0.usage?.inputTokens ?? 0n),
      outputTokens: Number(run0.usage?.outputTokens ?? 0n),
    };
    // Shared with the kernel, which records it in run.paused (resume counts on from it).
    const kr: KernelRun = {
      runId,
      sessionId,
      fence: epoch,
      sandbox: box,
      signal: cancel.signal,
      usage,
    };
    const skills = await loadSkills({
      workspaceFiles: workspace.skillFiles,
      serverDir: deps.skillsDir,
    });
    let selected: ReturnType<typeof selectSkills>;
    try {
      selected = selectSkills(skills.skills, { named: run0.skills, prompt: run0.prompt });
    } catch (err) {
      // A skill named at CreateRun that exists nowhere: the run cannot be what was asked.
      return await fail("ESKILL_NOT_FOUND", (err as Error).message);
    }
    const tools = TOOLS.map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: toolJsonSchema(t),
    }));
    let steps = 0;
    let heldMs = 0;
    const failures = new Map<string, number>();

    for (;;) {
      if (cancel.signal.aborted) return await finishCancelled();
      if (stop.aborted) return "released";
      all = await events();
      if (pausedHere) {
        const r = projectRun(runId, all);
        // CancelRun on a paused run appends run.cancelled itself: nothing more may run.
        if (isTerminal(r.state)) return await endedElsewhere(r.state);
        if (r.pendingApprovalId === "") {
          // The approval this drive waited for is resolved: the run goes on here, unless
          // something else landed on the head just read (then look again).
          try {
            await deps.log.append({
              runId,
              sessionId,
              fence: epoch,
              expectedSeq: all.length,
              payload: {
                case: "runResumed",
                value: create(RunResumedSchema, {
                  workerId: deps.workerId,
                  epoch: BigInt(epoch),
                  approvalId: lastResolvedApproval(all),
                }),
              },
            });
          } catch (err) {
            if (isAgentdError(err, "ECONFLICT")) continue;
            throw err;
          }
          pausedHere = false;
          all = await events();
        }
      }
      const assembleInput = {
        events: all,
        systemPrompt: deps.systemPrompt,
        skills: selected.skills,
        ...(workspace.memory === undefined ? {} : { memory: workspace.memory }),
        budgetTokens: deps.limits.contextBudgetTokens,
      };
      let ctx = assembleContext(assembleInput);
      // Calls left open: approvals resolved while the run waited, or a crash mid-call.
      if (ctx.pending.length > 0) {
        if (await settle(ctx.pending, kr)) {
          const o = await awaitApproval();
          if (o !== undefined) return o;
        }
        continue;
      }
      if (ctx.overBudget) {
        const c = await compactContext({ ...assembleInput, artifacts: deps.artifacts });
        if (c === undefined)
          return await fail(
            "ECONTEXT_OVERFLOW",
            "the context does not fit the budget even after compaction",
          );
        await append(c.payload);
        all = await events();
        ctx = assembleContext({ ...assembleInput, events: all });
      }
      if (steps >= deps.limits.maxSteps)
        return await fail("ELIMIT_STEPS", `the run used its ${deps.limits.maxSteps} model steps`);
      if (usage.inputTokens + usage.outputTokens >= deps.limits.maxTokens)
        return await fail("ELIMIT_TOKENS", `the run used its ${deps.limits.maxTokens} tokens`);
      if (now() - started - heldMs >= deps.limits.maxWallMs)
        return await fail(
          "ELIMIT_TIME",
          `the run used its ${deps.limits.maxWallMs} ms of wall-clock time`,
        );
      steps++;

      // One model step. Text is coalesced into output.delta events as it streams.
      let text = "";
      let chain: Promise<unknown> = Promise.resolve();
      const coalescer = createOutputCoalescer({
        emit: (t) => {
          chain = chain.then(() =>
            append({ case: "outputDelta", value: create(OutputDeltaSchema, { text: t }) }),
          );
        },
      });
      const calls: EngineToolCall[] = [];
      const bad: {
        callId: string;
        tool: string;
        input: unknown;
        error: { code: string; message: string };
      }[] = [];
      let finished = false;
      for await (const ev of deps.engine.run(
        { system: ctx.system, messages: ctx.messages, tools },
        cancel.signal,
      )) {
        if (ev.type === "text-delta") {
          text += ev.text;
          coalescer.push(ev.text);
        } else if (ev.type === "tool-call")
          calls.push({ callId: ev.callId, tool: ev.tool, input: ev.input });
        else if (ev.type === "tool-call-error") bad.push(ev);
        else if (ev.type === "finish") {
          usage.inputTokens += ev.usage.inputTokens;
          usage.outputTokens += ev.usage.outputTokens;
          finished = true;
        } else if (ev.type === "error") {
          coalescer.close();
          await chain;
          if (ev.error.code === "EABORTED" && cancel.signal.aborted) return await finishCancelled();
          return await fail(ev.error.code, ev.error.message);
        }
      }
      coalescer.close();
      await chain;
      if (!finished)
        return await fail("EMODEL_BAD_RESPONSE", "the model step ended without finishing");
      if (text !== "")
        await append({
          case: "outputMessage",
          value: create(OutputMessageSchema, { role: "assistant", text }),
        });
      // Calls the model got wrong are answered with the error, so it can try again.
      for (const b of bad) {
        await append({
          case: "toolCall",
          value: create(ToolCallSchema, {
            callId: b.callId,
            tool: b.tool,
            inputJson: JSON.stringify(b.input ?? null),
          }),
        });
        await append({
          case: "toolResult",
          value: create(ToolResultSchema, { callId: b.callId, ok: false, error: b.error }),
        });
      }
      if (calls.length === 0 && bad.length === 0) return await complete(text);
      for (const call of calls) {
        if (cancel.signal.aborted) return await finishCancelled();
        const out = await deps.kernel.handle(kr, call);
        if (out.kind === "paused") {
          const o = await awaitApproval();
          if (o !== undefined) return o;
          // Resumed in place: the step's later calls are dropped, as after a real pause
          // (the next context is rebuilt from the log, which never saw them).
          break;
        }
        // A model that keeps making the same failing call is stopped, not paid for forever.
        const key = `${call.tool}\u0000${JSON.stringify(call.input)}`;
        const n = out.ok ? 0 : (failures.get(key) ?? 0) + 1;
        failures.set(key, n);
        if (n >= deps.limits.maxRepeatedFailures) {
          return await fail(
            "ELOOP",
            `the model made the same failing ${call.tool} call ${n} times`,
          );
        }
      }
    }

    /** Settles open calls; true when one still waits for a person. */
    async function settle(pending: PendingCall[], k: KernelRun): Promise<boolean> {
      for (const p of pending) {
        const call = { callId: p.callId, tool: p.tool, input: p.input };
        if (p.approval === undefined) {
          // The call started under an owner that died: its effect is unknown. The model
          // decides what to redo.
          await append({
            case: "toolResult",
            value: create(ToolResultSchema, {
              callId: p.callId,
              ok: false,
              error: {
                code: "interrupted",
                message: "the worker running this call stopped; its effect is unknown",
              },
            }),
          });
        } else if (p.approval.state === "awaiting") {
          return true;
        } else {
          await deps.kernel.continueAfterApproval(k, call, {
            approved: p.approval.state === "approved",
            reason: p.approval.reason,
          });
        }
      }
      return false;
    }

    /**
     * The run waits for a person (approval.requested and run.paused are in the log). Holds
     * the run and its container for up to `approvalHoldMs`: resolved in time, the run
     * resumes here (undefined: go on); otherwise it pauses for real. Ended meanwhile (a
     * CancelRun on the paused run appends run.cancelled itself): the container goes.
     */
    async function awaitApproval(): Promise<DriveOutcome | undefined> {
      pausedHere = true;
      const t0 = now();
      const held = await holdForApproval();
      heldMs += now() - t0;
      if (held === "resolved") return undefined; // the loop appends run.resumed
      if (held !== "waiting") return await endedElsewhere(held);
      if (cancel.signal.aborted) return await finishCancelled();
      return await pause();
    }

    /** Follows the log until the pending approval is resolved, the run ends, or the hold is up. */
    async function holdForApproval(): Promise<"resolved" | "waiting" | RunState> {
      const holdMs = deps.approvalHoldMs ?? 0;
      if (holdMs <= 0) return "waiting";
      // Made before anything is awaited: a stop or cancel that comes at any point ends it.
      const until = AbortSignal.any([stop, cancel.signal, AbortSignal.timeout(holdMs)]);
      if (until.aborted) return "waiting";
      const evs = await events();
      const state = (): "resolved" | "waiting" | RunState => {
        const r = projectRun(runId, evs);
        if (isTerminal(r.state)) return r.state;
        return r.state === RunState.PAUSED && r.pendingApprovalId !== "" ? "waiting" : "resolved";
      };
      let s = state();
      if (s !== "waiting") return s;
      for await (const ev of deps.log.follow(runId, evs.length, until)) {
        evs.push(ev.event);
        s = state();
        if (s !== "waiting") return s;
      }
      return "waiting";
    }

    /** The run ended without this worker (CancelRun on the paused run): the container goes. */
    async function endedElsewhere(state: RunState): Promise<DriveOutcome> {
      await box?.destroy();
      return endedOutcome(state);
    }

    async function pause(): Promise<DriveOutcome> {
      // The paused run holds no worker: keep its workspace as an artifact to restore from,
      // in the normalised form an upload has (the bytes come from the sandbox: owners,
      // set-id bits, devices and hard links do not survive).
      const exported = await collect((box as SandboxHandle).exportWorkspace());
      const tar = await normaliseWorkspaceArchive(exported, SANDBOX_EXPORT_LIMITS);
      const info = await deps.artifacts.put(tar);
      await append({
        case: "artifactEmitted",
        value: create(ArtifactEmittedSchema, {
          name: SNAPSHOT,
          digest: info.digest,
          sizeBytes: BigInt(info.size),
          mediaType: "application/x-tar",
        }),
      });
      await (box as SandboxHandle).destroy();
      return "paused";
    }

    async function complete(summary: string): Promise<DriveOutcome> {
      const diff = await (box as SandboxHandle).diff(await baseArchive(deps, all));
      let patchDigest = "";
      if (diff.patch !== "") {
        const info = await deps.artifacts.put(Buffer.from(diff.patch, "utf8"));
        patchDigest = info.digest;
        await append({
          case: "artifactEmitted",
          value: create(ArtifactEmittedSchema, {
            name: PATCH,
            digest: info.digest,
            sizeBytes: BigInt(info.size),
            mediaType: "text/x-diff",
          }),
        });
      }
      const cost = costMicros(deps.model, usage, deps.prices);
      await append({
        case: "runCompleted",
        value: create(RunCompletedSchema, {
          summary: summary.slice(0, 16 * 1024),
          usage: {
            inputTokens: BigInt(usage.inputTokens),
            outputTokens: BigInt(usage.outputTokens),
          },
          costMicros: BigInt(cost.micros),
          patchDigest,
        }),
      });
      await (box as SandboxHandle).destroy();
      return "completed";
    }

    async function fail(code: string, message: string): Promise<DriveOutcome> {
      const cost = costMicros(deps.model, usage, deps.prices);
      await append({
        case: "runFailed",
        value: create(RunFailedSchema, {
          error: { code, message },
          usage: {
            inputTokens: BigInt(usage.inputTokens),
            outputTokens: BigInt(usage.outputTokens),
          },
          costMicros: BigInt(cost.micros),
        }),
      });
      await (box as SandboxHandle | undefined)?.destroy();
      return "failed";
    }
  } catch (err) {
    if (cancel.signal.aborted && !isAgentdError(err, "EFENCED")) return await finishCancelled();
    throw err;
  } finally {
    watcher.stop();
    box?.detach?.(); // released, paused, failed: whatever this drive still held open
  }

  async function finishCancelled(): Promise<DriveOutcome> {
    const req = (await events()).find((e) => e.payload.case === "runCancelRequested");
    const by = req?.payload.case === "runCancelRequested" ? req.payload.value : undefined;
    await box?.destroy();
    await append({
      case: "runCancelled",
      value: create(RunCancelledSchema, {
        reason: by?.reason ?? "the worker was stopped",
        cancelledBy: by?.requestedBy ?? deps.workerId,
      }),
    });
    return "cancelled";
  }
}

/** The approval the run resumes after (the last one resolved). */
function lastResolvedApproval(events: readonly Event[]): string {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case === "approvalResolved") return p.value.approvalId;
  }
  return "";
}

/** The workspace to start from: the last snapshot if the run paused, else the uploaded archive. */
async function createSandbox(
  deps: DriverDeps,
  runId: string,
  tenantId: string,
  events: readonly Event[],
  base: Uint8Array,
): Promise<SandboxHandle> {
  const snapshot = lastArtifact(events, SNAPSHOT);
  const tar =
    snapshot !== undefined
      ? await readAll(deps.artifacts, snapshot)
      : base.byteLength > 0
        ? base
        : undefined;
  return deps.sandbox.create({
    runId,
    tenantId,
    ...sandboxShape(deps.policy()),
    ...(tar === undefined ? {} : { workspaceTar: tar }),
  });
}

/** The sandbox a run gets under `policy` (what a worker keeps warm containers of). */
export function sandboxShape(p: Policy): SandboxShape {
  return {
    image: p.sandbox.image,
    limits: {
      memoryBytes: p.sandbox.memory,
      cpus: p.sandbox.cpu,
      pids: p.sandbox.pids,
      tmpBytes: p.sandbox.tmp,
      workspaceBytes: p.sandbox.workspaceSize,
    },
    network: "none",
  };
}

/** The outcome of a drive that found its run ended (`state` is terminal). */
function endedOutcome(state: RunState): DriveOutcome {
  if (state === RunState.COMPLETED) return "completed";
  return state === RunState.CANCELLED ? "cancelled" : "failed";
}

/** The original workspace (what the final patch is computed against). */
async function baseArchive(deps: DriverDeps, events: readonly Event[]): Promise<Uint8Array> {
  const digest = projectRun("", events).workspaceDigest;
  return digest ? readAll(deps.artifacts, digest) : new Uint8Array();
}

function lastArtifact(events: readonly Event[], name: string): string | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case === "artifactEmitted" && p.value.name === name) return p.value.digest;
  }
  return undefined;
}

async function readAll(store: ArtifactStore, digest: string): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of store.read(digest)) parts.push(c);
  return Buffer.concat(parts);
}

/** Follows the log for a cancel request and aborts `ac` when one appears. */
function watchCancel(
  log: EventLog,
  runId: string,
  after: number,
  ac: AbortController,
): { stop(): void } {
  const stop = new AbortController();
  void (async () => {
    try {
      for await (const ev of log.follow(runId, after, stop.signal)) {
        if (ev.type === "run.cancel_requested") {
          ac.abort();
          return;
        }
      }
    } catch {
      // the log went away: the lease will tell the owner
    }
  })();
  return { stop: () => stop.abort() };
}
