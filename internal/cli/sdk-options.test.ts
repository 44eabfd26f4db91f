/**
 * The SDK's connection options: headers, trace context and timeouts are checked (each bad
 * one named), and tlsProblem names Node's certificate codes and nothing else.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { tlsProblem } from "../../clients/typescript/src/tls-problem.ts";
import { callHeaders, createRunClient } from "../../clients/typescript/src/transport.ts";

const TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

it("callHeaders: headers, traceparent and tracestate; every bad option named", () => {
  assert.deepEqual(
    callHeaders({
      address: "x",
      headers: { "X-Team": "core" },
      traceparent: TP,
      tracestate: "a=1",
    }),
    { "x-team": "core", traceparent: TP, tracestate: "a=1" },
  );
  assert.throws(
    () => callHeaders({ address: "x", traceparent: "nope" }),
    /^TypeError: traceparent "nope": not a W3C/,
  );
  assert.throws(
    () => callHeaders({ address: "x", traceparent: TP, tracestate: "a=\n" }),
    /tracestate:/,
  );
  assert.throws(
    () => callHeaders({ address: "x", headers: { "bad name": "v" } }),
    /headers: "bad name"/,
  );
  assert.throws(() => callHeaders({ address: "x", headers: { x: "a\r\nb" } }), /headers\.x: /);
  assert.throws(
    () => callHeaders({ address: "x", headers: { Authorization: "t" } }),
    /token option/,
  );
  assert.throws(() => createRunClient({ address: "x", timeoutMs: -1 }), /timeoutMs: .* not -1/);
});

it("tlsProblem: Node's certificate codes in the causes, nothing for other errors", () => {
  const cause = Object.assign(new Error("self-signed certificate in certificate chain"), {
    code: "SELF_SIGNED_CERT_IN_CHAIN",
  });
  const p = tlsProblem(new Error("wrapped", { cause }));
  assert.equal(p?.code, "SELF_SIGNED_CERT_IN_CHAIN");
  assert.equal(p?.text, "certificate signed by an unknown authority");
  assert.equal(p?.untrusted, true);
  assert.equal(
    tlsProblem(Object.assign(new Error("x"), { code: "CERT_HAS_EXPIRED" }))?.untrusted,
    false,
  );
  assert.equal(
    tlsProblem(Object.assign(new Error("refused"), { code: "ECONNREFUSED" })),
    undefined,
  );
  assert.equal(tlsProblem("not an error"), undefined);
});
