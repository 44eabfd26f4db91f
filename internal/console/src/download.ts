/** Downloads an artifact (GetArtifact's stream) into a Blob and saves it under its name. */
import type { Api } from "./api.ts";

export async function downloadArtifact(
  api: Api,
  runId: string,
  digest: string,
  name: string,
): Promise<void> {
  const parts: Uint8Array<ArrayBuffer>[] = [];
  let type = "application/octet-stream";
  for await (const res of api.getArtifact({ runId, digest })) {
    if (res.part.case === "info") type = res.part.value.mediaType || type;
    else if (res.part.case === "chunk") parts.push(new Uint8Array(res.part.value));
  }
  const url = URL.createObjectURL(new Blob(parts, { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
