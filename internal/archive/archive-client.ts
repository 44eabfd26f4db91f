/**
 * The RunService of one archive, in process (no server, no network): agentctl's
 * `--archive PATH` answers GetRun, StreamEvents and GetArtifact from a verified archive
 * with the same handlers the server uses, as the archive's own tenant. Writes are refused
 * by name (the archive is read-only).
 * Must never: open a connection, or serve an archive that did not verify.
 */
import { createClient, createRouterTransport, type Interceptor } from "@connectrpc/connect";
import { kPrincipal } from "../api/context.ts";
import { archivedReadOnlyInterceptor } from "../api/interceptors/archived-read-only.ts";
import { errorInterceptor } from "../api/interceptors/errors.ts";
import { registerRunService } from "../api/routes.ts";
import type { Role } from "../auth/tokens.ts";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { RunProjectionCache } from "../projections/run-cache.ts";
import { ArchiveBlobStore } from "./archive-blob-store.ts";
import { ArchiveFallbackLog } from "./archive-fallback-log.ts";
import type { OpenedArchive } from "./open-archive.ts";

/** A RunService client answering from `archive` alone. */
export function archiveClient(archive: OpenedArchive) {
  const runId = archive.manifest.runId;
  const log = new ArchiveFallbackLog({
    find: async (id) => (id === runId ? archive : undefined),
  });
  const deps = {
    log,
    runs: new RunProjectionCache({ log }),
    artifacts: new ArchiveBlobStore(archive),
    archive: log,
  };
  const asOwner: Interceptor = (next) => (req) => {
    req.contextValues.set(kPrincipal, {
      name: "archive",
      tenantId: archive.head.tenantId,
      roles: new Set<Role>(["read"]),
    });
    return next(req);
  };
  const transport = createRouterTransport((r) => registerRunService(r, deps), {
    router: {
      interceptors: [errorInterceptor(() => undefined), asOwner, archivedReadOnlyInterceptor(log)],
    },
  });
  return createClient(RunService, transport);
}
