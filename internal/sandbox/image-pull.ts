/**
 * A run's own image on the Docker engine: used as it is when the engine has it, else
 * pulled from its registry (with the registry's credentials when the policy has some), with
 * the engine's progress coalesced into a few reports (started, at most one progress per
 * interval, done) rather than one per layer chunk. The result pins the image: its engine
 * id (what the container is made from, so a tag moved meanwhile changes nothing) and its
 * digest (the registry's manifest digest when known).
 *
 * Must never: put a credential in a report, an error or a log (messages are scrubbed of
 * the password and username), or pull without a deadline.
 */
import type { Readable } from "node:stream";
import type Docker from "dockerode";
import { AgentdError, type ErrorCode } from "../errors.ts";
import { type ImageReference, parseImageReference, pullReference } from "./image-reference.ts";

export type PullFailure = "not_found" | "unauthorized" | "unreachable" | "error";

export interface PullReport {
  phase: "started" | "progress" | "done" | "failed";
  bytesDone: number;
  bytesTotal: number;
  layersDone: number;
  layersTotal: number;
  /** On done. */
  digest?: string;
  /** On failed. */
  reason?: PullFailure;
  message?: string;
}

export interface RegistryCredentials {
  username: string;
  password: string;
}

export interface EnsureImageOptions {
  /** Credentials for the reference's registry, if any. */
  auth?: RegistryCredentials;
  /**
   * The digest an earlier container of the run ran (EnsuredImage.digest): the image is
   * that content — the engine's image of that id, else name@digest from the registry —
   * whatever the reference's tag names now.
   */
  pin?: string;
  /** Progress (only when a pull happens). */
  onReport?: (r: PullReport) => void;
  /** At most one "progress" report per this many ms (default 2000). */
  reportEveryMs?: number;
  /** The whole pull at most (default 10 minutes). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface EnsuredImage {
  /** The engine's image id (sha256:…): what the sandbox is created from. */
  id: string;
  /** The manifest digest when the image came from (or was pushed to) a registry, else the id. */
  digest: string;
  source: "pulled" | "local";
}

/** A pull that failed: names the image and why. */
export class ImagePullError extends AgentdError {
  readonly reason: PullFailure;
  constructor(image: string, reason: PullFailure, detail: string, cause?: unknown) {
    const code: ErrorCode =
      reason === "not_found"
        ? "ENOTFOUND"
        : reason === "unauthorized"
          ? "EPERMISSION"
          : "EUNAVAILABLE";
    const what = {
      not_found: "not found",
      unauthorized: "unauthorized",
      unreachable: "registry unreachable",
      error: "failed",
    }[reason];
    super(code, `cannot pull image ${image}: ${what} (${detail})`, { cause });
    this.reason = reason;
  }
}

const DEFAULT_TIMEOUT_MS = 10 * 60_000;

/** The image on the engine, pulled when it is not there yet. */
export async function ensureImage(
  docker: Docker,
  ref: ImageReference,
  opts: EnsureImageOptions = {},
): Promise<EnsuredImage> {
  if (opts.pin !== undefined) {
    const byId = await inspect(docker, opts.pin).catch(() => undefined);
    if (byId !== undefined && byId.id === opts.pin) return { ...byId, source: "local" };
    if (ref.digest !== opts.pin) {
      const pinned = parseImageReference(`${ref.name}@${opts.pin}`);
      if (!("error" in pinned)) return ensureImage(docker, pinned, { ...opts, pin: undefined });
    }
  }
  const pullRef = pullReference(ref);
  const local = await inspect(docker, pullRef);
  if (local !== undefined) return { ...local, source: "local" };
  const progress = new PullProgress(opts.onReport, opts.reportEveryMs ?? 2000);
  progress.report("started");
  const scrub = scrubber(opts.auth);
  let digest: string | undefined;
  try {
    digest = await pull(docker, pullRef, ref, opts, progress, scrub);
  } catch (err) {
    // Cancelled (the run was): not a failure of the pull; the caller ends the run so.
    if (err instanceof AgentdError && err.code === "ECANCELLED") throw err;
    if (opts.signal?.aborted)
      throw new AgentdError("ECANCELLED", `the pull of ${ref.normalised} was cancelled`, {
        cause: err,
      });
    const failure =
      err instanceof ImagePullError
        ? err
        : new ImagePullError(
            ref.normalised,
            classify(scrub(messageOf(err))),
            scrub(messageOf(err)),
            err,
          );
    progress.report("failed", { reason: failure.reason, message: failure.message });
    throw failure;
  }
  const pulled = await inspect(docker, pullRef);
  if (pulled === undefined)
    throw new ImagePullError(ref.normalised, "error", "the engine does not have it after the pull");
  const result = { id: pulled.id, digest: digest ?? pulled.digest, source: "pulled" as const };
  progress.report("done", { digest: result.digest });
  return result;
}

/** id and digest of an image the engine has, or undefined. */
async function inspect(
  docker: Docker,
  pullRef: string,
): Promise<{ id: string; digest: string } | undefined> {
  let info: Docker.ImageInspectInfo;
  try {
    info = await docker.getImage(pullRef).inspect();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return undefined;
    throw new AgentdError("EUNAVAILABLE", `cannot inspect image ${pullRef}: ${messageOf(err)}`, {
      cause: err,
    });
  }
  const name = pullRef.replace(/[@:][^/]*$/, "");
  const repoDigest = (info.RepoDigests ?? []).find((d) => sameRepo(d.split("@")[0] ?? "", name));
  return { id: info.Id, digest: repoDigest?.split("@")[1] ?? info.Id };
}

/** docker.io names are stored without their registry (and library/) in RepoDigests. */
function sameRepo(a: string, b: string): boolean {
  const norm = (s: string) => s.replace(/^docker\.io\//, "").replace(/^library\//, "");
  return norm(a) === norm(b);
}

async function pull(
  docker: Docker,
  pullRef: string,
  ref: ImageReference,
  opts: EnsureImageOptions,
  progress: PullProgress,
  scrub: (s: string) => string,
): Promise<string | undefined> {
  const authconfig =
    opts.auth === undefined
      ? undefined
      : { username: opts.auth.username, password: opts.auth.password, serveraddress: ref.registry };
  const stream = (await docker.pull(pullRef, {
    ...(authconfig === undefined ? {} : { authconfig }),
    ...(opts.signal === undefined ? {} : { abortSignal: opts.signal }),
  })) as Readable;
  let digest: string | undefined;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    let buf = "";
    let failed = false;
    const fail = (err: Error): void => {
      if (failed) return;
      failed = true;
      clearTimeout(timer);
      stream.destroy();
      reject(err);
    };
    const timer = setTimeout(
      () =>
        fail(new ImagePullError(ref.normalised, "unreachable", `no end within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onAbort = (): void =>
      fail(new AgentdError("ECANCELLED", `the pull of ${ref.normalised} was cancelled`));
    if (opts.signal?.aborted) onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const done = (): void => opts.signal?.removeEventListener("abort", onAbort);
    stream.on("close", done);
    stream.on("end", done);
    stream.on("data", (chunk: Buffer) => {
      buf += chunk.toString("utf8");
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line === "") continue;
        let msg: EngineLine;
        try {
          msg = JSON.parse(line) as EngineLine;
        } catch {
          continue;
        }
        if (msg.error !== undefined || msg.errorDetail?.message !== undefined) {
          const text = scrub(msg.errorDetail?.message ?? msg.error ?? "");
          fail(new ImagePullError(ref.normalised, classify(text), text.slice(0, 500)));
          return;
        }
        const d = /^Digest: (sha256:[a-f0-9]{64})/.exec(msg.status ?? "");
        if (d !== null) digest = d[1];
        progress.line(msg);
      }
    });
    stream.on("error", (err) => fail(err));
    stream.on("end", () => {
      if (failed) return;
      clearTimeout(timer);
      resolve();
    });
  });
  return digest;
}

interface EngineLine {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
}

/** Per-layer state folded into coalesced reports. */
class PullProgress {
  readonly #layers = new Map<string, { done: number; total: number; finished: boolean }>();
  readonly #emit: ((r: PullReport) => void) | undefined;
  readonly #everyMs: number;
  #last = 0;

  constructor(emit: ((r: PullReport) => void) | undefined, everyMs: number) {
    this.#emit = emit;
    this.#everyMs = everyMs;
  }

  line(msg: EngineLine): void {
    const id = msg.id;
    if (id === undefined || !/^[a-f0-9]{12,64}$/.test(id)) return;
    const layer = this.#layers.get(id) ?? { done: 0, total: 0, finished: false };
    this.#layers.set(id, layer);
    const status = msg.status ?? "";
    if (status === "Downloading") {
      layer.done = msg.progressDetail?.current ?? layer.done;
      layer.total = msg.progressDetail?.total ?? layer.total;
    } else if (status === "Download complete") layer.done = layer.total;
    else if (status === "Pull complete" || status === "Already exists") layer.finished = true;
    const now = performance.now();
    if (now - this.#last >= this.#everyMs) this.report("progress");
  }

  report(phase: PullReport["phase"], extra: Partial<PullReport> = {}): void {
    this.#last = performance.now();
    let bytesDone = 0;
    let bytesTotal = 0;
    let layersDone = 0;
    for (const l of this.#layers.values()) {
      bytesDone += l.done;
      bytesTotal += l.total;
      if (l.finished) layersDone++;
    }
    this.#emit?.({
      phase,
      bytesDone,
      bytesTotal,
      layersDone,
      layersTotal: this.#layers.size,
      ...extra,
    });
  }
}

/** What the engine said, as a reason. */
export function classify(message: string): PullFailure {
  const m = message.toLowerCase();
  if (
    /unauthorized|authentication required|no basic auth credentials|access denied|denied:/.test(m)
  )
    return "unauthorized";
  if (/manifest unknown|not found|does not exist|no such image|name unknown/.test(m))
    return "not_found";
  if (
    /connection refused|no such host|i\/o timeout|dial tcp|tls handshake|deadline exceeded|network is unreachable|server misbehaving|no route to host|connection reset|eof/.test(
      m,
    )
  )
    return "unreachable";
  return "error";
}

function messageOf(err: unknown): string {
  const e = err as { json?: { message?: string }; message?: string };
  return e.json?.message ?? e.message ?? String(err);
}

/** Removes the credentials from engine text (a registry may echo a username). */
function scrubber(auth: RegistryCredentials | undefined): (s: string) => string {
  if (auth === undefined) return (s) => s;
  const secrets = [auth.password, auth.username].filter((v) => v.length >= 3);
  return (s) => secrets.reduce((t, v) => t.split(v).join("[redacted]"), s);
}
