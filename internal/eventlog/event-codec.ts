/**
 * Builds, seals and decodes events. The stored form of an event is its canonical
 * protobuf-JSON (see canonical-json.ts); `hash` is sha256 over that form without `hash`.
 * Never re-encode a stored event to serve it: the stored bytes are what the chain covers.
 */
import { randomFillSync } from "node:crypto";
import { gzipSync } from "node:zlib";
import { type DescMessage, fromJsonString, toBinary, toJson } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ulid } from "ulid";
import { type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import { canonicalJson } from "./canonical-json.ts";
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
  "tool.started": "toolStarted",
  "policy.decision": "policyDecision",
  "approval.requested": "approvalRequested",
  "approval.resolved": "approvalResolved",
  "artifact.emitted": "artifactEmitted",
  "checkpoint.created": "checkpointCreated",
  "usage.updated": "usageUpdated",
  "network.request": "networkRequest",
  "image.pull": "imagePull",
  "cache.restored": "cacheRestored",
  "cache.saved": "cacheSaved",
  "log.rewound": "logRewound",
  "secret.written": "secretWritten",
  "reviewer.verdict": "reviewerVerdict",
  "reviewer.overridden": "reviewerOverridden",
  "policy.shadow": "policyShadow",
  // Notices: only in the log-wide feed (EventLog.publish), never in a run's log.
  "run.deleted": "runDeleted",
  "tenant.purged": "tenantPurged",
  "policy.changed": "policyChanged",
  "policy.change_proposed": "policyChangeProposed",
  "policy.change_applied": "policyChangeApplied",
  "sandbox.lost": "sandboxLost",
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
  if (ms === lastTsMs) return lastTs;
  const iso = new Date(ms).toISOString();
  lastTsMs = ms;
  lastTs = ms % 1000 === 0 ? `${iso.slice(0, 19)}Z` : iso;
  return lastTs;
}
// The events of one commit share their timestamp: format it once.
let lastTsMs = Number.NaN;
let lastTs = "";

/** The envelope's members: every key but the payload's, which depends on its case. */
const ENVELOPE_KEYS = ["eventId", "hash", "prevHash", "runId", "seq", "sessionId", "ts", "type"];

/**
 * Per payload case, the envelope's keys in canonical (code-unit sorted) order with the
 * payload's case name among them: sealing fills them in without sorting anything.
 */
const KEY_ORDER = new Map<string, readonly string[]>(
  [...PAYLOAD_SCHEMAS.keys()].map((kase) => [kase, [...ENVELOPE_KEYS, kase].sort()]),
);

/**
 * Seals `ev` at position `seq` after `prevHash`, stamped `nowMs`. The envelope's
 * protobuf-JSON is built directly, members in a precomputed canonical order (only the
 * payload goes through protobuf's JSON encoder and canonicalJson): byte for byte what
 * `canonicalJson(toJson(EventSchema, event))` gives, which the tests check, at a fraction
 * of the cost — sealing is on the hot path of every append.
 */
export function sealEvent(ev: NewEvent, seq: number, prevHash: string, nowMs: number): SealedEvent {
  const type = typeOfPayload(ev.payload);
  const kase = ev.payload.case;
  const schema = PAYLOAD_SCHEMAS.get(kase) as DescMessage;
  const payload = canonicalJson(toJson(schema, ev.payload.value as never));
  let before = ""; // members sorted before "hash"
  let after = ""; // members sorted after it
  let seenHash = false;
  for (const key of KEY_ORDER.get(kase) as readonly string[]) {
    let member: string;
    switch (key) {
      case "hash":
        seenHash = true;
        continue;
      case "eventId":
        // ULIDs (Crockford base32), seq digits, timestamps and type names need no escaping.
        member = `"eventId":"${ulid(nowMs, pooledRandom)}"`;
        break;
      case "prevHash":
        member = `"prevHash":${JSON.stringify(prevHash || GENESIS_HASH)}`;
        break;
      case "runId":
        // proto3 JSON omits empty strings: so must we, to stay byte-identical.
        if (ev.runId === "") continue;
        member = `"runId":${JSON.stringify(ev.runId)}`;
        break;
      case "seq":
        member = `"seq":"${seq}"`;
        break;
      case "sessionId":
        if (ev.sessionId === "") continue;
        member = `"sessionId":${JSON.stringify(ev.sessionId)}`;
        break;
      case "ts":
        member = `"ts":"${timestampJson(nowMs)}"`;
        break;
      case "type":
        member = `"type":"${type}"`;
        break;
      default:
        member = `${JSON.stringify(kase)}:${payload}`;
    }
    if (seenHash) after = after === "" ? member : `${after},${member}`;
    else before = before === "" ? member : `${before},${member}`;
  }
  const without = before === "" ? after : after === "" ? before : `${before},${after}`;
  const hash = sha256Hex(`{${without}}`);
  const hashMember = `"hash":"${hash}"`;
  const json = `{${before === "" ? "" : `${before},`}${hashMember}${after === "" ? "" : `,${after}`}}`;
  return { seq, type, hash, json };
}

/** An event read from a log: its stored JSON, decoded on first use. */
export class LoggedEvent {
  readonly runId: string;
  readonly seq: number;
  /** The stored canonical JSON: serve these bytes as they are. */
  readonly json: string;
  #event: Event | undefined;
  #type: string | undefined;
  #frame: Uint8Array | undefined;
  #frameGzip: Uint8Array | undefined;

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

  /**
   * The event's type, without decoding the event when it was not decoded yet: JSON.parse
   * (native) is a fraction of protobuf's decoding, and readers that only look for one type
   * (a cancel watch, the trust counters) skip everything else.
   */
  get type(): string {
    if (this.#event !== undefined) return this.#event.type;
    this.#type ??= String((JSON.parse(this.json) as { type?: unknown }).type ?? "");
    return this.#type;
  }

  /**
   * The event's protobuf encoding with its length prefix, i.e. the value of a
   * length-delimited field holding this event (memoised). Encoded once per event and
   * server, however many subscribers receive it.
   */
  get lengthPrefixedBinary(): Uint8Array {
    return this.grpcFrame.subarray(GRPC_FRAME_PREFIX);
  }

  /**
   * A whole gRPC message of `StreamEventsResponse{event}` as it goes on the wire:
   * the 5-byte envelope (flags 0, big-endian length), the field tag, then
   * `lengthPrefixedBinary` (memoised: built once per event, written as it is to every
   * subscriber's HTTP/2 stream).
   */
  get grpcFrame(): Uint8Array {
    this.#frame ??= grpcEnvelope(
      0,
      new BinaryWriter()
        .tag(1, WireType.LengthDelimited)
        .bytes(toBinary(EventSchema, this.event))
        .finish(),
    );
    return this.#frame;
  }

  /**
   * grpcFrame with the message gzip-compressed (flags 1), for a stream whose response
   * `grpc-encoding` is gzip (memoised, so compressed once per event, not per subscriber).
   */
  get grpcFrameGzip(): Uint8Array {
    this.#frameGzip ??= grpcEnvelope(1, gzipSync(this.grpcFrame.subarray(5)));
    return this.#frameGzip;
  }
}

/**
 * A message in the length-prefixed envelope of gRPC (and of Connect streaming): one flags
 * byte (gRPC: 1 = compressed; Connect: 2 = end of stream), the body's length (big-endian
 * uint32), the body. (Connect's own encodeEnvelope is marked internal, not for use.)
 */
export function grpcEnvelope(flags: number, body: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(5 + body.length);
  frame[0] = flags;
  frame.writeUInt32BE(body.length, 1);
  frame.set(body, 5);
  return frame;
}

/** Bytes of a grpcFrame before the event's length prefix: the envelope and the field tag. */
const GRPC_FRAME_PREFIX = 6;
