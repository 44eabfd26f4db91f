/** CreateRun: validate, store the workspace archive, append `run.queued`. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { ulid } from "ulid";
import { AgentdError, invalid } from "../errors.ts";
import { RunFailedSchema, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import type { CreateRunRequest, CreateRunResponseSchema } from "../gen/agentd/v1/run_service_pb.js";
import { applyEvent, emptyRun } from "../projections/run-projection.ts";
import { normaliseWorkspaceArchive } from "../sandbox/workspace-archive.ts";
import { principalOf } from "./context.ts";
import type { ApiDeps } from "./deps.ts";
import { SESSION_RE, textField } from "./validate.ts";

const MAX_PROMPT_BYTES = 64 * 1024;
const SKILL_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
const LABEL_KEY_RE = /^[A-Za-z0-9._/-]{1,63}$/;

export function createRunHandler(deps: ApiDeps) {
  return async (
    req: CreateRunRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof CreateRunResponseSchema>> => {
    const principal = principalOf(ctx);
    textField("prompt", req.prompt, MAX_PROMPT_BYTES, true);
    if (req.sessionId !== "" && !SESSION_RE.test(req.sessionId)) {
      throw invalid("session_id", "must be 1-128 characters of [A-Za-z0-9._:-]");
    }
    if (req.priority > 10)
      throw invalid("priority", "must be 1 (highest) to 10 (lowest), or 0 for the default 5");
    if (req.skills.length > 16) throw invalid("skills", "at most 16 skills");
    req.skills.forEach((s, i) => {
      if (!SKILL_RE.test(s))
        throw invalid(`skills[${i}]`, "must be a skill name of [a-z0-9-], at most 64 characters");
    });
    const labels = Object.entries(req.labels);
    if (labels.length > 32) throw invalid("labels", "at most 32 labels");
    for (const [k, v] of labels) {
      if (!LABEL_KEY_RE.test(k))
        throw invalid(
          `labels[${JSON.stringify(k)}]`,
          "key must be 1-63 characters of [A-Za-z0-9._/-]",
        );
      textField(`labels[${JSON.stringify(k)}]`, v, 256);
    }
    let workspace = { digest: "", size: 0 };
    if (req.workspaceTar.byteLength > 0) {
      // Checked whole before anything is stored: tar-slip, absolute paths, links out of
      // the tree, devices and size limits are refused; what is stored is the normalised form.
      workspace = await deps.artifacts.put(await normaliseWorkspaceArchive(req.workspaceTar));
    }
    const runId = ulid();
    const sessionId = req.sessionId || ulid();
    const ev = await deps.log.append({
      runId,
      sessionId,
      tenantId: principal.tenantId,
      expectedSeq: 0,
      payload: {
        case: "runQueued",
        value: create(RunQueuedSchema, {
          tenantId: principal.tenantId,
          prompt: req.prompt,
          priority: req.priority === 0 ? 5 : req.priority,
          skills: req.skills,
          labels: req.labels,
          workspaceDigest: workspace.digest,
          workspaceSizeBytes: BigInt(workspace.size),
          submittedBy: principal.name,
        }),
      },
    });
    const run = applyEvent(emptyRun(runId), ev.event);
    if (deps.queue !== undefined) {
      try {
        await deps.queue.enqueue({
          runId,
          tenantId: principal.tenantId,
          sessionId,
          priority: run.priority,
        });
      } catch (err) {
        // Nothing acknowledged may be lost: a run that cannot be queued is failed, visibly.
        await deps.log
          .append({
            runId,
            sessionId,
            expectedSeq: 1,
            payload: {
              case: "runFailed",
              value: create(RunFailedSchema, {
                error: { code: "EQUEUE", message: "the run could not be queued" },
              }),
            },
          })
          .catch(() => undefined);
        throw new AgentdError(
          "EUNAVAILABLE",
          "the run queue cannot be reached; the run was not started",
          { cause: err },
        );
      }
    }
    return { run };
  };
}
