/**
 * Detaching a handle from its in-container agent, and waiting until the agent has acted on
 * it. An agent that loses agentd kills every process of the sandbox user (by design: a
 * call's result can no longer be told), so a test that goes on through `docker exec` right
 * after a detach races that sweep on a loaded machine: the sweep can kill the next exec.
 * A marker process started beside the agent, by the engine as the sandbox user, is gone
 * once the sweep ran; nothing started after that is touched. Test-only.
 */
import type Docker from "dockerode";
import type { SandboxHandle } from "../sandbox/port.ts";

/** Runs argv in the container through the engine (not agentd) and gives its exit code. */
async function engineExec(docker: Docker, id: string, argv: string[], user: string) {
  const exec = await docker.getContainer(id).exec({ Cmd: argv, User: user, AttachStdout: true });
  const stream = await exec.start({});
  await new Promise((r) => {
    stream.on("end", r);
    stream.on("error", r);
    stream.resume();
  });
  return (await exec.inspect()).ExitCode;
}

/** Detaches `h` and returns once its agent's sweep has run (the marker is gone). */
export async function detachAndSettle(docker: Docker, h: SandboxHandle): Promise<void> {
  const exec = await docker.getContainer(h.id).exec({ Cmd: ["sleep", "600"], User: "1000:1000" });
  await exec.start({ Detach: true });
  const alive = () => engineExec(docker, h.id, ["sh", "-c", "grep -qs sleep /proc/*/comm"], "0:0");
  // Wait until the marker runs, so its death below is the sweep's doing.
  for (let i = 0; i < 1200 && (await alive()) !== 0; i++) await pause(100);
  h.detach?.();
  for (let i = 0; i < 1200 && (await alive()) === 0; i++) await pause(100);
  if ((await alive()) === 0) throw new Error("the agent never swept after the detach (2 min)");
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
