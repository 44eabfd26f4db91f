/**
 * Sandbox: where every effect of a run happens. One isolated container per run; the
 * workspace goes in as an archive (never a writable bind mount of a host path) and comes
 * out as an archive or a diff. Exec streams output, enforces a timeout on the whole
 * process group and caps output. Nothing here decides *whether* to run something: that is
 * the kernel's job; the sandbox only makes sure an effect stays inside.
 */

import type { EnsuredImage, EnsureImageOptions } from "./image-pull.ts";
import type { ImageReference } from "./image-reference.ts";
import type { WorkspaceDiffResult as WorkspaceDiff } from "./workspace-diff.ts";

/** Resources and reach of a sandbox. */
export interface SandboxLimits {
  /** Memory limit in bytes (no swap on top). */
  memoryBytes: number;
  /** CPU limit in cores (fractions allowed). */
  cpus: number;
  /** Maximum processes and threads. */
  pids: number;
  /** Size of the /tmp tmpfs in bytes. */
  tmpBytes: number;
  /**
   * Size of /workspace in bytes (policy sandbox.workspaceSize): a write past it fails in the
   * container with ENOSPC. Default 1 GiB.
   */
  workspaceBytes?: number;
  /**
   * Size of the dependency cache tmpfs /cache in bytes (policy sandbox.cacheSize,
   * cache-env.ts); 0 or absent: no /cache. Counted into the memory limit like /workspace.
   */
  cacheBytes?: number;
}

/** A workspace archive (the normalised tar) that can be streamed, with its exact size. */
export interface WorkspaceSource {
  size: number;
  open(): AsyncIterable<Uint8Array>;
}

export interface SandboxSpec {
  runId: string;
  tenantId: string;
  /** Image reference, e.g. "agentd-sandbox-base:latest". */
  image: string;
  limits: SandboxLimits;
  /**
   * "none" (default): no network at all. "bridge": the engine's default network (tests
   * only). "egress": the run's own internal network whose only way out is agentd's egress
   * proxy on its gateway (handle.egress), with the proxy variables set.
   */
  network: "none" | "bridge" | "egress";
  /** The normalised workspace tar (see workspace-archive.ts); empty workspace when absent. */
  workspaceTar?: Uint8Array;
  /** The same, streamed (a snapshot from the artifact store); wins over workspaceTar. */
  workspace?: WorkspaceSource;
  /** Extra environment for every exec. */
  env?: Record<string, string>;
  /**
   * The image is the run's own (CreateRun, .agent/config.yaml), not the operator's: its
   * labels are not trusted (an agent label could name any binary to run as root), so
   * agentd's own agent is injected (agent-bundle.ts). Never from a warm container.
   */
  userImage?: boolean;
}

/** The shape of a sandbox without its run: what a policy asks for, a warm container is made for. */
export type SandboxShape = Omit<SandboxSpec, "runId" | "tenantId" | "workspaceTar" | "workspace">;

export type OutputStreamName = "stdout" | "stderr";

/**
 * The abort reason of an exec whose caller lost the container to another owner (a lost
 * lease): only the exec's own process group is killed, never the rest of the container.
 */
export const OWNER_CHANGED = "lease-lost";

export interface ExecRequest {
  /** Program and arguments (no shell unless argv says so). */
  argv: string[];
  /** Absolute working directory inside the sandbox; default /workspace. */
  cwd?: string;
  /**
   * When set: the cwd is entered by its physical path, which must be this directory or
   * below it; else nothing runs and the call exits 126 with a message on stderr ("agentd:
   * cwd does not exist: …", "agentd: cwd leaves the workspace"). A symlinked directory
   * cannot take a command out of the workspace.
   */
  cwdWithin?: string;
  env?: Record<string, string>;
  /** The whole process group is killed after this long. */
  timeoutMs: number;
  /** stdout + stderr kept at most; past it the process group is killed and a marker added. */
  maxOutputBytes: number;
  /** Bytes written to the process' stdin (then closed). */
  stdin?: Uint8Array;
  /** Live output, as it comes (already capped). */
  onOutput?: (stream: OutputStreamName, chunk: string) => void;
  /**
   * Aborting kills the process group (e.g. run cancelled), then — since a call may have
   * escaped its group — every process in the container, unless the reason is
   * OWNER_CHANGED: the container may be another owner's by then, so only the group goes.
   */
  signal?: AbortSignal;
  /**
   * agentd's containment scan (kernel/secret-taint.ts) only: through the sandbox's agent,
   * argv gets "--agentd-homes" and the path of every entry of /tmp/.agentd-home, listed by
   * the agent (root, the directory's owner; the sandbox user may make entries there but not
   * list them), and the call gets no HOME of its own. Ignored by `docker exec` (there the
   * directory is the sandbox user's and the scan lists it itself).
   */
  listHomes?: boolean;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** Output went past maxOutputBytes and was cut (the marker is in the text). */
  truncated: boolean;
  /** Killed because the timeout passed. */
  timedOut: boolean;
  /** Killed by the kernel's OOM killer at the memory limit. */
  oomKilled: boolean;
  /** Killed because `signal` aborted. */
  cancelled: boolean;
  durationMs: number;
}

/** The diff of a workspace against its initial snapshot (workspace-diff.ts). */
export type { WorkspaceDiffResult as WorkspaceDiff } from "./workspace-diff.ts";

/** How a workspace is diffed. */
export interface DiffOptions {
  /** The archive to compare against; default the workspace the sandbox was created with. */
  baseTar?: Uint8Array;
  /**
   * The same, streamed (the run's upload in the artifact store): read twice, a scan and the
   * old content of the changed files, never held whole. Wins over baseTar.
   */
  base?: WorkspaceSource;
  /** Largest patch (policy limits.maxPatchSize); past it ETOOLARGE. Default 64 MiB. */
  maxPatchBytes?: number;
  /** The run's redactor: every secret value in the patch becomes a marker. */
  redact?: (text: string) => string;
  signal?: AbortSignal;
}

export interface SandboxHandle {
  readonly id: string;
  readonly runId: string;
  /** Where the run's egress proxy must listen (network "egress" only). */
  readonly egress?: { host: string; port: number };
  /**
   * The environment agentd's own tool scripts run with (tools/sandbox-script.ts): in a
   * sandbox whose agent was injected, busybox's applets from the read-only bundle come
   * first, so repo.read, repo.patch and friends work in an image without a shell.
   */
  readonly toolEnv?: Readonly<Record<string, string>>;
  exec(req: ExecRequest): Promise<ExecResult>;
  /**
   * The workspace as a tar (paths relative to /workspace), streamed: never held whole in
   * memory. Longer than the workspace can be (its size limit plus tar's headers) fails
   * with ETOOLARGE. Stopping early is allowed.
   */
  exportWorkspace(): AsyncIterable<Uint8Array>;
  /**
   * The workspace's changes since the initial snapshot (or `baseTar`), as a git patch that
   * applies; the workspace is read as a stream, twice (see workspace-diff.ts).
   */
  diff(opts?: DiffOptions): Promise<WorkspaceDiff>;
  /**
   * Kills every process in the container but its main process, whatever group or session
   * it escaped to, and resolves only once none is left (confirmed by a scan). What a
   * previous owner of the run started is dead afterwards. A handle may answer at once when
   * it knows the container is quiet: it started the container, or every call since the
   * last kill-all ended with its own confirmed kill-all (and none is running).
   */
  killAll(): Promise<void>;
  /**
   * Whether the container is lost: gone, no longer running (killed, stopped, its agent or
   * main process died, the engine restarted) or its agent stopped answering. A lost
   * container's /workspace (a tmpfs) is gone with it; the caller starts over from the run's
   * last snapshot (worker/workspace-recovery.ts). Throws when the engine cannot be asked.
   * Absent: the adapter cannot tell (taken as not lost).
   */
  lost?(): Promise<boolean>;
  /** Stops and removes the container and its workspace volume. Idempotent. */
  destroy(): Promise<void>;
  /**
   * Lets go of the container without removing it (the run is handed to another drive):
   * frees what this handle holds open. Idempotent; the handle still works, slower.
   */
  detach?(): void;
  /**
   * agentd's marks in the container (the workspace filled, a recovery under way), where the
   * sandbox user can neither make, remove nor see them (root-marks.ts), gone with the
   * container's tmpfs on a restart. `test`: whether the mark is there. Throws when it cannot
   * tell. Absent: the adapter keeps them as files in /tmp (fill-mark.ts, recovery-marker.ts).
   */
  mark?(name: "filled" | "recovering", op: "set" | "clear" | "test"): Promise<boolean>;
}

export interface Sandbox {
  /** Creates, starts and fills a run's container. */
  create(spec: SandboxSpec): Promise<SandboxHandle>;
  /**
   * Whether the engine has `image` (a language image the run would use; without it the
   * run gets the base image). An adapter without it is taken to have every image.
   */
  hasImage?(image: string): Promise<boolean>;
  /**
   * The engine's id (sha256:…) of the image `image` names now, or undefined when the engine
   * lacks it: a tag moved to another build is another id (the dependency cache keys on it).
   */
  imageId?(image: string): Promise<string | undefined>;
  /** The live container of a run, if one exists (e.g. after a worker restart). */
  find(runId: string): Promise<SandboxHandle | undefined>;
  /**
   * Removes every agentd container whose run is no longer live; returns their run ids.
   * `isLive` decides per run (e.g. "not terminal in the event log"). Another process's warm
   * containers go when they exited or are too old, and at once when `poolOwnerDead` says
   * their keeper is known dead (its presence beats stopped, scheduler/presence.ts).
   */
  reap(
    isLive: (runId: string) => Promise<boolean> | boolean,
    opts?: ReapOptions,
  ): Promise<string[]>;
  /**
   * A run's own image on the engine: used as it is when the engine has it, else pulled from
   * its registry (image-pull.ts). Its id is what `create` is then given (with userImage).
   * Absent: this sandbox cannot run images of a run's own.
   */
  prepareImage?(ref: ImageReference, opts?: EnsureImageOptions): Promise<EnsuredImage>;
}

/** A sandbox adapter as a worker holds it: warm sandboxes kept ready, closed at its end. */
export interface PooledSandbox extends Sandbox {
  /**
   * Fills the warm pool for `shape` (no-op without warm sandboxes); resolves when it is
   * full. A worker calls it at start with its policy's shape, so its first run starts warm.
   */
  prewarm(shape: SandboxShape): Promise<void>;
  /** Removes this instance's idle warm sandboxes and stops refilling. */
  close(): Promise<void>;
}

/** Mount point of the workspace in every sandbox. */
export const WORKSPACE = "/workspace";

export interface ReapOptions {
  /**
   * True when the process that keeps warm containers labelled with this owner is known to
   * be dead; never true for an owner never seen (another deployment on the same engine).
   */
  poolOwnerDead?: (owner: string) => Promise<boolean>;
}
