/**
 * Group commit for one log: appends to the same run queue up and are sealed against the
 * run's head and committed together (one Redis script call, or one write+fsync), in
 * arrival order. Every commit is a compare-and-append on the head, so a writer in another
 * process makes the commit fail with "conflict" and the batch is re-sealed on the new head:
 * no gap, no duplicate, whatever the concurrency.
 *
 * Terminal is terminal: a group ends with the first event that ends the run, and once the
 * head is known to be ended (a commit of ours, a conflict reply, a fresh head) every append
 * still queued fails with EENDED (RunEndedError) without reaching storage.
 *
 * A rewound store is refused, never sealed on: a commit carries the newest head its
 * writers saw (`knownHead`), and storage answers "rewound" when it does not hold that head;
 * a store that answers a head behind one it answered before (the batcher's cached head) is
 * rewound too. Either way the group fails with EREWOUND (LogRewoundError) and nothing of it
 * is written.
 *
 * Never reorders: items are taken from the front of the queue only.
 */
import { AgentdError, invalid } from "../errors.ts";
import {
  EVENT_TYPES,
  LoggedEvent,
  type SealedEvent,
  sealEvent,
  TERMINAL_TYPES,
} from "./event-codec.ts";
import { GENESIS_HASH } from "./hash-chain.ts";
import { LogRewoundError } from "./log-rewound-error.ts";
import type { AppendRequest } from "./port.ts";
import { RunEndedError } from "./run-ended-error.ts";

/** Largest stored event; bigger content belongs in the artifact store. */
export const MAX_EVENT_BYTES = 512 * 1024;
/** At most this many events go into one commit. */
const MAX_BATCH = 256;

export interface Head {
  seq: number;
  hash: string;
  /** The terminal event's type once the run ended (then `seq` is that event's). */
  ended?: string | undefined;
}

/** What an adapter is asked to store atomically: events following `prev`. */
export interface Commit {
  runId: string;
  sessionId: string;
  /** Set for the first event of a run. */
  tenantId: string | undefined;
  fence: number | undefined;
  prev: Head;
  /**
   * The newest head the group's writers saw (their `knownHead`): storage answers "rewound"
   * when it does not hold this event at this seq. Undefined: no such check.
   */
  known: Head | undefined;
  /** Never holds an event after a terminal one. */
  events: SealedEvent[];
  /**
   * The terminal type of the last event when it ends the run: storage records the end
   * in the same atomic step and refuses every later commit ("ended").
   */
  ends: string | undefined;
}

/**
 * "conflict": the head moved on (when `head.ended` is set, the run ended: every append
 * queued for it then fails with EENDED). A run that ended answers "conflict" with an ended
 * head before any fence check: EENDED wins over EFENCED.
 */
export type CommitOutcome =
  | { kind: "ok" }
  | { kind: "conflict"; head: Head }
  | { kind: "fenced"; epoch: number }
  /** The store does not hold `known`: it lost acknowledged events; `head` is its head now. */
  | { kind: "rewound"; head: Head }
  /** The run was deleted (internal/lifecycle): nothing is ever appended to it again. */
  | { kind: "deleted" };

export interface AppendBatcherOptions {
  /** Reads the run's head from storage (seq 0 and GENESIS_HASH when empty). */
  loadHead(runId: string): Promise<Head>;
  /** Stores a commit atomically, or reports why it could not. */
  commit(c: Commit): Promise<CommitOutcome>;
  /** Clock, for tests. */
  now?: () => number;
}

interface Pending {
  req: AppendRequest;
  resolve(ev: LoggedEvent): void;
  reject(err: unknown): void;
}

interface RunQueue {
  items: Pending[];
  head: Head | undefined;
  draining: boolean;
}

export class AppendBatcher {
  readonly #opts: AppendBatcherOptions;
  readonly #runs = new Map<string, RunQueue>();
  readonly #now: () => number;

  constructor(opts: AppendBatcherOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  append(req: AppendRequest): Promise<LoggedEvent> {
    return new Promise<LoggedEvent>((resolve, reject) => {
      let q = this.#runs.get(req.runId);
      if (q === undefined) {
        q = { items: [], head: undefined, draining: false };
        this.#runs.set(req.runId, q);
      }
      q.items.push({ req, resolve, reject });
      if (!q.draining) {
        // Drain on the next microtask, so appends issued together (in one synchronous
        // block) are sealed into one commit: atomic, with nothing landing between them.
        q.draining = true;
        const queue = q;
        queueMicrotask(() => void this.#drain(req.runId, queue));
      }
    });
  }

  /** Forgets a cached head (e.g. after an error left it unknown). */
  invalidate(runId: string): void {
    const q = this.#runs.get(runId);
    if (q !== undefined) q.head = undefined;
  }

  async #drain(runId: string, q: RunQueue): Promise<void> {
    try {
      while (q.items.length > 0) {
        let head: Head;
        try {
          head = q.head ??= await this.#opts.loadHead(runId);
        } catch (err) {
          // The head cannot be read: fail the front group (nothing of it was sent), go on.
          q.head = undefined;
          const group = this.#takeGroup(q);
          for (const p of group) p.reject(err);
          continue;
        }
        if (head.ended !== undefined) {
          // Terminal is terminal: nothing queued for an ended run is ever sent (a run never
          // comes back to life, so a head known to be ended needs no second look).
          const err = new RunEndedError(runId, head.ended, head.seq);
          for (const p of q.items.splice(0)) p.reject(err);
          continue;
        }
        await this.#commitFront(q, head);
      }
    } finally {
      q.draining = false;
      if (q.items.length === 0) this.#runs.delete(runId);
    }
  }

  /**
   * The longest prefix of the queue that can share one commit. It ends with the first
   * event that ends the run: what is queued behind that one waits for the commit's outcome
   * (EENDED once it landed; a normal commit if it failed).
   */
  #takeGroup(q: RunQueue): Pending[] {
    const first = q.items[0];
    if (first === undefined) return [];
    if (first.req.expectedSeq !== undefined) return q.items.splice(0, 1);
    let n = 1;
    while (
      n < q.items.length &&
      n < MAX_BATCH &&
      !endsRun(q.items[n - 1]?.req as AppendRequest) &&
      q.items[n]?.req.fence === first.req.fence &&
      q.items[n]?.req.expectedSeq === undefined &&
      q.items[n]?.req.sessionId === first.req.sessionId
    ) {
      n++;
    }
    return q.items.splice(0, n);
  }

  async #commitFront(q: RunQueue, head: Head): Promise<void> {
    const first = q.items[0];
    if (first === undefined) return;
    if (first.req.expectedSeq !== undefined && first.req.expectedSeq !== head.seq) {
      q.items.shift();
      first.reject(
        new AgentdError(
          "ECONFLICT",
          `run ${first.req.runId} moved on: last seq is ${head.seq}, expected ${first.req.expectedSeq}`,
        ),
      );
      return;
    }
    const { ok, sealed } = this.#seal(this.#takeGroup(q), head);
    if (ok.length === 0) return;
    const firstReq = ok[0]?.req as AppendRequest;
    const last = sealed[sealed.length - 1] as SealedEvent;
    const ends = TERMINAL_TYPES.has(last.type) ? last.type : undefined;
    const known = knownOf(ok);
    let outcome: CommitOutcome;
    try {
      outcome = await this.#opts.commit({
        runId: firstReq.runId,
        sessionId: firstReq.sessionId,
        tenantId: firstReq.tenantId,
        fence: firstReq.fence,
        prev: head,
        known,
        events: sealed,
        ends,
      });
    } catch (err) {
      const known = await this.#afterFailedCommit(q, firstReq.runId, last);
      if (known === undefined) {
        for (const p of ok) p.reject(err);
        return;
      }
      outcome = known;
    }
    if (outcome.kind === "ok") {
      q.head = { seq: last.seq, hash: last.hash, ended: ends };
      ok.forEach((p, i) => {
        const s = sealed[i] as SealedEvent;
        p.resolve(new LoggedEvent(p.req.runId, s.seq, s.json));
      });
      return;
    }
    if (outcome.kind === "deleted") {
      q.head = undefined;
      const err = new AgentdError("ENOTFOUND", `run ${firstReq.runId} was deleted`);
      for (const p of ok) p.reject(err);
      return;
    }
    if (outcome.kind === "fenced") {
      const err = new AgentdError(
        "EFENCED",
        `stale writer on run ${firstReq.runId}: fencing token ${firstReq.fence} but the run's epoch is ${outcome.epoch}`,
      );
      for (const p of ok) p.reject(err);
      return;
    }
    if (outcome.kind === "rewound" || isBehind(outcome.head, head)) {
      // The store lost acknowledged events (it answered a head behind one it answered
      // before, or does not hold what the writer saw): never seal on its older head.
      q.head = undefined;
      const expected = outcome.kind === "rewound" && known !== undefined ? known : head;
      const err = new LogRewoundError(firstReq.runId, expected, outcome.head);
      for (const p of ok) p.reject(err);
      return;
    }
    // Someone else appended: take the new head and retry these same items, in order (an
    // ended head fails them all in #drain), except a compare-and-append, whose expectation
    // is now false.
    q.head = outcome.head;
    q.items.unshift(...ok);
  }

  /** Seals a group on `head`; an item that cannot be sealed is rejected and left out. */
  #seal(group: Pending[], head: Head): { ok: Pending[]; sealed: SealedEvent[] } {
    const sealed: SealedEvent[] = [];
    const ok: Pending[] = [];
    let prevHash = head.seq === 0 ? GENESIS_HASH : head.hash;
    const now = this.#now();
    for (const p of group) {
      const seq = head.seq + ok.length + 1;
      try {
        if (seq === 1 && !p.req.tenantId) {
          throw invalid("tenantId", "the first event of a run must name its tenant");
        }
        const s = sealEvent(p.req, seq, prevHash, now);
        if (s.json.length > MAX_EVENT_BYTES) {
          throw new AgentdError(
            "ETOOLARGE",
            `event ${s.type} is ${s.json.length} bytes, over the ${MAX_EVENT_BYTES}-byte limit; store large content as an artifact`,
          );
        }
        sealed.push(s);
        ok.push(p);
        prevHash = s.hash;
      } catch (err) {
        p.reject(err);
      }
    }
    return { ok, sealed };
  }

  /**
   * Storage failed with the commit's outcome unknown (the connection dropped after it was
   * sent, say): it may have landed. The head tells: it is the commit's last event exactly
   * when the commit was stored (hashes are unique). Answers "ok" then; a conflict on the
   * ended head when it did not land and the run ended meanwhile (it never can: EENDED);
   * undefined otherwise, or when the head cannot be read either: the group then fails with
   * the storage error (EUNAVAILABLE and the like), and the queue behind it goes on.
   */
  async #afterFailedCommit(
    q: RunQueue,
    runId: string,
    last: SealedEvent,
  ): Promise<CommitOutcome | undefined> {
    const now = await this.#opts.loadHead(runId).catch(() => undefined);
    q.head = now;
    if (now?.seq === last.seq && now.hash === last.hash) return { kind: "ok" };
    if (now?.ended !== undefined) return { kind: "conflict", head: now };
    return undefined;
  }
}

/** The newest `knownHead` of a group (one writer's are in order; the highest seq wins). */
function knownOf(group: Pending[]): Head | undefined {
  let known: Head | undefined;
  for (const p of group) {
    const k = p.req.knownHead;
    if (k !== undefined && k.seq > 0 && (known === undefined || k.seq > known.seq)) {
      known = { seq: k.seq, hash: k.hash };
    }
  }
  return known;
}

/**
 * True when `now` (the store's answer) is behind `before` (a head the store answered
 * earlier): a healthy log's head only moves forward, and one seq holds one event. An ended
 * head is never "behind": the run's end is reported as EENDED.
 */
function isBehind(now: Head, before: Head): boolean {
  if (now.ended !== undefined) return false;
  return (
    now.seq < before.seq || (now.seq === before.seq && now.hash !== before.hash && now.seq > 0)
  );
}

/** Payload cases of the terminal event types. */
const TERMINAL_CASES: ReadonlySet<string> = new Set(
  [...TERMINAL_TYPES].map((t) => EVENT_TYPES[t as keyof typeof EVENT_TYPES]),
);

/** True when the append would end its run. */
function endsRun(req: AppendRequest): boolean {
  return TERMINAL_CASES.has(req.payload.case);
}
