/**
 * One exec through the sandbox's agent (agent-channel.ts): output streamed and capped,
 * the timeout enforced by the agent inside the container (and by agentd as a backstop),
 * cancellation, stdin. What the call left running is killed by the agent when it ends;
 * after a cancel or a kill that did not end the call, every process of the sandbox user.
 *
 * Must never: report a result that is not the call's own exit frame, or wait for ever on
 * an agent that stopped answering — after a kill, a call that does not end in
 * ESCALATE_AFTER_MS + ABANDON_AFTER_MS fails with AgentLostError (the container is lost).
 */
import { AgentdError } from "../errors.ts";
import type { AgentChannel } from "./agent-channel.ts";
import { type Exit, FLAG } from "./agent-protocol.ts";
import { OutputCollector } from "./docker-stream.ts";
import { type ExecRequest, type ExecResult, OWNER_CHANGED, WORKSPACE } from "./port.ts";

/** agentd's own timer fires this long after the agent's: the agent kills at the deadline. */
export const WATCHDOG_GRACE_MS = 2_000;
/** A killed call still running after this gets kill-all; after this much more, abandoned. */
export const ESCALATE_AFTER_MS = 2_000;
export const ABANDON_AFTER_MS = 3_000;

/** The agent did not end a killed call: agentd lost track of what the sandbox runs. */
export class AgentLostError extends AgentdError {
  constructor(why: string) {
    super("EIO", `the sandbox agent stopped answering (${why}); the container is treated as lost`);
  }
}

export interface AgentExecResult extends ExecResult {
  /** The agent confirmed that no process of the sandbox user is left. */
  clean: boolean;
}

/** `own`: agentd's own helper call (its pipes private to it: agent-protocol.ts). */
export async function agentExec(
  agent: AgentChannel<unknown>,
  req: ExecRequest,
  own = false,
): Promise<AgentExecResult> {
  const started = performance.now();
  const out = new OutputCollector(req.maxOutputBytes, req.onOutput);
  const ownerChanged = (): boolean => req.signal?.reason === OWNER_CHANGED;
  let killedFor: "timeout" | "cap" | "cancel" | undefined;
  let escalation: NodeJS.Timeout | undefined;
  let abandon!: (err: Error) => void;
  const abandoned = new Promise<never>((_, reject) => {
    abandon = reject;
  });
  abandoned.catch(() => undefined);
  const call = agent.call(
    {
      argv: req.argv,
      cwd: req.cwd ?? WORKSPACE,
      env: req.env ?? {},
      timeoutMs: req.timeoutMs,
      maxOutputBytes: req.maxOutputBytes,
      stdin: req.stdin !== undefined,
      ...(req.cwdWithin === undefined ? {} : { cwdWithin: req.cwdWithin }),
      ...(own ? { private: true } : {}),
      // The containment scan is agentd's own call too: private pipes, no HOME of its own.
      ...(req.listHomes === true ? { homes: true, private: true } : {}),
    },
    (name, chunk) => {
      if (!out.push(name, chunk)) kill("cap");
    },
  );
  const kill = (why: "timeout" | "cap" | "cancel"): void => {
    if (killedFor !== undefined) return;
    killedFor = why;
    call.kill();
    escalation = setTimeout(() => {
      if (!ownerChanged()) agent.killAll().catch(() => undefined);
      escalation = setTimeout(
        () => abandon(new AgentLostError(`a killed call did not end (${why})`)),
        ABANDON_AFTER_MS,
      );
    }, ESCALATE_AFTER_MS);
  };
  const timer = setTimeout(() => kill("timeout"), req.timeoutMs + WATCHDOG_GRACE_MS);
  const onAbort = (): void => kill("cancel");
  req.signal?.addEventListener("abort", onAbort);
  if (req.signal?.aborted) kill("cancel");
  let exit: Exit;
  try {
    if (req.stdin !== undefined) {
      call.write(req.stdin).then(
        () => call.endStdin(),
        () => undefined,
      );
    }
    exit = await Promise.race([call.done, abandoned]);
  } finally {
    clearTimeout(timer);
    clearTimeout(escalation);
    req.signal?.removeEventListener("abort", onAbort);
  }
  if ((exit.flags & FLAG.failed) !== 0)
    throw new AgentdError("EIO", exit.message || "the sandbox agent could not start the process");
  let clean = (exit.flags & FLAG.clean) !== 0;
  if (killedFor === "cancel" && !clean && !ownerChanged()) {
    await agent.killAll();
    clean = true;
  }
  const { stdout, stderr, truncated } = out.finish();
  return {
    exitCode: exit.code,
    stdout,
    stderr,
    truncated,
    timedOut: killedFor === "timeout" || (exit.flags & FLAG.timeout) !== 0,
    cancelled: killedFor === "cancel",
    oomKilled: false,
    durationMs: Math.round(performance.now() - started),
    clean,
  };
}

/** Whether a result may be an OOM kill (worth asking the cgroup). */
export function maybeOom(r: ExecResult): boolean {
  return r.exitCode === 137 && !r.timedOut && !r.cancelled && !r.truncated;
}
