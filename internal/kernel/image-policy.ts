/**
 * Which sandbox images a run may name (policy `sandbox.images`, `sandbox.imageDigests`):
 * a reference CreateRun or the workspace's `.agent/config.yaml` names is allowed only when
 * its normalised form (image-reference.ts) matches one of the patterns; no patterns, no
 * image of a run's own. With `imageDigests` (the strict profile) only `name@sha256:…`
 * references are taken: a tag can be moved to other content after it was allowed.
 *
 * Patterns are globs over normalised references: `*` any characters but `/`, `**` any
 * characters, `?` one character but `/`; everything else is literal
 * (`registry.example.com/team/*`, `docker.io/library/python:3.12*`).
 *
 * Pure. Must never: allow a reference that did not parse, or allow anything when the list
 * is empty. The policy's own `sandbox.image` is the operator's and is not checked here.
 */
import { type ImageReference, parseImageReference } from "../sandbox/image-reference.ts";

export interface ImagePolicy {
  /** Policy sandbox.images. */
  images: readonly string[];
  /** Policy sandbox.imageDigests: digests only. */
  imageDigests: boolean;
}

export type ImageDecision =
  | { ok: true; ref: ImageReference; pattern: string }
  | { ok: false; why: string };

/** Characters a pattern may hold (a normalised reference's, plus * and ?). */
export const IMAGE_PATTERN = /^[A-Za-z0-9._:/@*?-]{1,512}$/;

/** Checks a requested reference against the policy; `why` names the image and the patterns. */
export function decideImage(input: string, policy: ImagePolicy): ImageDecision {
  const ref = parseImageReference(input);
  if ("error" in ref) return { ok: false, why: ref.error };
  if (policy.imageDigests && ref.digest === undefined)
    return {
      ok: false,
      why: `image ${ref.normalised} is refused: this policy (sandbox.imageDigests) takes only references pinned by digest (name@sha256:…)`,
    };
  const pattern = policy.images.find((p) => imagePatternRegex(p).test(ref.normalised));
  if (pattern === undefined)
    return {
      ok: false,
      why:
        policy.images.length === 0
          ? `image ${ref.normalised} is refused: the policy allows no images of a run's own (sandbox.images is empty)`
          : `image ${ref.normalised} is refused: it matches none of the policy's sandbox.images (${policy.images.join(", ")})`,
    };
  return { ok: true, ref, pattern };
}

const compiled = new Map<string, RegExp>();

/** The pattern as an anchored regular expression (cached). */
export function imagePatternRegex(pattern: string): RegExp {
  let re = compiled.get(pattern);
  if (re === undefined) {
    let src = "";
    for (let i = 0; i < pattern.length; i++) {
      const c = pattern[i] as string;
      if (c === "*" && pattern[i + 1] === "*") {
        src += ".*";
        i++;
      } else if (c === "*") src += "[^/]*";
      else if (c === "?") src += "[^/]";
      else src += c.replace(/[.^$+(){}[\]|\\]/g, "\\$&");
    }
    re = new RegExp(`^${src}$`);
    if (compiled.size > 1000) compiled.clear();
    compiled.set(pattern, re);
  }
  return re;
}

/** Why a sandbox.images pattern can never match a normalised reference, or undefined. */
export function imagePatternProblem(pattern: string): string | undefined {
  if (!IMAGE_PATTERN.test(pattern))
    return "must be 1-512 characters of a normalised image reference ([A-Za-z0-9._:/@-]) and * or ?";
  if (pattern !== "**" && !pattern.includes("/"))
    return `matches normalised references, which always name their registry: write e.g. "docker.io/library/${pattern}"`;
  return undefined;
}
