/**
 * A drive's right to write its run's log: every append carries the owner's fencing token
 * (its lease epoch) and passes through the run's secret redaction, and the writer knows the
 * head of the log as far as this drive has seen it. The driver and the kernel both append
 * through it, so the rules hold for every event a worker writes.
 *
 * `gate()` is the last check before an effect starts: it reads whatever other writers (the
 * server: a cancel request, an approval) appended since, so an execution never starts after
 * a cancel request is in the log (a cancel that lands after the gate finds the call already
 * executing, and the cancel watch kills it).
 *
 * A rewound log is refused: the writer knows the head it saw (seq and hash, from its own
 * appends and its reads) and every append names it (`knownHead`), so a store that lost
 * acknowledged events refuses it (EREWOUND) instead of having new events sealed on its
 * older head; the gate refuses the same way before an effect starts.
 *
 * `begin()` is the gate and the record that the effect starts (tool.started) together: one
 * round trip when nobody else appended since the last check.
 *
 * Must never: append without the fence, append an unredacted payload, seal on a head
 * behind one it saw, or let an execution start past a cancel request or the run's end.
 */
import { AgentdError, isAgentdError } from "../errors.ts";
import { hashOf } from "../eventlog/chain-links.ts";
import type { EventPayload, LoggedEvent } from "../eventlog/event-codec.ts";
import { TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import { GENESIS_HASH } from "../eventlog/hash-chain.ts";
import { LogRewoundError } from "../eventlog/log-rewound-error.ts";
import type { EventLog } from "../eventlog/port.ts";
import { redactMessage } from "./redact-payload.ts";
import type { RunSecrets } from "./run-secrets.ts";

export interface RunWriter {
  readonly runId: string;
  readonly sessionId: string;
  /** The owner's lease epoch. */
  readonly fence: number;
  /** The run's secrets (values resolved by any call of the run). */
  readonly secrets: RunSecrets;
  /** Appends an event of this run, fenced and redacted. */
  append(payload: EventPayload): Promise<LoggedEvent>;
  /** The same, only if nobody else appended since this drive last looked (ECONFLICT otherwise). */
  appendAtHead(payload: EventPayload): Promise<LoggedEvent>;
  /**
   * Before an effect: fails with EFENCED when another owner's epoch took over, EENDED when
   * the run ended, ECANCELLED when a cancel request landed since the last check (whatever
   * this drive appended meanwhile). Resolves with the events read.
   */
  gate(): Promise<LoggedEvent[]>;
  /**
   * gate(), then `payload` (the record that an effect starts: tool.started) appended;
   * resolves once the log holds it. One round trip when the gate has nothing to read: a
   * compare-and-append on the head the gate last checked, which lands only if nobody
   * appended since (no cancel request, no end) and carries the fence. Otherwise the gate
   * reads what came (and fails as gate() does), then the record is appended.
   */
  begin(payload: EventPayload): Promise<LoggedEvent>;
  /** The last seq this drive knows the log to have. */
  head(): number;
  /** That event's hash (the head every append names as its `knownHead`). */
  headHash(): string;
  /** Tells the writer the drive has seen the log up to `seq`, whose event's hash is `hash`. */
  saw(seq: number, hash: string): void;
}

export interface RunWriterOptions {
  log: EventLog;
  runId: string;
  sessionId: string;
  fence: number;
  secrets: RunSecrets;
  /** The seq of the last event the drive has read. */
  head: number;
  /**
   * The hash of that event. Unset or "": appends name no `knownHead` until this writer
   * appended or read an event (the gate still compares seqs).
   */
  headHash?: string;
}

export function createRunWriter(opts: RunWriterOptions): RunWriter {
  let head = opts.head;
  let headHash = opts.headHash ?? "";
  /** The last seq the gate checked for a cancel request or an end. */
  let checked = opts.head;
  const redact = (payload: EventPayload): EventPayload =>
    opts.secrets.any() ? redactMessage(payload, opts.secrets.redactor) : payload;
  const seen = (ev: LoggedEvent): LoggedEvent => {
    if (ev.seq > head) {
      head = ev.seq;
      headHash = hashOf(ev.json) ?? ev.event.hash;
    }
    return ev;
  };
  const known = () =>
    head > 0 && headHash !== "" ? { knownHead: { seq: head, hash: headHash } } : {};
  const append = async (payload: EventPayload, expectedSeq?: number) => {
    const ev = seen(
      await opts.log.append({
        runId: opts.runId,
        sessionId: opts.sessionId,
        fence: opts.fence,
        payload: redact(payload),
        ...known(),
        ...(expectedSeq === undefined ? {} : { expectedSeq }),
      }),
    );
    // The next seq after the last checked one is this drive's own event, neither a cancel
    // request nor an end: the gate need not read it back.
    const seq = Number(ev.event.seq);
    if (seq === checked + 1) checked = seq;
    return ev;
  };
  const gate = async (): Promise<LoggedEvent[]> => {
    // One head read per call: the epoch (a lost lease is fenced here, before the effect,
    // not only at the next append), the end, and whether anyone appended since the last
    // check — checked separately from `head`, which this drive's own appends move past
    // events it has not read.
    const h = await opts.log.head(opts.runId);
    // Behind what this drive saw: the store lost acknowledged events (checked before the
    // epoch, which a lost write may have taken back too).
    if ((h?.seq ?? 0) < head)
      throw new LogRewoundError(
        opts.runId,
        { seq: head, hash: headHash },
        { seq: h?.seq ?? 0, hash: h?.hash ?? GENESIS_HASH },
      );
    if (h !== undefined && h.epoch !== opts.fence)
      throw new AgentdError(
        "EFENCED",
        `run ${opts.runId} is owned by epoch ${h.epoch} now, not ${opts.fence}`,
      );
    if (h?.ended) throw new AgentdError("EENDED", `run ${opts.runId} already ended (${h.ended})`);
    if (h === undefined || h.seq <= checked) return [];
    const news = await opts.log.read(opts.runId, checked);
    for (const ev of news) {
      seen(ev);
      if (ev.type === "run.cancel_requested")
        throw new AgentdError("ECANCELLED", `run ${opts.runId} was asked to cancel`);
      if (TERMINAL_TYPES.has(ev.type))
        throw new AgentdError("EENDED", `run ${opts.runId} already ended (${ev.type})`);
    }
    checked = Number(news.at(-1)?.event.seq ?? BigInt(checked));
    return news;
  };
  return {
    runId: opts.runId,
    sessionId: opts.sessionId,
    fence: opts.fence,
    secrets: opts.secrets,
    append: (payload) => append(payload),
    appendAtHead: (payload) => append(payload, head),
    gate,
    async begin(payload) {
      if (head === checked) {
        try {
          // Lands only on the checked head: nothing unread can be a cancel request or an end.
          return await append(payload, checked);
        } catch (err) {
          if (!isAgentdError(err, "ECONFLICT")) throw err; // EFENCED, EENDED, EREWOUND: as the gate
        }
      }
      await gate();
      return append(payload);
    },
    head: () => head,
    headHash: () => headHash,
    saw: (seq, hash) => {
      if (seq > head) {
        head = seq;
        headHash = hash;
      }
    },
  };
}
