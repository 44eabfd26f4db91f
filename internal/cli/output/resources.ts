/**
 * agentd's messages as printable resources (kind, id and protobuf-JSON form) for the
 * `-o` formats. The JSON is protobuf's canonical JSON mapping (lowerCamelCase names,
 * enums by name such as "RUN_STATE_COMPLETED", 64-bit integers as strings, fields at their
 * default value left out) — the same form as the API's JSON and `--json`. Never adds,
 * renames or drops a field of its own.
 */
import { toJson } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "../../gen/agentd/v1/events_pb.js";
import {
  type Approval,
  ApprovalSchema,
  type PolicyChange,
  PolicyChangeSchema,
  type Run,
  RunSchema,
  type WhoAmIResponse,
  WhoAmIResponseSchema,
} from "../../gen/agentd/v1/run_service_pb.js";
import type { Resource } from "./print.ts";

export function runResource(r: Run): Resource {
  return { kind: "run", id: r.runId, json: toJson(RunSchema, r) };
}

export function approvalResource(a: Approval): Resource {
  return { kind: "approval", id: a.approvalId, json: toJson(ApprovalSchema, a) };
}

/** An event: `event/RUN/SEQ` for -o name. */
export function eventResource(e: Event): Resource {
  return { kind: "event", id: `${e.runId}/${e.seq}`, json: toJson(EventSchema, e) };
}

export function principalResource(w: WhoAmIResponse): Resource {
  return { kind: "principal", id: w.principal, json: toJson(WhoAmIResponseSchema, w) };
}

export function policyChangeResource(c: PolicyChange): Resource {
  return { kind: "policychange", id: c.changeId, json: toJson(PolicyChangeSchema, c) };
}
