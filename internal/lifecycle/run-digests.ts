/**
 * The artifact digests an event names, from its stored canonical JSON: every `digest` or
 * `…Digest` member holding 64 hex characters (workspace, snapshots, patches, tool outputs,
 * summaries …). The Redis append script finds the same with the same rule
 * (eventlog/append-lua.ts), so the reference sets and a deletion agree.
 *
 * Must never: read a string value's content as a member (canonical JSON escapes quotes in
 * values, so `"digest":"` cannot start inside one).
 */
const DIGEST_MEMBER = /[A-Za-z]igest":"([0-9a-f]+)"/g;

/** The 64-hex digests `json` names, each once. */
export function digestsOf(json: string): string[] {
  const out = new Set<string>();
  for (const m of json.matchAll(DIGEST_MEMBER)) {
    const d = m[1] as string;
    if (d.length === 64) out.add(d);
  }
  return [...out];
}
