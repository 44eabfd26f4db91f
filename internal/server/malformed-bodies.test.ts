/**
 * Request bodies that are no valid message, against a real `agentd server`, in every
 * protocol and codec it serves, unary and server-streaming, over real clients: @grpc/grpc-js
 * (raw bytes through its generic client), node:http2 and fetch (HTTP/1.1). Each answers
 * INVALID_ARGUMENT with a plain message and nothing of the server's insides; a caller
 * without a token is refused before its body is read; the server serves on.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, it } from "node:test";
import type { Code } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { grpc } from "../testing/grpc-run-client.ts";

let stack: Stack;
let runId: string;

before(async () => {
  stack = await startStack();
  const { run } = await stack.client.createRun({ prompt: "a good run" });
  runId = run?.runId ?? "";
});

after(async () => {
  await stack?.stop();
});

const UNARY = "/agentd.v1.RunService/CreateRun";
const STREAM = "/agentd.v1.RunService/StreamEvents";

/** Binary bodies that no protobuf decoder may accept (CreateRun and StreamEvents alike). */
const BINARY: Record<string, Buffer> = {
  // Field 0 with wire type 7: no such tag.
  "random bytes": Buffer.from([0x07, 0x9c, 0x3e, 0xd1, 0x00, 0xff, 0x12]),
  // Field 4 as a varint whose continuation bit promises bytes that never come.
  "a truncated varint": Buffer.from([0x20, 0xff, 0xff]),
  // Field 1 (a string in both messages) sent as a 32-bit fixed value.
  "a wrong wire type": Buffer.from([0x0d, 0x01, 0x02, 0x03, 0x04]),
  // Field 1 holding 0xC3 0x28: not UTF-8.
  "a string that is not UTF-8": Buffer.from([0x0a, 0x02, 0xc3, 0x28]),
  // Field 1 claiming 127 bytes, holding one.
  "a length past the end": Buffer.from([0x0a, 0x7f, 0x61]),
};

/** JSON bodies that are no valid CreateRunRequest / StreamEventsRequest / ListRunsRequest. */
const JSON_BODIES: Record<string, { path: string; body: Buffer; re: RegExp }> = {
  "JSON that is not an object": { path: UNARY, body: Buffer.from("[1,2]"), re: /JSON body/ },
  "JSON that does not parse": { path: UNARY, body: Buffer.from('{"prompt":'), re: /JSON body/ },
  "an unknown enum string": {
    path: "/agentd.v1.RunService/ListRuns",
    body: Buffer.from('{"state":"RUN_STATE_NOPE"}'),
    re: /RUN_STATE_NOPE/,
  },
  "an unknown field": { path: UNARY, body: Buffer.from('{"promt":"x"}'), re: /"promt" is unknown/ },
  "a string that is not UTF-8": {
    path: UNARY,
    body: Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]),
    re: /not valid UTF-8/,
  },
};

/** What a client saw: the status (connect's lower-case name) and the message. */
interface Outcome {
  code: string;
  message: string;
}

function envelope(body: Buffer, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(body.byteLength, 1);
  return Buffer.concat([head, body]);
}

function frames(buf: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  for (let o = 0; o + 5 <= buf.byteLength; ) {
    const len = buf.readUInt32BE(o + 1);
    out.push({ flags: buf[o] as number, data: buf.subarray(o + 5, o + 5 + len) });
    o += 5 + len;
  }
  return out;
}

const grpcName = (status: number): string => codeToString(status as Code);

/** gRPC via @grpc/grpc-js: the bytes go out as they are (identity serializer). */
function viaGrpcJs(path: string, body: Buffer, token: string = TOKENS.acme): Promise<Outcome> {
  const client = new grpc.Client(stack.server.addr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  if (token !== "") md.set("authorization", `Bearer ${token}`);
  const raw = (b: Buffer): Buffer => b;
  return new Promise<Outcome>((resolve) => {
    if (path === STREAM) {
      const call = client.makeServerStreamRequest(path, raw, raw, body, md);
      call.on("data", () => undefined);
      call.on("error", () => undefined);
      call.on("status", (s: grpc.StatusObject) =>
        resolve({ code: grpcName(s.code), message: unescapeGrpcJs(s.details) }),
      );
    } else {
      client.makeUnaryRequest(path, raw, raw, body, md, (err) =>
        resolve({ code: grpcName(err?.code ?? 0), message: unescapeGrpcJs(err?.details ?? "") }),
      );
    }
  }).finally(() => client.close());
}

/**
 * grpc-js decodes grpc-message with decodeURI, which leaves %3A and friends as they are,
 * while connect encodes with encodeURIComponent: finish the decoding here.
 */
function unescapeGrpcJs(details: string): string {
  return decodeURIComponent(details);
}

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  trailers: Record<string, string>;
}

/** One POST over HTTP/2 (prior knowledge), with trailers. */
function viaHttp2(path: string, headers: Record<string, string>, body: Buffer) {
  return new Promise<RawResponse>((resolve, reject) => {
    const session = http2.connect(stack.server.url);
    session.on("error", reject);
    const req = session.request({ ":method": "POST", ":path": path, ...headers });
    const chunks: Buffer[] = [];
    let status = 0;
    let head: Record<string, string> = {};
    let trailers: Record<string, string> = {};
    req.on("response", (h) => {
      status = Number(h[":status"]);
      head = h as Record<string, string>;
    });
    req.on("trailers", (t) => {
      trailers = t as Record<string, string>;
    });
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      session.close();
      resolve({ status, headers: head, body: Buffer.concat(chunks), trailers });
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** One POST over HTTP/1.1 (fetch); gRPC-Web and Connect carry their trailers in the body. */
async function viaFetch(path: string, headers: Record<string, string>, body: Buffer) {
  const res = await fetch(`${stack.server.url}${path}`, { method: "POST", headers, body });
  const out: RawResponse = {
    status: res.status,
    headers: Object.fromEntries(res.headers),
    body: Buffer.from(await res.arrayBuffer()),
    trailers: {},
  };
  return out;
}

const auth = (token: string): Record<string, string> =>
  token === "" ? {} : { authorization: `Bearer ${token}` };

/** gRPC's status from trailers (or a trailers-only response's headers). */
function grpcOutcome(r: RawResponse): Outcome {
  const status = r.trailers["grpc-status"] ?? r.headers["grpc-status"] ?? "-1";
  const message = r.trailers["grpc-message"] ?? r.headers["grpc-message"] ?? "";
  return { code: grpcName(Number(status)), message: decodeURIComponent(message) };
}

/** gRPC-Web's status from the trailer frame (or the headers of a trailers-only answer). */
function grpcWebOutcome(r: RawResponse): Outcome {
  const trailer = frames(r.body).find((f) => (f.flags & 0x80) !== 0);
  if (trailer === undefined) return grpcOutcome(r);
  const fields: Record<string, string> = {};
  for (const line of trailer.data.toString("utf8").split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) fields[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return grpcOutcome({ ...r, trailers: fields });
}

/** Connect: unary errors are the JSON body; stream errors the end-of-stream frame. */
function connectOutcome(r: RawResponse, streaming: boolean): Outcome {
  const json = streaming
    ? (JSON.parse(
        frames(r.body)
          .find((f) => (f.flags & 0x02) !== 0)
          ?.data.toString() ?? "{}",
      ).error ?? {})
    : JSON.parse(r.body.toString("utf8"));
  return { code: json.code ?? "ok", message: json.message ?? "" };
}

type Client = (path: string, body: Buffer, token?: string) => Promise<Outcome>;

/** Every protocol × transport for binary bodies. */
const BINARY_CLIENTS: Record<string, Client> = {
  "gRPC (grpc-js)": viaGrpcJs,
  "gRPC-Web, HTTP/1.1": async (path, body, token: string = TOKENS.acme) =>
    grpcWebOutcome(
      await viaFetch(
        path,
        { "content-type": "application/grpc-web+proto", ...auth(token) },
        envelope(body),
      ),
    ),
  "gRPC-Web, HTTP/2": async (path, body, token: string = TOKENS.acme) =>
    grpcWebOutcome(
      await viaHttp2(
        path,
        { "content-type": "application/grpc-web+proto", ...auth(token) },
        envelope(body),
      ),
    ),
  "Connect, HTTP/1.1": async (path, body, token: string = TOKENS.acme) => {
    const streaming = path === STREAM;
    const type = streaming ? "application/connect+proto" : "application/proto";
    const r = await viaFetch(
      path,
      { "content-type": type, ...auth(token) },
      streaming ? envelope(body) : body,
    );
    return connectOutcome(r, streaming);
  },
  "Connect, HTTP/2": async (path, body, token: string = TOKENS.acme) => {
    const streaming = path === STREAM;
    const type = streaming ? "application/connect+proto" : "application/proto";
    const r = await viaHttp2(
      path,
      { "content-type": type, ...auth(token) },
      streaming ? envelope(body) : body,
    );
    return connectOutcome(r, streaming);
  },
};

/** Every protocol with the JSON codec (unary methods). */
const JSON_CLIENTS: Record<string, Client> = {
  "gRPC+json, HTTP/2": async (path, body) =>
    grpcOutcome(
      await viaHttp2(
        path,
        { "content-type": "application/grpc+json", te: "trailers", ...auth(TOKENS.acme) },
        envelope(body),
      ),
    ),
  "gRPC-Web+json, HTTP/1.1": async (path, body) =>
    grpcWebOutcome(
      await viaFetch(
        path,
        { "content-type": "application/grpc-web+json", ...auth(TOKENS.acme) },
        envelope(body),
      ),
    ),
  "Connect JSON, HTTP/1.1": async (path, body) =>
    connectOutcome(
      await viaFetch(path, { "content-type": "application/json", ...auth(TOKENS.acme) }, body),
      false,
    ),
  "Connect JSON, HTTP/2": async (path, body) =>
    connectOutcome(
      await viaHttp2(path, { "content-type": "application/json", ...auth(TOKENS.acme) }, body),
      false,
    ),
};

/** A plain INVALID_ARGUMENT about the request, with nothing of the server's insides. */
function assertClientSafe(o: Outcome, what: string, re: RegExp): void {
  assert.equal(o.code, "invalid_argument", `${what}: ${JSON.stringify(o)}`);
  assert.match(o.message, /^request: /, what);
  assert.match(o.message, re, what);
  assert.doesNotMatch(o.message, /parse binary|internal|incident/i, what);
  assert.doesNotMatch(o.message, /\sat \S+:\d+|\.ts\b|\.js\b|node_modules|\/work\//, what);
}

async function assertStillServing(): Promise<void> {
  const { run } = await stack.client.getRun(runId);
  assert.equal(run?.runId, runId);
}

describe("a body that is no valid message: INVALID_ARGUMENT in every protocol", {
  timeout: 60_000,
}, () => {
  for (const [clientName, client] of Object.entries(BINARY_CLIENTS)) {
    it(`binary, ${clientName}, unary and server-streaming`, async () => {
      for (const [bodyName, body] of Object.entries(BINARY)) {
        for (const path of [UNARY, STREAM]) {
          const what = `${bodyName} to ${path}`;
          assertClientSafe(await client(path, body), what, /not a valid protobuf message \(.+\)/);
        }
      }
      await assertStillServing();
    });
  }

  for (const [clientName, client] of Object.entries(JSON_CLIENTS)) {
    it(`JSON, ${clientName}`, async () => {
      for (const [bodyName, { path, body, re }] of Object.entries(JSON_BODIES)) {
        assertClientSafe(await client(path, body), bodyName, re);
      }
      await assertStillServing();
    });
  }

  it("Connect server-streaming with the JSON codec", async () => {
    const r = await viaFetch(
      STREAM,
      { "content-type": "application/connect+json", ...auth(TOKENS.acme) },
      envelope(Buffer.from('{"runId":')),
    );
    assertClientSafe(connectOutcome(r, true), "truncated JSON", /JSON body/);
  });

  it("the reasons are told apart", async () => {
    const reasons = await Promise.all(
      Object.values(BINARY).map(async (b) => (await viaGrpcJs(UNARY, b)).message),
    );
    assert.match(reasons[1] ?? "", /truncated/);
    assert.match(reasons[2] ?? "", /wire type/);
    assert.match(reasons[3] ?? "", /not valid UTF-8/);
    assert.match(reasons[4] ?? "", /truncated/);
  });

  it("without a token the body is never read: UNAUTHENTICATED, even for garbage", async () => {
    for (const [name, client] of Object.entries(BINARY_CLIENTS)) {
      for (const path of [UNARY, STREAM]) {
        const o = await client(path, BINARY["random bytes"] as Buffer, "");
        assert.equal(o.code, "unauthenticated", `${name} ${path}: ${JSON.stringify(o)}`);
      }
    }
    // A reader's token on CreateRun: PERMISSION_DENIED before the body is parsed.
    const o = await viaGrpcJs(UNARY, BINARY["random bytes"] as Buffer, TOKENS.acmeReader);
    assert.equal(o.code, "permission_denied");
    await assertStillServing();
  });

  it("nothing of it is logged as a server failure", () => {
    assert.doesNotMatch(stack.server.output(), /"msg":"request failed"/);
  });
});
