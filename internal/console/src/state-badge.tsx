/** A run state as a coloured badge (the colour is a class; the text says it too). */
import type { RunState } from "../../gen/agentd/v1/run_service_pb.js";
import { stateName } from "./format.ts";

export function StateBadge(props: { state: RunState; testid?: string }) {
  const name = stateName(props.state);
  return (
    <span class={`state state-${name}`} data-testid={props.testid}>
      {name}
    </span>
  );
}
