/** The network.request event (the proxy's record in the log): sealed, stored, read back, shown. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { eventLine } from "../cli/render.ts";
import { makeStyle } from "../cli/style.ts";
import { LoggedEvent, sealEvent, typeOfPayload } from "../eventlog/event-codec.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { NetworkRequestSchema } from "../gen/agentd/v1/events_pb.js";

it("a network.request event round-trips through the log's encoding and renders in one line", () => {
  const payload = {
    case: "networkRequest" as const,
    value: create(NetworkRequestSchema, {
      host: "registry.npmjs.org",
      port: 443,
      method: "CONNECT",
      decision: "allowed",
      reason: "registry.npmjs.org",
      bytesUp: 1200n,
      bytesDown: 48_000n,
      durationMs: 310n,
      tls: "tunnel",
      callId: "call_7",
    }),
  };
  assert.equal(typeOfPayload(payload), "network.request");
  const sealed = sealEvent(
    { runId: "01JRUN0000000000000000000", sessionId: "s", payload },
    1,
    "0".repeat(64),
    Date.now(),
  );
  const back = new LoggedEvent("01JRUN0000000000000000000", 1, sealed.json);
  assert.equal(back.type, "network.request");
  const p = back.event.payload;
  assert.ok(
    p.case === "networkRequest" &&
      p.value.host === "registry.npmjs.org" &&
      p.value.bytesDown === 48_000n,
  );
  assert.equal(verifyChain([sealed.json]).ok, true);
  assert.match(
    eventLine(back.event, makeStyle(false)),
    /network\.request\s+CONNECT registry\.npmjs\.org:443 allowed/,
  );
});
