/**
 * Docker for tests: the engine must answer (in CI and out of it: a missing engine is a
 * failure, never a skip) and the sandbox images must be built (make images).
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { ulid } from "ulid";
import { createDockerSandbox } from "../sandbox/docker-sandbox.ts";
import type { Sandbox, SandboxHandle, SandboxLimits, SandboxSpec } from "../sandbox/port.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The exact tag `make images` built for `name` (base, test, or a language image). */
export function sandboxImage(
  name: "base" | "test" | "python" | "go" | "rust" | "java" | "node",
): string {
  try {
    return readFileSync(join(root, "sandbox-images", ".built", `${name}.tag`), "utf8").trim();
  } catch {
    throw new Error(`sandbox image '${name}' is not built: run 'make images'`);
  }
}

export async function requireDocker(): Promise<Docker> {
  const docker = new Docker();
  try {
    await docker.ping();
  } catch (err) {
    throw new Error(
      `the Docker engine does not answer (${(err as Error).message}): start it (scripts/ensure-docker.sh) — these tests need the real engine`,
    );
  }
  return docker;
}

/** A sandbox adapter whose containers carry a label unique to this test file. */
export async function testSandbox(opts: { agent?: boolean } = {}): Promise<{
  docker: Docker;
  sandbox: Sandbox;
  label: string;
  cleanup(): Promise<void>;
}> {
  const docker = await requireDocker();
  const label = `test-${ulid().toLowerCase()}`;
  const sandbox = createDockerSandbox({
    docker,
    managedLabel: label,
    // Images without the agent (a run's own) get the test image's, injected.
    agentSource: () => sandboxImage("test"),
    ...(opts.agent === undefined ? {} : { agent: opts.agent }),
  });
  return {
    docker,
    sandbox,
    label,
    async cleanup() {
      await sandbox.reap(() => false);
    },
  };
}

/** A run's sandbox on the test image with TEST_LIMITS and no network, for a fresh run id. */
export function testBoxSpec(image: "base" | "test" = "test"): SandboxSpec {
  return {
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage(image),
    limits: TEST_LIMITS,
    network: "none",
  };
}

export const TEST_LIMITS: SandboxLimits = {
  memoryBytes: 128 * 1024 * 1024,
  cpus: 1,
  pids: 64,
  tmpBytes: 16 * 1024 * 1024,
  workspaceBytes: 64 * 1024 * 1024,
};

/** `box` with a count of the execs made through it. */
export function countingExecs(box: SandboxHandle): { handle: SandboxHandle; execs(): number } {
  let n = 0;
  return {
    handle: {
      id: box.id,
      runId: box.runId,
      exec: (req) => {
        n++;
        return box.exec(req);
      },
      exportWorkspace: () => box.exportWorkspace(),
      killAll: () => box.killAll(),
      diff: (opts) => box.diff(opts),
      destroy: () => box.destroy(),
      detach: () => box.detach?.(),
    },
    execs: () => n,
  };
}
