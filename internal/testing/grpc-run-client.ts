/**
 * A RunService client on @grpc/grpc-js (a plain gRPC stack, none of the server's Connect
 * code): paths and message (de)serialization come from the generated @bufbuild/protobuf
 * descriptors, transport and status handling from grpc-js. For integration tests.
 */
import assert from "node:assert/strict";
import {
  create,
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
  toJson,
} from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import {
  type CreateRunRequestSchema,
  type GetRunResponse,
  type ListRunsRequestSchema,
  RunService,
  type StreamEventsRequestSchema,
  type UploadWorkspaceResponse,
} from "../gen/agentd/v1/run_service_pb.js";
import {
  HealthCheckRequestSchema,
  type HealthCheckResponse,
  HealthCheckResponseSchema,
} from "../gen/grpc/health/v1/health_pb.js";

/** A method as grpc-js needs it: its path and message types. */
interface Method<I extends DescMessage, O extends DescMessage> {
  readonly name: string;
  readonly parent: { readonly typeName: string };
  readonly input: I;
  readonly output: O;
}

/**
 * Whose credentials a call carries: a token (sent as `authorization: Bearer TOKEN`),
 * `null` for no authorization header at all, or undefined for the client's default token.
 */
export type Auth = string | null | undefined;

/** How a server stream ended. */
export interface StreamEnd {
  /** The final status (code 0 when the server ended the stream normally). */
  status: grpc.StatusObject;
  /** Set when the stream ended with an error status. */
  error: grpc.ServiceError | undefined;
}

/** An UploadWorkspace call written by hand (GrpcRunClient.openUpload). */
export interface OpenUpload {
  /** The call's answer, or its error status. */
  readonly result: Promise<UploadWorkspaceResponse>;
  /** Sends one chunk (waits for the stream to take it). */
  write(chunk: Uint8Array): Promise<void>;
  /** Half-closes: the upload is complete. */
  end(): void;
  cancel(): void;
}

/** An open StreamEvents call: the events received so far and how the call ended. */
export class EventStream {
  readonly events: Event[] = [];
  readonly done: Promise<StreamEnd>;
  readonly #call: grpc.ClientReadableStream<{ event?: Event }>;
  readonly #waiters = new Set<() => void>();
  #ended = false;

  constructor(call: grpc.ClientReadableStream<{ event?: Event }>) {
    this.#call = call;
    let error: grpc.ServiceError | undefined;
    call.on("data", (m: { event?: Event }) => {
      if (m.event !== undefined) this.events.push(m.event);
      this.#wake();
    });
    // Without an error listener a failed call would throw in the test process.
    call.on("error", (e: grpc.ServiceError) => {
      error = e;
    });
    this.done = new Promise((resolve) => {
      call.on("status", (status: grpc.StatusObject) => {
        this.#ended = true;
        this.#wake();
        resolve({ status, error });
      });
    });
  }

  #wake(): void {
    for (const w of this.#waiters) w();
  }

  /** Seqs received so far, in arrival order. */
  seqs(): number[] {
    return this.events.map((e) => Number(e.seq));
  }

  /** Waits until at least `n` events arrived; throws after `timeoutMs` or if the call ended short. */
  async waitForCount(n: number, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.events.length < n) {
      if (this.#ended)
        throw new Error(`stream ended after ${this.events.length} events, wanted ${n}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`only ${this.events.length} of ${n} events in ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.#waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, left);
        this.#waiters.add(done);
      });
    }
  }

  /** Resolves with how the call ended; rejects when it is still open after `timeoutMs`. */
  async end(timeoutMs = 60_000): Promise<StreamEnd> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.done,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`stream still open after ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  cancel(): void {
    this.#call.cancel();
  }
}

export class GrpcRunClient {
  readonly #client: grpc.Client;
  readonly #token: string | undefined;

  /**
   * `target` is "HOST:PORT"; `token` is sent with every call that does not name its own;
   * `ca` (PEM) makes it a TLS client trusting that CA.
   */
  constructor(target: string, token?: string, ca?: Buffer) {
    const creds =
      ca === undefined ? grpc.credentials.createInsecure() : grpc.credentials.createSsl(ca);
    this.#client = new grpc.Client(target, creds);
    this.#token = token;
  }

  #metadata(auth: Auth, headers: Record<string, string> = {}): grpc.Metadata {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(headers)) md.set(k, v);
    const token = auth === undefined ? this.#token : auth;
    if (token !== null && token !== undefined) md.set("authorization", `Bearer ${token}`);
    return md;
  }

  /** One unary call of any method. */
  unary<I extends DescMessage, O extends DescMessage>(
    method: Method<I, O>,
    init: MessageInitShape<I>,
    auth?: Auth,
    headers: Record<string, string> = {},
  ): Promise<MessageShape<O>> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        `/${method.parent.typeName}/${method.name}`,
        (m: MessageShape<I>) => Buffer.from(toBinary(method.input, m)),
        (b: Buffer) => fromBinary(method.output, b),
        create(method.input, init),
        this.#metadata(auth, headers),
        (err, out) => (err || out === undefined ? reject(err) : resolve(out)),
      );
    });
  }

  createRun(
    init: MessageInitShape<typeof CreateRunRequestSchema>,
    auth?: Auth,
    headers: Record<string, string> = {},
  ) {
    return this.unary(RunService.method.createRun, init, auth, headers);
  }

  getRun(runId: string, auth?: Auth): Promise<GetRunResponse> {
    return this.unary(RunService.method.getRun, { runId }, auth);
  }

  listRuns(init: MessageInitShape<typeof ListRunsRequestSchema>, auth?: Auth) {
    return this.unary(RunService.method.listRuns, init, auth);
  }

  cancelRun(runId: string, reason: string, auth?: Auth) {
    return this.unary(RunService.method.cancelRun, { runId, reason }, auth);
  }

  /** Any server-streaming method, as grpc-js's readable stream of decoded messages. */
  serverStream<I extends DescMessage, O extends DescMessage>(
    method: Method<I, O>,
    init: MessageInitShape<I>,
    auth?: Auth,
  ): grpc.ClientReadableStream<MessageShape<O>> {
    return this.#client.makeServerStreamRequest(
      `/${method.parent.typeName}/${method.name}`,
      (m: MessageShape<I>) => Buffer.from(toBinary(method.input, m)),
      (b: Buffer) => fromBinary(method.output, b),
      create(method.input, init),
      this.#metadata(auth),
    );
  }

  /**
   * UploadWorkspace as a client stream: each chunk one message, written with grpc-js's
   * backpressure (the next waits for "drain"). `abortAfter` cancels the call after that
   * many chunks (an upload that stops half way).
   */
  uploadWorkspace(
    chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    opts: { auth?: Auth; abortAfter?: number } = {},
  ): Promise<UploadWorkspaceResponse> {
    const m = RunService.method.uploadWorkspace;
    return new Promise((resolve, reject) => {
      const call = this.#client.makeClientStreamRequest(
        `/${m.parent.typeName}/${m.name}`,
        (req: MessageShape<typeof m.input>) => Buffer.from(toBinary(m.input, req)),
        (b: Buffer) => fromBinary(m.output, b),
        this.#metadata(opts.auth),
        (err, out) => (err || out === undefined ? reject(err) : resolve(out)),
      );
      void (async () => {
        let n = 0;
        for await (const chunk of chunks) {
          if (opts.abortAfter !== undefined && n++ >= opts.abortAfter) {
            call.cancel();
            return;
          }
          if (!call.write(create(m.input, { chunk })))
            await new Promise((r) => call.once("drain", r));
        }
        call.end();
      })().catch((err: unknown) => {
        call.cancel();
        reject(err);
      });
    });
  }

  /**
   * An UploadWorkspace stream the caller writes by hand (to hold it open, idle, between
   * chunks); `result` settles with the call's answer or error status.
   */
  openUpload(opts: { auth?: Auth; deadlineMs?: number } = {}): OpenUpload {
    const m = RunService.method.uploadWorkspace;
    let settle!: { resolve(v: UploadWorkspaceResponse): void; reject(e: unknown): void };
    const result = new Promise<UploadWorkspaceResponse>((resolve, reject) => {
      settle = { resolve, reject };
    });
    result.catch(() => undefined); // read by the caller, maybe later than it settles
    const call = this.#client.makeClientStreamRequest(
      `/${m.parent.typeName}/${m.name}`,
      (req: MessageShape<typeof m.input>) => Buffer.from(toBinary(m.input, req)),
      (b: Buffer) => fromBinary(m.output, b),
      this.#metadata(opts.auth),
      opts.deadlineMs === undefined ? {} : { deadline: Date.now() + opts.deadlineMs },
      (err, out) => (err || out === undefined ? settle.reject(err) : settle.resolve(out)),
    );
    call.on("error", () => undefined);
    return {
      result,
      async write(chunk) {
        if (!call.write(create(m.input, { chunk })))
          await new Promise((r) => call.once("drain", r));
      },
      end: () => call.end(),
      cancel: () => call.cancel(),
    };
  }

  /** Opens StreamEvents; events are collected as they arrive. */
  streamEvents(init: MessageInitShape<typeof StreamEventsRequestSchema>, auth?: Auth) {
    const m = RunService.method.streamEvents;
    const call = this.#client.makeServerStreamRequest(
      `/${m.parent.typeName}/${m.name}`,
      (req: MessageShape<typeof m.input>) => Buffer.from(toBinary(m.input, req)),
      (b: Buffer) => fromBinary(m.output, b),
      create(m.input, init),
      this.#metadata(auth),
    );
    return new EventStream(call);
  }

  /** grpc.health.v1.Health/Check; never sends a token. */
  healthCheck(service = ""): Promise<HealthCheckResponse> {
    return this.unary(
      {
        name: "Check",
        parent: { typeName: "grpc.health.v1.Health" },
        input: HealthCheckRequestSchema,
        output: HealthCheckResponseSchema,
      },
      { service },
      null,
    );
  }

  close(): void {
    this.#client.close();
  }
}

/** The events in protobuf-JSON form: what verifyChain checks. */
export function eventsJson(events: readonly Event[]): Record<string, unknown>[] {
  return events.map((e) => toJson(EventSchema, e) as Record<string, unknown>);
}

/**
 * Asserts that `call` fails with gRPC status `code` and, when given, a message matching
 * `message`; returns the error.
 */
export async function assertGrpcError(
  call: Promise<unknown>,
  code: grpc.status,
  message?: RegExp,
): Promise<grpc.ServiceError> {
  let err: unknown;
  try {
    await call;
  } catch (e) {
    err = e;
  }
  assert.ok(err !== undefined, `expected gRPC status ${grpc.status[code]}, the call succeeded`);
  const se = err as grpc.ServiceError;
  assert.equal(
    se.code,
    code,
    `expected ${grpc.status[code]}, got ${grpc.status[se.code] ?? se.code}: ${se.details ?? se.message}`,
  );
  // grpc-js decodes grpc-message with decodeURI, which leaves %3A, %2C… as they came
  // (connect-node encodes them): match on the fully decoded text, as a gRPC client sees it.
  if (message !== undefined) assert.match(fullyDecoded(se.details), message);
  return se;
}

function fullyDecoded(details: string): string {
  try {
    return decodeURIComponent(details);
  } catch {
    return details;
  }
}

export { grpc };
