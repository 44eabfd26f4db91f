/**
 * Fitting content into one event. The size that counts is the sealed event's: its canonical
 * JSON, in which a JSON document carried as a string field (tool.result's output_json,
 * tool.call's input_json) is escaped a second time — a NUL byte of output becomes `\u0000`
 * in the document and `\\u0000` in the event. So sizes are measured by sealing the event
 * with the codec itself, never estimated from the content.
 *
 * Never returns a shape whose event was not measured to fit (except the last resort, which
 * is as small as the event's fixed fields allow).
 */
import { MAX_EVENT_BYTES } from "../eventlog/append-batcher.ts";
import { canonicalJson } from "../eventlog/canonical-json.ts";
import { type EventPayload, sealEvent } from "../eventlog/event-codec.ts";
import { GENESIS_HASH } from "../eventlog/hash-chain.ts";
import { type CutNote, cutTree, headTail, treeExtent } from "./head-tail.ts";

/**
 * What a kernel event may take: the log's limit less a margin. Sizes are measured with the
 * longest seq and timestamp an event can have, so the margin only absorbs changes of the
 * codec made after this was written (a new envelope member).
 */
export const EVENT_BUDGET = MAX_EVENT_BYTES - 4 * 1024;

/** A seq with more digits than any run reaches, and a timestamp in its longest form. */
const WORST_SEQ = 10 ** 15;
const WORST_TS_MS = Date.UTC(2999, 11, 31, 23, 59, 59, 999);

/** Where an event goes (the envelope members that vary in size). */
export interface EventPlace {
  runId: string;
  sessionId: string;
}

/** UTF-8 bytes of the event holding `payload` once sealed (at least what the log compares). */
export function sealedBytes(place: EventPlace, payload: EventPayload): number {
  const s = sealEvent(
    { runId: place.runId, sessionId: place.sessionId, payload },
    WORST_SEQ,
    GENESIS_HASH,
    WORST_TS_MS,
  );
  return Buffer.byteLength(s.json);
}

export interface FitOptions {
  place: EventPlace;
  /** The event carrying a shaped document and its canonical JSON. */
  build: (shaped: unknown, json: string) => EventPayload;
  /** Most characters of the document's canonical JSON (a cap for readers of the event). */
  maxJson: number;
  /** The marker put where content is left out. */
  note: CutNote;
}

export interface Fitted {
  /** The document as the event carries it. */
  shaped: unknown;
  /** Its canonical JSON. */
  json: string;
  /** True when anything was left out. */
  cut: boolean;
}

/**
 * `doc` shaped so that its event fits: as it is when it does; else the head+tail form of
 * cutTree with the longest `keep` that fits (binary search: ~18 seals for a large output);
 * else `{truncated, note, head}` holding a head+tail cut of the document's JSON text (a
 * document with too many keys, say); else `null`.
 */
export function fitDocument(doc: unknown, opts: FitOptions): Fitted {
  const fits = (shaped: unknown): string | undefined => {
    const json = canonicalJson(shaped);
    if (json.length > opts.maxJson) return undefined;
    return sealedBytes(opts.place, opts.build(shaped, json)) <= EVENT_BUDGET ? json : undefined;
  };
  const whole = fits(doc);
  if (whole !== undefined) return { shaped: doc, json: whole, cut: false };

  let best: Fitted | undefined;
  let lo = 1;
  let hi = Math.min(treeExtent(doc), opts.maxJson);
  while (lo <= hi) {
    const keep = Math.floor((lo + hi) / 2);
    const shaped = cutTree(doc, keep, opts.note);
    const json = fits(shaped);
    if (json === undefined) hi = keep - 1;
    else {
      best = { shaped, json, cut: true };
      lo = keep + 1;
    }
  }
  if (best !== undefined) return best;

  const text = canonicalJson(doc);
  lo = 0;
  hi = Math.min(text.length, opts.maxJson);
  while (lo <= hi) {
    const keep = Math.floor((lo + hi) / 2);
    const shaped = {
      truncated: true,
      note: "cut as JSON text: too large for one event",
      head: headTail(text, keep, opts.note),
    };
    const json = fits(shaped);
    if (json === undefined) hi = keep - 1;
    else {
      best = { shaped, json, cut: true };
      lo = keep + 1;
    }
  }
  return best ?? { shaped: null, json: "null", cut: true };
}
