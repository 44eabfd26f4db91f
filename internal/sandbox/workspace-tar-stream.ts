/**
 * Walks a workspace export (a tar byte stream) entry by entry with tar-stream, with
 * backpressure: an entry's content is read chunk by chunk as the consumer asks for it and is
 * never gathered here. Names are read as raw bytes and decoded as strict UTF-8, so a name
 * git could not carry is flagged rather than silently changed.
 *
 * Must never buffer an entry, nor keep reading the source after the consumer stopped.
 */
import * as tar from "tar-stream";
import { AgentdError } from "../errors.ts";
import { normaliseEntryPath } from "./workspace-archive.ts";

/** One entry of the export. Drain `body` or not: the walk skips what is left of it. */
export interface ExportEntry {
  /** Normalised relative path ("" for the root); lossy when `nameValid` is false. */
  path: string;
  /** False when the name (or a symlink's target) is not valid UTF-8. */
  nameValid: boolean;
  type: tar.Header["type"];
  /** Permission bits. */
  mode: number;
  size: number;
  /** Symlink target, or a hard link's first path (normalised). */
  linkname?: string;
  body: AsyncIterable<Buffer>;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A header string read as latin1 (one char per byte) decoded as UTF-8; undefined if invalid. */
function decode(raw: string, fromPax: boolean): string | undefined {
  // PAX records are always decoded as UTF-8 by tar-stream: a bad byte is already U+FFFD.
  if (fromPax) return raw.includes("\uFFFD") ? undefined : raw;
  try {
    return UTF8.decode(Buffer.from(raw, "latin1"));
  } catch {
    return undefined;
  }
}

function corrupt(message: string, cause?: unknown): AgentdError {
  return new AgentdError("EIO", `the workspace export is not a valid archive: ${message}`, {
    cause,
  });
}

/** The PAX records tar-stream applied to a header. */
interface Pax {
  path?: string;
  linkpath?: string;
}

/** What a failed walk throws: the source's own error, the abort reason, or EIO. */
function failure(err: unknown, signal?: AbortSignal): unknown {
  if (err instanceof AgentdError || signal?.aborted) return err;
  return corrupt((err as Error).message, err);
}

function toEntry(header: tar.Header, body: AsyncIterable<Buffer>): ExportEntry {
  const pax = (header.pax ?? {}) as Pax;
  const name = decode(header.name, pax.path !== undefined);
  const raw = header.linkname ?? undefined;
  const link = raw == null ? undefined : decode(raw, pax.linkpath !== undefined);
  const lossy = (s: string) => Buffer.from(s, "latin1").toString("utf8");
  let path: string;
  try {
    path = normaliseEntryPath(name ?? lossy(header.name));
  } catch (err) {
    throw corrupt((err as Error).message, err);
  }
  let linkname = link ?? (raw == null ? undefined : lossy(raw));
  if (header.type === "link" && linkname !== undefined) {
    try {
      linkname = normaliseEntryPath(linkname);
    } catch (err) {
      throw corrupt((err as Error).message, err);
    }
  }
  return {
    path,
    nameValid: name !== undefined && (raw == null || link !== undefined),
    type: header.type,
    mode: (header.mode ?? 0o644) & 0o777,
    size: header.size ?? 0,
    linkname,
    body,
  };
}

/** Resolves when `extract` wants more input or is gone. */
function drainOrClose(extract: tar.Extract): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      extract.off("drain", done);
      extract.off("close", done);
      resolve();
    };
    extract.on("drain", done);
    extract.on("close", done);
  });
}

/** Feeds `source` into `extract` with backpressure; a source error destroys the extract. */
async function pump(source: AsyncIterator<Uint8Array>, extract: tar.Extract): Promise<void> {
  try {
    for (;;) {
      const next = await source.next();
      if (extract.destroyed) return;
      if (next.done) break;
      if (!extract.write(next.value)) await drainOrClose(extract);
    }
    extract.end(null);
  } catch (err) {
    extract.destroy(err as Error);
  }
}

/** The entries of the tar in `source`, in archive order. */
export async function* exportEntries(
  source: AsyncIterable<Uint8Array>,
  signal?: AbortSignal,
): AsyncGenerator<ExportEntry> {
  signal?.throwIfAborted();
  // Names as raw bytes (one char per byte), decoded strictly in toEntry.
  const extract = tar.extract({ filenameEncoding: "latin1" } as Parameters<typeof tar.extract>[0]);
  const input = source[Symbol.asyncIterator]();
  const onAbort = () => extract.destroy(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  void pump(input, extract);
  try {
    for await (const stream of extract) {
      const it = (stream as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
      let ended = false;
      const body = {
        async *[Symbol.asyncIterator]() {
          try {
            for (let r = await it.next(); !r.done; r = await it.next()) yield r.value;
          } catch (err) {
            throw failure(err, signal);
          }
          ended = true;
        },
      };
      yield toEntry(stream.header, body);
      // What the consumer left of the entry is skipped (the walk cannot go on otherwise).
      while (!ended) ended = (await it.next()).done === true;
      signal?.throwIfAborted();
    }
  } catch (err) {
    throw failure(err, signal);
  } finally {
    signal?.removeEventListener("abort", onAbort);
    extract.destroy();
    // Lets the producer stop (e.g. close the container's export stream); not awaited, as
    // a producer suspended mid-read answers only once its pending read settles.
    input.return?.().catch(() => undefined);
  }
}
