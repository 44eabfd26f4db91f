/**
 * The secret values of one run, for redaction across the whole run: every value any call
 * resolved, by any worker, before or after a takeover or a resume. Values are never stored
 * anywhere (not in events, not in snapshots): a new drive rebuilds the set from the
 * providers, for every name a call of the run ever used.
 *
 * Must never: log, return in an error, or persist a value; substitute a value into
 * anything (resolution for tool input is secrets.ts's job, under `secrets.allow`).
 */
import type { Event } from "../gen/agentd/v1/events_pb.js";
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
 * The run's secrets at the start of a drive: the value of every name a call of the run
 * used (allowed then, perhaps not now: a value that entered the run is hidden for the rest
 * of it), from the first provider that has it. Names no provider has are answered in
 * `missing`: the drive cannot keep those values out of the run's output and must not go on.
 * Only used names: an allowed secret the run never used is not in its workspace, and
 * masking its value everywhere would only garble text that happens to match it.
 */
export async function loadRunSecrets(opts: {
  events: readonly Event[];
  providers: readonly SecretProvider[];
  onError?: (name: string, err: unknown) => void;
}): Promise<RunSecrets & { missing: string[] }> {
  const values: string[] = [];
  const missing: string[] = [];
  for (const name of namesUsedIn(opts.events)) {
    const v = await lookupSecret(opts.providers, name, opts.onError);
    if (v === undefined) missing.push(name);
    else values.push(v);
  }
  return Object.assign(createRunSecrets(values), { missing });
}

/** A secret's value from the first provider that has it (a failing provider is skipped). */
export async function lookupSecret(
  providers: readonly SecretProvider[],
  name: string,
  onError?: (name: string, err: unknown) => void,
): Promise<string | undefined> {
  for (const p of providers) {
    try {
      const v = await p.get(name);
      if (v !== undefined) return v;
    } catch (err) {
      onError?.(name, err);
    }
  }
  return undefined;
}
