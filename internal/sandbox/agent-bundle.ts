/**
 * agentd's agent for images that do not carry it (a run's own image, an operator's image
 * without the label): a Docker volume `agentd-agent-<hash of the source image>` holding the
 * static agent and a static busybox, filled once from an agentd image (the labels
 * org.agentd.sandbox.agent and org.agentd.sandbox.busybox name where they are) and mounted
 * read-only at /.agentd in the sandbox. The agent is then the container's main process in
 * any image, even one without a shell, tar or an /etc/passwd: agentd's own calls (the
 * workspace in and out, the OOM counter) run busybox's sh and tar from /.agentd/bin.
 *
 * Filling: a short-lived container of the source image (no network, no capabilities, its
 * root read-only) copies the two binaries into a staging folder of the volume and renames
 * them into place, then writes `.complete`; fillers racing in several processes write the
 * same bytes, and a rename never shows a half-written file to a sandbox already using it.
 *
 * Must never: mount the volume writable into a sandbox, take the binaries from the run's
 * own image (its labels are not trusted), or run the filler with a network.
 */
import { createHash, randomUUID } from "node:crypto";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import { AGENT_LABEL, agentPathOf } from "./agent-image.ts";

/** Where the volume is mounted in a sandbox. */
export const BUNDLE_DIR = "/.agentd";
/** The agent, as the container's main process. */
export const BUNDLE_AGENT = `${BUNDLE_DIR}/agent`;
/** busybox applets for agentd's own calls (PATH of those calls). */
export const BUNDLE_BIN = `${BUNDLE_DIR}/bin`;
/** The label naming a static busybox in an agentd image (scripts/build-images.sh). */
export const BUSYBOX_LABEL = "org.agentd.sandbox.busybox";
/** Volume names start with this (find() recognises an injected agent by it). */
export const BUNDLE_VOLUME_PREFIX = "agentd-agent-";
const FILL_AT = "/.agentd-fill";
const FILL_TIMEOUT_MS = 60_000;
const TTL_MS = 60_000;

/** The environment of agentd's own calls in a sandbox whose agent was injected. */
export const BUNDLE_ENV: Readonly<Record<string, string>> = { PATH: BUNDLE_BIN };

/**
 * The environment of the tools' own helper scripts (repo.read, repo.search, repo.patch:
 * tools/sandbox-script.ts) in such a sandbox: busybox's applets first, then the usual
 * places (ripgrep, for one, is the image's). The model's commands keep the image's PATH.
 */
export const BUNDLE_TOOL_ENV: Readonly<Record<string, string>> = {
  PATH: `${BUNDLE_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
};

export interface AgentBundle {
  /** The volume to mount, or undefined when no agentd image to fill it from is known. */
  volume(): Promise<string | undefined>;
  /**
   * A sandbox with `volume` did not start: it may have been removed behind this process's
   * back (the engine then makes an empty one). The next volume() checks and fills it again.
   */
  forget(volume: string): void;
}

/**
 * The bundle of `source()` (an image reference; e.g. the policy's sandbox.image). One
 * inspect per minute; the volume is filled at most once per source image and process.
 */
export function agentBundle(
  docker: Docker,
  source: () => string | undefined,
  now: () => number = Date.now,
): AgentBundle {
  let looked: { at: number; image: string; id: Promise<string | undefined> } | undefined;
  const filled = new Map<string, Promise<string>>();
  const volume = async (): Promise<string | undefined> => {
    const image = source();
    if (image === undefined) return undefined;
    if (looked === undefined || looked.image !== image || now() - looked.at >= TTL_MS)
      looked = { at: now(), image, id: sourceOf(docker, image) };
    const src = await looked.id;
    if (src === undefined) return undefined;
    const [id, agent, busybox] = src.split("\n") as [string, string, string];
    const ensure = (): Promise<string> => {
      let filling = filled.get(id);
      if (filling === undefined) {
        filling = fill(docker, id, agent, busybox);
        filled.set(id, filling);
        filling.catch(() => filled.delete(id));
      }
      return filling;
    };
    const name = await ensure();
    // Removed behind this process's back (docker volume rm, a prune): the engine would make
    // an empty one at the container's create. One inspect per sandbox of such an image.
    const there = await docker
      .getVolume(name)
      .inspect()
      .then(
        () => true,
        (err: { statusCode?: number }) => err.statusCode !== 404,
      );
    if (there) return name;
    forget(name);
    filled.delete(id);
    return ensure();
  };
  function forget(name: string): void {
    for (const [id, p] of filled)
      void p.then(
        (v) => v === name && filled.get(id) === p && filled.delete(id),
        () => undefined,
      );
  }
  return { volume, forget };
}

/** "id\nagent\nbusybox" of an agentd image with both labels, else undefined. */
async function sourceOf(docker: Docker, image: string): Promise<string | undefined> {
  try {
    const info = await docker.getImage(image).inspect();
    const labels = info.Config?.Labels ?? {};
    const agent = agentPathOf(labels);
    const busybox = agentPathOf({ [AGENT_LABEL]: labels[BUSYBOX_LABEL] ?? "" });
    return agent === undefined || busybox === undefined
      ? undefined
      : `${info.Id}\n${agent}\n${busybox}`;
  } catch {
    return undefined;
  }
}

/**
 * The volume's name for a source image id: a hash of the id and of the fill script, so a
 * volume filled by an older layout is never taken for a complete one of this layout.
 */
export function bundleVolume(imageId: string): string {
  const h = createHash("sha256").update(imageId).update("\0").update(FILL_SCRIPT);
  return `${BUNDLE_VOLUME_PREFIX}${h.digest("hex").slice(0, 12)}`;
}

/** Copies, renames into place, marks complete; a complete volume is left as it is. */
const FILL_SCRIPT = `set -e
d=${FILL_AT}; t="$d/.fill-$3"
[ -f "$d/.complete" ] && exit 0
rm -rf "$t"; mkdir -p "$t/bin" "$d/bin"
cp "$1" "$t/agent"; cp "$2" "$t/busybox"; chmod 0555 "$t/agent" "$t/busybox"
for a in $("$t/busybox" --list); do ln -s ../busybox "$t/bin/$a"; done
mv -f "$t/agent" "$d/agent"; mv -f "$t/busybox" "$d/busybox"
for a in $("$t/busybox" --list 2>/dev/null || "$d/busybox" --list); do mv -f "$t/bin/$a" "$d/bin/$a"; done
rm -rf "$t"; : > "$d/.complete"`;

async function fill(docker: Docker, id: string, agent: string, busybox: string): Promise<string> {
  const volume = bundleVolume(id);
  const doing = `fill the agent volume ${volume}`;
  try {
    await docker.createVolume({ Name: volume, Labels: { "agentd.agent-bundle": id } });
    const c = await docker.createContainer({
      name: `${volume}.fill.${randomUUID().slice(0, 8)}`,
      Image: id,
      Entrypoint: [busybox],
      Cmd: ["sh", "-c", FILL_SCRIPT, "agentd-fill", agent, busybox, randomUUID()],
      User: "0:0",
      NetworkDisabled: true,
      Labels: { "agentd.agent-bundle": id },
      HostConfig: {
        NetworkMode: "none",
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges"],
        ReadonlyRootfs: true,
        Mounts: [{ Type: "volume", Source: volume, Target: FILL_AT }],
      },
    });
    try {
      await c.start();
      const waited = await Promise.race([
        c.wait() as Promise<{ StatusCode: number }>,
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error(`no answer within ${FILL_TIMEOUT_MS} ms`)),
            FILL_TIMEOUT_MS,
          ).unref(),
        ),
      ]);
      if (waited.StatusCode !== 0) {
        const logs = await c.logs({ stdout: true, stderr: true }).catch(() => Buffer.alloc(0));
        throw new Error(
          `the filler exited ${waited.StatusCode}: ${logs
            .toString("utf8")
            .replace(/[^\x20-\x7e\n]/g, "")
            .trim()
            .slice(0, 300)}`,
        );
      }
    } finally {
      await c.remove({ force: true }).catch(() => undefined);
    }
  } catch (err) {
    throw new AgentdError("EIO", `cannot ${doing}: ${(err as Error).message}`, { cause: err });
  }
  return volume;
}

/** The mount of the bundle in a sandbox: read-only, never filled from the run's image. */
export function bundleMount(volume: string): Docker.MountSettings {
  return {
    Type: "volume",
    Source: volume,
    Target: BUNDLE_DIR,
    ReadOnly: true,
    // dockerode's typings want every volume option; the engine takes NoCopy alone.
    VolumeOptions: { NoCopy: true } as Docker.MountSettings["VolumeOptions"],
  };
}

/** Whether a container (inspected) has the bundle mounted: its main process is our agent. */
export function hasBundle(info: Docker.ContainerInspectInfo): boolean {
  return (info.Mounts ?? []).some(
    (m) =>
      m.Destination === BUNDLE_DIR &&
      m.Type === "volume" &&
      (m.Name ?? "").startsWith(BUNDLE_VOLUME_PREFIX) &&
      m.RW === false,
  );
}
