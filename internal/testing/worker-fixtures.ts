/**
 * Shared pieces of the worker tests: the repository's policy moved onto the small test
 * image, and scripted model replies (a tool call, a text answer) for the OpenAI stub.
 */
import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import type { EventLog } from "../eventlog/port.ts";
import {
  ApprovalDecision,
  ApprovalResolvedSchema,
  RunQueuedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { parsePolicy } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { sandboxImage } from "./docker.ts";
import { type StubReply, textReply, toolCallsReply } from "./openai-stub.ts";

/** The repository's policy.yaml with the sandbox on the busybox test image, small limits. */
export function testImagePolicy(): Policy {
  const parsed = parsePolicy(
    readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
    "policy.yaml",
  );
  if (!parsed.ok) throw new Error(`policy.yaml does not parse: ${JSON.stringify(parsed.errors)}`);
  return {
    ...parsed.policy,
    sandbox: {
      ...parsed.policy.sandbox,
      image: sandboxImage("test"),
      memory: 128 * 1024 * 1024,
      pids: 64,
      tmp: 16 * 1024 * 1024,
      // A small /cache: the tests' containers stay near the size they had before it.
      cacheSize: 16 * 1024 * 1024,
    },
  };
}

/** The model calls `tool` (dotted name; sent as the wire name) with `args`. */
export function callReply(id: string, tool: string, args: unknown): StubReply {
  return {
    chunks: toolCallsReply([{ id, name: tool.replace(".", "_"), arguments: JSON.stringify(args) }]),
  };
}

/** The model answers `text` and stops. */
export function sayReply(text: string): StubReply {
  return { chunks: textReply([text]) };
}

/** Appends `run.queued` for a new run of tenant "acme", as CreateRun would. */
export async function queueRun(
  log: EventLog,
  opts: {
    prompt: string;
    workspaceDigest?: string;
    workspaceSizeBytes?: number;
    budget?: { maxTokens?: bigint; maxCostMicros?: bigint; maxWallMs?: bigint };
    /** CreateRun's image, normalised as CreateRun stores it. */
    image?: string;
  },
): Promise<{ runId: string; sessionId: string }> {
  const runId = ulid();
  const sessionId = ulid();
  await log.append({
    runId,
    sessionId,
    tenantId: "acme",
    payload: {
      case: "runQueued",
      value: create(RunQueuedSchema, {
        tenantId: "acme",
        prompt: opts.prompt,
        priority: 5,
        workspaceDigest: opts.workspaceDigest ?? "",
        workspaceSizeBytes: BigInt(opts.workspaceSizeBytes ?? 0),
        ...(opts.budget === undefined ? {} : { budget: opts.budget }),
        ...(opts.image === undefined ? {} : { image: opts.image }),
      }),
    },
  });
  return { runId, sessionId };
}

/** A person approves `approvalId` (the server's append: no fence). */
export async function approveInLog(
  log: EventLog,
  run: { runId: string; sessionId: string },
  approvalId: string,
): Promise<void> {
  await log.append({
    runId: run.runId,
    sessionId: run.sessionId,
    payload: {
      case: "approvalResolved",
      value: create(ApprovalResolvedSchema, {
        approvalId,
        decision: ApprovalDecision.APPROVE,
        resolvedBy: "alice",
      }),
    },
  });
}
