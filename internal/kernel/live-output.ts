/**
 * Live output of a running call as `tool.output` events: redacted as it streams (a value
 * split across chunks is still caught), coalesced to at most one flush every 100 ms (or at
 * once past 16 KiB). Output arriving after a quiet 100 ms goes at once; output arriving
 * sooner waits for the end of the 100 ms since the last flush — the stream redactor's
 * flush() gives back all but what could still be a secret form — so a line printed
 * reaches the log within 100 ms plus one append, and at once when the call was quiet.
 *
 * Must never: emit a character a scan of the whole output would have redacted, emit half a
 * surrogate pair, or leave a failed append as an unhandled rejection (close() throws it).
 */
import { create } from "@bufbuild/protobuf";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { OutputStream, ToolOutputSchema } from "../gen/agentd/v1/events_pb.js";
import { createStreamRedactor, type Redactor } from "./redaction.ts";

/** Live output is coalesced: at most one tool.output event per stream per interval. */
export const OUTPUT_FLUSH_MS = 100;
/** Also the most characters one tool.output event carries (escaped, at most 6x: fits). */
export const OUTPUT_FLUSH_BYTES = 16 * 1024;

type StreamName = "stdout" | "stderr";

export interface LiveOutput {
  push(stream: StreamName, text: string): void;
  /** The rest, then waits for every append; throws the first append that failed. */
  close(): Promise<void>;
}

export function createLiveOutput(
  append: (payload: EventPayload) => Promise<unknown>,
  redactor: Redactor,
  callId: string,
): LiveOutput {
  const pending: Record<StreamName, string> = { stdout: "", stderr: "" };
  const streams = {
    stdout: createStreamRedactor(redactor, 4096),
    stderr: createStreamRedactor(redactor, 4096),
  };
  let timer: NodeJS.Timeout | undefined;
  let lastFlush = Number.NEGATIVE_INFINITY;
  let chain: Promise<unknown> = Promise.resolve();
  let failure: { err: unknown } | undefined;
  const emit = (s: StreamName, final: boolean): void => {
    // A surrogate pair split between two pushes waits for its second half: an event
    // holding half a pair cannot be decoded. At the end, whatever is left is made whole.
    const text = final ? pending[s].toWellFormed() : pending[s];
    const held = !final && isHighSurrogate(text.charCodeAt(text.length - 1)) ? 1 : 0;
    pending[s] = text.slice(text.length - held);
    for (const chunk of slices(text.slice(0, text.length - held), OUTPUT_FLUSH_BYTES)) {
      chain = chain.then(() =>
        failure !== undefined
          ? undefined
          : append({
              case: "toolOutput",
              value: create(ToolOutputSchema, {
                callId,
                stream: s === "stdout" ? OutputStream.STDOUT : OutputStream.STDERR,
                chunk,
              }),
            }).catch((err: unknown) => {
              failure = { err };
            }),
      );
    }
  };
  const onTimer = (): void => {
    timer = undefined;
    lastFlush = performance.now();
    for (const s of ["stdout", "stderr"] as const) {
      pending[s] += streams[s].flush();
      emit(s, false);
    }
  };
  return {
    push(stream, text) {
      pending[stream] += streams[stream].push(text);
      if (pending[stream].length >= OUTPUT_FLUSH_BYTES) emit(stream, false);
      if (timer !== undefined) return;
      const wait = lastFlush + OUTPUT_FLUSH_MS - performance.now();
      if (wait <= 0) onTimer();
      else timer = setTimeout(onTimer, wait);
    },
    async close() {
      clearTimeout(timer);
      for (const s of ["stdout", "stderr"] as const) {
        pending[s] += streams[s].end();
        emit(s, true);
      }
      await chain;
      if (failure !== undefined) throw failure.err;
    },
  };
}

const isHighSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;

/** Pieces of at most `max` UTF-16 units, never splitting a surrogate pair. */
function slices(text: string, max: number): string[] {
  const out: string[] = [];
  let at = 0;
  while (at < text.length) {
    let end = Math.min(text.length, at + max);
    if (end < text.length && end - at > 1 && isHighSurrogate(text.charCodeAt(end - 1))) end--;
    out.push(text.slice(at, end));
    at = end;
  }
  return out;
}
