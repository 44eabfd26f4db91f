/**
 * Builds, seals and decodes events. The stored form of an event is its canonical
 * protobuf-JSON (see canonical-json.ts); `hash` is sha256 over that form without `hash`.
 * Never re-encode a stored event to serve it: the stored bytes are what the chain covers.
 */
import { randomFillSync } from "node:crypto";
import { type DescMessage, fromJsonString, toBinary, toJson } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { ulid } from "ulid";
import { type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import { canonicalJsonWith } from "./canonical-json.ts";
import { GENESIS_HASH, sha256Hex } from "./hash-chain.ts";

/** Event type names (the `type` field) and the payload case each one carries. */
export const EVENT_TYPES = {
  "run.queued": "runQueued",
  "run.started": "runStarted",
  "run.paused": "runPaused",
  "run.resumed": "runResumed",
  "run.completed": "runCompleted",
  "run.failed": "runFailed",
  "run.cancelled": "runCancelled",
  "run.cancel_requested": "runCancelRequested",
  "output.delta": "outputDelta",
  "output.message": "outputMessage",
  "tool.call": "toolCall",
  "tool.output": "toolOutput",
  "tool.result": "toolResult",
  "policy.decision": "policyDecision",
  "approval.requested": "approvalRequested",
  "approval.resolved": "approvalResolved",
  "artifact.emitted": "artifactEmitted",
  "checkpoint.created": "checkpointCreated",
} as const satisfies Record<string, NonNullable<Event["payload"]["case"]>>;

export type EventType = keyof typeof EVENT_TYPES;
/** A payload: one case of the Event oneof. */
export type EventPayload = Exclude<Event["payload"], { case: undefined }>;

const TYPE_OF_CASE = new Map<string, EventType>(
  Object.entries(EVENT_TYPES).map(([type, kase]) => [kase, type as EventType]),
);

/** The event type whose payload case is `kase`. */
export function typeOfPayload(payload: EventPayload): EventType {
  const type = TYPE_OF_CASE.get(payload.case);
  if (type === undefined) throw new TypeError(`unknown payload case ${payload.case}`);
  return type;
}

/** Types after which a run never changes state again. */
export const TERMINAL_TYPES: ReadonlySet<string> = new Set([
  "run.completed",
  "run.failed",
  "run.cancelled",
]);

/** What a writer supplies; the log adds id, seq, ts and the chain. */
export interface NewEvent {
  runId: string;
  sessionId: string;
  payload: EventPayload;
}

/** An event sealed into its stored form. */
export interface SealedEvent {
  readonly seq: number;
  readonly type: EventType;
  readonly hash: string;
  /** Canonical JSON, including `hash`. */
  readonly json: string;
}

/**
 * Randomness of event ids: crypto-strong bytes served from a pool refilled 4 KiB at a time.
 * ulid's default PRNG calls getRandomValues once per character (16 per id, ~35 µs), which
 * made id generation most of the CPU cost of an append. Same distribution: byte / 256.
 */
const RANDOM_POOL = new Uint8Array(4096);
let randomPos = RANDOM_POOL.length;
function pooledRandom(): number {
  if (randomPos >= RANDOM_POOL.length) {
    randomFillSync(RANDOM_POOL);
    randomPos = 0;
  }
  return (RANDOM_POOL[randomPos++] as number) / 256;
}

/** The message type of each payload case (for encoding a payload alone). */
const PAYLOAD_SCHEMAS = new Map<string, DescMessage>(
  EventSchema.oneofs
    .find((o) => o.localName === "payload")
    ?.fields.map((f) => [f.localName, f.message as DescMessage]) ?? [],
);

/** protobuf-JSON of a Timestamp at millisecond precision ("…:05Z", "…:05.120Z"). */
function timestampJson(ms: number): string {
  const iso = new Date(ms).toISOString();
  return ms % 1000 === 0 ? `${iso.slice(0, 19)}Z` : iso;
}

/**
 * Seals `ev` at position `seq` after `prevHash`, stamped `nowMs`. The envelope's
 * protobuf-JSON is built directly (only the payload goes through protobuf's JSON encoder):
 * byte for byte what `canonicalJson(toJson(EventSchema, event))` gives, which the tests
 * check, at half the cost — sealing is on the hot path of every append.
 */
export function sealEvent(ev: NewEvent, seq: number, prevHash: string, nowMs: number): SealedEvent {
  const type = typeOfPayload(ev.payload);
  const schema = PAYLOAD_SCHEMAS.get(ev.payload.case) as DescMessage;
  const obj: Record<string, unknown> = {
    eventId: ulid(nowMs, pooledRandom),
    seq: String(seq),
    ts: timestampJson(nowMs),
    type,
    prevHash: prevHash || GENESIS_HASH,
    [ev.payload.case]: toJson(schema, ev.payload.value as never),
  };
  // proto3 JSON omits empty strings: so must we, to stay byte-identical.
  if (ev.runId !== "") obj.runId = ev.runId;
  if (ev.sessionId !== "") obj.sessionId = ev.sessionId;
  const { value: hash, json } = canonicalJsonWith(obj, "hash", sha256Hex);
  return { seq, type, hash, json };
}

/** An event read from a log: its stored JSON, decoded on first use. */
export class LoggedEvent {
  readonly runId: string;
  readonly seq: number;
  /** The stored canonical JSON: serve these bytes as they are. */
  readonly json: string;
  #event: Event | undefined;
  #binary: Uint8Array | undefined;

  constructor(runId: string, seq: number, json: string) {
    this.runId = runId;
    this.seq = seq;
    this.json = json;
  }

  /** The decoded protobuf message (memoised). */
  get event(): Event {
    this.#event ??= fromJsonString(EventSchema, this.json, { ignoreUnknownFields: true });
    return this.#event;
  }

  get type(): string {
    return this.event.type;
  }

  /**
   * The event's protobuf encoding with its length prefix, i.e. the value of a
   * length-delimited field holding this event (memoised). Encoded once per event and
   * server, however many subscribers receive it.
   */
  get lengthPrefixedBinary(): Uint8Array {
    this.#binary ??= new BinaryWriter().bytes(toBinary(EventSchema, this.event)).finish();
    return this.#binary;
  }
}
