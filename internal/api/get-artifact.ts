/**
 * GetArtifact: streams a blob that belongs to the caller's run (named in one of its
 * `artifact.emitted` events, or its uploaded workspace), info first, then chunks.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { ArchiveBlobStore } from "../archive/archive-blob-store.ts";
import { DIGEST_RE } from "../artifacts/port.ts";
import { AgentdError, invalid } from "../errors.ts";
import type {
  GetArtifactRequest,
  GetArtifactResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import { principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";

interface Found {
  digest: string;
  name: string;
  mediaType: string;
}

export function getArtifactHandler(deps: ApiDeps) {
  return async function* (
    req: GetArtifactRequest,
    ctx: HandlerContext,
  ): AsyncGenerator<MessageInitShape<typeof GetArtifactResponseSchema>> {
    const principal = principalOf(ctx);
    if (req.digest === "" && req.name === "") throw invalid("digest", "give a digest or a name");
    if (req.digest !== "" && !DIGEST_RE.test(req.digest)) {
      throw invalid("digest", "must be 64 lowercase hex characters (sha256)");
    }
    const { run } = await runOf(deps, principal, req.runId);
    const candidates: Found[] = [];
    if (run.workspaceDigest !== "") {
      candidates.push({
        digest: run.workspaceDigest,
        name: "workspace",
        mediaType: "application/x-tar",
      });
    }
    for (const ev of await deps.log.read(req.runId, 0)) {
      const p = ev.event.payload;
      if (p.case === "artifactEmitted") {
        candidates.push({
          digest: p.value.digest,
          name: p.value.name,
          mediaType: p.value.mediaType,
        });
      }
    }
    const match = candidates
      .reverse()
      .find(
        (c) =>
          (req.digest === "" || c.digest === req.digest) &&
          (req.name === "" || c.name === req.name),
      );
    if (match === undefined) {
      throw new AgentdError(
        "ENOTFOUND",
        `run ${req.runId} has no artifact ${req.digest || `named ${JSON.stringify(req.name)}`}`,
      );
    }
    // An archived run's blobs are served from its archive (the live store may have none).
    const archived = await deps.archive?.archivedRun(req.runId);
    const store = archived === undefined ? deps.artifacts : new ArchiveBlobStore(archived);
    const info = await store.stat(match.digest);
    if (info === undefined)
      throw new AgentdError("ENOTFOUND", `artifact ${match.digest} is no longer stored`);
    yield {
      part: {
        case: "info",
        value: {
          digest: info.digest,
          sizeBytes: BigInt(info.size),
          mediaType: match.mediaType,
          name: match.name,
        },
      },
    };
    for await (const chunk of store.read(match.digest)) {
      if (ctx.signal.aborted) return;
      yield { part: { case: "chunk", value: chunk } };
    }
  };
}
