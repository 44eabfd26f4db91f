/**
 * The secret values of one run, for redaction across the whole run: every value any call
 * resolved, by any worker, before or after a takeover or a resume. Values are never stored
 * anywhere (not in events, not in snapshots): a new drive rebuilds the set from the
 * providers, for every name the policy allows and every name a call of the run ever used.
 *
 * Must never: log, return in an error, or persist a value; substitute a value into
 * anything (resolution for tool input is secrets.ts's job, under `secrets.allow`).
 */
import type { Event } from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "./policy-schema.ts";
import { createRedactor, type Redactor } from "./redaction.ts";
import { PLACEHOLDER_PATTERN, type SecretProvider } from "./secrets.ts";

export interface RunSecrets {
  /** Every value known in the run (the same array until one is added). Never log it. */
  values(): readonly string[];
  /** Values a call just resolved. */
  add(values: Iterable<string>): void;
  /** Hides the values (all forms the redactor knows); no key or pattern rules. */
  readonly redactor: Redactor;
  /** True once at least one value is known: callers skip redaction work otherwise. */
  any(): boolean;
}

export function createRunSecrets(initial: Iterable<string> = []): RunSecrets {
  const known = new Set<string>();
  let list: readonly string[] = Object.freeze([]);
  const add = (values: Iterable<string>): void => {
    let grew = false;
    for (const v of values) {
      if (typeof v !== "string" || v === "" || known.has(v)) continue;
      known.add(v);
      grew = true;
    }
    if (grew) list = Object.freeze([...known]);
  };
  add(initial);
  return {
    values: () => list,
    add,
    redactor: createRedactor({ secrets: () => list }),
    any: () => list.length > 0,
  };
}

/** Names a run's calls referred to (`$ENV.NAME` in any tool.call's input). */
export function namesUsedIn(events: readonly Event[]): Set<string> {
  const names = new Set<string>();
  for (const e of events) {
    if (e.payload.case !== "toolCall") continue;
    const input = e.payload.value.inputJson;
    if (!input.includes("$ENV.")) continue;
    for (const m of input.matchAll(PLACEHOLDER_PATTERN)) names.add(m[1] as string);
  }
  return names;
}

/**
 * The run's secrets at the start of a drive: the values of every name `secrets.allow`
 * lists and every name the run's calls used (allowed then, perhaps not now: a value that
 * entered the run is hidden for the rest of it), from the first provider that has it.
 * A provider that fails is skipped for that name (`onError` is told the name, never a
 * value): redaction is best effort across providers, resolution for calls is not.
 */
export async function loadRunSecrets(opts: {
  events: readonly Event[];
  policy: Policy;
  providers: readonly SecretProvider[];
  onError?: (name: string, err: unknown) => void;
}): Promise<RunSecrets> {
  const names = new Set([...opts.policy.secrets.allow, ...namesUsedIn(opts.events)]);
  const values: string[] = [];
  for (const name of names) {
    for (const p of opts.providers) {
      try {
        const v = await p.get(name);
        if (v !== undefined) {
          values.push(v);
          break;
        }
      } catch (err) {
        opts.onError?.(name, err);
      }
    }
  }
  return createRunSecrets(values);
}
