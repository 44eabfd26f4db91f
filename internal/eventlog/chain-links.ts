/**
 * Reads an event's own chain links (`hash`, `prevHash`) from its stored canonical JSON
 * without decoding it: the rewound-log checks (file-event-log.ts, follow.ts) look at them
 * on every commit and every live batch. The same pattern as the Redis append script's
 * `holds` (append-lua.ts).
 *
 * Why a pattern is safe here: canonical JSON sorts members, so the top-level `hash` comes
 * right after `eventId` (no payload case sorts between them), and a quote inside a string
 * value is always escaped, so `"…":"` can only be real structure. Never used to verify a
 * chain: verifyChain (hash-chain.ts) recomputes hashes.
 */

const HASH_RE = /"eventId":"[0-9A-Za-z]+","hash":"([0-9a-f]{64})"/;
const PREV_RE = /"prevHash":"([0-9a-f]{64})"/;

/** The event's `hash` member, or undefined when the JSON does not have one. */
export function hashOf(json: string): string | undefined {
  return HASH_RE.exec(json)?.[1];
}

/** The event's `prevHash` member, or undefined when the JSON does not have one. */
export function prevHashOf(json: string): string | undefined {
  return PREV_RE.exec(json)?.[1];
}
