/**
 * `agentctl events` shows the notices of rules from approvals: policy.change_proposed names
 * the change, the proposer, the approval and the rule; policy.change_applied the applier
 * (or the rejection) and the digests. Hostile text in them (a proposer's name with escape
 * sequences) is escaped, never sent to the terminal as is.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { EventSchema, PolicyChangeState, ProposedRuleKind } from "../gen/agentd/v1/events_pb.js";
import { eventLine } from "./render.ts";
import { makeStyle } from "./style.ts";

const ID = "pc_0123456789abcdef0123";

it("events shows policy.change_proposed and policy.change_applied, escaped", () => {
  const proposed = eventLine(
    create(EventSchema, {
      runId: "01JRUN00000000000000000000",
      type: "policy.change_proposed",
      payload: {
        case: "policyChangeProposed",
        value: {
          changeId: ID,
          proposedBy: "alice\u009b31m",
          approvalId: "apr_R_c1",
          rule: { kind: ProposedRuleKind.COMMAND, command: "npm test", repo: "web" },
          policyFile: "acme.yaml",
        },
      },
    }),
    makeStyle(false),
  );
  assert.match(
    proposed,
    /pc_0123456789abcdef0123 by alice.* from apr_R_c1: command "npm test" in repo web \(acme\.yaml\)/,
  );
  assert.doesNotMatch(proposed, /\u009b/);
  const host = eventLine(
    create(EventSchema, {
      type: "policy.change_proposed",
      payload: {
        case: "policyChangeProposed",
        value: {
          changeId: ID,
          rule: { kind: ProposedRuleKind.HOST, host: "api.example.com:443" },
          policyFile: "policy.yaml",
          needsTenantFile: true,
        },
      },
    }),
    makeStyle(false),
  );
  assert.match(host, /host api\.example\.com:443 \(policy\.yaml, needs a tenant policy file\)/);
  const applied = eventLine(
    create(EventSchema, {
      type: "policy.change_applied",
      payload: {
        case: "policyChangeApplied",
        value: {
          changeId: ID,
          state: PolicyChangeState.APPLIED,
          appliedBy: "root",
          proposedBy: "alice",
          oldDigest: "a".repeat(64),
          newDigest: "b".repeat(64),
        },
      },
    }),
    makeStyle(false),
  );
  assert.match(applied, /applied by root \(proposed by alice\) a{12} → b{12}/);
  const rejected = eventLine(
    create(EventSchema, {
      type: "policy.change_applied",
      payload: {
        case: "policyChangeApplied",
        value: { changeId: ID, state: PolicyChangeState.REJECTED, appliedBy: "root" },
      },
    }),
    makeStyle(false),
  );
  assert.match(rejected, /rejected by root/);
});
