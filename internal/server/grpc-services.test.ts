/**
 * Integration test of the gRPC health and reflection services: a real HTTP/2 cleartext
 * connect-node server, probed by @grpc/grpc-js (a plain gRPC client, no connect code) and
 * by `buf curl` (which needs working reflection to do anything).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import {
  create,
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { createConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { file_agentd_v1_events } from "../gen/agentd/v1/events_pb.js";
import { file_agentd_v1_run_service } from "../gen/agentd/v1/run_service_pb.js";
import {
  file_grpc_health_v1_health,
  HealthCheckRequestSchema,
  type HealthCheckResponse,
  HealthCheckResponse_ServingStatus,
  HealthCheckResponseSchema,
} from "../gen/grpc/health/v1/health_pb.js";
import {
  ServerReflectionRequestSchema,
  type ServerReflectionResponse,
  ServerReflectionResponseSchema,
} from "../gen/grpc/reflection/v1/reflection_pb.js";
import { registerHealth } from "./health.ts";
import { registerReflection } from "./reflection.ts";

const BUF = fileURLToPath(new URL("../../node_modules/.bin/buf", import.meta.url));
const run = promisify(execFile);
const { SERVING, NOT_SERVING, SERVICE_UNKNOWN } = HealthCheckResponse_ServingStatus;

let healthy = true;
let server: http2.Http2Server;
let client: grpc.Client;
let base = "";

/** grpc-js (de)serializers for a generated message schema. */
function codec<D extends DescMessage>(schema: D) {
  return {
    ser: (m: MessageShape<D>) => Buffer.from(toBinary(schema, m)),
    de: (b: Buffer) => fromBinary(schema, b),
  };
}
const req = codec(HealthCheckRequestSchema);
const res = codec(HealthCheckResponseSchema);

function check(service: string): Promise<HealthCheckResponse> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      "/grpc.health.v1.Health/Check",
      req.ser,
      res.de,
      create(HealthCheckRequestSchema, { service }),
      (err, out) => (err || !out ? reject(err) : resolve(out)),
    );
  });
}

/** Opens Watch; `next()` yields the statuses as they come, `cancel()` ends the call. */
function watch(service: string) {
  const call = client.makeServerStreamRequest(
    "/grpc.health.v1.Health/Watch",
    req.ser,
    res.de,
    create(HealthCheckRequestSchema, { service }),
  );
  const seen: HealthCheckResponse_ServingStatus[] = [];
  const waiters: (() => void)[] = [];
  let failure: Error | undefined;
  call.on("data", (m: HealthCheckResponse) => {
    seen.push(m.status);
    for (const w of waiters.splice(0)) w();
  });
  call.on("error", (e: grpc.ServiceError) => {
    if (e.code !== grpc.status.CANCELLED) failure = e;
    for (const w of waiters.splice(0)) w();
  });
  return {
    /** Waits until `n` statuses were received (or 120 s: generous), and returns them. */
    async take(n: number): Promise<HealthCheckResponse_ServingStatus[]> {
      const deadline = Date.now() + 120_000;
      while (seen.length < n && !failure && Date.now() < deadline) {
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 100);
        });
      }
      if (failure) throw failure;
      return seen.slice();
    },
    cancel: () => call.cancel(),
  };
}

/** One reflection exchange over grpc-js on the given service version. */
function reflect(
  version: "v1" | "v1alpha",
  init: MessageInitShape<typeof ServerReflectionRequestSchema>,
): Promise<ServerReflectionResponse> {
  const rq = codec(ServerReflectionRequestSchema);
  const rs = codec(ServerReflectionResponseSchema);
  return new Promise((resolve, reject) => {
    const call = client.makeBidiStreamRequest(
      `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
      rq.ser,
      rs.de,
    );
    call.on("data", (m: ServerReflectionResponse) => {
      resolve(m);
      call.end();
    });
    call.on("error", reject);
    call.write(create(ServerReflectionRequestSchema, init));
  });
}

async function bufCurl(...args: string[]): Promise<string> {
  const { stdout } = await run(BUF, [
    "curl",
    "--protocol",
    "grpc",
    "--http2-prior-knowledge",
    ...args,
  ]);
  return stdout;
}

before(async () => {
  const services = [
    "agentd.v1.RunService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
  ];
  server = http2.createServer(
    connectNodeAdapter({
      routes(router) {
        registerHealth(router, { check: async () => healthy, services, watchIntervalMs: 20 });
        registerReflection(router, {
          files: [file_agentd_v1_run_service, file_agentd_v1_events, file_grpc_health_v1_health],
          services,
        });
      },
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
});

after(async () => {
  client.close();
  await new Promise((resolve) => server.close(resolve));
});

describe("grpc.health.v1.Health over grpc-js", () => {
  it("Check answers SERVING for the server and known services", async () => {
    healthy = true;
    assert.equal((await check("")).status, SERVING);
    assert.equal((await check("agentd.v1.RunService")).status, SERVING);
  });

  it("Check answers NOT_SERVING when the check fails, NOT_FOUND for unknown services", async () => {
    healthy = false;
    assert.equal((await check("")).status, NOT_SERVING);
    healthy = true;
    await assert.rejects(check("no.such.Service"), (e: grpc.ServiceError) => {
      assert.equal(e.code, grpc.status.NOT_FOUND);
      return true;
    });
  });

  it("Watch sends the current status, then each change", async () => {
    healthy = true;
    const w = watch("");
    try {
      assert.deepEqual(await w.take(1), [SERVING]);
      healthy = false;
      assert.deepEqual(await w.take(2), [SERVING, NOT_SERVING]);
      healthy = true;
      assert.deepEqual(await w.take(3), [SERVING, NOT_SERVING, SERVING]);
    } finally {
      w.cancel();
    }
  });

  it("Watch on an unknown service sends SERVICE_UNKNOWN and stays open", async () => {
    const w = watch("no.such.Service");
    try {
      assert.deepEqual(await w.take(1), [SERVICE_UNKNOWN]);
    } finally {
      w.cancel();
    }
  });
});

describe("grpc.reflection over grpc-js", () => {
  it("v1 and v1alpha list the services and echo the request", async () => {
    for (const version of ["v1", "v1alpha"] as const) {
      const r = await reflect(version, {
        host: "example",
        messageRequest: { case: "listServices", value: "*" },
      });
      assert.equal(r.validHost, "example");
      assert.equal(r.originalRequest?.messageRequest.case, "listServices");
      assert.equal(r.messageResponse.case, "listServicesResponse");
      assert.deepEqual(
        r.messageResponse.value?.service.map((s) => s.name),
        ["agentd.v1.RunService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"],
      );
    }
  });

  it("file_containing_symbol returns the file and its transitive imports", async () => {
    const r = await reflect("v1", {
      messageRequest: { case: "fileContainingSymbol", value: "agentd.v1.RunService.CreateRun" },
    });
    assert.equal(r.messageResponse.case, "fileDescriptorResponse");
    const names = r.messageResponse.value?.fileDescriptorProto.map(
      (b) => fromBinary(FileDescriptorProtoSchema, b).name,
    );
    assert.deepEqual(names, [
      "agentd/v1/run_service.proto",
      "agentd/v1/events.proto",
      "google/protobuf/timestamp.proto",
    ]);
  });

  it("file_by_filename serves the reflection schema itself (needed by buf curl)", async () => {
    const r = await reflect("v1alpha", {
      messageRequest: { case: "fileByFilename", value: "grpc/reflection/v1/reflection.proto" },
    });
    assert.equal(r.messageResponse.case, "fileDescriptorResponse");
    const [first] = r.messageResponse.value?.fileDescriptorProto ?? [];
    assert.ok(first);
    const file = fromBinary(FileDescriptorProtoSchema, first);
    assert.equal(file.package, "grpc.reflection.v1");
    assert.equal(file.service[0]?.name, "ServerReflection");
  });

  it("refuses to list a service that no given file declares", () => {
    assert.throws(
      () => registerReflection(createConnectRouter(), { files: [], services: ["a.B"] }),
      /a\.B/,
    );
  });

  it("unknown symbols and files answer NOT_FOUND", async () => {
    for (const messageRequest of [
      { case: "fileContainingSymbol", value: "agentd.v1.Nope" },
      { case: "fileByFilename", value: "nope.proto" },
    ] as const) {
      const r = await reflect("v1", { messageRequest });
      assert.equal(r.messageResponse.case, "errorResponse");
      assert.equal(r.messageResponse.value?.errorCode, grpc.status.NOT_FOUND);
    }
  });
});

describe("buf curl with server reflection", () => {
  it("--list-methods shows the RunService methods", async () => {
    const out = await bufCurl("--list-methods", base);
    assert.match(out, /^agentd\.v1\.RunService\/CreateRun$/m);
    assert.match(out, /^agentd\.v1\.RunService\/StreamEvents$/m);
    assert.match(out, /^grpc\.health\.v1\.Health\/Watch$/m);
  });

  it("--list-services shows the registered services", async () => {
    const out = await bufCurl("--list-services", base);
    assert.deepEqual(out.trim().split("\n").sort(), [
      "agentd.v1.RunService",
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
    ]);
  });

  it("calls Health/Check through a reflected schema, also on v1alpha", async () => {
    healthy = true;
    for (const protocol of ["grpc-v1", "grpc-v1alpha"]) {
      const out = await bufCurl(
        "--reflect-protocol",
        protocol,
        "-d",
        '{"service":"agentd.v1.RunService"}',
        `${base}/grpc.health.v1.Health/Check`,
      );
      assert.deepEqual(JSON.parse(out), { status: "SERVING" });
    }
  });
});
