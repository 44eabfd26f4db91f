/**
 * A run's artifact store whose every write takes the run's reference on the blob until its
 * events name it (a patch, a snapshot, a tool output): the worker stores a blob first and
 * appends the event naming it after, and a deletion of another run with the same bytes in
 * between would otherwise find the blob unreferenced and remove it. The reference expires
 * after RUN_HOLD_MS (the receipts' sweep drops it; by then the events name the blob).
 * A blob a deletion removed before the reference is stored again (bytes in hand) or, for a
 * stream, the write fails ECONFLICT.
 *
 * Must never: answer a write whose blob a deletion removed, or hold a blob forever.
 */
import type { ArtifactInfo, ArtifactStore, PutStreamOptions } from "../artifacts/port.ts";
import { isAgentdError } from "../errors.ts";
import { holdWorkspace } from "./hold-blob.ts";
import type { UploadReceiptRefs } from "./port.ts";

/** How long a run's write holds its blob: far past the event that names it. */
export const RUN_HOLD_MS = 30 * 60_000;

/** The reference's holder for a run (never a tenant id: NUL-led). */
export const runHolder = (runId: string): string => `\u0000run:${runId}`;

export function heldArtifactStore(
  store: ArtifactStore,
  refs: UploadReceiptRefs,
  runId: string,
  now: () => number = Date.now,
): ArtifactStore {
  const hold = (info: ArtifactInfo): Promise<void> =>
    holdWorkspace(refs, store, runHolder(runId), info.digest, now() + RUN_HOLD_MS, "artifact");
  const wrapped: ArtifactStore = {
    put: async (data) => {
      const info = await store.put(data);
      try {
        await hold(info);
      } catch (err) {
        if (!isAgentdError(err) || err.code !== "ECONFLICT") throw err;
        // Held now: no later deletion removes what is stored again.
        return store.put(data);
      }
      return info;
    },
    putStream: async (source: AsyncIterable<Uint8Array>, opts?: PutStreamOptions) => {
      const info = await store.putStream(source, opts);
      await hold(info);
      return info;
    },
    stat: (d) => store.stat(d),
    read: (d, chunk) => store.read(d, chunk),
  };
  if (store.delete !== undefined) wrapped.delete = store.delete.bind(store);
  return wrapped;
}
