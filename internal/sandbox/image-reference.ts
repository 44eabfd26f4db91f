/**
 * Container image references (`registry.example.com/team/app:1.2@sha256:…`): parsed,
 * checked against the distribution grammar and normalised the way the Docker engine reads
 * them (`python:3.12` is `docker.io/library/python:3.12`, a reference without tag or digest
 * is `:latest`), so a policy pattern is matched against what the engine will pull.
 *
 * Pure. Must never: accept what the engine would read differently (uppercase repository
 * paths, `..`, spaces, control characters, a second `@`), or echo a hostile input whole in
 * an error (errors quote at most 80 characters of it).
 */

/** The longest reference accepted (the grammar caps a name at 255; tag and digest add to it). */
export const MAX_REFERENCE_LENGTH = 512;

export interface ImageReference {
  /** Registry host (and port), lowercase: "docker.io", "registry.example.com:5000". */
  registry: string;
  /** Repository path below it: "library/python", "team/app". */
  repository: string;
  /** The tag, when the reference has one (else "latest" when it has no digest either). */
  tag?: string;
  /** "sha256:<64 hex>" (or sha512), when the reference pins one. */
  digest?: string;
  /** registry/repository[:tag][@digest]: what patterns are matched against. */
  normalised: string;
  /** registry/repository: the name the engine pulls (with tag or digest added). */
  name: string;
}

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const HOST_LABEL = /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^(?:sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;
const DEFAULT_REGISTRY = "docker.io";

/**
 * Whether `s` is an image reference rather than the name of one of agentd's own images
 * ("python", "go", "base"…): a reference has a `/`, a `:` or an `@`.
 */
export function looksLikeReference(s: string): boolean {
  return /[/:@]/.test(s);
}

/** The reference, or why it is not one (a sentence naming what is wrong). */
export function parseImageReference(input: string): ImageReference | { error: string } {
  const shown = JSON.stringify(input.slice(0, 80)) + (input.length > 80 ? "…" : "");
  const bad = (why: string) => ({ error: `${shown} is not an image reference: ${why}` });
  if (input.length === 0) return bad("it is empty");
  if (input.length > MAX_REFERENCE_LENGTH)
    return bad(`it is longer than ${MAX_REFERENCE_LENGTH} characters`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing them is the point
  if (/[\u0000-\u0020\u007f-\uffff]/.test(input))
    return bad("it holds spaces, control or non-ASCII characters");
  const at = input.split("@");
  if (at.length > 2) return bad("it has more than one @");
  const [named = "", digest] = at;
  if (digest !== undefined && !DIGEST.test(digest))
    return bad("its digest must be sha256: and 64 lowercase hex digits (or sha512: and 128)");
  const slash = named.lastIndexOf("/");
  const colon = named.lastIndexOf(":");
  const tag = colon > slash ? named.slice(colon + 1) : undefined;
  const path = colon > slash ? named.slice(0, colon) : named;
  if (tag !== undefined && !TAG.test(tag))
    return bad("its tag must be 1-128 characters of [A-Za-z0-9_.-], not starting with . or -");
  const parts = path.split("/");
  const first = parts[0] ?? "";
  const hasHost =
    parts.length > 1 && (first.includes(".") || first.includes(":") || first === "localhost");
  const registry = hasHost ? first.toLowerCase() : DEFAULT_REGISTRY;
  const repoParts = hasHost ? parts.slice(1) : parts;
  if (hasHost) {
    const hostError = checkHost(first);
    if (hostError !== undefined) return bad(hostError);
  }
  if (repoParts.length === 0 || repoParts.some((p) => p === ""))
    return bad("its repository path is empty or has an empty part");
  for (const p of repoParts) {
    if (p === "." || p === "..") return bad("its repository path has a . or .. part");
    if (/[A-Z]/.test(p)) return bad("repository names must be lowercase");
    if (!COMPONENT.test(p))
      return bad(
        `its repository part ${JSON.stringify(p.slice(0, 40))} must be lowercase letters and digits, separated by ., _, __ or -`,
      );
  }
  if (registry === DEFAULT_REGISTRY && repoParts.length === 1) repoParts.unshift("library");
  const repository = repoParts.join("/");
  const name = `${registry}/${repository}`;
  if (name.length > 255) return bad("its name is longer than 255 characters");
  const effectiveTag = tag ?? (digest === undefined ? "latest" : undefined);
  const normalised =
    name +
    (effectiveTag === undefined ? "" : `:${effectiveTag}`) +
    (digest === undefined ? "" : `@${digest}`);
  return {
    registry,
    repository,
    name,
    normalised,
    ...(effectiveTag === undefined ? {} : { tag: effectiveTag }),
    ...(digest === undefined ? {} : { digest }),
  };
}

/** Why a registry host (with an optional port) is not one, or undefined. */
function checkHost(host: string): string | undefined {
  const m = /^([^:]+)(?::(\d{1,5}))?$/.exec(host);
  if (m === null) return "its registry must be a host name with an optional :port";
  const port = m[2];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535))
    return "its registry port must be 1-65535";
  const labels = (m[1] as string).split(".");
  if (labels.some((l) => !HOST_LABEL.test(l) || l.length > 63))
    return "its registry must be a host name of letters, digits, - and .";
  return undefined;
}

/** The reference the engine pulls and runs: name@digest when pinned, else name:tag. */
export function pullReference(ref: ImageReference): string {
  return ref.digest !== undefined ? `${ref.name}@${ref.digest}` : `${ref.name}:${ref.tag}`;
}
