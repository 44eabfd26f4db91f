/** Tar archives for tests, built entry by entry (tar-stream), hostile entries included. */
import * as tar from "tar-stream";

export interface TarEntry {
  name: string;
  type?: "file" | "symlink" | "link" | "character-device" | "directory";
  linkname?: string;
  data?: string;
}

export async function tarOf(entries: readonly TarEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on("data", (c: unknown) => chunks.push(c as Buffer));
  for (const e of entries) {
    pack.entry(
      { name: e.name, type: e.type ?? "file", linkname: e.linkname, mode: 0o644 },
      e.data ?? "",
    );
  }
  pack.finalize();
  await new Promise<void>((r) => pack.on("end", () => r()));
  return Buffer.concat(chunks);
}
