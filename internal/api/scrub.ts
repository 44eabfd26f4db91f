/**
 * The last line before an error message reaches a client: removes what only the server
 * should see (Redis script hashes and line references, stack frames, absolute host paths,
 * IP addresses) and caps the length. Adapters are expected to write client-safe messages
 * and keep the detail in `cause`; this only catches what slipped through, so it must never
 * be the reason a message is safe — and never touches quoted client input, which our own
 * messages quote with JSON.stringify.
 */

/** Longest message sent: gRPC carries it in a header, and no reason needs more. */
const MAX_MESSAGE_CHARS = 1024;

const RULES: readonly [RegExp, string][] = [
  // Redis 7: "… script: <sha1>, on @user_script:12."; Redis 6: "(call to f_<sha1>):
  // @user_script:12:".
  [/\s*script: [^,\s]+, on @user_script:\d+\.?/g, ""],
  [/\bf_[0-9a-f]{40}\b/g, "a script"],
  // A bare sha1 is a script's (or a commit's) name; sha-256 digests (64) are ours to show.
  [/\b[0-9a-f]{40}\b/g, "a script"],
  [/@?user_script:\d+:?\s*/g, ""],
  // Stack frames: "\n    at fn (file:1:2)" and inline " at /abs/file.js:1:2".
  [/\n\s*at [^\n]*/g, ""],
  [/\s+at (?:\S+ )?\(?[^\s()]*(?:\/|node:|\.[cm]?[jt]s)[^\s()]*:\d+:\d+\)?/g, ""],
  // Absolute paths not inside double quotes (client input is quoted; errno paths are not).
  [/(^|[\s'(=,:])\/(?:[^\s'"()/:,;]+\/)*[^\s'"()/:,;]+/g, "$1<path>"],
  [/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b/g, "<address>"],
  [/\[[0-9a-fA-F:]*:[0-9a-fA-F:]*\](?::\d{1,5})?/g, "<address>"],
];

/** `message` without server internals, at most 1024 characters. */
export function scrubMessage(message: string): string {
  let out = message;
  for (const [re, to] of RULES) out = out.replace(re, to);
  out = out.trim();
  return out.length > MAX_MESSAGE_CHARS ? `${out.slice(0, MAX_MESSAGE_CHARS - 1)}…` : out;
}
