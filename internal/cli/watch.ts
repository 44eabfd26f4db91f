/**
 * Watching a run: follows its events into the renderer (or NDJSON), keeps the status line's
 * queue position fresh, and handles the run's pauses for approval: ask inline on a terminal,
 * print how to approve elsewhere, or stop with exit code 3 (`--no-wait`).
 */
import { toJson } from "@bufbuild/protobuf";
import { followEvents } from "../../clients/typescript/src/follow.ts";
import { canonicalJson } from "../eventlog/canonical-json.ts";
import { type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { mayRace, nudgeResume, resolve } from "./approval.ts";
import { type Endpoint, EXIT, explainError, type RunClient } from "./client.ts";
import { jsonLine, safeJson } from "./output/serialize.ts";
import { type Output, Renderer } from "./render.ts";
import { makeStyle } from "./style.ts";

export type ApprovalMode =
  /** Ask "approve? [y/N/reason]" on the terminal and resolve the approval. */
  | "prompt"
  /** Print the approval id and the commands that resolve it, keep following. */
  | "hint"
  /** Print the hint and stop: exit code 3 (--no-wait). */
  | "exit"
  /** Nothing (replays). */
  | "none";

export interface WatchOptions {
  client: RunClient;
  ep: Endpoint;
  runId: string;
  afterSeq?: bigint;
  /** Only the stored events, no live ones (replay, events without --follow). */
  historyOnly?: boolean;
  /** story: the renderer; quiet: the renderer's quiet mode; json: NDJSON. */
  mode: "story" | "quiet" | "json";
  out: Output;
  err: Output;
  color: boolean;
  /** Spinner and status line (stdout is a terminal). */
  live: boolean;
  columns?: () => number;
  approvals: ApprovalMode;
  signal: AbortSignal;
  /** Asks a question on the terminal; undefined when aborted. */
  ask?: (question: string, signal: AbortSignal) => Promise<string | undefined>;
}

export interface WatchResult {
  /** Exit code: 0 completed, 1 failed, 2 cancelled, 3 waiting (stopped at a pause / not ended). */
  code: number;
  last: Event | undefined;
}

/** The exit code for a run whose last seen event is `last`. */
export function outcomeCode(last: Event | undefined): number {
  switch (last?.type) {
    case "run.completed":
      return EXIT.OK;
    case "run.failed":
      return EXIT.FAILED;
    case "run.cancelled":
      return EXIT.CANCELLED;
    default:
      return EXIT.WAITING;
  }
}

/** Parses an answer to "approve? [y/N/reason]": y/yes approves, anything else denies. */
export function parseAnswer(answer: string): { approve: boolean; reason: string } {
  const a = answer.trim();
  if (/^(y|yes)$/i.test(a)) return { approve: true, reason: "" };
  if (a === "" || /^(n|no)$/i.test(a)) return { approve: false, reason: "" };
  return { approve: false, reason: a };
}

export function approvalHint(runId: string, approvalId: string): string {
  return (
    `run ${runId} waits for approval ${approvalId}.\n` +
    `  approve: agentctl approve ${approvalId}\n` +
    `  deny:    agentctl deny ${approvalId} --reason "…"\n` +
    `  or approve and propose a rule: agentctl approve ${approvalId} --rule command|host\n` +
    `  preview: agentctl approvals --run ${runId}`
  );
}

export async function watchRun(o: WatchOptions): Promise<WatchResult> {
  const renderer =
    o.mode === "json"
      ? undefined
      : new Renderer({
          out: o.out,
          color: o.color,
          live: o.live && o.historyOnly !== true,
          quiet: o.mode === "quiet",
          ...(o.columns === undefined ? {} : { columns: o.columns }),
        });
  const st = makeStyle(o.color);
  const note = (s: string): void => {
    renderer?.suspend();
    o.err.write(`${s}\n`);
    renderer?.resume();
  };
  let queued = true;
  // The queue position, while the run waits for a worker (status line only).
  const poller =
    renderer !== undefined && o.live && o.historyOnly !== true
      ? setInterval(() => {
          if (!queued) return;
          o.client.getRun({ runId: o.runId }, { timeoutMs: 5000 }).then(
            (r) => {
              if (r.run?.state === RunState.QUEUED)
                renderer.setQueuePosition(r.run.queuePosition, r.run.sessionPosition);
            },
            () => undefined,
          );
        }, 1000)
      : undefined;
  poller?.unref();
  /** The run moved on (resumed, ended, paused again) since the last inline decision. */
  let resumedSince = true;

  const onPause = async (approvalId: string): Promise<"stop" | undefined> => {
    if (o.approvals === "none" || o.historyOnly === true) return undefined;
    // Following from history, a pause may already be resolved further on: ask the server.
    const { run } = await o.client.getRun({ runId: o.runId }, { timeoutMs: 10_000 });
    if (run?.state !== RunState.PAUSED || run.pendingApprovalId !== approvalId) return undefined;
    if (o.approvals === "exit") {
      note(approvalHint(o.runId, approvalId));
      return "stop";
    }
    if (o.approvals === "hint" || o.ask === undefined) {
      note(
        `${approvalHint(o.runId, approvalId)}\n  (still following: the run goes on once someone decides)`,
      );
      return undefined;
    }
    return ask(approvalId);
  };

  const ask = async (approvalId: string): Promise<undefined> => {
    const ctl = new AbortController();
    const onAbort = (): void => ctl.abort();
    o.signal.addEventListener("abort", onAbort, { once: true });
    // Someone else may decide meanwhile (agentctl approve elsewhere, the expiry).
    let elsewhere = false;
    const watch = setInterval(() => {
      o.client.getRun({ runId: o.runId }, { timeoutMs: 5000 }).then(
        (r) => {
          if (r.run?.pendingApprovalId !== approvalId) {
            elsewhere = true;
            ctl.abort();
          }
        },
        () => undefined,
      );
    }, 2000);
    renderer?.suspend();
    try {
      for (;;) {
        const answer = await o.ask?.(`${st.bold(st.yellow("approve?"))} [y/N/reason] `, ctl.signal);
        if (answer === undefined) {
          if (elsewhere) o.out.write(`\n${st.dim("(resolved elsewhere)")}\n`);
          return undefined;
        }
        const { approve, reason } = parseAnswer(answer);
        const d = {
          approvalId,
          approve,
          reason: approve ? reason : reason || "denied at the terminal",
        };
        try {
          const a = await resolve(o.client, d);
          if (mayRace(a)) {
            resumedSince = false;
            void nudgeResume(o.client, o.runId, d, {
              signal: o.signal,
              done: () => resumedSince,
            });
          }
          return undefined;
        } catch (err) {
          o.err.write(`agentctl: ${explainError(err, o.ep, { approvalId })}\n`);
          const { run } = await o.client.getRun({ runId: o.runId }, { timeoutMs: 10_000 });
          if (run?.pendingApprovalId !== approvalId) return undefined;
        }
      }
    } finally {
      clearInterval(watch);
      o.signal.removeEventListener("abort", onAbort);
      renderer?.resume();
    }
  };

  try {
    const res = await followEvents({
      client: o.client,
      runId: o.runId,
      afterSeq: o.afterSeq ?? 0n,
      ...(o.historyOnly === undefined ? {} : { historyOnly: o.historyOnly }),
      signal: o.signal,
      onReconnect: (err, attempt) => {
        if (attempt === 1)
          note(`agentctl: lost the event stream (${explainError(err, o.ep)}); reconnecting…`);
      },
      onResync: (why) => {
        // The stored log lost events already shown: say so where they were shown (a JSON
        // reader drops every line before the marker), then show the run again from seq 1.
        note(`agentctl: the stored log lost events already shown (${why}); showing the run again`);
        o.out.write(
          renderer === undefined
            ? jsonLine({ agentctl: "resync", runId: o.runId, reason: why })
            : "‼ resync: the stored log lost events shown above; the run again from seq 1:\n",
        );
      },
      onEvent: async (ev) => {
        if (ev.type !== "run.queued") queued = false;
        if (/^run\.(resumed|paused|completed|failed|cancelled)$/.test(ev.type)) resumedSince = true;
        if (renderer === undefined)
          o.out.write(`${safeJson(canonicalJson(toJson(EventSchema, ev)))}\n`);
        else renderer.event(ev);
        if (ev.payload.case === "runPaused" && ev.payload.value.approvalId !== "")
          return onPause(ev.payload.value.approvalId);
        return undefined;
      },
    });
    // Only a pause with --no-wait stops the follow early.
    if (res.stopped) return { code: EXIT.WAITING, last: res.last };
    const code = outcomeCode(res.last);
    if (code === EXIT.WAITING && o.historyOnly === true && res.last !== undefined && renderer)
      note(`run ${o.runId} has not ended yet (last event: seq ${res.last.seq} ${res.last.type})`);
    return { code, last: res.last };
  } finally {
    if (poller !== undefined) clearInterval(poller);
    renderer?.close();
  }
}
