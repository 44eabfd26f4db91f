/**
 * Collects a byte stream into one Buffer, for callers that know the stream is small (tests,
 * archives already bounded by a cap). Must never be used on a workspace export of unknown
 * size in production code: exports are streamed.
 */
export async function collect(source: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const c of source) parts.push(c);
  return Buffer.concat(parts);
}
