/**
 * The RPC edge: codes map to gRPC codes, internal failures become an incident id (logged
 * with the whole error), and no message that reaches a client carries script hashes,
 * script line references, stack frames, host paths or addresses — whatever an adapter
 * put in it. Client input quoted in our own messages is kept.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { AgentdError } from "../errors.ts";
import { BadRequestSchema } from "../gen/google/rpc/error_details_pb.js";
import { clientSafe, toConnectError } from "./errors.ts";
import { scrubMessage } from "./scrub.ts";

const SHA = "ebaf070fc84601eb8110aa3e1a753cdefc6ce943";
const INTERNALS = [
  /f_[0-9a-f]{40}/,
  /\b[0-9a-f]{40}\b/,
  /user_script/,
  /\sat \S+/,
  /(^|[\s'(])\/(tmp|work|home|var|data|etc)\//,
  /127\.0\.0\.1|10\.1\.2\.3/,
];

function assertNoInternals(message: string): void {
  for (const re of INTERNALS)
    assert.doesNotMatch(message, re, `${re} in ${JSON.stringify(message)}`);
}

/** A logger that remembers what it was given. */
function recorder() {
  const logged: { err: unknown; incident: string }[] = [];
  return { logged, log: (err: unknown, incident: string) => logged.push({ err, incident }) };
}

describe("toConnectError", () => {
  const leaky: [string, string][] = [
    [
      "Redis 7 script error",
      `redis: WRONGTYPE Operation against a key holding the wrong kind of value script: ${SHA}, on @user_script:18.`,
    ],
    [
      "Redis 6 script error",
      `redis: ERR Error running script (call to f_${SHA}): @user_script:12: user_script:12: attempt to index a nil value`,
    ],
    [
      "a stack trace",
      "redis: boom\n    at wrap (file:///work/main/internal/eventlog/redis-event-log.ts:339:11)\n    at async Promise.all (index 0)",
    ],
    [
      "an errno with a path",
      "cannot write: ENOSPC: no space left on device, open '/data/artifacts/tmp/1.tmp'",
    ],
    ["an address", "redis: connect ECONNREFUSED 10.1.2.3:6379"],
  ];

  for (const [name, message] of leaky) {
    it(`EUNAVAILABLE with ${name}: scrubbed, an incident id, the whole error logged`, () => {
      const { logged, log } = recorder();
      const err = new AgentdError("EUNAVAILABLE", message, { cause: new Error("inner") });
      const ce = toConnectError(err, log);
      assert.equal(ce.code, Code.Unavailable);
      assertNoInternals(ce.rawMessage);
      const m = / \(incident ([0-9A-Z]{26})\)$/.exec(ce.rawMessage);
      assert.ok(m, ce.rawMessage);
      assert.equal(logged.length, 1);
      assert.equal(logged[0]?.incident, m[1]);
      assert.equal(logged[0]?.err, err, "the log gets the error itself, cause and all");
    });
  }

  it("a validation error keeps its message, field and quoted client input", () => {
    const err = new AgentdError(
      "EVALIDATION",
      'workspace_tar: entry "/etc/cron.d/evil" has an absolute path',
      { field: "workspace_tar" },
    );
    const ce = toConnectError(err);
    assert.equal(ce.code, Code.InvalidArgument);
    assert.equal(ce.rawMessage, err.message);
    const [detail] = ce.findDetails(BadRequestSchema);
    assert.equal(detail?.fieldViolations[0]?.field, "workspace_tar");
  });

  it("ETOOLARGE is RESOURCE_EXHAUSTED naming the field", () => {
    const ce = toConnectError(
      new AgentdError("ETOOLARGE", "workspace_tar: over the limit", { field: "workspace_tar" }),
    );
    assert.equal(ce.code, Code.ResourceExhausted);
    assert.equal(ce.findDetails(BadRequestSchema)[0]?.fieldViolations[0]?.field, "workspace_tar");
  });

  it("EIO and anything unknown: INTERNAL with an incident id only, logged", () => {
    for (const err of [
      new AgentdError("EIO", `artifact store: cannot write /data/x (${SHA})`),
      new TypeError("Cannot read properties of undefined (reading 'x')"),
    ]) {
      const { logged, log } = recorder();
      const ce = toConnectError(err, log);
      assert.equal(ce.code, Code.Internal);
      assert.match(ce.rawMessage, /^internal error \(incident [0-9A-Z]{26}\)$/);
      assert.equal(logged[0]?.err, err);
    }
  });
});

describe("clientSafe (ConnectErrors, including connect's own)", () => {
  it("connect's INTERNAL 'parse binary' is INVALID_ARGUMENT with a plain reason", () => {
    const ce = clientSafe(new ConnectError("parse binary: premature EOF", Code.Internal));
    assert.equal(ce.code, Code.InvalidArgument);
    assert.equal(
      ce.rawMessage,
      "request: the body is not a valid protobuf message (it is truncated)",
    );
  });

  it("an INTERNAL without an incident gets one (logged); one with an id is left alone", () => {
    const { logged, log } = recorder();
    const first = clientSafe(
      new ConnectError("serialize binary: at /x/y.js:1:2", Code.Internal),
      log,
    );
    assert.match(first.rawMessage, /^internal error \(incident [0-9A-Z]{26}\)$/);
    assert.equal(logged.length, 1);
    assert.equal(clientSafe(first, log), first);
    assert.equal(logged.length, 1);
  });

  it("other codes keep their code, metadata and details; only the message is scrubbed", () => {
    const original = new ConnectError(
      `unavailable: script: ${SHA}, on @user_script:3.`,
      Code.Unavailable,
      { "x-id": "1" },
    );
    const ce = clientSafe(original);
    assert.equal(ce.code, Code.Unavailable);
    assert.equal(ce.metadata.get("x-id"), "1");
    assertNoInternals(ce.rawMessage);
    const plain = new ConnectError("run_id: is required", Code.InvalidArgument);
    assert.equal(clientSafe(plain), plain);
  });
});

describe("scrubMessage", () => {
  it("keeps ordinary messages, JSON-quoted paths, URLs, timestamps and sha-256 digests", () => {
    for (const m of [
      'workspace_tar: symlink "l" points to an absolute path ("/etc/passwd")',
      "the approval expired at 2026-01-01T12:30:00.000Z",
      "see http://example.com/a/b",
      `artifact ${"ab".repeat(32)} not found`,
      'labels["a/b"]: key must be 1-63 characters of [A-Za-z0-9._/-]',
    ]) {
      assert.equal(scrubMessage(m), m);
    }
  });

  it("caps the length", () => {
    assert.equal(scrubMessage("x".repeat(5000)).length, 1024);
  });
});
