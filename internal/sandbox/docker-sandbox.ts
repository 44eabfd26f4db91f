/**
 * The Sandbox port on the Docker engine (dockerode). One hardened container per run:
 * every sandbox process as user 1000 without capabilities, no-new-privileges, read-only
 * root with a size-limited tmpfs /workspace and a tmpfs /tmp, memory/CPU/pids limits, no
 * network unless asked, an init that reaps zombies, labels agentd.run-id / agentd.tenant.
 * The main process is the agent (agent-channel.ts): the image's own when the operator's
 * image has one, else agentd's, injected read-only from a volume (agent-bundle.ts); it
 * alone runs as root, with CAP_SETUID and CAP_SETGID only, to start every call as user
 * 1000. Without either, the control loop (exec-scripts.ts) as user 1000. Either way the
 * workspace goes in and out through the attached pipe. A run's own image (pulled by
 * image-pull.ts) brings nothing that acts: its agent label, entrypoint, user and
 * healthcheck are ignored, its volumes become tmpfs.
 *
 * Must never: bind-mount a host path, mount the Docker socket, run anything privileged,
 * trust a run's own image to bring the agent, or leave a process running past its timeout.
 */
import { createHash, randomUUID } from "node:crypto";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import { metrics } from "../telemetry/metrics.ts";
import {
  type AgentBundle,
  agentBundle,
  BUNDLE_AGENT,
  BUNDLE_DIR,
  BUNDLE_ENV,
  BUNDLE_TOOL_ENV,
  bundleMount,
  hasBundle,
} from "./agent-bundle.ts";
import { AgentChannel } from "./agent-channel.ts";
import { agentImageLookup, agentPathOf } from "./agent-image.ts";
import { CACHE_DIR, cacheMountSpec } from "./cache-env.ts";
import { ControlChannel } from "./control-channel.ts";
import { DockerSandboxHandle, dockerError, SANDBOX_USER } from "./docker-handle.ts";
import { guardBridge, sweepGuards } from "./egress-guard.ts";
import {
  EGRESS_PORT,
  type EgressNetwork,
  inspectEgressNetwork,
  openEgressNetwork,
  proxyEnv,
  removeEgressNetwork,
} from "./egress-network.ts";
import { CONTROL_LOOP } from "./exec-scripts.ts";
import { isFilled, LABEL_FILL_MARK, MARK_ROOT, markFilled } from "./fill-mark.ts";
import { ensureImage } from "./image-pull.ts";
import type {
  PooledSandbox,
  ReapOptions,
  SandboxHandle,
  SandboxShape,
  SandboxSpec,
  WorkspaceSource,
} from "./port.ts";
import { WORKSPACE } from "./port.ts";
import { createWarmPool, WARM_MAX_AGE_MS, type WarmContainer } from "./warm-pool.ts";
import { packWorkspace } from "./workspace-archive.ts";

export { dockerError } from "./docker-handle.ts";

export const LABEL_RUN = "agentd.run-id";
export const LABEL_TENANT = "agentd.tenant";
export const LABEL_MANAGED = "agentd.managed";
/** On warm containers: the process that keeps them (DockerSandboxOptions.poolOwner). */
export const LABEL_POOL = "agentd.pool";

export interface DockerSandboxOptions {
  docker: Docker;
  /**
   * Value of the agentd.managed label on containers this instance makes and reaps.
   * Default "true"; tests use a unique value so they never touch each other's containers.
   */
  managedLabel?: string;
  /**
   * Started, empty containers kept ready per sandbox shape (image, limits, network, env):
   * a run then only waits for its workspace to be copied in, not for a container to be
   * created and started. Default 0 (every create is cold).
   */
  warm?: number;
  /**
   * Who keeps the warm containers (label agentd.pool), e.g. the worker id; default a
   * random id. Lets an operator (or a test) find the warm containers of one process.
   */
  poolOwner?: string;
  /**
   * Run tool processes through the image's agent when it has one (default true); false
   * uses `docker exec` for every container (a baseline, and the fallback's tests).
   */
  agent?: boolean;
  /**
   * An agentd image (labels org.agentd.sandbox.agent and org.agentd.sandbox.busybox) whose
   * agent and busybox are injected read-only into sandboxes of images without the agent
   * (agent-bundle.ts), e.g. the policy's sandbox.image. Unset, or an image without those
   * labels: such sandboxes run the control loop and `docker exec` (and need a shell).
   */
  agentSource?: () => string | undefined;
  now?: () => number;
}

/** How a sandbox's main process is started: the image's agent, the injected one, or the loop. */
type MainProcess =
  | { kind: "image"; path: string }
  | { kind: "bundle"; volume: string }
  | { kind: "loop" };

/** The Docker adapter: a PooledSandbox (warm containers: warm-pool.ts). */
export type DockerSandbox = PooledSandbox;

/** Default size of /workspace (policy sandbox.workspaceSize). */
export const DEFAULT_WORKSPACE_BYTES = 1024 ** 3;
const CONTROL_CMD = ["sh", "-c", CONTROL_LOOP];
/** Set on a sandbox whose agent was injected (agent-bundle.ts); informational. */
export const LABEL_AGENT = "agentd.agent";

/**
 * The /workspace tmpfs of a shape. A tmpfs, not a volume: the kernel enforces its size (a
 * write past it fails with ENOSPC inside the container) on any engine; Docker's volume
 * quotas need XFS project quotas under the engine's data root, which most hosts (and this
 * project's CI) do not have. Its pages count toward the container's memory cgroup, so the
 * memory limit is sandbox.memory + sandbox.workspaceSize. Inodes are capped too (one per
 * 4 KiB of size, at least 16,384): millions of empty files are a bomb of their own.
 * `exec` because Docker mounts tmpfs noexec by default, and a workspace holds scripts.
 */
export function workspaceMount(shape: SandboxShape): {
  size: number;
  inodes: number;
  spec: string;
} {
  const size = Math.floor(shape.limits.workspaceBytes ?? DEFAULT_WORKSPACE_BYTES);
  const inodes = Math.max(16_384, Math.floor(size / 4096));
  return {
    size,
    inodes,
    spec: `rw,exec,nosuid,nodev,size=${size},nr_inodes=${inodes},uid=1000,gid=1000,mode=0755`,
  };
}

/**
 * The most bytes a tar of a workspace can have: its content, plus per inode a pax header
 * with two blocks of records (its mtime, a long name), the entry's own header and 511 bytes
 * of padding, plus the end blocks. An export past it is not a tar of this workspace.
 */
export function maxExportBytes(size: number, inodes: number): number {
  return size + inodes * 2560 + 64 * 1024;
}

/**
 * A run's container is named `agentd-<managed key>.<run id>` (run ids have no dots): find()
 * is one lookup, and a warm container, created before its run was known (labels cannot be
 * changed), becomes the run's by a rename. Warm containers are `agentd-<key>.pool.<id>`.
 */
export function containerName(managed: string, runId: string): string {
  return `${namePrefix(managed)}${runId}`;
}

/** A run's egress network: `agentd-<managed key>.net.<run id>`. */
export function networkName(managed: string, runId: string): string {
  return `${namePrefix(managed)}net.${runId}`;
}

function namePrefix(managed: string): string {
  return `agentd-${createHash("sha256").update(managed).digest("hex").slice(0, 8)}.`;
}

export function createDockerSandbox(opts: DockerSandboxOptions): DockerSandbox {
  const docker = opts.docker;
  const managed = opts.managedLabel ?? "true";
  const prefix = namePrefix(managed);
  const poolOwner = opts.poolOwner ?? randomUUID();
  const now = opts.now ?? Date.now;
  const agentOf = agentImageLookup(docker, now);
  const useAgent = opts.agent ?? true;
  const bundle: AgentBundle = agentBundle(docker, opts.agentSource ?? (() => undefined), now);

  /**
   * The image's own agent, only for the operator's images: a run's own image could name
   * any binary of its own in the label, to run as root. Else the injected one, else the loop.
   */
  async function mainOf(shape: SandboxShape): Promise<MainProcess> {
    if (!useAgent) return { kind: "loop" };
    const path = shape.userImage === true ? undefined : await agentOf(shape.image);
    if (path !== undefined) return { kind: "image", path };
    const volume = await bundle.volume();
    return volume === undefined ? { kind: "loop" } : { kind: "bundle", volume };
  }

  function containerOptions(
    shape: SandboxShape,
    name: string,
    labels: Record<string, string>,
    egress: EgressNetwork | undefined,
    main: MainProcess,
    imageVolumes: readonly string[] = [],
  ): Docker.ContainerCreateOptions {
    const agent =
      main.kind === "image" ? main.path : main.kind === "bundle" ? BUNDLE_AGENT : undefined;
    const vars = { HOME: "/tmp", ...shape.env, ...(egress ? proxyEnv(egress.gateway) : {}) };
    const env = Object.entries(vars).map(([k, v]) => `${k}=${v}`);
    const ws = workspaceMount(shape);
    const cache = Math.floor(shape.limits.cacheBytes ?? 0);
    return {
      name,
      Image: shape.image,
      // The agent starts as root to drop every call to user 1000 (agent.c); nothing else
      // in the container is root. An entrypoint, so an image's own ENTRYPOINT never wraps it.
      Entrypoint: agent === undefined ? CONTROL_CMD : [agent],
      Cmd: [],
      User: agent === undefined ? SANDBOX_USER : "0:0",
      WorkingDir: WORKSPACE,
      Env: env,
      Labels: {
        ...labels,
        [LABEL_MANAGED]: managed,
        [LABEL_FILL_MARK]: MARK_ROOT,
        ...(main.kind === "bundle" ? { [LABEL_AGENT]: "injected" } : {}),
      },
      NetworkDisabled: shape.network === "none",
      ...(egress === undefined
        ? {}
        : { NetworkingConfig: { EndpointsConfig: { [egress.name]: {} } } }),
      // An image's HEALTHCHECK would be run by the engine as the container's user: root here.
      Healthcheck: { Test: ["NONE"] },
      OpenStdin: true,
      StdinOnce: true,
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      HostConfig: {
        NetworkMode: egress?.name ?? (shape.network === "none" ? "none" : "bridge"),
        CapDrop: ["ALL"],
        ...(agent === undefined ? {} : { CapAdd: ["CAP_SETUID", "CAP_SETGID"] }),
        // The injected agent and busybox: a named volume, read-only (never a host path).
        ...(main.kind === "bundle" ? { Mounts: [bundleMount(main.volume)] } : {}),
        SecurityOpt: ["no-new-privileges"],
        ReadonlyRootfs: true,
        Tmpfs: {
          // Paths the image declares as VOLUMEs would be anonymous volumes on the host's
          // disk, outside every limit: each gets a tmpfs of /tmp's size instead.
          ...Object.fromEntries(
            imageVolumes.map((v) => [
              v,
              `rw,nosuid,nodev,size=${Math.floor(shape.limits.tmpBytes)},uid=1000,gid=1000,mode=0755`,
            ]),
          ),
          [WORKSPACE]: ws.spec,
          // exec, like /workspace: toolchains run what they build there (go test's
          // binaries in GOTMPDIR, Gradle's native libraries in its user home under
          // /tmp/.cache, node-gyp and pip build scripts); Docker's default is noexec.
          "/tmp": `rw,exec,nosuid,nodev,size=${Math.floor(shape.limits.tmpBytes)},mode=1777`,
          ...(cache > 0 ? { [CACHE_DIR]: cacheMountSpec(cache) } : {}),
        },
        // The workspace and cache tmpfs are charged to this cgroup: processes keep
        // sandbox.memory.
        Memory: Math.floor(shape.limits.memoryBytes) + ws.size + cache,
        MemorySwap: Math.floor(shape.limits.memoryBytes) + ws.size + cache,
        NanoCpus: Math.floor(shape.limits.cpus * 1e9),
        PidsLimit: shape.limits.pids,
        Init: true,
        Privileged: false,
        IpcMode: "private",
        // Nothing a sandbox prints to its main process's stdout or stderr (exports among
        // it) is kept on the host's disk.
        LogConfig: { Type: "none", Config: {} },
      },
    };
  }

  /** Creates and starts a container of `shape` with its control channel. */
  async function start(
    shape: SandboxShape,
    name: string,
    labels: Record<string, string>,
    egress?: EgressNetwork,
  ): Promise<WarmContainer> {
    const main = await mainOf(shape);
    const volumes = shape.userImage === true ? await declaredVolumes(docker, shape.image) : [];
    let c: Docker.Container;
    try {
      c = await docker.createContainer(
        containerOptions(shape, name, labels, egress, main, volumes),
      );
    } catch (err) {
      throw dockerError(err, "create a sandbox", shape.image);
    }
    try {
      if (main.kind === "loop") return await ControlChannel.start(c, now());
      const channel = await AgentChannel.start(
        c,
        now(),
        main.kind === "bundle" ? BUNDLE_ENV : undefined,
      );
      await channel.ready();
      return channel;
    } catch (err) {
      await c.remove({ force: true, v: true }).catch(() => undefined);
      if (main.kind === "bundle") bundle.forget(main.volume);
      throw dockerError(
        err,
        main.kind === "loop" && shape.userImage === true
          ? "start a sandbox of a run's own image without agentd's agent (it then needs sh and tar; none could be injected: the worker's policy image lacks the org.agentd.sandbox.busybox label, see make images)"
          : "start a sandbox",
        shape.image,
      );
    }
  }

  const egressOf = (info: Docker.ContainerInspectInfo) => egressOfContainer(docker, prefix, info);

  /** Egress networks of runs no longer live (their container already gone), and stale rules. */
  async function reapNetworks(isLive: (runId: string) => Promise<boolean> | boolean) {
    const nets = await docker.listNetworks({
      filters: { label: [`${LABEL_MANAGED}=${managed}`] },
    });
    for (const n of nets) {
      const runId = n.Labels?.[LABEL_RUN];
      if (!n.Name.startsWith(`${prefix}net.`) || runId === undefined || (await isLive(runId)))
        continue;
      await removeEgressNetwork(docker, n.Name).catch(() => undefined);
    }
    await sweepGuards();
  }

  const pool = createWarmPool({
    target: opts.warm ?? 0,
    now,
    make: (shape) => start(shape, `${prefix}pool.${randomUUID()}`, { [LABEL_POOL]: poolOwner }),
  });

  const handle = (
    container: Docker.Container,
    runId: string,
    shape: SandboxShape | undefined,
    extra: {
      channel?: WarmContainer;
      baseTar?: Uint8Array;
      tmpfs?: string;
      egress?: EgressNetwork;
      agentPath?: string;
      ownEnv?: Readonly<Record<string, string>>;
      toolEnv?: Readonly<Record<string, string>>;
      startedAt?: string;
    },
  ): DockerSandboxHandle => {
    const ws = shape !== undefined ? workspaceMount(shape) : mountOfSpec(extra.tmpfs ?? "");
    const net = extra.egress;
    // A channel to an injected agent runs agentd's own calls with the bundle's PATH.
    const injected =
      extra.channel instanceof AgentChannel && extra.channel.ownEnv.PATH === BUNDLE_ENV.PATH;
    const toolEnv = extra.toolEnv ?? (injected ? BUNDLE_TOOL_ENV : undefined);
    return new DockerSandboxHandle(container, runId, {
      maxExportBytes: maxExportBytes(ws.size, ws.inodes),
      ...(extra.channel === undefined ? {} : { channel: extra.channel }),
      ...(extra.agentPath === undefined ? {} : { agentPath: extra.agentPath }),
      ...(extra.ownEnv === undefined ? {} : { ownEnv: extra.ownEnv }),
      ...(toolEnv === undefined ? {} : { toolEnv }),
      ...(extra.baseTar === undefined ? {} : { baseTar: extra.baseTar }),
      ...(extra.startedAt === undefined ? {} : { startedAt: extra.startedAt }),
      ...(net === undefined
        ? {}
        : {
            egress: { host: net.gateway, port: EGRESS_PORT },
            afterDestroy: () => removeEgressNetwork(docker, net.name),
          }),
    });
  };

  /** A run's container on its own egress network (never warm: the network is the run's). */
  async function createEgress(spec: SandboxSpec, source: WorkspaceSource, baseTar?: Uint8Array) {
    const labels = { [LABEL_RUN]: spec.runId, [LABEL_TENANT]: spec.tenantId };
    const netName = networkName(managed, spec.runId);
    const net = await openEgressNetwork(docker, netName, { ...labels, [LABEL_MANAGED]: managed });
    let channel: WarmContainer;
    try {
      channel = await start(spec, containerName(managed, spec.runId), labels, net);
    } catch (err) {
      await removeEgressNetwork(docker, netName).catch(() => undefined);
      throw err;
    }
    try {
      const boot = await bootOf(channel.container);
      await channel.unpack(source);
      return await filled(
        boot,
        handle(channel.container, spec.runId, spec, {
          channel,
          egress: net,
          ...(baseTar === undefined ? {} : { baseTar }),
        }),
      );
    } catch (err) {
      await channel.discard();
      await removeEgressNetwork(docker, netName).catch(() => undefined);
      throw dockerError(err, `fill the sandbox of run ${spec.runId}`);
    }
  }

  /**
   * A handle whose workspace is complete: marked filled (fill-mark.ts) and knowing when its
   * container started (`boot`, read before the fill), so that a restart since is seen as a
   * loss (DockerSandboxHandle.lost); one restarted during the fill is refused.
   */
  async function filled(boot: string, h: DockerSandboxHandle): Promise<DockerSandboxHandle> {
    await markFilled(h);
    if ((await bootOf(docker.getContainer(h.id))) !== boot)
      throw new AgentdError("EIO", `the sandbox of run ${h.runId} restarted while it was filled`);
    h.startedAt = boot;
    return h;
  }

  /** When the engine last started the container. */
  async function bootOf(c: Docker.Container): Promise<string> {
    return (await c.inspect()).State.StartedAt;
  }

  return {
    async create(spec: SandboxSpec): Promise<SandboxHandle> {
      const t0 = performance.now();
      const took = (start: "warm" | "cold"): void =>
        metrics.sandboxCreate.observe({ start }, (performance.now() - t0) / 1000);
      const { source, baseTar } = await workspaceOf(spec);
      if (spec.network === "egress") {
        const h = await createEgress(spec, source, baseTar);
        took("cold");
        return h;
      }
      // A run's own image is never warm (nor kept warm: the pool is the policy's shape).
      const warm = spec.userImage === true ? undefined : pool.take(spec);
      if (warm !== undefined) {
        try {
          // The workspace streams in through the main process's stdin; the rename makes the
          // container the run's (find, reap) only once the workspace is complete: a worker
          // dying mid-unpack leaves an abandoned warm container (reaped), never a run's
          // container with half a workspace that a taker would go on with.
          const boot = await bootOf(warm.container);
          await warm.unpack(source);
          const h = await filled(
            boot,
            handle(warm.container, spec.runId, spec, { channel: warm, baseTar }),
          );
          await warm.container.rename({ name: containerName(managed, spec.runId) });
          took("warm");
          return h;
        } catch {
          // Gone meanwhile (removed by hand, engine restarted) or the unpack failed.
          await warm.discard();
        }
      }
      const channel = await start(spec, containerName(managed, spec.runId), {
        [LABEL_RUN]: spec.runId,
        [LABEL_TENANT]: spec.tenantId,
      });
      try {
        const boot = await bootOf(channel.container);
        await channel.unpack(source);
        const h = await filled(
          boot,
          handle(channel.container, spec.runId, spec, { channel, baseTar }),
        );
        took("cold");
        return h;
      } catch (err) {
        await channel.discard();
        throw dockerError(err, `fill the sandbox of run ${spec.runId}`);
      }
    },

    async hasImage(image: string): Promise<boolean> {
      try {
        await docker.getImage(image).inspect();
        return true;
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return false;
        throw dockerError(err, `look up the sandbox image ${image}`);
      }
    },

    async imageId(image: string): Promise<string | undefined> {
      try {
        return (await docker.getImage(image).inspect()).Id;
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return undefined;
        throw dockerError(err, `look up the sandbox image ${image}`);
      }
    },

    async find(runId: string): Promise<SandboxHandle | undefined> {
      const c = docker.getContainer(containerName(managed, runId));
      let info: Docker.ContainerInspectInfo;
      try {
        info = await c.inspect();
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return undefined;
        throw dockerError(err, `find the sandbox of run ${runId}`);
      }
      if (info.Config.Labels[LABEL_MANAGED] !== managed) return undefined;
      if (!info.State.Running) {
        // Stopped (the engine restarted, its main process died): its /workspace was a tmpfs
        // and is gone with it. The caller owns the run and starts over from the last snapshot.
        await c.remove({ force: true, v: true }).catch(() => undefined);
        return undefined;
      }
      const tmpfs = (info.HostConfig as { Tmpfs?: Record<string, string> }).Tmpfs?.[WORKSPACE];
      const egress = await egressOf(info);
      // Its agent was the previous owner's (its pipe closed with it): a found container
      // gets an agent of its own through one `docker exec`, when it runs one (it runs as
      // root only if its main process is the agent): the injected one when the bundle is
      // mounted (the image's labels are then not looked at), else the image's label's.
      const injected = hasBundle(info);
      const agentPath =
        !useAgent || info.Config.User !== "0:0"
          ? undefined
          : injected
            ? BUNDLE_AGENT
            : agentPathOf(info.Config.Labels);
      const h = handle(docker.getContainer(info.Id), runId, undefined, {
        tmpfs: tmpfs ?? "",
        startedAt: info.State.StartedAt,
        ...(egress === undefined ? {} : { egress }),
        ...(agentPath === undefined ? {} : { agentPath }),
        ...(injected ? { ownEnv: BUNDLE_ENV, toolEnv: BUNDLE_TOOL_ENV } : {}),
      });
      // Restarted since its fill (its tmpfs empty again), or named before the fill ended:
      // no workspace of the run's. The caller starts over from the last snapshot.
      const fillLabel = info.Config.Labels[LABEL_FILL_MARK];
      if (fillLabel !== undefined && !(await isFilled(h, fillLabel))) {
        await h.destroy().catch(() => undefined);
        return undefined;
      }
      return h;
    },

    async reap(isLive, reapOpts = {}): Promise<string[]> {
      const list = await docker.listContainers({
        all: true,
        filters: { label: [`${LABEL_MANAGED}=${managed}`] },
      });
      const reaped: string[] = [];
      const remove = (id: string, what: string) =>
        docker
          .getContainer(id)
          .remove({ force: true, v: true })
          .catch((err: { statusCode?: number }) => {
            if (err.statusCode !== 404) throw dockerError(err, `remove ${what}`);
          });
      for (const c of list) {
        const name = (c.Names[0] ?? "").replace(/^\//, "");
        const rest = name.startsWith(prefix) ? name.slice(prefix.length) : undefined;
        if (c.Labels[LABEL_POOL] !== undefined && rest?.startsWith("pool.")) {
          // Another process's warm container that exited (its keeper went before handing it
          // out: stdin closed), is too old to be handed out, or whose keeper is known dead
          // (its presence beats stopped: a SIGKILLed worker's pool stays running otherwise).
          // One just created and not started yet is left alone while its keeper lives.
          if (pool.owns(c.Id)) continue;
          const exited = c.State === "exited" || c.State === "dead";
          const old = now() - c.Created * 1000 > 2 * WARM_MAX_AGE_MS;
          const owner = c.Labels[LABEL_POOL] ?? "";
          if (exited || old || (await ownerDead(reapOpts, owner)))
            await remove(c.Id, "an abandoned warm sandbox");
          continue;
        }
        const runId = c.Labels[LABEL_RUN] ?? rest;
        if (runId === undefined || (await isLive(runId))) continue;
        await remove(c.Id, `the sandbox of run ${runId}`).then(() => reaped.push(runId));
      }
      await reapNetworks(isLive);
      return reaped;
    },

    prepareImage: (ref, o) => ensureImage(docker, ref, o),

    prewarm: (shape) => (shape.network === "egress" ? Promise.resolve() : pool.fill(shape)),
    close: () => pool.close(),
  };
}

/** Most VOLUMEs a run's own image may declare. */
const MAX_IMAGE_VOLUMES = 32;

/** The VOLUME paths an image declares, but those agentd mounts itself. */
async function declaredVolumes(docker: Docker, image: string): Promise<string[]> {
  let info: Docker.ImageInspectInfo;
  try {
    info = await docker.getImage(image).inspect();
  } catch (err) {
    throw dockerError(err, "inspect a sandbox image", image);
  }
  const paths = Object.keys(info.Config?.Volumes ?? {})
    .map((p) => p.replace(/\/+$/, ""))
    .filter((p) => p !== "" && p !== WORKSPACE && p !== "/tmp" && p !== BUNDLE_DIR);
  if (
    paths.length > MAX_IMAGE_VOLUMES ||
    paths.some((p) => !/^\/[\w.@+-]+(\/[\w.@+-]+)*$/.test(p) || p.split("/").includes(".."))
  )
    throw new AgentdError(
      "EVALIDATION",
      `image ${image} declares volumes agentd cannot replace (at most ${MAX_IMAGE_VOLUMES} plain absolute paths)`,
    );
  return paths;
}

/** The egress network of a run's container, if it is on one (its firewall put back in place). */
async function egressOfContainer(
  docker: Docker,
  prefix: string,
  info: Docker.ContainerInspectInfo,
): Promise<EgressNetwork | undefined> {
  const mode = info.HostConfig.NetworkMode ?? "";
  if (!mode.startsWith(`${prefix}net.`)) return undefined;
  const net = await inspectEgressNetwork(docker, mode);
  if (net === undefined) return undefined;
  await guardBridge({ bridge: net.bridge, gateway: net.gateway, port: EGRESS_PORT });
  return net;
}

/** The workspace to stream in, and the archive a later diff compares against (when in memory). */
export async function workspaceOf(
  spec: SandboxSpec,
): Promise<{ source: WorkspaceSource; baseTar?: Uint8Array }> {
  if (spec.workspace !== undefined) return { source: spec.workspace };
  // An empty workspace is an empty archive (tar refuses zero bytes).
  const tar =
    spec.workspaceTar !== undefined && spec.workspaceTar.byteLength > 0
      ? spec.workspaceTar
      : await packWorkspace([]);
  return {
    source: {
      size: tar.byteLength,
      open: async function* () {
        yield tar;
      },
    },
    baseTar: tar,
  };
}

/** size= and nr_inodes= of a tmpfs option string (a found container's /workspace). */
function mountOfSpec(spec: string): { size: number; inodes: number } {
  const opt = (k: string): number | undefined => {
    const m = new RegExp(`(?:^|,)${k}=(\\d+)`).exec(spec);
    return m === null ? undefined : Number(m[1]);
  };
  const size = opt("size") ?? DEFAULT_WORKSPACE_BYTES;
  return { size, inodes: opt("nr_inodes") ?? Math.max(16_384, Math.floor(size / 4096)) };
}

/** The reaper's question about a warm container's keeper; a failed answer is "not dead". */
async function ownerDead(opts: ReapOptions, owner: string): Promise<boolean> {
  if (opts.poolOwnerDead === undefined || owner === "") return false;
  return opts.poolOwnerDead(owner).catch(() => false);
}
