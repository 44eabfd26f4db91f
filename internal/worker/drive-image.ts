/**
 * The image of a drive's new container when the run named one of its own (requested-
 * image.ts): checked against the worker's policy, pulled when the engine lacks it (with
 * the registry's credentials from policy sandbox.registryAuth, resolved from the worker's
 * secret providers and added to the run's secrets so no event can carry them), its
 * progress appended as `image.pull` events, pinned: a later drive (after a pause, a
 * takeover that found no container) makes its container from the digest the first one
 * recorded in `run.started`, not from a tag that may have moved.
 *
 * Must never: create a container of a refused image, put a registry credential in an
 * event, or let a drive run in another image than the one `run.started` names.
 */
import { create } from "@bufbuild/protobuf";
import { AgentdError } from "../errors.ts";
import { ImagePullSchema } from "../gen/agentd/v1/events_pb.js";
import { lookupSecret } from "../kernel/run-secrets.ts";
import {
  ImagePullError,
  type PullReport,
  type RegistryCredentials,
} from "../sandbox/image-pull.ts";
import type { ImageReference } from "../sandbox/image-reference.ts";
import type { Drive } from "./drive.ts";
import { checkRequestedImage, requestedImage } from "./requested-image.ts";

/** The run failed this way when its image could not be pulled. */
export const IMAGE_PULL_FAILED = "EIMAGE_PULL";

/** What run.started records about the image. */
export interface StartedImage {
  image: string;
  imageDigest: string;
  imageSource: "pulled" | "local";
}

export type RunImage =
  | { image: string; started: StartedImage }
  | { fail: { code: string; message: string } };

/** The run's own image for a new container, or undefined when it named none (the policy's). */
export async function runImage(d: Drive, configImage?: string): Promise<RunImage | undefined> {
  const req = requestedImage(d.events, configImage);
  if (req === undefined) return undefined;
  const check = checkRequestedImage(req, d.deps.policy());
  if (!check.ok) return { fail: { code: check.code, message: check.message } };
  const sandbox = d.deps.sandbox;
  if (sandbox.prepareImage === undefined)
    return {
      fail: {
        code: IMAGE_PULL_FAILED,
        message: `image ${check.ref.normalised}: this worker's sandbox cannot run images of a run's own`,
      },
    };
  const ref = check.ref;
  const pin = pinned(d, ref);
  let auth: RegistryCredentials | undefined;
  try {
    auth = await credentialsFor(d, ref.registry);
  } catch (err) {
    if (err instanceof AgentdError && err.code === "ESECRET_NOT_FOUND")
      return { fail: { code: err.code, message: err.message } };
    throw err;
  }
  let chain: Promise<unknown> = Promise.resolve();
  try {
    const got = await sandbox.prepareImage(ref, {
      ...(auth === undefined ? {} : { auth }),
      ...(pin === undefined ? {} : { pin }),
      // In order, one after the other: the log's order is the pull's.
      onReport: (r) => {
        chain = chain.then(() => appendReport(d, ref.normalised, r));
      },
      signal: d.cancel.signal,
    });
    await chain;
    return {
      image: got.id,
      started: { image: check.ref.normalised, imageDigest: got.digest, imageSource: got.source },
    };
  } catch (err) {
    await chain.catch(() => undefined);
    if (err instanceof ImagePullError)
      return { fail: { code: IMAGE_PULL_FAILED, message: err.message } };
    throw err;
  }
}

/** The digest an earlier drive recorded in run.started for the same image, if any. */
function pinned(d: Drive, ref: ImageReference): string | undefined {
  for (const e of d.events) {
    const p = e.payload;
    if (p.case === "runStarted" && p.value.image === ref.normalised && p.value.imageDigest !== "")
      return p.value.imageDigest;
  }
  return undefined;
}

/** The policy's credentials for `registry`, the password resolved now. */
async function credentialsFor(
  d: Drive,
  registry: string,
): Promise<RegistryCredentials | undefined> {
  const entry = d.deps.policy().sandbox.registryAuth.find((a) => a.registry === registry);
  if (entry === undefined) return undefined;
  const name = entry.password.slice("$ENV.".length);
  const value = await lookupSecret(d.deps.secretProviders ?? [], name);
  if (value === undefined)
    throw new AgentdError(
      "ESECRET_NOT_FOUND",
      `sandbox.registryAuth for ${registry} names $ENV.${name}, which no secret provider of worker ${d.deps.workerId} has`,
    );
  // Never in an event, whatever the engine echoes.
  d.writer.secrets.add([value]);
  return { username: entry.username, password: value };
}

function appendReport(d: Drive, image: string, r: PullReport): Promise<unknown> {
  return d.writer.append({
    case: "imagePull",
    value: create(ImagePullSchema, {
      image,
      phase: r.phase,
      bytesDone: BigInt(Math.max(0, Math.floor(r.bytesDone))),
      bytesTotal: BigInt(Math.max(0, Math.floor(r.bytesTotal))),
      layersDone: r.layersDone,
      layersTotal: r.layersTotal,
      digest: r.digest ?? "",
      reason: r.reason ?? "",
      message: (r.message ?? "").slice(0, 1000),
    }),
  });
}
