/** What a run's egress admits: the policy's list, the approval mode, the run's answers, trust. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  ApprovalDecision,
  ApprovalRequestedSchema,
  ApprovalResolvedSchema,
  type Event,
  EventSchema,
  PreviewSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { NetworkPolicy } from "../kernel/network-schema.ts";
import { foldTrust, networkTrustKey } from "../kernel/trust.ts";
import { admission } from "./run-egress.ts";

const policy = (over: Partial<NetworkPolicy> = {}): NetworkPolicy => ({
  allow: ["registry.npmjs.org", "*.pythonhosted.org:443"],
  presets: [],
  private: [],
  approval: "risk",
  credentials: [],
  trust: [],
  limits: { concurrent: 64, connections: 2000, connectionBytes: 1024 ** 3, bytes: 4 * 1024 ** 3 },
  ...over,
});
const none = { approved: new Set<string>(), denied: new Set<string>() };

describe("admission", () => {
  it("allows listed hosts at their ports, asks for the rest under risk, refuses under never", () => {
    assert.equal(admission(policy(), "registry.npmjs.org", 443, none).decision, "allowed");
    assert.equal(admission(policy(), "files.pythonhosted.org", 443, none).decision, "allowed");
    assert.equal(admission(policy(), "files.pythonhosted.org", 80, none).decision, "pending");
    assert.equal(admission(policy(), "evil.example", 443, none).decision, "pending");
    const never = admission(policy({ approval: "never" }), "evil.example", 443, none);
    assert.equal(never.decision, "denied");
    assert.match(
      "reason" in never ? never.reason : "",
      /evil\.example:443 is not in .*network\.allow/,
    );
  });

  it("under always, asks even for listed hosts until a person approved them in the run", () => {
    const p = policy({ approval: "always" });
    assert.equal(admission(p, "registry.npmjs.org", 443, none).decision, "pending");
    const run = { approved: new Set(["registry.npmjs.org:443"]), denied: new Set<string>() };
    assert.equal(admission(p, "registry.npmjs.org", 443, run).decision, "approved");
    assert.equal(admission(p, "registry.npmjs.org", 80, run).decision, "pending");
  });

  it("a person's no stands for the run, over the list; an address is never asked about", () => {
    const run = { approved: new Set<string>(), denied: new Set(["registry.npmjs.org:443"]) };
    assert.equal(admission(policy(), "registry.npmjs.org", 443, run).decision, "denied");
    const ip = admission(policy(), "203.0.113.9", 443, none);
    assert.equal(ip.decision, "denied");
    assert.match("reason" in ip ? ip.reason : "", /only host names can be approved/);
  });

  it("network.trust relaxes a host people approved often enough, never if one denied it", () => {
    const p = policy({ trust: [{ host: "*.github.com", approvals: 2 }] });
    const key = networkTrustKey("api.github.com");
    const counters = (ok: number, no: number) => ({
      [key]: { successfulCalls: ok, failedCalls: 0, revertedPatches: 0, manualOverrides: no },
    });
    assert.equal(admission(p, "api.github.com", 443, none, counters(1, 0)).decision, "pending");
    assert.equal(admission(p, "api.github.com", 443, none, counters(2, 0)).decision, "trusted");
    assert.equal(admission(p, "api.github.com", 443, none, counters(5, 1)).decision, "pending");
    assert.equal(admission(p, "gitlab.com", 443, none, counters(9, 0)).decision, "pending");
    // Trust never overrides never: nothing is asked, so nothing is relaxed.
    const never = policy({ approval: "never", trust: [{ host: "*.github.com", approvals: 1 }] });
    assert.equal(admission(never, "api.github.com", 443, none, counters(3, 0)).decision, "denied");
  });

  it("foldTrust counts a host's approvals and denials from network approvals", () => {
    const ev = (seq: number, payload: Event["payload"]): Event =>
      create(EventSchema, { seq: BigInt(seq), payload });
    const ask = (id: string, host: string) =>
      ({
        case: "approvalRequested",
        value: create(ApprovalRequestedSchema, {
          approvalId: id,
          callId: "c",
          tool: "network",
          preview: create(PreviewSchema, { host, port: 443 }),
        }),
      }) as const;
    const answer = (id: string, yes: boolean) =>
      ({
        case: "approvalResolved",
        value: create(ApprovalResolvedSchema, {
          approvalId: id,
          decision: yes ? ApprovalDecision.APPROVE : ApprovalDecision.DENY,
          resolvedBy: "alice",
        }),
      }) as const;
    const c = foldTrust({}, [
      ev(1, ask("a1", "API.github.com")),
      ev(2, answer("a1", true)),
      ev(3, ask("a2", "api.github.com")),
      ev(4, answer("a2", false)),
    ]);
    assert.equal(c[networkTrustKey("api.github.com")]?.successfulCalls, 1);
    assert.equal(c[networkTrustKey("api.github.com")]?.manualOverrides, 1);
  });
});
