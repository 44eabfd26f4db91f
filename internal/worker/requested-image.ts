/**
 * A run's own image REFERENCE: the one CreateRun named (run.queued `image`), else the
 * workspace's `.agent/config.yaml` `image:` when that is a reference (anything with a `/`,
 * `:` or `@`; a bare name such as `python` or `go` names one of agentd's ecosystem images
 * and is the image chooser's, run-image.ts), checked against the worker's policy
 * (sandbox.images, sandbox.imageDigests) at every drive: a policy reloaded since CreateRun
 * is the one that counts.
 *
 * Pure. Must never: allow a reference the policy does not, or take a bare ecosystem name
 * for a reference.
 */
import { parse as parseYaml } from "yaml";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { decideImage } from "../kernel/image-policy.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { type ImageReference, looksLikeReference } from "../sandbox/image-reference.ts";

/** A reference a run asked for, and where it was named. */
export interface RequestedImage {
  input: string;
  /** "request": CreateRun (agentctl --image); "workspace": .agent/config.yaml. */
  from: "request" | "workspace";
}

/** Where each origin is named in messages. */
const FIELD = { request: "CreateRun image", workspace: ".agent/config.yaml image" } as const;

/** The run failed this way when its image is refused (the code of run.failed). */
export const IMAGE_REFUSED = "EIMAGE_REFUSED";

/** The reference the run asked for, if any. */
export function requestedImage(
  events: readonly Event[],
  configImage: string | undefined,
): RequestedImage | undefined {
  const asked = askedImage(events, configImage);
  return asked !== undefined && looksLikeReference(asked.input) ? asked : undefined;
}

/**
 * The name of one of agentd's own images the run asked for ("python", "go"…: no `/`, `:`
 * or `@`), CreateRun's first, else `.agent/config.yaml`'s: the image chooser's to resolve
 * (run-image.ts), not this module's. Undefined when the run asked for a reference or nothing.
 */
export function requestedImageName(
  events: readonly Event[],
  configImage: string | undefined,
): RequestedImage | undefined {
  const asked = askedImage(events, configImage);
  return asked !== undefined && !looksLikeReference(asked.input) ? asked : undefined;
}

/** What the run asked for: CreateRun's image wins over the workspace's. */
function askedImage(
  events: readonly Event[],
  configImage: string | undefined,
): RequestedImage | undefined {
  const q = events[0]?.payload;
  if (q?.case === "runQueued" && q.value.image !== "")
    return { input: q.value.image, from: "request" };
  if (configImage !== undefined && configImage !== "")
    return { input: configImage, from: "workspace" };
  return undefined;
}

export type ImageCheck =
  | { ok: true; ref: ImageReference; pattern: string }
  | { ok: false; code: typeof IMAGE_REFUSED; message: string };

/** The requested reference against the policy: allowed, or why not (naming where it was named). */
export function checkRequestedImage(req: RequestedImage, policy: Policy): ImageCheck {
  const d = decideImage(req.input, policy.sandbox);
  if (d.ok) return d;
  return { ok: false, code: IMAGE_REFUSED, message: `${FIELD[req.from]}: ${d.why}` };
}

/**
 * `image:` of a `.agent/config.yaml` (its bytes), when it is a string; anything else
 * (no file, not YAML, another type) is undefined here — the commands' reader reports a
 * broken file.
 */
export function imageOfConfig(data: Buffer | undefined): string | undefined {
  if (data === undefined) return undefined;
  try {
    const doc = parseYaml(data.toString("utf8"), { maxAliasCount: 10 }) as unknown;
    if (doc === null || typeof doc !== "object") return undefined;
    const image = (doc as Record<string, unknown>).image;
    return typeof image === "string" ? image : undefined;
  } catch {
    return undefined;
  }
}
