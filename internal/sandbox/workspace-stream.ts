/**
 * Workspace archives as streams: an uploaded or exported tar (or tar.gz) is gunzipped,
 * capped, parsed and checked entry by entry (workspace-rules.ts) and re-packed into the one
 * normalised form a sandbox accepts (owner 1000, no set-id bits, parents listed), without
 * ever holding the archive, or even one entry, in memory: memory is bounded by a few chunks
 * whatever the archive's size. File times: an upload gets mtime 0 everywhere (the same tree
 * gives the same bytes, so equal uploads share one digest); a snapshot keeps each entry's
 * time, to the nanosecond where the export has it (workspace-times.ts), so build and test
 * tools see a restored workspace as it was. Never writes anything: a consumer that stores
 * the output must keep it invisible until the stream ended without error (a refusal can
 * come at the last entry); see ArtifactStore.putStream.
 */
import { createGunzip } from "node:zlib";
import * as tar from "tar-stream";
import { isAgentdError } from "../errors.ts";
import {
  type ArchiveLimits,
  bad,
  classifyEntry,
  DEFAULT_LIMITS,
  EntryIndex,
  type EntryMeta,
  SANDBOX_UID,
  tooLarge,
} from "./workspace-rules.ts";
import {
  clampTime,
  EPOCH_TIME,
  entryTime,
  type FileTime,
  timeHeader,
  timeOfMs,
} from "./workspace-times.ts";

/** One entry of a checked archive, in archive order. */
export interface ArchiveEntry extends EntryMeta {
  /** Content bytes (files; 0 for the rest). */
  size: number;
  /** The file's content; read it to the end before asking for the next entry. */
  content: AsyncIterable<Uint8Array>;
  /** A parent directory the archive did not list, given before its first child. */
  implicit?: boolean;
  /** Modification time as the archive has it (clamped; the epoch for an implicit parent). */
  mtime: FileTime;
}

/** How normaliseWorkspaceStream packs entries. */
export interface NormaliseOptions {
  /**
   * Rewrites an entry on its way (its content must keep its size); undefined leaves the
   * entry out (its content is read and dropped).
   */
  mapEntry?: (entry: ArchiveEntry) => ArchiveEntry | undefined;
  /**
   * Keep each entry's modification time (snapshots) instead of mtime 0 (uploads), never
   * later than the moment the normalisation started. Default false.
   */
  keepTimes?: boolean;
  /** The clock behind the future-time clamp, ms since the epoch. Default Date.now. */
  now?: () => number;
}

/** The content stream tar-stream hands out for an entry. */
type EntryStream = tar.ExtractEvents["entry"][1];

const EMPTY: AsyncIterable<Uint8Array> = { async *[Symbol.asyncIterator]() {} };
const USTAR_AT = 257;

/**
 * The checked entries of an archive (tar or gzip-compressed tar) read from `source`.
 * Refusals are AgentdErrors naming workspace_tar: EVALIDATION for a bad archive or entry,
 * ETOOLARGE for a limit (naming the limit and, when given, its setting).
 */
export async function* readArchiveEntries(
  source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  limits: ArchiveLimits = {},
): AsyncGenerator<ArchiveEntry> {
  const lenient = limits.lenient === true;
  const maxUnpacked = limits.maxUnpackedBytes ?? DEFAULT_LIMITS.maxUnpackedBytes;
  const index = new EntryIndex(limits);
  const extract = tar.extract();
  // Its errors reach us through the entry iterator and `fail`; an 'error' event after the
  // iteration ended must not become an uncaught exception.
  extract.on("error", () => undefined);
  let failure: unknown;
  const fail = (err: unknown): unknown => {
    failure ??= isAgentdError(err) ? err : bad(`corrupt tar: ${(err as Error).message}`);
    return failure;
  };
  const feeding = feed(tarBytes(source, limits), extract).catch((err: unknown) => {
    extract.destroy(fail(err) as Error);
  });
  // A consumer reading a file when the archive fails gets the archive's error, not the
  // entry stream's "destroyed".
  async function* contentOf(stream: EntryStream): AsyncGenerator<Uint8Array> {
    try {
      for await (const chunk of stream) yield chunk as Uint8Array;
    } catch (err) {
      throw fail(err);
    }
  }
  let completed = false;
  try {
    for await (const stream of extract) {
      const header = stream.header;
      index.count();
      // A declared size past the limit is refused before any of its content is unpacked.
      const start = (header as { byteOffset?: number }).byteOffset ?? 0;
      if (start + header.size > maxUnpacked)
        throw unpackedTooLarge(maxUnpacked, limits, `entry of ${header.size} bytes`);
      const meta = classifyEntry(header, lenient, limits.keepHardLinks === true);
      const parents = meta === undefined ? undefined : index.add(meta);
      if (meta === undefined || parents === undefined || meta.type !== "file") {
        // tar-stream never feeds a directory's stream: waiting for its end would hang.
        if (header.type !== "directory") await drain(stream);
      }
      if (meta === undefined || parents === undefined) continue;
      for (const path of parents)
        yield {
          path,
          type: "directory",
          mode: 0o755,
          size: 0,
          content: EMPTY,
          implicit: true,
          mtime: EPOCH_TIME,
        };
      const mtime = entryTime(header);
      if (meta.type !== "file") {
        yield { ...meta, size: 0, content: EMPTY, mtime };
        continue;
      }
      yield { ...meta, size: header.size, content: contentOf(stream), mtime };
      await drain(stream);
    }
    completed = true;
  } catch (err) {
    fail(err);
  } finally {
    extract.destroy();
  }
  // Only a complete read waits for the feeder (to see a failure after the last entry); a
  // refused or abandoned one must not wait for a source that may be slow to answer.
  if (completed) await feeding;
  if (failure !== undefined) throw failure;
}

/**
 * The normalised tar of the archive `source` yields, as it is produced: every entry
 * checked (lenient limits keep links and skip devices), owner 1000, no set-id bits, parent
 * directories listed, and mtime 0, so the same tree always gives the same bytes, unless
 * `keepTimes` (snapshots). Memory is bounded by a few chunks: file contents stream through.
 * Throws (see readArchiveEntries) when the archive is refused, possibly after much output:
 * store it only once complete.
 */
export async function* normaliseWorkspaceStream(
  source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  limits: ArchiveLimits = {},
  options: NormaliseOptions = {},
): AsyncGenerator<Uint8Array> {
  const { mapEntry } = options;
  // A time past the start of the export is no time a file of this workspace was written
  // (the sandbox is quiet while it is exported): kept, it would make that file look newer
  // than every edit after the restore, for ever.
  const notAfter = options.keepTimes === true ? timeOfMs((options.now ?? Date.now)()) : undefined;
  const pack = tar.pack();
  pack.on("error", () => undefined); // errors are read from the iterator and `failure`
  let failure: unknown;
  const writing = (async () => {
    for await (const entry of readArchiveEntries(source, limits)) {
      const e = mapEntry === undefined ? entry : mapEntry(entry);
      if (e === undefined) continue;
      await packEntry(pack, e, notAfter === undefined ? EPOCH_TIME : clampTime(e.mtime, notAfter));
    }
    pack.finalize();
  })().catch((err: unknown) => {
    failure ??= err;
    pack.destroy(err as Error);
  });
  try {
    for await (const chunk of pack) yield chunk as Uint8Array;
  } catch (err) {
    failure ??= err;
  } finally {
    // A consumer that stopped early stops the reader too (the pack's sink fails).
    pack.destroy();
    await writing;
  }
  if (failure !== undefined) throw failure;
}

/** The tar header of a normalised entry; mtime 0 unless `time` is given (snapshots). */
export function normalisedHeader(
  e: EntryMeta,
  size: number,
  time: FileTime = EPOCH_TIME,
): tar.Header {
  return {
    name: e.type === "directory" ? `${e.path}/` : e.path,
    type: e.type,
    mode: e.mode,
    size: e.type === "file" ? size : 0,
    linkname: e.linkname ?? "",
    uid: SANDBOX_UID,
    gid: SANDBOX_UID,
    uname: "agent",
    gname: "agent",
    ...timeHeader(time),
    devmajor: 0,
    devminor: 0,
  };
}

/** Writes one entry into `pack` with mtime `time`, its content chunk by chunk; resolves once packed. */
async function packEntry(pack: tar.Pack, e: ArchiveEntry, time: FileTime): Promise<void> {
  let sink: ReturnType<tar.Pack["entry"]> | undefined;
  const packed = new Promise<void>((resolve, reject) => {
    sink = pack.entry(normalisedHeader(e, e.size, time), (err) => (err ? reject(err) : resolve()));
  });
  // When the content fails first, `packed` is never awaited and the sink is destroyed with
  // the pack: neither may surface as an unhandled rejection or an uncaught 'error'.
  packed.catch(() => undefined);
  sink?.on("error", () => undefined);
  if (e.type === "file" && sink !== undefined) {
    for await (const chunk of e.content) {
      // A destroyed pack (the consumer stopped) must not read the rest of a large file.
      if (sink.destroyed) break;
      if (!sink.write(chunk)) await drained(sink);
    }
    sink.end(null);
  }
  await packed;
}

/** Writes the tar bytes into `extract`, honouring its back-pressure, then ends it. */
async function feed(bytes: AsyncIterable<Buffer>, extract: tar.Extract): Promise<void> {
  for await (const chunk of bytes) {
    if (extract.destroyed) return;
    if (!extract.write(chunk)) await drained(extract);
  }
  extract.end(null);
}

/**
 * The archive's tar bytes: gunzipped when it starts with the gzip magic, the input capped
 * at maxArchiveBytes and the output at maxUnpackedBytes, and refused unless the first block
 * is a ustar header.
 */
async function* tarBytes(
  source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  limits: ArchiveLimits,
): AsyncGenerator<Buffer> {
  const maxUnpacked = limits.maxUnpackedBytes ?? DEFAULT_LIMITS.maxUnpackedBytes;
  const { gzip, bytes } = await sniff(capped(source, limits));
  let total = 0;
  let head: Buffer | undefined = Buffer.alloc(0);
  for await (const chunk of gzip ? gunzip(bytes) : bytes) {
    total += chunk.byteLength;
    if (total > maxUnpacked) throw unpackedTooLarge(maxUnpacked, limits, "archive");
    if (head === undefined) {
      yield chunk;
      continue;
    }
    head = head.byteLength === 0 ? chunk : Buffer.concat([head, chunk]);
    if (head.byteLength < 512) continue;
    // An empty archive is only its end: zero blocks.
    const empty = head.subarray(0, 512).every((b) => b === 0);
    if (!empty && head.subarray(USTAR_AT, USTAR_AT + 5).toString("latin1") !== "ustar")
      throw bad("is not a tar archive (no ustar header)");
    yield head;
    head = undefined;
  }
  if (head !== undefined) throw bad("is not a tar archive (no ustar header)");
}

/** The input as Buffers, refused past maxArchiveBytes. */
async function* capped(
  source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  limits: ArchiveLimits,
): AsyncGenerator<Buffer> {
  const max = limits.maxArchiveBytes ?? DEFAULT_LIMITS.maxArchiveBytes;
  let total = 0;
  for await (const c of source) {
    total += c.byteLength;
    if (total > max) throw tooLarge(`the archive is larger than ${max} bytes`, undefined);
    yield Buffer.from(c.buffer, c.byteOffset, c.byteLength);
  }
}

/** Whether the input starts with the gzip magic, and the input again from its start. */
async function sniff(
  input: AsyncGenerator<Buffer>,
): Promise<{ gzip: boolean; bytes: AsyncIterable<Buffer> }> {
  const first: Buffer[] = [];
  let n = 0;
  while (n < 2) {
    const r = await input.next();
    if (r.done === true) break;
    first.push(r.value);
    n += r.value.byteLength;
  }
  const start = Buffer.concat(first);
  async function* again(): AsyncGenerator<Buffer> {
    try {
      if (start.byteLength > 0) yield start;
      yield* input;
    } finally {
      // Stopped at `start` (a refusal in the first chunk): the input is closed too, so a
      // source that holds something per chunk (an unpack slot) gives it back.
      await input.return(undefined);
    }
  }
  return { gzip: start[0] === 0x1f && start[1] === 0x8b, bytes: again() };
}

/** Gunzips `bytes` as a stream: output comes a chunk at a time, as it is read. */
async function* gunzip(bytes: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const z = createGunzip();
  // Written by hand, honouring z's back-pressure: the next input chunk is asked for only
  // once z took the last one in (inflated all but its output buffer), so whoever paces
  // the input (an unpack slot per chunk, api/chunk-slots.ts) paces the inflating too.
  // Errors surface through z; a destroyed z stops the feeding.
  const input = bytes[Symbol.asyncIterator]();
  void (async () => {
    for (let r = await input.next(); r.done !== true; r = await input.next()) {
      if (z.destroyed) return;
      if (!z.write(r.value)) await drained(z);
    }
    z.end();
  })().catch((err: unknown) => {
    z.destroy(err as Error);
  });
  try {
    for await (const chunk of z) yield chunk as Buffer;
  } catch (err) {
    if (isAgentdError(err)) throw err;
    throw bad("gzip data is corrupt or truncated");
  } finally {
    z.destroy();
    // A feeder waiting for input ends once that input comes (or its source closes).
    void Promise.resolve(input.return?.()).catch(() => undefined);
  }
}

function unpackedTooLarge(max: number, limits: ArchiveLimits, what: string) {
  return tooLarge(
    `the unpacked ${what} exceeds the limit of ${max} bytes`,
    limits.settings?.unpackedBytes,
  );
}

/** Reads `stream` to its end, discarding what is left. */
async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of stream);
}

/** Resolves once `stream` can take more, or is gone (never waits on a destroyed stream). */
async function drained(stream: {
  destroyed: boolean;
  once(event: string, fn: () => void): unknown;
  off(event: string, fn: () => void): unknown;
}): Promise<void> {
  if (stream.destroyed) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      stream.off("drain", done);
      stream.off("close", done);
      resolve();
    };
    stream.once("drain", done);
    stream.once("close", done);
  });
}
