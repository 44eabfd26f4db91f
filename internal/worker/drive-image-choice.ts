/**
 * Which of agentd's images a drive's new container gets when the run named no image of its
 * own (drive-image.ts handles a reference): the pure chooser (run-image.ts) fed with what
 * the drive knows — the run's `run.started`, the policy's `sandbox.image`, an ecosystem
 * name given to CreateRun (`image: go`) or in `.agent/config.yaml`, detection — and asked
 * of the engine whether the language image it would pick is there.
 *
 * Must never: pull anything, or look up more than the one image detection would pick.
 */
import { ECOSYSTEMS, type Ecosystem, ecosystemProblem } from "../tools/detect-commands.ts";
import type { Drive } from "./drive.ts";
import { requestedImageName } from "./requested-image.ts";
import { chooseRunImage, type RunImage, type RunImageInput } from "./run-image.ts";
import type { WorkspaceConfig } from "./workspace-config.ts";

export async function chooseDriveImage(d: Drive, config: WorkspaceConfig): Promise<RunImage> {
  const started = d.events.find((e) => e.payload.case === "runStarted")?.payload;
  const input: Omit<RunImageInput, "present"> = {
    started: started?.case === "runStarted" ? started.value : undefined,
    policyImage: d.deps.policy().sandbox.image,
    config: askedEcosystem(d, config),
    detected: config.detected,
  };
  // One image is looked up: the build the run started on, else the one detection would
  // pick, and only when nothing before wins.
  const has = d.deps.sandbox.hasImage;
  const pinned = input.started?.imageDigest ?? "";
  const wanted = pinned !== "" ? pinned : chooseRunImage({ ...input, present: () => true }).image;
  const mustLook =
    pinned !== "" || (input.started === undefined && input.policyImage === undefined);
  const present = !mustLook || has === undefined ? true : await has.call(d.deps.sandbox, wanted);
  return chooseRunImage({ ...input, present: (i) => i !== wanted || present });
}

/** CreateRun's ecosystem name (`agentctl run --image go`) first, else `.agent/config.yaml`'s. */
function askedEcosystem(
  d: Drive,
  config: WorkspaceConfig,
): { ecosystem?: Ecosystem } | { problem: string } {
  const asked = requestedImageName(d.events, undefined);
  if (asked === undefined) return config.ecosystemImage;
  const name = asked.input.trim();
  if ((ECOSYSTEMS as readonly string[]).includes(name)) return { ecosystem: name as Ecosystem };
  return ecosystemProblem("CreateRun image", asked.input);
}
