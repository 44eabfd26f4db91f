/**
 * The image of a run's sandbox, and why (recorded in `run.started`: image, ecosystem,
 * image_reason). The first that applies wins:
 *
 *   1. The image the run already started on (its `run.started`): a run recreated after a
 *      pause, a takeover or a release keeps its toolchain — the very build, by the engine's
 *      id `run.started` recorded (`image_digest`), while the engine still has it (a tag such
 *      as agentd-sandbox-go:latest moves to every new build).
 *   2. The policy's `sandbox.image`, when the operator set it.
 *   3. `.agent/config.yaml` `image: <ecosystem>`; a bad value is not taken, and the reason
 *      says so before going on.
 *   4. Detection (tools/detect-ecosystem.ts).
 *   5. Base.
 *
 * An ecosystem maps to `agentd-sandbox-<name>:latest`; one that is not on the Docker
 * engine falls back to base, and the reason says which image is missing and how to build it.
 *
 * Pure: the caller says which images the engine has. Must never: take an image reference
 * from the workspace (bringing your own image is checked against the policy elsewhere), or
 * change the image of a run that has started.
 */
import { DEFAULT_SANDBOX_IMAGE } from "../kernel/policy-schema.ts";
import { ECOSYSTEMS, type Ecosystem } from "../tools/detect-commands.ts";
import type { DetectedEcosystem } from "../tools/detect-ecosystem.ts";

/** The image a policy without `sandbox.image` gives every run that detection leaves alone. */
export const BASE_IMAGE = DEFAULT_SANDBOX_IMAGE;

/** The language image of an ecosystem, as `make images` tags it. */
export function ecosystemImage(ecosystem: Ecosystem): string {
  return `agentd-sandbox-${ecosystem}:latest`;
}

export interface RunImage {
  image: string;
  /** The ecosystem whose image it is; "" for an image the operator named. */
  ecosystem: Ecosystem | "";
  /** Why, in a sentence that names the deciding setting or file. */
  reason: string;
  /** The engine's id of the build to create the container from, when the run is pinned to one. */
  pin?: string;
}

export interface RunImageInput {
  /** What the run's `run.started` recorded, if it has one. */
  started?:
    | { image: string; ecosystem: string; imageReason: string; imageDigest: string }
    | undefined;
  /** The policy's `sandbox.image` when set (undefined: the operator left it to detection). */
  policyImage?: string | undefined;
  /** `.agent/config.yaml`'s `image:` (detect-commands.ts configImage). */
  config: { ecosystem?: Ecosystem } | { problem: string };
  /** What detection found in the workspace. */
  detected: DetectedEcosystem;
  /** Whether the engine has an image (e.g. the agentd-sandbox-go:latest tag). */
  present: (image: string) => boolean;
}

export function chooseRunImage(input: RunImageInput): RunImage {
  const s = input.started;
  if (s !== undefined && s.image !== "") return startedImage(s, input.present);
  if (input.policyImage !== undefined)
    return { image: input.policyImage, ecosystem: "", reason: "policy sandbox.image" };
  const c = input.config;
  if ("ecosystem" in c && c.ecosystem !== undefined)
    return available(c.ecosystem, ".agent/config.yaml image", input.present);
  const note = "problem" in c ? `${c.problem} (not taken); ` : "";
  const d = input.detected;
  return available(d.ecosystem, `${note}detected ${d.ecosystem} from ${d.reason}`, input.present);
}

/** The image `run.started` recorded: its build by id while the engine has it, else the tag. */
function startedImage(
  s: NonNullable<RunImageInput["started"]>,
  present: (image: string) => boolean,
): RunImage {
  const out: RunImage = {
    image: s.image,
    ecosystem: asEcosystem(s.ecosystem),
    reason: s.imageReason === "" ? "as run.started recorded" : s.imageReason,
  };
  if (s.imageDigest === "") return out;
  if (present(s.imageDigest)) return { ...out, pin: s.imageDigest };
  return {
    ...out,
    reason: `${out.reason}; the build it started on (${s.imageDigest.slice(0, 19)}) is gone from the engine, so ${s.image} as it is now`,
  };
}

function available(
  ecosystem: Ecosystem,
  why: string,
  present: (image: string) => boolean,
): RunImage {
  const image = ecosystemImage(ecosystem);
  if (ecosystem === "base" || present(image)) return { image, ecosystem, reason: why };
  return {
    image: BASE_IMAGE,
    ecosystem: "base",
    reason: `${why}; ${image} is not on the Docker engine (make images IMAGES=${ecosystem}), so base`,
  };
}

function asEcosystem(v: string): Ecosystem | "" {
  return (ECOSYSTEMS as readonly string[]).includes(v) ? (v as Ecosystem) : "";
}
