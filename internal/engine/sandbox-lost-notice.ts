/**
 * What the model is told of a `sandbox.lost` event: its container was replaced, the
 * workspace restored (from the last snapshot or the upload), which of its changes were
 * applied again, and — by call id, tool and input — which calls' effects are gone, so it
 * can redo what it still needs. Pure; must never claim an effect survived that the event
 * lists as lost.
 */
import type { SandboxLost } from "../gen/agentd/v1/events_pb.js";

/** Longest input shown per lost call. */
const MAX_INPUT_CHARS = 300;
/** Most lost calls named one by one. */
const MAX_LISTED = 30;

export function sandboxLostNotice(
  e: SandboxLost,
  calls: ReadonlyMap<string, { tool: string; input: unknown }>,
): string {
  const from =
    e.restoredFromSeq > 0n
      ? `the last workspace snapshot (event ${e.restoredFromSeq})`
      : "the uploaded workspace";
  const lines = [
    `Your sandbox container was lost (${e.reason}). The workspace was restored from ${from}; running processes, /tmp and anything outside the workspace are gone.`,
  ];
  if (e.reappliedCallIds.length > 0)
    lines.push(`Re-applied exactly as recorded: ${e.reappliedCallIds.join(", ")}.`);
  if (e.lostCallIds.length === 0) lines.push("No recorded change of the workspace was lost.");
  else {
    lines.push(
      "The effects of these calls are GONE from the workspace (files they wrote or changed are back as they were before them); redo what you still need:",
    );
    for (const id of e.lostCallIds.slice(0, MAX_LISTED)) {
      const c = calls.get(id);
      const input = c === undefined ? "" : (JSON.stringify(c.input) ?? "");
      lines.push(
        `- ${id} ${c?.tool ?? "(unknown tool)"} ${input.length > MAX_INPUT_CHARS ? `${input.slice(0, MAX_INPUT_CHARS)}…` : input}`,
      );
    }
    if (e.lostCallIds.length > MAX_LISTED)
      lines.push(`- and ${e.lostCallIds.length - MAX_LISTED} more`);
  }
  if (e.failsRun) lines.push("The policy (sandbox.onLost: fail) ends the run.");
  return lines.join("\n");
}
