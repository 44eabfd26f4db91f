/**
 * CreateRun: validate, store the workspace archive (streamed through the server's upload
 * limits, see workspace-upload.ts), then store `run.queued` and the run's queue record as
 * one step (admit-run.ts): an acknowledged run always starts. Nothing is appended for a
 * refused request, and nothing is stored for a refused archive.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { ROOT_CONTEXT } from "@opentelemetry/api";
import { ulid } from "ulid";
import { invalid } from "../errors.ts";
import { type RunBudget, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import type { CreateRunRequest, CreateRunResponseSchema } from "../gen/agentd/v1/run_service_pb.js";
import { FileIdempotencyStore } from "../idempotency/file-idempotency.ts";
import { decideImage } from "../kernel/image-policy.ts";
import { releaseTenantBlobs } from "../lifecycle/delete-run.ts";
import { releaseHold } from "../lifecycle/expire-receipts.ts";
import { holdWorkspace } from "../lifecycle/hold-blob.ts";
import { looksLikeReference, parseImageReference } from "../sandbox/image-reference.ts";
import { traceParentFor } from "../telemetry/trace-context.ts";
import { admitRun } from "./admit-run.ts";
import { principalOf } from "./context.ts";
import { type ApiDeps, type BudgetMax, DEFAULT_BUDGET_MAX } from "./deps.ts";
import { claimRun, idempotencyKeyField, requestDigest } from "./idempotent-create.ts";
import { annotateRpc, kTraceContext } from "./interceptors/tracing.ts";
import { validateLabels } from "./labels.ts";
import { requeueStranded } from "./requeue-stranded.ts";
import { RUN_REUSED_HEADER } from "./reused-header.ts";
import { RECEIPT_USE_GRACE_MS, uploadedWorkspace } from "./upload-workspace.ts";
import { SESSION_RE, textField } from "./validate.ts";
import { createWorkspaceUploader, kWorkspaceUploader } from "./workspace-upload.ts";

const MAX_PROMPT_BYTES = 64 * 1024;
const SKILL_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
/** The name of one of agentd's own images (an ecosystem: python, go, rust…). */
const IMAGE_NAME = /^[a-z][a-z0-9-]{0,31}$/;

export function createRunHandler(deps: ApiDeps) {
  // Servers set their own (limits from flags); this one serves in-process routers.
  const fallbackUploader = createWorkspaceUploader(deps.artifacts);
  const keys = deps.idempotency ?? new FileIdempotencyStore();
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
    validateLabels(req.labels);
    idempotencyKeyField(req.idempotencyKey);
    budgetField(req.budget, deps.budgetMax ?? DEFAULT_BUDGET_MAX);
    const image = imageField(req.image, deps, principal.tenantId);
    let workspace = { digest: "", size: 0 };
    let dropHold: (() => Promise<void>) | undefined;
    if (req.workspaceDigest !== "") {
      if (req.workspaceTar.byteLength > 0)
        throw invalid("workspace_digest", "give workspace_tar or workspace_digest, not both");
      workspace = await uploadedWorkspace(
        deps.artifacts,
        principal.tenantId,
        req.workspaceDigest,
        deps.deletion?.store.receipts,
      );
    } else if (req.workspaceTar.byteLength > 0) {
      // Checked entry by entry while it streams into the store (tar-slip, absolute paths,
      // links out of the tree, devices, size and entry limits); the run exists only once
      // the whole archive passed, and what is stored is the normalised form.
      const uploader = ctx.values.get(kWorkspaceUploader) ?? fallbackUploader;
      // It takes one of the tenant's upload turns, and a slot per chunk, like a stream.
      const own = deps.tenantUploadBytes?.(principal.tenantId);
      workspace = await uploader.store(req.workspaceTar, {
        signal: ctx.signal,
        tenantId: principal.tenantId,
        ...(own === undefined ? {} : { tenantMaxBytes: own }),
      });
      // A reference until the run's events name the blob: a deletion of another run with
      // the same content, deciding meanwhile, cannot remove what this run is about to name.
      // Its own holder (never a tenant id: NUL-led), dropped once the run's events name the
      // blob (or the CreateRun failed: then an unreferenced blob goes); a process dying
      // before leaves it to expire after RECEIPT_USE_GRACE_MS.
      const deletion = deps.deletion;
      if (deletion !== undefined) {
        const holder = `\u0000create:${ulid()}`;
        const digest = workspace.digest;
        await holdWorkspace(
          deletion.store.receipts,
          deps.artifacts,
          holder,
          digest,
          Date.now() + RECEIPT_USE_GRACE_MS,
          "workspace_tar",
        );
        dropHold = () => releaseHold(deletion, holder, digest).then(() => undefined);
      }
      await deps.tenantArtifacts?.charge(principal.tenantId, workspace.digest, workspace.size);
    }
    try {
      return await admit(ctx, req, principal, workspace, image);
    } catch (err) {
      // Refused (a tenant limit, a key's conflict…): no run names the inline workspace, so
      // its charge goes unless the tenant references the same bytes otherwise.
      if (req.workspaceTar.byteLength > 0 && deps.deletion !== undefined)
        await releaseTenantBlobs(deps.deletion, principal.tenantId, [workspace.digest]);
      throw err;
    } finally {
      await dropHold?.();
    }
  };

  async function admit(
    ctx: HandlerContext,
    req: CreateRunRequest,
    principal: ReturnType<typeof principalOf>,
    workspace: { digest: string; size: number },
    image: string,
  ): Promise<MessageInitShape<typeof CreateRunResponseSchema>> {
    let runId = ulid();
    let release = async (): Promise<void> => undefined;
    if (req.idempotencyKey !== "") {
      const digest = requestDigest({
        prompt: req.prompt,
        sessionId: req.sessionId,
        priority: req.priority === 0 ? 5 : req.priority,
        skills: req.skills,
        labels: req.labels,
        budget: [req.budget?.maxTokens, req.budget?.maxCostMicros, req.budget?.maxWallMs].map(
          String,
        ),
        workspace: workspace.digest,
        // Only when given: keys stored before the field existed keep their digests.
        ...(image === "" ? {} : { image }),
      });
      const claimed = await claimRun(
        deps,
        keys,
        principal.tenantId,
        req.idempotencyKey,
        digest,
        ctx.signal,
      );
      if (claimed.kind === "existing") {
        // The first CreateRun may have failed on its replicas' confirmation: confirm now.
        await deps.log.replicated?.(async () => undefined);
        ctx.responseHeader.set(RUN_REUSED_HEADER, "true");
        // Its CreateRun may have died between storing and queueing it (older servers).
        await requeueStranded(deps, claimed.run);
        return { run: claimed.run };
      }
      ({ runId, release } = claimed);
      deps.crashPoint?.("createRun.afterClaim");
    }
    // The tenant's day spent or its minute full: refused (after the key check: a retry
    // gets its run; tenant-gate.ts).
    const refusal = await deps.tenantGate?.(principal.tenantId);
    if (refusal !== undefined) {
      await release();
      throw refusal;
    }
    const sessionId = req.sessionId || ulid();
    annotateRpc(ctx.values, { "agentd.run.id": runId, "gen_ai.conversation.id": sessionId });
    const priority = req.priority === 0 ? 5 : req.priority;
    const first = {
      runId,
      sessionId,
      tenantId: principal.tenantId,
      payload: {
        case: "runQueued" as const,
        value: create(RunQueuedSchema, {
          tenantId: principal.tenantId,
          prompt: req.prompt,
          priority,
          skills: req.skills,
          labels: req.labels,
          ...(req.budget === undefined ? {} : { budget: req.budget }),
          workspaceDigest: workspace.digest,
          workspaceSizeBytes: BigInt(workspace.size),
          submittedBy: principal.name,
          image,
          // Every worker that drives the run continues this trace (the CreateRun span's).
          ...traceParentFor(ctx.values.get(kTraceContext) ?? ROOT_CONTEXT),
        }),
      },
    };
    // The run.queued event and the queue record: one step (admit-run.ts).
    return { run: await admitRun(deps, first, priority, release) };
  }
}

/**
 * The requested image, normalised ("" for none): a reference that does not parse, or that
 * the tenant's policy (its own, else the server's) does not allow (sandbox.images,
 * sandbox.imageDigests), is INVALID_ARGUMENT naming `image`. The worker checks it again.
 */
function imageField(image: string, deps: ApiDeps, tenantId: string): string {
  if (image === "") return "";
  // A bare name ("python", "go"): one of agentd's own images, which the worker resolves.
  if (!looksLikeReference(image)) {
    if (!IMAGE_NAME.test(image))
      throw invalid(
        "image",
        `${JSON.stringify(image.slice(0, 80))} is neither an image reference (registry/name:tag, name@sha256:…) nor the name of one of agentd's images ([a-z][a-z0-9-], at most 32)`,
      );
    return image;
  }
  const policy = deps.policy?.(tenantId);
  if (policy === undefined) {
    const ref = parseImageReference(image);
    if ("error" in ref) throw invalid("image", ref.error);
    return ref.normalised;
  }
  const d = decideImage(image, policy.sandbox);
  if (!d.ok) throw invalid("image", d.why);
  return d.ref.normalised;
}

/** Each limit of a run's budget at most the server's maximum: INVALID_ARGUMENT naming it. */
function budgetField(b: RunBudget | undefined, max: BudgetMax): void {
  if (b === undefined) return;
  const check = (field: string, v: bigint, limit: number, flag: string, unit: string) => {
    if (v > BigInt(limit))
      throw invalid(
        `budget.${field}`,
        `${v} is over this server's maximum of ${limit} ${unit} (${flag})`,
      );
  };
  check("max_tokens", b.maxTokens, max.maxTokens, "--max-run-tokens", "tokens");
  check("max_cost_micros", b.maxCostMicros, max.maxCostMicros, "--max-run-cost-usd", "micro-USD");
  check("max_wall_ms", b.maxWallMs, max.maxWallMs, "--max-run-wall-ms", "ms");
}
